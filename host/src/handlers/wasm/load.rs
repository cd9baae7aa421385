//! Loading a plugin: stat, digest, `sha256` pin, managed admission, compile (or the
//! compile cache), link, `describe`, and the WIT version check.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Serialize;
use wasmtime::component::Component;

use super::bindings::{self, PluginPre};
use super::cache::{CacheStatus, CompileError, sha256_hex};
use super::compiles::{Budget, Prepared};
use super::hostcalls::stub_http;
use super::limits::{EventBudget, Limits, Phase, classify_error};
use super::state::State;
use super::{HOOK_EXPORT, LoadError, Sandbox, WIT_VERSIONS};
use crate::config::file::{FileError, FileStamp, kind_name, open_regular, read_regular};
use crate::handlers::FailureKind;
use crate::policy::allowlist::PluginAllowlist;
use crate::policy::capability::{Declared, DirRequest, Live};

/// The limits of `describe` when no hook asks (`hookhost plugin inspect`); a hook's
/// plugin is described under the hook's own limits.
pub(super) const INSPECT_LIMITS: Limits = Limits {
    fuel: 1_000_000_000,
    memory_bytes: 1 << 30,
    timeout: Duration::from_secs(10),
};
/// The largest plugin file read unless configured otherwise
/// ([`super::WasmRuntime::with_max_plugin_bytes`], `HOOKHOST_MAX_PLUGIN_MB`).
pub const DEFAULT_MAX_PLUGIN_BYTES: u64 = 256 << 20;
/// Caps on what `describe` may answer: it is kept for the process's lifetime and shown
/// in reports.
const MAX_DESCRIBED_TEXT: usize = 200;
const MAX_DESCRIBED_ITEMS: usize = 100;

/// What a plugin says about itself, and what the host found in the file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginInfo {
    /// The file.
    pub path: PathBuf,
    /// sha256 of the file, lowercase hex.
    pub sha256: String,
    /// Size of the file in bytes.
    pub size: u64,
    /// The `hookhost:hook` version it was built for.
    pub wit_version: String,
    /// Name from `describe`.
    pub name: String,
    /// Version from `describe`.
    pub version: String,
    /// Events it handles (empty: all).
    pub events: Vec<String>,
    /// Capabilities it asks for.
    pub capabilities: DeclaredCapabilities,
    /// The component's imports (WIT names).
    pub imports: Vec<String>,
    /// The component's exports (WIT names).
    pub exports: Vec<String>,
}

/// The capabilities a plugin declares, as reported by `inspect`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeclaredCapabilities {
    /// Directories: `(path, write)`.
    pub dirs: Vec<DeclaredDir>,
    /// Env var names.
    pub env: Vec<String>,
    /// Host patterns.
    pub http: Vec<String>,
    /// Whether it imports `hookhost:hook/model` (0.2.0): how a plugin asks for the model.
    pub model: bool,
}

/// A directory a plugin asks for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeclaredDir {
    /// `${workspace}`, `${home}`, an absolute path, or `*`.
    pub path: String,
    /// Whether it asks to write.
    pub write: bool,
}

impl DeclaredCapabilities {
    pub(super) fn to_declared(&self) -> Declared {
        Declared {
            dirs: self
                .dirs
                .iter()
                .map(|d| DirRequest {
                    path: d.path.clone(),
                    write: d.write,
                })
                .collect(),
            env: self.env.clone(),
            http: self.http.clone(),
            model: self.model,
        }
    }
}

/// Why `WasmRuntime::inspect` could not load a plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The wasm engine (or the runtime that drives it) could not be set up; no plugin
    /// was read. The message says why.
    #[error("{0}")]
    Engine(String),
    /// The plugin did not load. `kind` is what a hook running it would fail with
    /// (`Refused` for a file that is not a regular file or is above the cap,
    /// `CannotStart` for one that cannot be read or compiled, `Timeout` or `Limit` for a
    /// `describe` stopped by its limits); the message names the file.
    #[error("{message}")]
    Load {
        /// The failure class.
        kind: FailureKind,
        /// What happened, naming the file.
        message: String,
    },
}

impl From<PluginError> for String {
    fn from(error: PluginError) -> String {
        error.to_string()
    }
}

/// `HOOKHOST_MAX_PLUGIN_MB` (1 to 4096), else [`DEFAULT_MAX_PLUGIN_BYTES`].
pub(super) fn max_plugin_bytes_from_env() -> u64 {
    match crate::config::env::number("HOOKHOST_MAX_PLUGIN_MB", 1, 4096) {
        Ok(Some(mb)) => mb << 20,
        Ok(None) => DEFAULT_MAX_PLUGIN_BYTES,
        Err(notice) => {
            tracing::warn!("{notice}");
            DEFAULT_MAX_PLUGIN_BYTES
        }
    }
}

