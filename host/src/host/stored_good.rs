//! The last good version of each config file, on disk ([`StoredGood`]): what a daemon
//! restarted after a file broke (killed, upgraded, or the dispatch daemon's idle exit),
//! and every one-shot `hookhost dispatch`, keep in force instead of the broken version.
//!
//! One file per config file in `last-good/` of the data directory (a host-owned place,
//! [`super::host_owned_places`]), named by the sha256 of the source's kind and path: a
//! header line (kind, path, digest of the body, when that version was first good) and
//! the config file's bytes as they were read when they passed every check of the reload
//! gate. Written through the host's one atomic private writer
//! ([`crate::session::write_atomically`]: 0600 in a 0700 directory, temporary file and
//! rename); read back through the one file reader ([`crate::config::file::read_checked`]),
//! refused unless a regular file of this user's that no one else may read or write, at
//! most [`crate::config::file::CONFIG_CAP`] plus its header, whose header names the
//! same source and whose body has the digest the header says. At most
//! [`STORED_FILES`] files and [`STORED_BYTES`] in all: the oldest go first.
//!
//! Managed policy is not stored: a store the user can write cannot vouch for policy that
//! binds the user. A broken managed file keeps its last good version only in a running
//! daemon's memory, and fails closed otherwise.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::file::{CONFIG_CAP, Open, Rule, read_checked};
use crate::config::{self, ConfigLayer, GoodSource, LastGood, LoadedConfig, SourceKind};
use crate::event::EventCatalogue;

/// How many config files' last good versions the store keeps.
pub const STORED_FILES: usize = 64;
/// How many bytes the store keeps in all (a single file may be up to
/// [`CONFIG_CAP`]).
pub const STORED_BYTES: u64 = 64 << 20;
/// The most a header line may take.
const HEADER_CAP: u64 = 8 << 10;

/// The store of last good config versions in a data directory.
#[derive(Debug, Clone)]
pub struct StoredGood {
    dir: PathBuf,
}

/// The header line of a stored version.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Header {
    kind: String,
    file: PathBuf,
    sha256: String,
    since: u64,
}

/// One stored version, as read: its digest and age, and its bytes.
#[derive(Debug, Clone)]
pub struct Stored {
    /// sha256 (hex) of the config file's bytes.
    pub sha256: String,
    /// When this version was first good.
    pub since: SystemTime,
    text: String,
}

impl Stored {
    /// The version as a layer of `kind` from `file`, parsed as the loader parses the file
    /// itself; `None` (logged) when it does not parse (another host version's schema).
    pub fn good(
        &self,
        kind: SourceKind,
        file: &Path,
        catalogue: &EventCatalogue,
    ) -> Option<GoodSource> {
        match config::parse_layer(kind, file, &self.text, self.sha256.clone(), catalogue) {
            Ok(layer) => Some(GoodSource {
                layer,
                since: self.since,
            }),
            Err(e) => {
                tracing::warn!("stored last good version of {}: {e}", file.display());
                None
            }
        }
    }

    /// This version when its bytes are those `layer` was parsed from (no parse needed).
    pub fn same_as(&self, layer: &ConfigLayer) -> Option<GoodSource> {
        (layer.sha256.as_deref() == Some(self.sha256.as_str())).then(|| GoodSource {
            layer: layer.clone(),
            since: self.since,
        })
    }
}

/// Whether the last good versions of `kind` are stored (not managed policy's, nor
/// sources built in code).
pub fn is_stored(kind: SourceKind) -> bool {
    !matches!(kind, SourceKind::Managed | SourceKind::Embedded)
}

impl StoredGood {
    /// The store in `last-good/` of the data directory `data`.
    pub fn in_data_dir(data: &Path) -> StoredGood {
        StoredGood {
            dir: data.join("last-good"),
        }
    }

    /// Its directory.
    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the version of `(kind, file)` is kept.
    pub fn entry_path(&self, kind: SourceKind, file: &Path) -> PathBuf {
        use sha2::Digest;
        use std::os::unix::ffi::OsStrExt;
        let mut hasher = sha2::Sha256::new();
        hasher.update(kind.as_str().as_bytes());
        hasher.update([0]);
        hasher.update(file.as_os_str().as_bytes());
        self.dir
            .join(format!("{}.good", hex::encode(hasher.finalize())))
    }

