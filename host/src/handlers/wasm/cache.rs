//! The on-disk compile cache: one precompiled artifact per (component sha256, wasmtime
//! version, engine config), and the memos that let a process skip work an earlier one
//! did (a plugin's digest, its `describe` answer).
//!
//! **Authenticated, not trusted.** Anything in the cache directory could have been
//! written by someone else (another plugin, a repository, another process), and an
//! artifact is native code that runs unchecked. So every record the cache keeps is
//! authenticated with HMAC-SHA256 under a per-user key (`cache_key.rs`: `auth.key`, 0600,
//! made by the first hookhost that uses the directory): whoever cannot read the key
//! cannot write a record that verifies. An entry is `<key>.cwasm` plus `<key>.sha256`:
//! the artifact's sha256, the stamp (device, inode, size, mtime, ctime) the artifact had
//! when this host wrote it, and the MAC over both and the entry's name. While the stamp
//! is unchanged the artifact is the file hookhost wrote and hashed (any write changes
//! the mtime and the ctime, and a ctime cannot be set back), so it is loaded without
//! being hashed; with another stamp it is hashed and used only if the digest matches the
//! authenticated one. wasmtime must accept it in every case; anything else (no valid
//! MAC, truncated, corrupt, another engine config) is rebuilt. Writes go to a temporary
//! file renamed into place.
//!
//! **Never mapped where it can be truncated.** A mapped file that shrinks kills the
//! process with `SIGBUS` on the next access. An artifact is mapped only when the opened
//! file is owned by this user and writable by no one else (so only processes with the
//! user's own rights, which could kill hookhost anyway, can truncate it), through the
//! descriptor that was checked (`/proc/self/fd`), not the path; otherwise it is read
//! into memory and loaded from there. The sandbox refuses every directory grant that
//! reaches the cache directory, so no plugin can write or truncate it either.
//!
//! A plugin's own sha256 (its cache key, and what `sha256` pins and allowlists check) is
//! memoized the same way under `digests/`, and the plugin's `describe` answer under
//! `describe/`: a 20 MB Python component is hashed once per change and described once
//! per digest, not once per process.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::config::file::{FileError, FileStamp, Owners, Rule, open_regular, read_regular};
use crate::session::write_atomically;

use super::cache_key::{CacheKey, MAX_RECORD_BYTES};
use super::progress::with_progress;

/// The wasmtime release the host is built with; part of every cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// How long a plugin file must have been left alone before its digest is memoized.
const SETTLE_TIME: Duration = Duration::from_secs(1);

/// The largest artifact the cache reads; a larger file is not one of ours.
const MAX_ARTIFACT_BYTES: u64 = 4 << 30;

/// How a component was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheStatus {
    /// Loaded from a valid cache entry.
    Hit,
    /// Compiled and stored (no entry existed).
    Compiled,
    /// An entry existed but was not usable; compiled again. The reason.
    Rebuilt(String),
    /// Compiled without a cache (no cache directory, or it is not writable).
    Uncached,
}

/// Why a component could not be had from the cache or a compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CompileError {
    /// The bytes are not a component this engine compiles: the same bytes never will,
    /// so the failure is remembered by digest.
    Invalid(String),
    /// Something else failed (reading the file, loading the artifact); the next load
    /// tries again.
    Unavailable(String),
}

impl CompileError {
    pub(super) fn into_message(self) -> String {
        match self {
            CompileError::Invalid(m) | CompileError::Unavailable(m) => m,
        }
    }
}

/// The compile cache of one engine.
#[derive(Debug)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    engine_key: String,
    /// The authentication key, read or created on first use; `Err` disables the cache.
    key: OnceLock<Result<CacheKey, String>>,
    /// Artifacts this process authenticated, by path and stamp: a second load of an
    /// unchanged artifact skips even the sidecar.
    verified: Mutex<HashMap<PathBuf, FileStamp>>,
}

