//! The wasm plugins of hookhost's tests: the crates in `plugins/`, built for
//! `wasm32-wasip2` by this crate's build script, and their paths as constants (wasmtime's
//! `test-programs-artifacts` pattern). The host's tests and benchmarks take it as a
//! dev-dependency; it depends on nothing, `hookhost` least of all.

/// Paths of the built plugins.
pub mod plugins {
    include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
}
