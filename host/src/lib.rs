//! hookhost runs the hooks of coding agents: sandboxed WebAssembly components beside the
//! command and HTTP hooks that agents already use, speaking Claude Code's hook protocol.
//!
//! # The pipeline
//!
//! Data flows one way; each stage is a module:
//!
//! ```text
//! config ──► policy ──► matcher ──► dispatch ──► handlers ──► outcome
//! (find and   (precedence, (matcher,   (parallel,   (command,    (merge rules
//!  parse       validation,  `if`)       sequential,  http, wasm)  per event)
//!  sources)    compiled)                async, cap)
//! ```
//!
//! - [`config`]: finds the sources (managed, `--settings`, project local, project, user)
//!   and parses them into raw layers; the only stage besides the handlers that does I/O.
//! - [`policy`]: merges the layers under one precedence rule and compiles every hook once
//!   into an immutable [`policy::Policy`].
//! - [`matcher`]: Claude Code's matcher and `if` rules.
//! - [`dispatch`]: runs the matching hooks (parallel by default), async hooks, the Stop cap.
//! - [`handlers`]: the runners, each returning a [`handlers::HandlerRun`].
//! - [`outcome`]: merges the runs into one [`outcome::Outcome`].
//!
//! [`event`] holds the catalogue of the 31 events and their attributes; [`session`] the
//! state that outlives one dispatch; [`trust`] the workspace trust store; [`audit`] the
//! audit log every dispatch appends to.
//!
//! # Workspace trust
//!
//! Project and local hooks (`.hookhost/hooks.json`, `.hookhost/hooks.local.json`) run only
//! in a trusted workspace. [`HostBuilder::standard_sources`] judges trust by the user's
//! trust store (and `HOOKHOST_TRUST_WORKSPACE=1`); a builder without it treats the
//! workspace as **untrusted** unless [`HostBuilder::workspace_trust`] says otherwise, so
//! an embedder never runs a repository's hooks without deciding to.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let host = hookhost::HostBuilder::new(std::env::current_dir()?)
//!     .settings(r#"{"hooks": {"PreToolUse": [{"matcher": "Bash",
//!         "hooks": [{"type": "command", "command": "echo '{}'"}]}]}}"#)
//!     .build();
//! let outcome = host
//!     .dispatch("PreToolUse", serde_json::json!({
//!         "session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "ls"}
//!     }))
//!     .await?;
//! println!("{}", serde_json::to_string_pretty(&outcome)?);
//! # Ok(()) }
//! ```

pub mod audit;
pub mod config;
pub mod dispatch;
pub mod event;
pub mod handlers;
pub mod matcher;
pub mod outcome;
pub mod policy;
pub mod serve;
pub mod session;
pub mod text;
pub mod trust;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

pub use dispatch::{AsyncLauncher, DispatchError, Dispatcher};
pub use event::{EventCatalogue, EventSpec};
pub use outcome::Outcome;

use audit::AuditLog;
use config::SourceOptions;
use handlers::{Handlers, WasmRunner};
use policy::{Policy, ResolveOptions};
use session::{MemoryStore, SessionStore};
pub use trust::WorkspaceTrust;

