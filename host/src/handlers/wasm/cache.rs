//! The on-disk compile cache: one precompiled artifact per (component sha256, wasmtime
//! version, engine config), loaded with `Component::deserialize_file`.
//!
//! An entry is `<key>.cwasm` plus `<key>.sha256`: the artifact's sha256 and the stamp
//! (device, inode, size, mtime, ctime) the artifact had when this host wrote it. An
//! entry whose stamp is unchanged is the very file the host wrote, since any write to it
//! changes its mtime and ctime, and a ctime cannot be set back: it is mapped as it is,
//! without reading its tens of megabytes. An entry with another stamp (copied, touched,
//! written by someone else, or from an older hookhost) is used only when its sha256
//! matches the sidecar, and wasmtime must accept it in every case; anything else
//! (truncated, corrupt, built by another engine config) is rebuilt. Writes go to a
//! temporary file that is renamed into place, so a crash never leaves a half-written
//! entry under the final name.
//!
//! A plugin's own sha256 (its cache key, and what `sha256` pins and allowlists check) is
//! memoized the same way, under `digests/`: a 20 MB Python component is hashed once
//! per change, not once per process.

use std::hash::{Hash, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The wasmtime release the host is built with; part of every cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// How long a plugin file must have been left alone before its digest is memoized.
const SETTLE_TIME: Duration = Duration::from_secs(1);

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

/// The compile cache of one engine.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: Option<PathBuf>,
    engine_key: String,
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

/// What identifies one version of a file: any write changes its mtime and ctime, and a
/// ctime cannot be set back by a user, so an unchanged stamp means unchanged content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    pub(super) fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether the file has been left alone for [`SETTLE_TIME`]. File times have the
    /// kernel's tick as resolution, so a file changed in the last moments could change
    /// again without a new stamp: like git's "racily clean" entries, such a stamp is not
    /// trusted for later runs.
    fn settled(&self) -> bool {
        let latest = self.mtime.max(self.ctime);
        let changed = UNIX_EPOCH + Duration::new(latest.0.max(0) as u64, latest.1 as u32);
        SystemTime::now()
            .duration_since(changed)
            .is_ok_and(|age| age >= SETTLE_TIME)
    }
}

impl std::fmt::Display for FileStamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dev={} ino={} size={} mtime={}.{:09} ctime={}.{:09}",
            self.dev, self.ino, self.size, self.mtime.0, self.mtime.1, self.ctime.0, self.ctime.1
        )
    }
}