/// A compiled plugin, ready to instantiate.
pub(super) struct Loaded {
    /// The file as it was when loaded; another stamp means it changed.
    pub(super) stamp: FileStamp,
    component: Component,
    /// Linked without wasi-http: for hooks without an HTTP grant.
    pub(super) pre: PluginPre<State>,
    /// Linked with wasi-http, made on the first call of a hook with an HTTP grant.
    pre_http: OnceLock<Result<PluginPre<State>, String>>,
    pub(super) info: PluginInfo,
    pub(super) declared: Declared,
    pub(super) cache_status: CacheStatus,
    pub(super) file_name: Arc<str>,
    /// The fingerprints of what its hooks' session instances were made under
    /// ([`super::session_key`]).
    pub(super) prints: super::session_key::Prints,
}

impl Loaded {
    /// The instance template for a call: with wasi-http only when the hook may use it.
    pub(super) fn pre_for(
        &self,
        sandbox: &Sandbox,
        http: bool,
    ) -> Result<&PluginPre<State>, String> {
        if !http {
            return Ok(&self.pre);
        }
        self.pre_http
            .get_or_init(|| {
                sandbox
                    .linkers
                    .http()?
                    .instantiate_pre(&self.component)
                    .and_then(PluginPre::new)
                    .map_err(|e| format!("cannot be linked with wasi-http: {e:#}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// What `describe` answered, as memoized in the compile cache.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Described {
    name: String,
    version: String,
    events: Vec<String>,
    dirs: Vec<(String, bool)>,
    env: Vec<String>,
    http: Vec<String>,
}

impl Described {
    fn from_wit(info: bindings::PluginInfo) -> Described {
        Described {
            name: info.name,
            version: info.version,
            events: info.events,
            dirs: info
                .capabilities
                .dirs
                .into_iter()
                .map(|d| (d.path, d.write))
                .collect(),
            env: info.capabilities.env,
            http: info.capabilities.http,
        }
    }

    /// Refuses an answer larger than a plugin's self-description can reasonably be.
    fn check(&self) -> Result<(), String> {
        let texts = [&self.name, &self.version]
            .into_iter()
            .chain(&self.events)
            .chain(self.dirs.iter().map(|(p, _)| p))
            .chain(&self.env)
            .chain(&self.http);
        if let Some(long) = texts
            .into_iter()
            .find(|t| t.chars().count() > MAX_DESCRIBED_TEXT)
        {
            return Err(format!(
                "`describe` answered a string of {} characters, above the cap of {MAX_DESCRIBED_TEXT}",
                long.chars().count()
            ));
        }
        for (field, count) in [
            ("events", self.events.len()),
            ("capabilities.dirs", self.dirs.len()),
            ("capabilities.env", self.env.len()),
            ("capabilities.http", self.http.len()),
        ] {
            if count > MAX_DESCRIBED_ITEMS {
                return Err(format!(
                    "`describe` answered {count} {field}, above the cap of {MAX_DESCRIBED_ITEMS}"
                ));
            }
        }
        Ok(())
    }
}

impl Sandbox {
    /// The compiled plugin at `path`, loading it when new or changed; the compile waited
    /// for at most `budget` ([`Sandbox::compile_bounded`]), and `describe` runs under
    /// `limits` (the hook's own; for an event, on what is left of the event's budget,
    /// which it spends) when its answer is not memoized.
    pub(super) async fn load(
        self: &Arc<Self>,
        path: &Path,
        expected_sha: Option<&str>,
        allowlist: Option<&PluginAllowlist>,
        limits: &Limits,
        budget: &Budget<'_>,
    ) -> Result<Arc<Loaded>, LoadError> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| cannot_read(path, &e))?;
        if !meta.is_file() {
            return Err(refused_file(path, &FileError::NotRegular(kind_name(&meta))));
        }
        if meta.len() > self.max_plugin_bytes {
            return Err(refused_file(
                path,
                &FileError::TooLarge {
                    size: meta.len(),
                    cap: self.max_plugin_bytes,
                },
            ));
        }
        let stamp = FileStamp::of(&meta);
        let cached = self
            .plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
            .cloned();
        if let Some(loaded) = cached.filter(|l| l.stamp == stamp) {
            check_sha(&loaded.info.sha256, expected_sha, path)?;
            admit(allowlist, path, &loaded.info.sha256)?;
            return Ok(loaded);
        }
        let file_name = plugin_label(path);
        // Hashing, compiling or mapping a cached compile: blocking work, done on a thread
        // of its own and waited for no longer than the budget.
        let (digest, size, component, cache_status) = self
            .compile_bounded(path, &file_name, expected_sha, allowlist, budget)
            .await?;
        let (imports, exports) = self.interface_names(&component);
        let wit_version = check_wit_version(&imports, &exports, path)?;
        let mut linker = self.linkers.plain.clone();
        let pre = stub_http(&mut linker, &self.engine, &component)
            .and_then(|()| linker.instantiate_pre(&component))
            .and_then(PluginPre::new)
            .map_err(|e| {
                (
                    FailureKind::CannotStart,
                    format!("plugin `{shown}` cannot be linked: {e:#}"),
                )
            })?;
        let described = match self
            .cache
            .described(&digest)
            .and_then(|json| serde_json::from_str::<Described>(&json).ok())
        {
            Some(described) => described,
            None => {
                let info = self.describe(&pre, &file_name, limits, budget.event);
                let described = Described::from_wit(info.await?);
                described.check().map_err(|e| {
                    (
                        FailureKind::InvalidOutput,
                        format!("plugin `{file_name}`: {e}"),
                    )
                })?;
                if let Ok(json) = serde_json::to_string(&described) {
                    self.cache.store_described(&digest, &json);
                }
                described
            }
        };
        let info = PluginInfo {
            path: path.to_path_buf(),
            sha256: digest,
            size,
            wit_version,
            name: described.name,
            version: described.version,
            events: described.events,
            capabilities: DeclaredCapabilities {
                dirs: described
                    .dirs
                    .into_iter()
                    .map(|(path, write)| DeclaredDir { path, write })
                    .collect(),
                env: described.env,
                http: described.http,
                model: imports.iter().any(|i| i.starts_with(MODEL_IMPORT)),
            },
            imports,
            exports,
        };
        let loaded = Arc::new(Loaded {
            stamp,
            component,
            pre,
            pre_http: OnceLock::new(),
            declared: info.capabilities.to_declared(),
            info,
            cache_status,
            file_name,
            prints: Default::default(),
        });
        self.plugins
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(path.to_path_buf(), loaded.clone());
        // A load that timed out meanwhile may have left the same component behind.
        drop(self.compiles.take_parked(&loaded.info.sha256));
        Ok(loaded)
    }

    /// The digest and size of the plugin at `path` and its compiled component (from
    /// the compile cache when it holds one), refusing a digest that the config's `sha256`
    /// or managed policy's allowlist does not admit. The file is opened without blocking
    /// and read only if it is a regular file under the size cap.
    pub(super) fn compile(
        &self,
        path: &Path,
        file_name: &Arc<str>,
        expected_sha: Option<&str>,
        allowlist: Option<&PluginAllowlist>,
    ) -> Result<Prepared, LoadError> {
        let shown = path.display();
        let cap = self.max_plugin_bytes;
        let (file, meta) = open_regular(path, cap).map_err(|e| refused_file(path, &e))?;
        let (digest, bytes) = self
            .cache
            .plugin_digest(path, &file, &meta, cap)
            .map_err(|e| refused_file(path, &e))?;
        drop(file);
        check_sha(&digest, expected_sha, path)?;
        // Managed allowlist: decided on the digest of the bytes that compile (`read`
        // below refuses bytes with another digest).
        admit(allowlist, path, &digest)?;
        // Only a cache miss reads (or re-reads) the file.
        let read = || {
            // Bytes from the digest step were hashed there; re-read ones must match it.
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => {
                    let (bytes, _) = read_regular(path, cap)
                        .map_err(|e| CompileError::Unavailable(refused_file(path, &e).1))?;
                    if sha256_hex(&bytes) != digest {
                        return Err(CompileError::Unavailable(format!(
                            "plugin `{shown}` changed while it was being loaded; try again"
                        )));
                    }
                    bytes
                }
            };
            if !wasmparser_is_component(&bytes) {
                return Err(CompileError::Invalid(format!(
                    "plugin `{shown}` is not a WebAssembly component (build it for wasm32-wasip2)"
                )));
            }
            Ok(bytes)
        };
        let (component, cache_status) = self.compile_once(&digest, file_name, read)?;
        Ok((digest, meta.len(), component, cache_status))
    }

    pub(super) fn interface_names(&self, component: &Component) -> (Vec<String>, Vec<String>) {
        let ty = component.component_type();
        let imports = ty
            .imports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        let exports = ty
            .exports(&self.engine)
            .map(|(name, _)| name.to_string())
            .collect();
        (imports, exports)
    }

    /// Calls `describe` in a throwaway instance with no capabilities, under `limits`
    /// (the whole call, host calls included, ends at its timeout), or for an event on
    /// what is left of the `event`'s budget, which it then spends.
    pub(super) async fn describe(
        &self,
        pre: &PluginPre<State>,
        file_name: &Arc<str>,
        limits: &Limits,
        event: Option<&EventBudget>,
    ) -> Result<bindings::PluginInfo, LoadError> {
        let mut store = self
            .store(
                file_name,
                &Live::default(),
                &[],
                limits.memory_bytes,
                &[],
                super::grants::StoreGuard {
                    hook: file_name.clone(),
                    places: self.guards.of(&Default::default()),
                },
            )
            .map_err(|e| (FailureKind::CannotStart, e))?;
        let fuel = limits
            .arm_for(&mut store, event)
            .map_err(|e| (FailureKind::CannotStart, e))?;
        let deadline = store.data().http_policy.deadline;
        let mut phase = Phase::Instantiate;
        let result = Limits::bound(&self.ticker, deadline, async {
            let plugin = pre.instantiate_async(&mut store).await?;
            phase = Phase::Call;
            plugin.hookhost_hook_hook().call_describe(&mut store).await
        })
        .await;
        if let Some(event) = event {
            event.spend(fuel.saturating_sub(store.get_fuel().unwrap_or(0)));
        }
        result.map_err(|e| {
            let (kind, message) = classify_error(&e, &mut store, limits, phase);
            (
                kind,
                format!("plugin `{file_name}`: `describe` failed: {message}"),
            )
        })
    }
}

/// A plugin file refused before it is read: not a regular file, or above the cap.
pub(super) fn refused_file(path: &Path, error: &FileError) -> LoadError {
    let kind = match error {
        FileError::NotRegular(_)
        | FileError::TooLarge { .. }
        | FileError::Symlink
        | FileError::Unsafe(_) => FailureKind::Refused,
        FileError::NotFound | FileError::Io(_) => FailureKind::CannotStart,
    };
    (
        kind,
        format!("cannot read plugin `{}`: {error}", path.display()),
    )
}

/// A plugin file that cannot be read (or stat'ed): the hook cannot start.
pub(super) fn cannot_read(path: &Path, error: &std::io::Error) -> LoadError {
    (
        FailureKind::CannotStart,
        format!("cannot read plugin `{}`: {error}", path.display()),
    )
}

/// The name a plugin is shown by in messages and the progress line: its file name (lossy
/// when not UTF-8), or the whole path when it has none. Shown on a terminal only through
/// [`crate::text::escape`].
pub(super) fn plugin_label(path: &Path) -> Arc<str> {
    path.file_name()
        .map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
        .into()
}

/// Runs `future` to completion from sync code, on a one-thread runtime of its own: on
/// this thread, or on a scoped thread when this one may be running an async task
/// (which must not block).
pub(super) fn block_on<F>(future: F) -> Result<F::Output, String>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let run = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|runtime| runtime.block_on(future))
            .map_err(|e| format!("cannot start the async runtime: {e}"))
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return run();
    }
    std::thread::scope(|scope| {
        scope
            .spawn(run)
            .join()
            .unwrap_or_else(|_| Err("the wasm runner crashed".to_string()))
    })
}

