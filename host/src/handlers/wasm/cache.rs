//! The on-disk compile cache: one precompiled artifact per (component sha256, wasmtime
//! version, engine config), loaded with `Component::deserialize_file`.
//!
//! An entry is `<key>.cwasm` plus `<key>.sha256`, the digest of the artifact. An entry is
//! used only when the artifact's digest matches its sidecar and wasmtime accepts it;
//! anything else (truncated, corrupt, built by another engine config) is rebuilt.
//! Writes go to a temporary file that is renamed into place, so a crash never leaves a
//! half-written entry under the final name.

use std::hash::{Hash, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The wasmtime release the host is built with; part of every cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

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

    /// The default directory: `HOOKHOST_CACHE_DIR`, else the user's cache directory
    /// (`~/.cache/hookhost/wasm` on Linux).
    pub fn default_dir() -> Option<PathBuf> {
        match std::env::var_os("HOOKHOST_CACHE_DIR") {
            Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
            _ => directories::ProjectDirs::from("", "", "hookhost")
                .map(|d| d.cache_dir().join("wasm")),
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

    /// Loads the component with digest `digest` from the cache, or compiles `bytes` and
    /// stores it. `label` names the plugin in progress messages.
    ///
    /// # Errors
    ///
    /// The component does not compile.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        digest: &str,
        label: &str,
    ) -> Result<(Component, CacheStatus), String> {
        let Some(path) = self.entry_path(digest) else {
            return compile(engine, bytes, label).map(|c| (c, CacheStatus::Uncached));
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
        let started = Instant::now();
        let artifact = with_progress(label, || engine.precompile_component(bytes))
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
        let expected =
            std::fs::read_to_string(sidecar).map_err(|e| format!("no digest sidecar ({e})"))?;
        let artifact = std::fs::read(path).map_err(|e| format!("unreadable ({e})"))?;
        let actual = sha256_hex(&artifact);
        if actual != expected.trim() {
            return Err(format!(
                "artifact digest {actual} does not match its sidecar {}",
                expected.trim()
            ));
        }
        // SAFETY: the artifact was written by `store` from `precompile_component` output,
        // and its digest matches the one recorded when it was written, so it is not
        // truncated or corrupted; wasmtime itself checks that it was built by a
        // compatible engine (version and codegen config) and refuses it otherwise.
        unsafe { Component::deserialize_file(engine, path) }
            .map_err(|e| format!("wasmtime refused it: {e}"))
    }
}

fn compile(engine: &Engine, bytes: &[u8], label: &str) -> Result<Component, String> {
    with_progress(label, || Component::new(engine, bytes))
        .map_err(|e| format!("`{label}` does not compile: {e:#}"))
}

fn store(path: &Path, sidecar: &Path, artifact: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry")
    ));
    std::fs::write(&tmp, artifact)?;
    std::fs::write(sidecar, sha256_hex(artifact))?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Runs a compile; when it takes more than a second and stderr is a terminal, shows a
/// progress line until it is done.
fn with_progress<T>(label: &str, work: impl FnOnce() -> T) -> T {
    if !std::io::stderr().is_terminal() {
        return work();
    }
    let done = Arc::new(AtomicBool::new(false));
    let shown = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let ticker = {
        let (done, shown, label) = (done.clone(), shown.clone(), label.to_string());
        std::thread::spawn(move || {
            let mut frame = 0usize;
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
                if started.elapsed() >= Duration::from_secs(1) && !done.load(Ordering::Acquire) {
                    shown.store(true, Ordering::Release);
                    let spinner = ['|', '/', '-', '\\'][frame % 4];
                    frame += 1;
                    eprint!(
                        "\r{spinner} hookhost: compiling {label} ({:.1} s)",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        })
    };
    let out = work();
    done.store(true, Ordering::Release);
    let _ = ticker.join();
    if shown.load(Ordering::Acquire) {
        eprintln!(
            "\r✓ hookhost: compiled {label} in {:.1} s (cached for next time)",
            started.elapsed().as_secs_f64()
        );
    }
    out
}