/// A `Hasher` that feeds sha256, so that the engine's compatibility hash is stable across
/// processes (unlike `DefaultHasher`'s random keys).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// The sha256 of some bytes, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether a file whose stamp is `stamp` has been left alone for [`SETTLE_TIME`]. File
/// times have the kernel's tick as resolution, so a file changed in the last moments
/// could change again without a new stamp: like git's "racily clean" entries, such a
/// stamp is not trusted for later runs.
fn settled(stamp: &FileStamp) -> bool {
    SystemTime::now()
        .duration_since(stamp.changed_at())
        .is_ok_and(|age| age >= SETTLE_TIME)
}

/// Whether only this user (or root) can change the opened file: it is ours and no one
/// else may write it. Only such a file is mapped, since truncating a mapped file kills
/// the process that maps it.
fn only_ours(meta: &std::fs::Metadata) -> bool {
    Rule::Believed(Owners::Me).judge(meta).is_none()
}

/// Whether `/proc/self/fd` reopens a descriptor (not in every container).
fn proc_fd_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

impl CompileCache {
    /// A cache in `dir` (`None`: no cache) for components of `engine`.
    pub fn new(dir: Option<PathBuf>, engine: &Engine) -> CompileCache {
        let mut hasher = ShaHasher(Sha256::new());
        hasher.write(WASMTIME_VERSION.as_bytes());
        hasher.write(std::env::consts::ARCH.as_bytes());
        hasher.write(std::env::consts::OS.as_bytes());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(&hasher.0.finalize()[..8]);
        CompileCache {
            dir,
            engine_key,
            key: OnceLock::new(),
            verified: Mutex::default(),
        }
    }

    /// The default directory: `HOOKHOST_CACHE_DIR` (absolute, not inside the working
    /// directory), else the user's cache directory (`~/.cache/hookhost/wasm` on Linux).
    pub fn default_dir() -> Option<PathBuf> {
        // Compiled code is loaded as native code: a relative path or one inside the working
        // directory (a repository can set the variable) is refused (`config::env`).
        let workspaces = crate::config::env::workspaces_of(None);
        match crate::config::env::path_var("HOOKHOST_CACHE_DIR", &workspaces) {
            Ok(Some(dir)) => Some(dir),
            judged => {
                if let Err(notice) = judged {
                    tracing::warn!("{notice}");
                }
                crate::config::env::cache_base(&workspaces)
                    .0
                    .map(|d| d.join("hookhost").join("wasm"))
            }
        }
    }

    /// The cache directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The authentication key, or why the cache cannot be used.
    fn key(&self) -> Option<&CacheKey> {
        let dir = self.dir.as_deref()?;
        self.key
            .get_or_init(|| {
                CacheKey::load_or_create(dir).inspect_err(|e| {
                    tracing::warn!("compile cache disabled: {e}");
                })
            })
            .as_ref()
            .ok()
    }

