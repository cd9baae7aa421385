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
//! - [`dispatch`]: runs the matching hooks (parallel by default), async hooks, the Stop cap,
//!   and the hooks registered at runtime ([`Host::register`], [`dispatch::registry`]).
//! - [`handlers`]: the runners, each returning a [`handlers::HandlerRun`].
//! - [`outcome`]: merges the runs into one [`outcome::Outcome`].
//!
//! [`event`] holds the catalogue of the 34 events and their attributes; [`session`] the
//! state that outlives one dispatch (and the one way to keep private files); [`trust`] the
//! workspace trust store; [`audit`] the audit log every dispatch appends to; [`telemetry`]
//! the OpenTelemetry spans and metrics of every dispatch (off unless an endpoint is set).
//! [`agents`] maps the hook input and output of Codex, Gemini CLI, Copilot CLI, Cursor and
//! OpenCode to and from hookhost's (Claude Code's) vocabulary (`dispatch --format AGENT`).
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

pub mod agents; // adapters: other agents' hook input and output in hookhost's words
pub mod audit; // the audit log: one redacted line per dispatch
pub mod config; // stage 1: find and parse the settings sources into raw layers
pub mod dispatch; // stage 4: run the matching hooks (parallel, sequential, async, Stop cap)
pub mod event; // the catalogue of events and their per-event attributes
pub mod handlers; // stage 5: the command, HTTP, function and wasm runners
mod host; // HostBuilder and Host: the embedder's entry point
pub mod matcher; // stage 3: Claude Code's matcher and `if` rules
pub mod outcome; // stage 6: merge the runs into one Outcome
pub mod policy; // stage 2: precedence, validation, compiled immutable Policy
pub mod serve; // the `hookhost serve` server
pub mod session; // state that outlives one dispatch
pub mod telemetry; // OpenTelemetry: a span per dispatch and per hook, metrics, OTLP/HTTP
pub mod text; // small text helpers
pub mod trust; // the workspace trust store

pub use dispatch::registry::HookId;
pub use dispatch::{AsyncLauncher, DispatchError, Dispatcher};
pub use event::{EventCatalogue, EventSpec};
pub use host::{
    Host, HostBuilder, HostFiles, Receipt, RegisterError, Registration, SourcesFingerprint,
    data_dir, gate, host_owned_places, resolve_options, shared_session_store, trust_store_for,
};
pub use outcome::Outcome;
pub use trust::WorkspaceTrust;
