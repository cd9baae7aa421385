//! hookhost runs the hooks of coding agents: sandboxed WebAssembly components beside the
//! command and HTTP hooks that agents already use, speaking Claude Code's hook protocol.
//!
//! # The pipeline
//!
//! Data flows one way; each stage is a module, and imports run one way along it
//! (`.ci/check-layout` holds the rule):
//!
//! ```text
//!  config ──► policy ──► matcher ──► dispatch ──► handlers ──► outcome
//!  find and   precedence, matcher,    parallel,    command,     merge rules
//!  parse the  trust,      `if`        sequential,  http, wasm,  per event
//!  sources    ceilings,               chains,      prompt,      (one Outcome)
//!             compiled                async, caps  agent, mcp
//! ```
//!
//! - [`config`]: finds the sources (managed, `--settings`, project local, project, user)
//!   and parses them into raw layers; the only stage besides the handlers that does I/O,
//!   every file through one reader ([`config::file`]) and every environment variable
//!   through one judge ([`config::env`]).
//! - [`policy`]: merges the layers under one precedence rule, applies workspace trust and
//!   managed ceilings, and compiles every hook once into an immutable [`policy::Policy`].
//! - [`matcher`]: Claude Code's matcher and `if` rules (with the bounded shell analysis of
//!   `Bash(…)` rules).
//! - [`dispatch`]: runs the matching hooks (parallel by default, sequential groups,
//!   transform chains), async hooks, the Stop cap and the depth guard, and the hooks
//!   registered at runtime ([`Host::register`], [`dispatch::registry`]).
//! - [`handlers`]: the runners — command, HTTP, function, wasm (the sandbox), prompt,
//!   agent and `mcp_tool` — each returning a [`handlers::HandlerRun`].
//! - [`outcome`]: merges the runs into one [`outcome::Outcome`], by the event's rules.
//!
//! Beside the pipeline: [`event`] holds the catalogue of the 34 events and their
//! attributes; [`session`] the state that outlives one dispatch (and the one way to keep
//! private files); [`trust`] the workspace trust store; [`audit`] the audit log every
//! dispatch appends to; [`telemetry`] the OpenTelemetry spans and metrics of every
//! dispatch (off unless an endpoint is set); [`serve`] the `hookhost serve` daemon;
//! [`agents`] maps the hook input and output of Codex, Gemini CLI, Copilot CLI, Cursor and
//! OpenCode to and from hookhost's (Claude Code's) vocabulary (`dispatch --format AGENT`).
//! [`HostBuilder`] and [`Host`] put them together for an embedder.
//!
//! # Workspace trust
//!
//! Project and local hooks (`.hookhost/hooks.json`, `.hookhost/hooks.local.json`) run only
//! in a trusted workspace. [`HostBuilder::standard_sources`] judges trust by the user's
//! trust store (and `HOOKHOST_TRUST_WORKSPACE=1`); a builder without it treats the
//! workspace as **untrusted** unless [`HostBuilder::workspace_trust`] says otherwise, so
//! an embedder never runs a repository's hooks without deciding to.
//!
//! # Embedding
//!
//! A host with one command hook from inline settings (a source of its own, so it needs no
//! workspace trust), asked about a tool call; the hook blocks it, and the merged
//! [`Outcome`] says so:
//!
//! ```
//! use hookhost::{HostBuilder, outcome::Decision};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let project = tempfile::tempdir()?;
//! let host = HostBuilder::new(project.path())
//!     .settings(r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
//!         "command": "grep -q 'rm -rf /' && { echo 'not the root' >&2; exit 2; }; exit 0"}]}]}}"#)
//!     .build();
//! let runtime = tokio::runtime::Runtime::new()?;
//! let ask = |command: &str| {
//!     let input = json!({"session_id": "s1", "tool_name": "Bash", "tool_input": {"command": command}});
//!     runtime.block_on(host.dispatch("PreToolUse", input))
//! };
//!
//! let outcome = ask("rm -rf /")?;
//! assert_eq!(outcome.decision, Decision::Deny);
//! assert_eq!(outcome.reason.as_deref(), Some("not the root"));
//! assert_eq!(ask("cargo test")?.decision, Decision::None);
//! # Ok(()) }
//! ```
//!
//! `host/examples/agent_loop.rs` is a whole agent loop (function hooks, rewrites, a Stop
//! gate, hooks registered at runtime); the book (`docs/book/`, chapter "Embedding") has
//! the rest.

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