    /// The artifact path of a component digest.
    pub fn entry_path(&self, digest: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| {
            d.join(format!(
                "{digest}-wasmtime{WASMTIME_VERSION}-{}.cwasm",
                self.engine_key
            ))
        })
    }

    /// The sha256 of the opened plugin `file` at `path` (whose metadata is `meta`), from
    /// the memo when the file is unchanged since it was last hashed; else read (at most
    /// `cap` bytes) and hashed, and then the bytes read are returned too.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or grew past `cap` while it was read.
    pub fn plugin_digest(
        &self,
        path: &Path,
        mut file: &std::fs::File,
        meta: &std::fs::Metadata,
        cap: u64,
    ) -> Result<(String, Option<Vec<u8>>), FileError> {
        let stamp = FileStamp::of(meta);
        let memo = self.key().zip(self.dir.as_ref()).map(|(key, dir)| {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            let name = sha256_hex(canonical.as_os_str().as_encoded_bytes());
            (key, dir.join("digests").join(&name[..32]), name)
        });
        if let Some((key, memo, name)) = &memo
            && let Ok((text, _)) = read_regular(memo, MAX_RECORD_BYTES)
            && let Some(fields) = key.open(&String::from_utf8_lossy(&text), 3)
            && fields[0] == name.as_str()
            && fields[1] == stamp.to_string()
            && fields[2].len() == 64
        {
            return Ok((fields[2].to_string(), None));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        Read::by_ref(&mut file)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > cap {
            return Err(FileError::TooLarge {
                size: bytes.len() as u64,
                cap,
            });
        }
        let digest = sha256_hex(&bytes);
        // Stamped with the metadata taken before the read: a file changed meanwhile has
        // another stamp next time. A file changed in the last moments is not memoized.
        if let Some((key, memo, name)) = &memo
            && settled(&stamp)
        {
            let record = key.seal(&[name, &stamp.to_string(), &digest]);
            if let Err(e) = write_atomically(memo, record.as_bytes()) {
                tracing::debug!("cannot memoize the digest of {}: {e}", path.display());
            }
        }
        Ok((digest, Some(bytes)))
    }

    /// The memoized `describe` answer of the component with digest `digest`, as JSON.
    pub(super) fn described(&self, digest: &str) -> Option<String> {
        let (key, path) = self.describe_path(digest)?;
        let (text, _) = read_regular(&path, MAX_RECORD_BYTES).ok()?;
        let fields = key.open(std::str::from_utf8(&text).ok()?, 2)?;
        (fields[0] == digest).then(|| fields[1].to_string())
    }

    /// Memoizes the `describe` answer (JSON on one line) of the component `digest`.
    pub(super) fn store_described(&self, digest: &str, json: &str) {
        let Some((key, path)) = self.describe_path(digest) else {
            return;
        };
        if json.contains('\n') || json.len() as u64 > MAX_RECORD_BYTES / 2 {
            return;
        }
        if let Err(e) = write_atomically(&path, key.seal(&[digest, json]).as_bytes()) {
            tracing::debug!("cannot memoize describe of {digest}: {e}");
        }
    }

    /// Why the component with digest `digest` did not compile under this engine, when a
    /// process sharing this cache found out before (a memo under `failed/`).
    pub(super) fn failed(&self, digest: &str) -> Option<String> {
        let (key, path) = self.memo_path("failed", digest)?;
        let (text, _) = read_regular(&path, MAX_RECORD_BYTES).ok()?;
        let fields = key.open(std::str::from_utf8(&text).ok()?, 2)?;
        (fields[0] == digest).then(|| fields[1].to_string())
    }

    /// Remembers that the component with digest `digest` does not compile, and why (on
    /// one line, capped): the next process does not compile it again. Another file is
    /// another digest, so changing the plugin clears it.
    pub(super) fn remember_failed(&self, digest: &str, reason: &str) {
        let Some((key, path)) = self.memo_path("failed", digest) else {
            return;
        };
        let mut reason = reason.replace(['\n', '\r'], " ");
        if reason.len() > 2048 {
            let mut end = 2048;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
            reason.push('…');
        }
        if let Err(e) = write_atomically(&path, key.seal(&[digest, &reason]).as_bytes()) {
            tracing::debug!("cannot remember the compile failure of {digest}: {e}");
        }
    }

    fn memo_path(&self, kind: &str, digest: &str) -> Option<(&CacheKey, PathBuf)> {
        let key = self.key()?;
        let dir = self.dir.as_ref()?;
        Some((
            key,
            dir.join(kind).join(format!("{digest}-{}", self.engine_key)),
        ))
    }

    fn describe_path(&self, digest: &str) -> Option<(&CacheKey, PathBuf)> {
        let key = self.key()?;
        let dir = self.dir.as_ref()?;
        Some((
            key,
            dir.join("describe")
                .join(format!("{digest}-{}.json", self.engine_key)),
        ))
    }

    /// Loads the component with digest `digest` from the cache, or compiles the bytes
    /// that `read` returns and stores them. `read` is only called on a cache miss, and
    /// must return bytes whose sha256 is `digest`. `label` names the plugin in progress
    /// messages.
    ///
    /// # Errors
    ///
    /// `read` fails, or the component does not compile.
    pub fn load(
        &self,
        engine: &Engine,
        read: impl FnOnce() -> Result<Vec<u8>, String>,
        digest: &str,
        label: &str,
    ) -> Result<(Component, CacheStatus), String> {
        self.load_component(
            engine,
            || read().map_err(CompileError::Unavailable),
            digest,
            label,
        )
        .map_err(CompileError::into_message)
    }

    /// [`CompileCache::load`], telling a component that does not compile (the same
    /// bytes never will, under this engine) from a load that failed for another reason.
    pub(super) fn load_component(
        &self,
        engine: &Engine,
        read: impl FnOnce() -> Result<Vec<u8>, CompileError>,
        digest: &str,
        label: &str,
    ) -> Result<(Component, CacheStatus), CompileError> {
        let (Some(path), Some(key)) = (self.entry_path(digest), self.key()) else {
            return compile(engine, &read()?, label)
                .map(|c| (c, CacheStatus::Uncached))
                .map_err(CompileError::Invalid);
        };
        let sidecar = path.with_extension("sha256");
        let mut rebuilt = None;
        match self.try_load(engine, key, &path, &sidecar) {
            Ok(Some(component)) => return Ok((component, CacheStatus::Hit)),
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(entry = %path.display(), "compile cache entry not used: {reason}");
                rebuilt = Some(reason);
            }
        }
        let bytes = read()?;
        let started = Instant::now();
        let artifact = with_progress(label, || engine.precompile_component(&bytes))
            .map_err(|e| CompileError::Invalid(format!("`{label}` does not compile: {e:#}")))?;
        tracing::debug!(plugin = label, "compiled in {:?}", started.elapsed());
        let stored = store(key, &path, &sidecar, &artifact);
        // SAFETY: the artifact was produced by `precompile_component` of this very engine
        // a moment ago and has not left this process.
        let component = unsafe { Component::deserialize(engine, &artifact) }.map_err(|e| {
            CompileError::Unavailable(format!(
                "`{label}`: cannot load the compiled artifact: {e:#}"
            ))
        })?;
        let status = match (stored, rebuilt) {
            (Err(e), _) => {
                tracing::warn!("cannot write the compile cache at {}: {e}", path.display());
                CacheStatus::Uncached
            }
            (Ok(()), Some(reason)) => CacheStatus::Rebuilt(reason),
            (Ok(()), None) => CacheStatus::Compiled,
        };
        Ok((component, status))
    }

    /// The cached component at `path`: `Ok(None)` when there is no entry, `Err` with the
    /// reason when there is one that cannot be used.
    fn try_load(
        &self,
        engine: &Engine,
        key: &CacheKey,
        path: &Path,
        sidecar: &Path,
    ) -> Result<Option<Component>, String> {
        use std::os::fd::AsRawFd;
        let (mut file, meta) = match open_regular(path, MAX_ARTIFACT_BYTES) {
            Err(FileError::NotFound) => return Ok(None),
            Err(e) => return Err(format!("unusable ({e})")),
            Ok(opened) => opened,
        };
        let stamp = FileStamp::of(&meta);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let memoized = self
            .verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .is_some_and(|s| *s == stamp);
        let (expected, recorded) = if memoized {
            (None, Some(stamp.to_string()))
        } else {
            let (text, _) = read_regular(sidecar, MAX_RECORD_BYTES)
                .map_err(|e| format!("no digest sidecar ({e})"))?;
            let text = String::from_utf8_lossy(&text);
            let fields = key.open(&text, 3).ok_or(
                "its sidecar is not authenticated by this user's cache key \
                 (written by someone else, or by an older hookhost)",
            )?;
            if fields[0] != name {
                return Err("its sidecar belongs to another entry".into());
            }
            (Some(fields[1].to_string()), Some(fields[2].to_string()))
        };
        let unchanged = recorded.as_deref() == Some(stamp.to_string().as_str());
        let component = if unchanged && only_ours(&meta) && proc_fd_available() {
            // The very file this host wrote and hashed, which only this user can
            // change: mapped, through the descriptor that was checked.
            // SAFETY: the artifact is the file `store` wrote from `precompile_component`
            // output (its stamp is unchanged since, and the stamp is authenticated), no
            // one but this user can write or truncate it, and wasmtime checks that it was
            // built by a compatible engine.
            unsafe {
                Component::deserialize_file(engine, format!("/proc/self/fd/{}", file.as_raw_fd()))
            }
            .map_err(|e| format!("wasmtime refused it: {e}"))?
        } else {
            // Read into memory: what is checked is what is loaded, and a truncation
            // later cannot reach it.
            let mut artifact = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
            file.read_to_end(&mut artifact)
                .map_err(|e| format!("unreadable ({e})"))?;
            let actual = sha256_hex(&artifact);
            let expected = match expected {
                Some(expected) => expected,
                // Memoized by stamp, but it is no longer mappable: hash what was read
                // against the sidecar.
                None => {
                    let (text, _) = read_regular(sidecar, MAX_RECORD_BYTES)
                        .map_err(|e| format!("no digest sidecar ({e})"))?;
                    key.open(&String::from_utf8_lossy(&text), 3)
                        .map(|f| f[1].to_string())
                        .ok_or("its sidecar is not authenticated by this user's cache key")?
                }
            };
            if actual != expected {
                return Err(format!(
                    "artifact digest {actual} does not match its sidecar {expected}"
                ));
            }
            if !unchanged && only_ours(&meta) {
                // Verified: stamp it, so that the next load maps it without hashing.
                let record = key.seal(&[&name, &expected, &stamp.to_string()]);
                if let Err(e) = write_atomically(sidecar, record.as_bytes()) {
                    tracing::debug!("cannot update {}: {e}", sidecar.display());
                }
            }
            // SAFETY: the bytes hash to the digest this user's key authenticated for
            // this entry, which `store` recorded for `precompile_component` output; and
            // wasmtime checks that it was built by a compatible engine.
            unsafe { Component::deserialize(engine, &artifact) }
                .map_err(|e| format!("wasmtime refused it: {e}"))?
        };
        self.verified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), stamp);
        Ok(Some(component))
    }
}

