//! hookhost's integration tests.

mod allowlist;
mod demo;
mod hostile;
mod lang;
mod support;
mod wasm;