    /// The digest of the stored version of `(kind, file)` (its header only, checked as
    /// [`StoredGood::read`] checks the file; the body is read only when it is needed).
    pub fn peek(&self, kind: SourceKind, file: &Path) -> Option<String> {
        use std::io::Read;
        if !is_stored(kind) {
            return None;
        }
        let path = self.entry_path(kind, file);
        let how = Open::read(CONFIG_CAP + HEADER_CAP)
            .no_follow()
            .rule(Rule::Private);
        let (opened, _) = crate::config::file::open_checked(&path, &how).ok()?;
        let mut head = Vec::new();
        opened.take(HEADER_CAP).read_to_end(&mut head).ok()?;
        let line = &head[..head.iter().position(|b| *b == b'\n')?];
        let header: Header = serde_json::from_slice(line).ok()?;
        (header.kind == kind.as_str() && header.file == file).then_some(header.sha256)
    }

    /// The stored version of `(kind, file)`: `None` when there is none, or when the one
    /// there is refused (not this user's regular file, readable or writable by others,
    /// too large, of another source, or its bytes not of its digest; logged).
    pub fn read(&self, kind: SourceKind, file: &Path) -> Option<Stored> {
        if !is_stored(kind) {
            return None;
        }
        let path = self.entry_path(kind, file);
        let refused = |why: String| {
            tracing::warn!(
                "stored last good version `{}` of {} refused: {why}",
                path.display(),
                file.display()
            );
            None
        };
        let how = Open::read(CONFIG_CAP + HEADER_CAP)
            .no_follow()
            .rule(Rule::Private);
        let bytes = match read_checked(&path, &how) {
            Ok((bytes, _)) => bytes,
            // Absent; or the host short of descriptors or memory, which says nothing
            // of the store (the file's own read fails the same way, a host failure).
            Err(e) if e.is_not_found() || e.is_host_failure() => return None,
            Err(e) => return refused(e.to_string()),
        };
        let Some(newline) = bytes.iter().position(|b| *b == b'\n') else {
            return refused("no header line".into());
        };
        let header: Header = match serde_json::from_slice(&bytes[..newline]) {
            Ok(header) => header,
            Err(e) => return refused(format!("bad header: {e}")),
        };
        if header.kind != kind.as_str() || header.file != file {
            return refused("it is of another config file".into());
        }
        let body = &bytes[newline + 1..];
        if sha256_hex(body) != header.sha256 {
            return refused("its bytes are not of the digest it names".into());
        }
        let Ok(text) = String::from_utf8(body.to_vec()) else {
            return refused("not UTF-8".into());
        };
        Some(Stored {
            sha256: header.sha256,
            since: UNIX_EPOCH + Duration::from_secs(header.since),
            text,
        })
    }

    /// Stores `good` as the last good version of its file, unless `stored` (what the
    /// store holds now) is that version already: the file is read again, and stored only
    /// if its bytes are still those of `good` (else the next build judges them). Then
    /// the oldest versions go until the store is within its bounds. Failures are logged:
    /// the host still serves, it only remembers less.
    pub fn write(&self, good: &GoodSource, stored: Option<&str>) {
        let layer = &good.layer;
        let (Some(file), Some(sha)) = (&layer.file, &layer.sha256) else {
            return;
        };
        self.write_file(layer.origin.kind, file, sha, good.since, stored);
    }

    /// [`StoredGood::write`] of the version `sha` of `(kind, file)`, good since `since`.
    fn write_file(
        &self,
        kind: SourceKind,
        file: &Path,
        sha: &str,
        since: SystemTime,
        stored: Option<&str>,
    ) {
        if !is_stored(kind) || stored == Some(sha) {
            return;
        }
        let Ok((bytes, _)) = crate::config::file::read_regular(file, CONFIG_CAP) else {
            return;
        };
        if sha256_hex(&bytes) != sha {
            return;
        }
        let header = Header {
            kind: kind.as_str().into(),
            file: file.to_path_buf(),
            sha256: sha.to_string(),
            since: since.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        };
        // A path that is not UTF-8 has no JSON header: not stored.
        let Ok(mut entry) = serde_json::to_vec(&header) else {
            return;
        };
        entry.push(b'\n');
        entry.extend_from_slice(&bytes);
        let path = self.entry_path(kind, file);
        if let Err(e) = crate::session::write_atomically(&path, &entry) {
            tracing::warn!(
                "cannot store the last good version of {}: {e}",
                file.display()
            );
            return;
        }
        self.prune(&path);
    }

