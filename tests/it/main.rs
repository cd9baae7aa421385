//! hookhost's integration tests.

mod allowlist;
mod demo;
mod hostile;
mod lang;
mod raw;
mod response_props;
mod support;
mod wasm;
