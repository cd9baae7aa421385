//! hookhost's integration tests.

mod allowlist;
mod hostile;
mod support;
mod wasm;
