//! hookhost's integration tests.

mod allowlist;
mod demo;
mod hostile;
mod lang;
mod output_keys;
mod raw;
mod response_props;
#[path = "../common/skip.rs"]
mod skip;
mod support;
mod wasm;
