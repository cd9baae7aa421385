//! hookhost's integration tests.

mod allowlist;
mod demo;
mod hostile;
mod lang;
#[path = "../common/skip.rs"]
mod skip;
mod support;
mod wasm;
