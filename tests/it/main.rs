//! hookhost's integration tests.

mod demo;
mod hostile;
mod lang;
mod support;
mod wasm;
