//! Shared fixtures of hookhost's integration tests: the paths of the plugins in
//! `plugins/`, built for `wasm32-wasip2` by this crate's build script.

/// Paths of the built plugins.
pub mod plugins {
    include!(concat!(env!("OUT_DIR"), "/plugins.rs"));
}