/// Writes `text` to `path` through a temporary file renamed into place.
fn write_atomically(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Unique per process and per write: two threads storing the same entry must not
    // write into one temporary file.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry")
    ));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
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
        CompileCache { dir, engine_key }
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
                directories::ProjectDirs::from("", "", "hookhost")
                    .map(|d| d.cache_dir().join("wasm"))
            }
        }
    }

    /// The cache directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
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

    /// The sha256 of the plugin file at `path` (whose metadata is `meta`), from the memo
    /// when the file is unchanged since it was last hashed; else read and hashed, and
    /// then the bytes read are returned too.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn plugin_digest(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
    ) -> std::io::Result<(String, Option<Vec<u8>>)> {
        let stamp = FileStamp::of(meta);
        let memo = self.dir.as_ref().map(|dir| {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            let key = sha256_hex(canonical.as_os_str().as_encoded_bytes());
            dir.join("digests").join(&key[..32])
        });
        if let Some(memo) = &memo
            && let Ok(text) = std::fs::read_to_string(memo)
            && let Some((memo_stamp, digest)) = text.trim_end().split_once('\n')
            && memo_stamp == stamp.to_string()
            && digest.len() == 64
        {
            return Ok((digest.to_string(), None));
        }
        let bytes = std::fs::read(path)?;
        let digest = sha256_hex(&bytes);
        // Stamped with the metadata taken before the read: a file changed meanwhile has
        // another stamp next time. A file changed in the last moments is not memoized.
        if let Some(memo) = &memo
            && stamp.settled()
            && let Err(e) = write_atomically(memo, format!("{stamp}\n{digest}\n").as_bytes())
        {
            tracing::debug!("cannot memoize the digest of {}: {e}", path.display());
        }
        Ok((digest, Some(bytes)))
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
        let Some(path) = self.entry_path(digest) else {
            return compile(engine, &read()?, label).map(|c| (c, CacheStatus::Uncached));
        };
        let sidecar = path.with_extension("sha256");
        let mut rebuilt = None;
        if path.exists() {
            match self.try_load(engine, &path, &sidecar) {
                Ok(component) => return Ok((component, CacheStatus::Hit)),
                Err(reason) => {
                    tracing::warn!(entry = %path.display(), "compile cache entry not used: {reason}");
                    rebuilt = Some(reason);
                }
            }
        }
        let bytes = read()?;
        let started = Instant::now();
        let artifact = with_progress(label, || engine.precompile_component(&bytes))
            .map_err(|e| format!("`{label}` does not compile: {e:#}"))?;
        tracing::debug!(plugin = label, "compiled in {:?}", started.elapsed());
        let stored = store(&path, &sidecar, &artifact);
        // SAFETY: the artifact was produced by `precompile_component` of this very engine
        // a moment ago and has not left this process.
        let component = unsafe { Component::deserialize(engine, &artifact) }
            .map_err(|e| format!("`{label}`: cannot load the compiled artifact: {e:#}"))?;
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

    fn try_load(&self, engine: &Engine, path: &Path, sidecar: &Path) -> Result<Component, String> {
        let recorded =
            std::fs::read_to_string(sidecar).map_err(|e| format!("no digest sidecar ({e})"))?;
        let mut lines = recorded.lines();
        let expected = lines.next().unwrap_or_default().trim();
        let written_as = lines.next();
        let meta = std::fs::metadata(path).map_err(|e| format!("unreadable ({e})"))?;
        if written_as != Some(FileStamp::of(&meta).to_string().as_str()) {
            let artifact = std::fs::read(path).map_err(|e| format!("unreadable ({e})"))?;
            let actual = sha256_hex(&artifact);
            if actual != expected {
                return Err(format!(
                    "artifact digest {actual} does not match its sidecar {expected}"
                ));
            }
            // Verified: stamp it, so that the next load maps it without hashing.
            let stamped = format!("{expected}\n{}\n", FileStamp::of(&meta));
            if let Err(e) = write_atomically(sidecar, stamped.as_bytes()) {
                tracing::debug!("cannot update {}: {e}", sidecar.display());
            }
        }
        // SAFETY: the artifact is the file `store` wrote from `precompile_component`
        // output (its stamp is unchanged since), or its digest matches the one recorded
        // when it was written; so it is not truncated or corrupted. wasmtime itself
        // checks that it was built by a compatible engine (version and codegen config)
        // and refuses it otherwise.
        unsafe { Component::deserialize_file(engine, path) }
            .map_err(|e| format!("wasmtime refused it: {e}"))
    }
}

fn compile(engine: &Engine, bytes: &[u8], label: &str) -> Result<Component, String> {
    with_progress(label, || Component::new(engine, bytes))
        .map_err(|e| format!("`{label}` does not compile: {e:#}"))
}

fn store(path: &Path, sidecar: &Path, artifact: &[u8]) -> std::io::Result<()> {
    write_atomically(path, artifact)?;
    let stamp = FileStamp::of(&std::fs::metadata(path)?);
    write_atomically(
        sidecar,
        format!("{}\n{stamp}\n", sha256_hex(artifact)).as_bytes(),
    )
}

