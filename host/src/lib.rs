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
//! state that outlives one dispatch.
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

pub mod config;
pub mod demo;
pub mod dispatch;
pub mod event;
pub mod handlers;
pub mod matcher;
pub mod outcome;
pub mod policy;
pub mod scaffold;
pub mod serve;
pub mod session;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

pub use dispatch::{AsyncLauncher, DispatchError, Dispatcher};
pub use event::{EventCatalogue, EventSpec};
pub use outcome::Outcome;

use config::SourceOptions;
use handlers::{Handlers, WasmRunner};
use policy::{Policy, ResolveOptions};
use session::{MemoryStore, SessionStore};

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
        }
    }

    /// Reads the standard sources: managed policy from `HOOKHOST_MANAGED_DIR`, the user's
    /// `HOOKHOST_HOME`, and the project's `.hookhost/`; the Stop cap from
    /// `HOOKHOST_STOP_BLOCK_CAP`.
    pub fn standard_sources(mut self) -> HostBuilder {
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
        let sources = self.sources;
        let options = ResolveOptions {
            project_dir: sources.project_dir.clone(),
            stop_block_cap: self.stop_block_cap,
            functions: self.functions,
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
        );
        Host {
            dispatcher,
            sources: Arc::new(sources),
        }
    }
}

/// A hook host: a resolved policy and the runners to dispatch events with it.
#[derive(Debug, Clone)]
pub struct Host {
    dispatcher: Dispatcher,
    sources: Arc<SourceOptions>,
}

impl Host {
    /// Where the config came from (for watching it).
    pub fn sources(&self) -> &SourceOptions {
        &self.sources
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
