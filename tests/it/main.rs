//! hookhost's integration tests.

mod demo;
mod hostile;
mod support;
mod wasm;