/// Whether the bytes are a component (not a core module): the layer field of the
/// preamble.
pub(super) fn wasmparser_is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

pub(super) fn check_sha(
    actual: &str,
    expected: Option<&str>,
    path: &Path,
) -> Result<(), LoadError> {
    match expected {
        Some(expected) if !expected.eq_ignore_ascii_case(actual) => Err((
            FailureKind::NotAdmitted,
            format!(
                "plugin `{}` refused: `sha256` is {expected} in config but the file's is {actual}",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Asks managed policy's allowlist about a plugin digest, reading the plugin's detached
/// signature only when the digest alone does not admit it.
pub(super) fn admit(
    allowlist: Option<&PluginAllowlist>,
    path: &Path,
    digest: &str,
) -> Result<(), LoadError> {
    let Some(list) = allowlist.filter(|l| l.required()) else {
        return Ok(());
    };
    let signature = if list.needs_signature(digest) {
        // The one reader: a regular file (a FIFO or a device is refused without
        // blocking), at most 4 KiB (a signature is 64 bytes in hex or base64).
        let sig = crate::policy::allowlist::signature_path(path);
        match read_regular(&sig, 4096) {
            Err(FileError::NotFound) => None,
            Err(e) => Some(Err(e.to_string())),
            Ok((bytes, _)) => Some(Ok(bytes)),
        }
    } else {
        None
    };
    list.admit(path, digest, signature)
        .map(drop)
        .map_err(|message| (FailureKind::NotAdmitted, message))
}

/// The model interface, without its version.
const MODEL_IMPORT: &str = "hookhost:hook/model@";

/// Finds the `hookhost:hook` version of a component: one the host loads
/// ([`WIT_VERSIONS`]), the same on every `hookhost:hook` interface it imports or exports
/// (a 0.1.0 plugin cannot reach for 0.2.0's `model`); refuses others, naming them.
pub(super) fn check_wit_version(
    imports: &[String],
    exports: &[String],
    path: &Path,
) -> Result<String, LoadError> {
    let version_of = |name: &str| {
        name.strip_prefix("hookhost:hook/")
            .and_then(|rest| rest.split_once('@'))
            .map(|(_, v)| v.to_string())
    };
    let Some(version) = exports
        .iter()
        .find(|n| n.starts_with(&format!("{HOOK_EXPORT}@")))
        .and_then(|n| version_of(n))
    else {
        return Err((
            FailureKind::CannotStart,
            format!(
                "`{}` is not a hookhost plugin: it exports no `{HOOK_EXPORT}` interface (exports: {})",
                path.display(),
                if exports.is_empty() {
                    "none".to_string()
                } else {
                    exports.join(", ")
                }
            ),
        ));
    };
    let supported = WIT_VERSIONS
        .iter()
        .map(|v| format!("hookhost:hook@{v}"))
        .collect::<Vec<_>>()
        .join(" and ");
    let newest = WIT_VERSIONS[WIT_VERSIONS.len() - 1];
    if !WIT_VERSIONS.contains(&version.as_str()) {
        return Err((
            FailureKind::Refused,
            format!(
                "plugin `{}` was built for hookhost:hook@{version}, but this host supports {supported}; \
                 rebuild it against hookhost-guest for {newest}",
                path.display()
            ),
        ));
    }
    let mixed = imports
        .iter()
        .chain(exports)
        .find(|n| version_of(n).is_some_and(|v| v != version));
    if let Some(other) = mixed {
        return Err((
            FailureKind::Refused,
            format!(
                "plugin `{}` exports hookhost:hook@{version} but also names `{other}`: one \
                 plugin is built for one version (this host supports {supported}); rebuild \
                 it against hookhost-guest for {newest}",
                path.display()
            ),
        ));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn wit_versions_are_checked_on_every_hookhost_interface() {
        let path = Path::new("p.wasm");
        let exports = vec!["hookhost:hook/hook@0.1.0".to_string()];
        assert_eq!(check_wit_version(&[], &exports, path).unwrap(), "0.1.0");
        let imports = vec!["hookhost:hook/host@0.3.0".to_string()];
        let (kind, message) = check_wit_version(&imports, &exports, path).unwrap_err();
        assert_eq!(kind, FailureKind::Refused);
        assert!(message.contains("hookhost:hook/host@0.3.0"), "{message}");
        // Both versions load; a newer one is refused naming what is supported.
        let v2 = vec!["hookhost:hook/hook@0.2.0".to_string()];
        let model = vec!["hookhost:hook/model@0.2.0".to_string()];
        assert_eq!(check_wit_version(&model, &v2, path).unwrap(), "0.2.0");
        let v3 = vec!["hookhost:hook/hook@0.3.0".to_string()];
        let (kind, message) = check_wit_version(&[], &v3, path).unwrap_err();
        assert_eq!(kind, FailureKind::Refused);
        assert!(
            message.contains("hookhost:hook@0.3.0")
                && message.contains("hookhost:hook@0.1.0")
                && message.contains("hookhost:hook@0.2.0"),
            "{message}"
        );
        // A 0.1.0 plugin cannot import 0.2.0's model.
        let (kind, message) = check_wit_version(&model, &exports, path).unwrap_err();
        assert_eq!(kind, FailureKind::Refused);
        assert!(message.contains("hookhost:hook/model@0.2.0"), "{message}");
        let (kind, message) =
            check_wit_version(&[], &["wasi:cli/run@0.2.0".to_string()], path).unwrap_err();
        assert_eq!(kind, FailureKind::CannotStart);
        assert!(
            message.contains("not a hookhost plugin") && message.contains("wasi:cli/run"),
            "{message}"
        );
    }

    #[test]
    pub(super) fn component_preamble_is_told_apart_from_core_modules() {
        assert!(wasmparser_is_component(b"\0asm\x0d\0\x01\0"));
        assert!(!wasmparser_is_component(b"\0asm\x01\0\0\0"));
        assert!(!wasmparser_is_component(b"nope"));
    }
}