/// Runs a compile; when it takes more than a second and stderr is a terminal, shows a
/// progress line until it is done.
fn with_progress<T>(label: &str, work: impl FnOnce() -> T) -> T {
    if !std::io::stderr().is_terminal() {
        return work();
    }
    progress_while(
        label,
        Duration::from_secs(1),
        &Mutex::new(std::io::stderr()),
        work,
    )
}

/// Runs `work`; once it has taken `after`, writes a spinner line to `out` every 100 ms,
/// and a closing line when it is done. Nothing is written for quick work.
fn progress_while<T, W: std::io::Write + Send>(
    label: &str,
    after: Duration,
    out: &Mutex<W>,
    work: impl FnOnce() -> T,
) -> T {
    let done = AtomicBool::new(false);
    let shown = AtomicBool::new(false);
    let started = Instant::now();
    let write = |line: std::fmt::Arguments<'_>| {
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_fmt(line);
    };
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut frame = 0usize;
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
                if started.elapsed() >= after && !done.load(Ordering::Acquire) {
                    shown.store(true, Ordering::Release);
                    let spinner = ['|', '/', '-', '\\'][frame % 4];
                    frame += 1;
                    write(format_args!(
                        "\r{spinner} hookhost: compiling {label} ({:.1} s)",
                        started.elapsed().as_secs_f64()
                    ));
                }
            }
        });
        let result = work();
        done.store(true, Ordering::Release);
        result
    });
    if shown.load(Ordering::Acquire) {
        write(format_args!(
            "\r✓ hookhost: compiled {label} in {:.1} s (cached for next time)\n",
            started.elapsed().as_secs_f64()
        ));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_compiles_show_progress_and_quick_ones_stay_silent() {
        // What `progress_while` writes, for `work_ms` of work under an `after_ms` threshold.
        let shown = |label: &str, after_ms: u64, work_ms: u64| {
            let out = Mutex::new(Vec::new());
            let answer = progress_while(label, Duration::from_millis(after_ms), &out, || {
                std::thread::sleep(Duration::from_millis(work_ms));
                work_ms
            });
            assert_eq!(answer, work_ms, "the work's result is passed through");
            String::from_utf8(out.into_inner().unwrap()).unwrap()
        };
        // The ticker wakes twice before the work ends and shows nothing.
        assert_eq!(shown("quick.wasm", 500, 250), "");
        let text = shown("slow.wasm", 150, 600);
        assert!(text.contains("hookhost: compiling slow.wasm ("), "{text:?}");
        assert!(
            text.ends_with("s (cached for next time)\n")
                && text.contains("\r✓ hookhost: compiled slow.wasm in "),
            "{text:?}"
        );
    }

    #[test]
    fn plugin_digests_are_memoized_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CompileCache::new(Some(dir.path().join("cache")), &Engine::default());
        let file = dir.path().join("p.wasm");
        std::fs::write(&file, "first version").unwrap();
        let digest = |cache: &CompileCache| {
            let meta = std::fs::metadata(&file).unwrap();
            cache.plugin_digest(&file, &meta).unwrap()
        };

        // Just written: hashed, and hashed again (not memoized while it may still change
        // within one timestamp tick).
        let (first, read) = digest(&cache);
        assert_eq!(first, sha256_hex(b"first version"));
        assert!(read.is_some());
        assert!(digest(&cache).1.is_some(), "a fresh file is not memoized");

        std::thread::sleep(SETTLE_TIME + Duration::from_millis(100));
        assert!(digest(&cache).1.is_some(), "hashed once more, and memoized");
        let (memoized, read) = digest(&cache);
        assert_eq!((memoized.as_str(), read), (first.as_str(), None));

        // Same size, same mtime, other bytes: the ctime gives the change away.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, "other version").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let (changed, read) = digest(&cache);
        assert_eq!(changed, sha256_hex(b"other version"));
        assert!(read.is_some());

        // Without a cache directory, nothing is memoized.
        let uncached = CompileCache::new(None, &Engine::default());
        assert!(digest(&uncached).1.is_some());
    }
}
