//! hookhost's integration tests.

mod allowlist;
mod demo;
mod hostile;
mod support;
mod wasm;