fn compile(engine: &Engine, bytes: &[u8], label: &str) -> Result<Component, String> {
    with_progress(label, || Component::new(engine, bytes))
        .map_err(|e| format!("`{label}` does not compile: {e:#}"))
}

fn store(key: &CacheKey, path: &Path, sidecar: &Path, artifact: &[u8]) -> std::io::Result<()> {
    write_atomically(path, artifact).map_err(std::io::Error::other)?;
    let stamp = FileStamp::of(&std::fs::metadata(path)?);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let record = key.seal(&[&name, &sha256_hex(artifact), &stamp.to_string()]);
    write_atomically(sidecar, record.as_bytes()).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a digest lookup of `file` returns: (digest, whether the file was read).
    fn digest_of(cache: &CompileCache, file: &Path) -> (String, bool) {
        let (opened, meta) = open_regular(file, 1 << 20).unwrap();
        let (digest, bytes) = cache.plugin_digest(file, &opened, &meta, 1 << 20).unwrap();
        (digest, bytes.is_some())
    }

    #[test]
    fn plugin_digests_are_memoized_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(Some(dir.path().join("cache")), &Engine::default());
        let file = dir.path().join("p.wasm");
        std::fs::write(&file, "first version").unwrap();

        // Just written: hashed, and hashed again (not memoized while it may still change
        // within one timestamp tick).
        let (first, read) = digest_of(&cache, &file);
        assert_eq!(first, sha256_hex(b"first version"));
        assert!(read);
        assert!(digest_of(&cache, &file).1, "a fresh file is not memoized");

        std::thread::sleep(SETTLE_TIME + Duration::from_millis(100));
        assert!(digest_of(&cache, &file).1, "hashed once more, and memoized");
        assert_eq!(digest_of(&cache, &file), (first.clone(), false));

        // A memo written by someone without the key is not believed.
        let memo_dir = dir.path().join("cache/digests");
        let memo = std::fs::read_dir(&memo_dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let forged = std::fs::read_to_string(&memo)
            .unwrap()
            .replace(&first, &"0".repeat(64));
        std::fs::write(&memo, forged).unwrap();
        assert_eq!(digest_of(&cache, &file), (first.clone(), true));

        // Same size, same mtime, other bytes: the ctime gives the change away.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, "other version").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let (changed, read) = digest_of(&cache, &file);
        assert_eq!(changed, sha256_hex(b"other version"));
        assert!(read);

        // Without a cache directory, nothing is memoized.
        let uncached = CompileCache::new(None, &Engine::default());
        assert!(digest_of(&uncached, &file).1);
    }
}
