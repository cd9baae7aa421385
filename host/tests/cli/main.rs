//! End-to-end tests of the `hookhost` binary with real shell hooks and a loopback HTTP
//! server.

mod support;
// `SKIPPED: <test>: <why>` for tests whose prerequisite (root, a toolchain) is missing.
#[path = "../common/skip.rs"]
mod skip;

mod answer_bytes;
mod async_hooks;
mod attacks;
mod audit;
mod chain;
mod claude_format;
mod command;
mod config;
mod config_size;
mod connections;
mod descendants;
mod dispatch_daemon;
mod drop_in;
mod fail_closed;
mod faults;
mod governance;
mod http;
mod install_race;
mod job_replay;
mod merge;
mod pipes;
mod plugin;
mod reload_gate;
mod schema;
mod serve;
mod session_store;
mod signing;
mod trust;
