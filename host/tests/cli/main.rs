//! End-to-end tests of the `hookhost` binary with real shell hooks and a loopback HTTP
//! server.

mod support;
// `SKIPPED: <test>: <why>` for tests whose prerequisite (root, a toolchain) is missing.
#[path = "../common/skip.rs"]
mod skip;
// A loopback model server speaking the Anthropic and OpenAI wire formats.
#[path = "../common/mcp_peers.rs"]
mod mcp_peers;
#[path = "../common/model_server.rs"]
mod model_server;

mod agent;
mod agents_real;
mod agents_recorded;
mod answer_bytes;
mod async_hooks;
mod attacks;
mod audit;
mod audit_verify;
mod audit_view;
mod book;
mod chain;
mod claude_format;
mod claude_real;
mod claude_real_hooks;
mod claude_settings_replay;
mod command;
mod config;
mod config_size;
mod connections;
mod descendants;
mod dispatch_client;
mod dispatch_daemon;
mod drop_in;
mod drop_in_promises;
mod fail_closed;
mod failure_modes;
mod faults;
mod flat_format;
mod governance;
mod http;
mod install_race;
mod job_replay;
mod loop_brakes;
mod machine_output;
mod mcp_serve;
mod merge;
mod model_plugins;
mod oci;
mod packaging;
mod parity;
mod pipes;
mod plugin;
mod prompt;
mod reload_gate;
mod required;
mod schema;
mod serve;
mod serve_registry;
mod session_store;
mod signing;
mod socket_activation;
mod telemetry;
mod trust;
