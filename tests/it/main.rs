//! hookhost's integration tests.

mod allowlist;
mod demo;
mod hostile;
mod lang;
#[path = "../../host/tests/common/skip.rs"]
mod skip;
mod support;
mod wasm;