/// The user's data directory: `HOOKHOST_DATA_DIR`, else `~/.local/share/hookhost` (the
/// platform's data directory), else a `hookhost` directory in the temp dir. Session state,
/// the trust store and the audit log live there.
pub fn data_dir() -> PathBuf {
    std::env::var_os("HOOKHOST_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| directories::BaseDirs::new().map(|d| d.data_dir().join("hookhost")))
        .unwrap_or_else(|| std::env::temp_dir().join("hookhost"))
}

/// Builds a [`Host`] from config sources.
#[derive(Debug)]
pub struct HostBuilder {
    sources: SourceOptions,
    catalogue: EventCatalogue,
    stop_block_cap: Option<u32>,
    sessions: Option<Arc<dyn SessionStore>>,
    launcher: AsyncLauncher,
    session_files: Option<PathBuf>,
    wasm: Option<Arc<dyn WasmRunner>>,
    functions: Vec<policy::FunctionHook>,
    trust: WorkspaceTrust,
    audit: Option<PathBuf>,
}

impl HostBuilder {
    /// A builder for a project, reading no files except those added: no managed, user or
    /// project sources until [`HostBuilder::standard_sources`] or the setters add them.
    pub fn new(project_dir: impl Into<PathBuf>) -> HostBuilder {
        HostBuilder {
            sources: SourceOptions {
                project_dir: project_dir.into(),
                ..SourceOptions::default()
            },
            catalogue: EventCatalogue::default(),
            stop_block_cap: None,
            sessions: None,
            launcher: AsyncLauncher::InProcess,
            session_files: None,
            wasm: None,
            functions: Vec::new(),
            trust: WorkspaceTrust::Untrusted,
            audit: None,
        }
    }

    /// Reads the standard sources: managed policy from `HOOKHOST_MANAGED_DIR`, the user's
    /// `HOOKHOST_HOME`, and the project's `.hookhost/`; the Stop cap from
    /// `HOOKHOST_STOP_BLOCK_CAP`. Judges workspace trust by the trust store in
    /// [`data_dir`] (or trusts explicitly when `HOOKHOST_TRUST_WORKSPACE=1`), and appends
    /// every dispatch to the audit log (`HOOKHOST_AUDIT_LOG`, else `audit.jsonl` in
    /// [`data_dir`]). An `audit_log` or a trust other than `Untrusted` set before is kept;
    /// setters called after override these.
    pub fn standard_sources(mut self) -> HostBuilder {
        let data = data_dir();
        if self.trust == WorkspaceTrust::Untrusted {
            self.trust = if std::env::var("HOOKHOST_TRUST_WORKSPACE").is_ok_and(|v| v.trim() == "1")
            {
                WorkspaceTrust::Explicit
            } else {
                WorkspaceTrust::Store(trust::TrustStore::in_data_dir(&data).path().to_path_buf())
            };
        }
        self.audit = self.audit.or_else(|| Some(AuditLog::default_path(&data)));
        let settings = std::mem::take(&mut self.sources.settings);
        self.sources = SourceOptions::from_env(self.sources.project_dir.clone(), settings);
        self.stop_block_cap = self.stop_block_cap.or_else(|| {
            std::env::var("HOOKHOST_STOP_BLOCK_CAP")
                .ok()
                .and_then(|v| v.trim().parse().ok())
        });
        self
    }

    /// Adds a `--settings` source: a file path or inline JSON.
    pub fn settings(mut self, file_or_json: impl Into<String>) -> HostBuilder {
        self.sources.settings.push(file_or_json.into());
        self
    }

    /// Sets the managed policy directory.
    pub fn managed_dir(mut self, dir: impl Into<PathBuf>) -> HostBuilder {
        self.sources.managed_dir = Some(dir.into());
        self
    }

    /// Sets the user config directory.
    pub fn user_dir(mut self, dir: impl Into<PathBuf>) -> HostBuilder {
        self.sources.user_dir = Some(dir.into());
        self
    }

    /// Overrides the Stop block cap (0 = no cap).
    pub fn stop_block_cap(mut self, cap: u32) -> HostBuilder {
        self.stop_block_cap = Some(cap);
        self
    }

    /// Keeps session state in `store` (default: in memory).
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> HostBuilder {
        self.sessions = Some(store);
        self
    }

    /// Starts async hooks with `launcher` (default: in-process tasks).
    pub fn async_launcher(mut self, launcher: AsyncLauncher) -> HostBuilder {
        self.launcher = launcher;
        self
    }

    /// Creates per-session files (`CLAUDE_ENV_FILE`) under `dir`.
    pub fn session_files(mut self, dir: impl Into<PathBuf>) -> HostBuilder {
        self.session_files = Some(dir.into());
        self
    }

    /// Runs wasm hooks with `runner` (default: a [`handlers::wasm::WasmRuntime`] with the
    /// compile cache in `HOOKHOST_CACHE_DIR` or the user's cache directory).
    pub fn wasm_runner(mut self, runner: Arc<dyn WasmRunner>) -> HostBuilder {
        self.wasm = Some(runner);
        self
    }

    /// Registers an in-process function hook. It runs after every configured hook in
    /// config order, and merges like any other hook.
    pub fn function_hook(mut self, hook: policy::FunctionHook) -> HostBuilder {
        self.functions.push(hook);
        self
    }

    /// How to judge the trust of the workspace (default: untrusted; see the crate docs).
    pub fn workspace_trust(mut self, trust: WorkspaceTrust) -> HostBuilder {
        self.trust = trust;
        self
    }

    /// Appends one JSON line per dispatch to the audit log at `path` (default: no log,
    /// or the standard one with [`HostBuilder::standard_sources`]).
    pub fn audit_log(mut self, path: impl Into<PathBuf>) -> HostBuilder {
        self.audit = Some(path.into());
        self
    }

    /// Registers a custom event.
    pub fn register_event(mut self, spec: EventSpec) -> HostBuilder {
        self.catalogue.register(spec);
        self
    }

    /// Loads the sources and resolves the policy. Problems in the sources do not fail the
    /// build: they are in [`Policy::errors`] and [`Policy::warnings`], and every outcome
    /// carries the errors as notices.
    pub fn build(self) -> Host {
        let catalogue = Arc::new(self.catalogue);
        let loaded = config::load(&self.sources, &catalogue);
        let trust = trust::request(&loaded, &self.sources, &self.trust);
        let sources = self.sources;
        let options = ResolveOptions {
            project_dir: sources.project_dir.clone(),
            stop_block_cap: self.stop_block_cap,
            functions: self.functions,
            trust: Some(trust),
        };
        let policy = Arc::new(policy::resolve(loaded, catalogue, &options));
        let sessions = self
            .sessions
            .unwrap_or_else(|| Arc::new(MemoryStore::default()));
        // The default sandbox is shared by the hosts of the process and cheap until the
        // first wasm hook runs: the engine starts then, with the compile cache in
        // `HOOKHOST_CACHE_DIR` or the user's cache dir.
        let wasm = self
            .wasm
            .unwrap_or_else(handlers::wasm::WasmRuntime::shared);
        let dispatcher = Dispatcher::new(
            policy,
            Handlers::new(Some(wasm)),
            sessions,
            self.launcher,
            self.session_files,
        )
        .with_audit(self.audit.map(AuditLog::new));
        let mut watched = sources.watched_paths();
        if let WorkspaceTrust::Store(store) = &self.trust {
            watched.push(store.clone());
        }
        watched.extend(
            dispatcher
                .policy()
                .hooks
                .iter()
                .filter_map(|hook| match &hook.handler {
                    policy::HandlerSpec::Wasm(wasm) => Some(wasm.plugin.clone()),
                    _ => None,
                }),
        );
        watched.sort();
        watched.dedup();
        Host {
            dispatcher,
            watched: Arc::new(watched),
        }
    }
}

/// The modification time and length of each file a host was built from (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesFingerprint(Vec<(PathBuf, Option<(std::time::SystemTime, u64)>)>);

impl SourcesFingerprint {
    /// The files whose state differs between `self` and `other`.
    pub fn changed_since(&self, other: &SourcesFingerprint) -> std::collections::BTreeSet<PathBuf> {
        self.0
            .iter()
            .filter(|entry| !other.0.contains(entry))
            .chain(other.0.iter().filter(|entry| !self.0.contains(entry)))
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Whether no file changed in the last second. A file written just before it was
    /// read and then again within its timestamp's granularity could look unchanged, so a
    /// host whose files are not settled should not be reused on its fingerprint alone.
    pub fn is_settled(&self) -> bool {
        let Some(recent) =
            std::time::SystemTime::now().checked_sub(std::time::Duration::from_secs(1))
        else {
            return false;
        };
        self.0
            .iter()
            .all(|(_, state)| state.is_none_or(|(modified, _)| modified < recent))
    }
}

/// A hook host: a resolved policy and the runners to dispatch events with it.
#[derive(Debug, Clone)]
pub struct Host {
    dispatcher: Dispatcher,
    watched: Arc<Vec<PathBuf>>,
}

impl Host {
    /// Every file whose change can change this host's policy: the config sources
    /// (present or not), the trust store, and the plugins its hooks reference.
    pub fn watched_paths(&self) -> &[PathBuf] {
        &self.watched
    }

    /// The state of [`Host::watched_paths`] now: while it is unchanged, a host built
    /// again would be built from the same files.
    pub fn fingerprint(&self) -> SourcesFingerprint {
        SourcesFingerprint(
            self.watched
                .iter()
                .map(|path| {
                    let state = std::fs::metadata(path)
                        .ok()
                        .and_then(|m| Some((m.modified().ok()?, m.len())));
                    (path.clone(), state)
                })
                .collect(),
        )
    }

    /// The resolved policy.
    pub fn policy(&self) -> &Arc<Policy> {
        self.dispatcher.policy()
    }

    /// The dispatcher.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Dispatches one event and returns the merged outcome.
    ///
    /// # Errors
    ///
    /// An unknown event or an input that is not a JSON object.
    pub async fn dispatch(&self, event: &str, input: Value) -> Result<Outcome, DispatchError> {
        self.dispatcher.dispatch(event, input).await
    }
}
