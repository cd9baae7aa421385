//! Skipped tests say so. A test whose prerequisite is missing (a toolchain, root) calls
//! [`skipped`] and returns: the line `SKIPPED: <test>: <why>` appears in the normal
//! `cargo test` output, and `.ci/run` fails when any such line does, listing them, so a
//! green run cannot hide an untested feature.
//!
//! Include it with `#[path]` (it is not a test target of its own):
//! `#[path = "../common/skip.rs"] mod skip;` from `host/tests/cli/`,
//! `#[path = "../../host/tests/common/skip.rs"] mod skip;` from `tests/it/`.

#![allow(dead_code)]

use std::io::Write;

/// Reports that `test` was skipped because of `why`, on stderr. The test harness
/// captures `eprintln!` of a passing test (the line would only show with
/// `--nocapture`), but not a write to the stderr handle, so this one is always seen.
pub fn skipped(test: &str, why: &str) {
    let line = format!("SKIPPED: {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Whether the process runs as root; when not, reports `test` as skipped (it needs
/// root for `why`, such as a second uid or a private mount namespace).
pub fn is_root_or_skip(test: &str, why: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc_geteuid() } == 0;
    if !root {
        skipped(test, &format!("needs root ({why})"));
    }
    root
}

unsafe extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
