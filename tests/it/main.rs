//! hookhost's integration tests.

mod hostile;
mod support;
mod wasm;
