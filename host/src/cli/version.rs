//! `hookhost --version`: the binary's version, the WIT package versions its sandbox loads
//! and the wasmtime it links. Each comes from what the host runs on, never from a string
//! typed here: the WIT versions are those the loader accepts
//! ([`hookhost::handlers::wasm::WIT_VERSIONS`], which a test holds to the `package` lines
//! of `wit/`), and wasmtime's is the version its own crate was built as
//! (`wasmtime_environ::VERSION`; wasmtime depends on wasmtime-environ at exactly its own
//! version), which a test holds to `Cargo.lock`.

use std::sync::LazyLock;

/// The WIT package every plugin interface version belongs to.
pub const WIT_PACKAGE: &str = "hookhost:hook";

/// `--version`'s text (after the program name clap prints first).
static LONG: LazyLock<String> = LazyLock::new(|| {
    let wit: Vec<String> = hookhost::handlers::wasm::WIT_VERSIONS
        .iter()
        .map(|v| format!("{WIT_PACKAGE}@{v}"))
        .collect();
    format!(
        "{}\nwit: {}\nwasmtime: {}",
        env!("CARGO_PKG_VERSION"),
        wit.join(", "),
        wasmtime_environ::VERSION
    )
});

/// `--version`: the version, the WIT packages and wasmtime, one per line.
pub fn long() -> &'static str {
    LONG.as_str()
}