    /// Removes the oldest stored versions (by modification time) beyond [`STORED_FILES`]
    /// or [`STORED_BYTES`]; `keep` (the one just written) stays.
    fn prune(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut found: Vec<(SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "good"))
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), e.path()))
            })
            .collect();
        found.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        let (mut count, mut bytes) = (0usize, 0u64);
        for (_, len, path) in found {
            count += 1;
            bytes = bytes.saturating_add(len);
            if path != keep && (count > STORED_FILES || bytes > STORED_BYTES) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A file of a build: its source and path, its digest as loaded, the digest of the
/// version the store held.
type Held = ((SourceKind, PathBuf), Option<String>, Option<String>);

/// What the store holds for the files of one build ([`gather`]).
#[derive(Debug)]
pub(super) struct Found {
    /// The previous versions to keep in force: the daemon's in memory, each replaced by
    /// the stored one where that is newer (a one-shot: the stored ones).
    pub previous: LastGood,
    /// A file that failed to load has a stored version the load did not have: load
    /// again with [`Found::previous`].
    pub reload: bool,
    /// A stored kind of file loaded with bytes that are not its stored version (or with
    /// none stored): the build must make the gate's plugin checks before it stores it.
    pub changed: bool,
    /// Each stored kind of file of the build: its digest as loaded (`None`: it failed to
    /// load), and what the store held.
    held: Vec<Held>,
}

/// Reads what `store` holds for every file `loaded` read (or failed to read).
pub(super) fn gather(
    store: &StoredGood,
    loaded: &LoadedConfig,
    memory: Option<&LastGood>,
    catalogue: &EventCatalogue,
) -> Found {
    let mut found = Found {
        previous: memory.cloned().unwrap_or_default(),
        reload: false,
        changed: false,
        held: Vec::new(),
    };
    // Whether `good` went in (absent from memory, or newer than the version there). A
    // version in memory dated after now was dated by a clock since stepped back: it is
    // no witness of order, and the store's other version (written later) wins.
    let now = SystemTime::now();
    let newer = |previous: &mut LastGood, key: &(SourceKind, PathBuf), good: GoodSource| {
        let newer = previous.get(key).is_none_or(|kept| {
            kept.layer.sha256 != good.layer.sha256 && (kept.since < good.since || kept.since > now)
        });
        if newer {
            previous.insert(key.clone(), good);
        }
        newer
    };
    for layer in &loaded.layers {
        let Some(file) = &layer.file else { continue };
        let kind = layer.origin.kind;
        if !is_stored(kind) {
            continue;
        }
        let key = (kind, file.clone());
        let stored_sha = store.peek(kind, file);
        if stored_sha.is_some() && stored_sha == layer.sha256 {
            // The version in force: only its age is of use.
            if let Some(good) = store.read(kind, file).and_then(|s| s.same_as(layer)) {
                newer(&mut found.previous, &key, good);
            }
        } else {
            found.changed = true;
            if let Some(good) = stored_sha
                .and_then(|_| store.read(kind, file))
                .and_then(|s| s.good(kind, file, catalogue))
            {
                // A version of the daemon's memory, newer in the store: load it again in
                // case it is one kept in force.
                let in_memory = found.previous.contains_key(&key);
                found.reload |= newer(&mut found.previous, &key, good) && in_memory;
            }
        }
        found
            .held
            .push((key, layer.sha256.clone(), store.peek(kind, file)));
    }
    for failed in &loaded.failed {
        let Some(file) = &failed.file else { continue };
        if !is_stored(failed.kind) {
            continue;
        }
        let key = (failed.kind, file.clone());
        let entry = store.read(failed.kind, file);
        if let Some(good) = entry
            .as_ref()
            .and_then(|s| s.good(failed.kind, file, catalogue))
        {
            found.reload |= newer(&mut found.previous, &key, good);
        }
        found.held.push((key, None, entry.map(|s| s.sha256)));
    }
    found
}

/// Stores each file of `found` that is good now (its version as loaded is its version in
/// `good`, the build's last good versions) and whose stored version is another.
pub(super) fn remember(store: Option<&StoredGood>, found: &Found, good: &LastGood) {
    let Some(store) = store else { return };
    for (key, sha, entry) in &found.held {
        if let Some(now) = good.get(key)
            && sha.is_some()
            && now.layer.sha256 == *sha
        {
            store.write(now, entry.as_deref());
        }
    }
}

/// The build of a one-shot host over the store: what [`gather`] and
/// `resolve_keeping_last_good` do for a daemon, without holding a second copy of the
/// config while nothing is broken. Each stored kind of file's stored digest is read (its
/// header only); the config is resolved as loaded; the gate's plugin checks are made
/// (`check`) only when a file's bytes are not its stored version. Only when a file that
/// fails has a stored version of other bytes (or failed to load and has one) are those
/// versions read, and the config loaded again with them (`reload`) and resolved keeping
/// them in force. Each file that is good now and not stored is stored when `may_store`.
pub(super) fn resolve_one_shot(
    store: &StoredGood,
    loaded: LoadedConfig,
    catalogue: &EventCatalogue,
    reload: impl Fn(&LastGood) -> LoadedConfig,
    resolve: impl Fn(LoadedConfig) -> crate::policy::Policy,
    check: impl Fn(&crate::policy::Policy) -> Vec<config::ConfigError>,
    may_store: bool,
) -> (crate::policy::Policy, LastGood, Vec<PathBuf>) {
    // Each stored kind of file loaded: source and path, digest, location, stored digest.
    let files: Vec<_> = loaded
        .layers
        .iter()
        .filter(|l| is_stored(l.origin.kind))
        .filter_map(|l| {
            let file = l.file.clone()?;
            let stored = store.peek(l.origin.kind, &file);
            Some((
                (l.origin.kind, file),
                l.sha256.clone(),
                l.origin.location.clone(),
                stored,
            ))
        })
        .collect();
    let failed: Vec<(SourceKind, PathBuf)> = loaded
        .failed
        .iter()
        .filter(|f| is_stored(f.kind))
        .filter_map(|f| Some((f.kind, f.file.clone()?)))
        .filter(|(kind, file)| store.peek(*kind, file).is_some())
        .collect();
    let changed = files.iter().any(|(_, sha, _, stored)| stored != sha);
    let check = |policy: &crate::policy::Policy| if changed { check(policy) } else { Vec::new() };
    let mut fallback = failed;
    if fallback.is_empty() {
        let policy = resolve(loaded);
        let refused = check(&policy);
        let erring = |location: &str| {
            policy
                .errors
                .iter()
                .chain(&refused)
                .any(|e| e.location == location)
        };
        fallback.extend(
            files
                .iter()
                .filter(|(_, sha, location, stored)| {
                    erring(location) && stored.is_some() && stored != sha
                })
                .map(|(key, ..)| key.clone()),
        );
        if fallback.is_empty() {
            if may_store {
                let now = SystemTime::now();
                for ((kind, file), sha, location, stored) in &files {
                    if let Some(sha) = sha.as_deref().filter(|_| !erring(location)) {
                        store.write_file(*kind, file, sha, now, stored.as_deref());
                    }
                }
            }
            return (policy, LastGood::new(), Vec::new());
        }
    }
    // A broken file with a stored version of other bytes: the daemon's way.
    let mut previous = LastGood::new();
    for (kind, file) in fallback {
        if let Some(good) = store
            .read(kind, &file)
            .and_then(|s| s.good(kind, &file, catalogue))
        {
            previous.insert((kind, file), good);
        }
    }
    let loaded = reload(&previous);
    let kept = super::reload::resolve_keeping_last_good(loaded, &previous, resolve, check);
    if may_store {
        for ((kind, file), sha, _, stored) in &files {
            if let (Some(now), Some(sha)) = (kept.1.get(&(*kind, file.clone())), sha)
                && now.layer.sha256.as_deref() == Some(sha.as_str())
            {
                store.write_file(*kind, file, sha, now.since, stored.as_deref());
            }
        }
    }
    kept
}

#[cfg(test)]
#[path = "stored_good_tests.rs"]
mod tests;
