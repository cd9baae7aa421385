//! Links the `hookhost` binary as a position-dependent executable on Linux.
//!
//! `hookhost dispatch` is started once per agent event, so its start-up is paid on every
//! hook. As a PIE, the dynamic loader must apply ~58,000 relative relocations to the
//! 40 MB binary before `main`, touching (and copying) every page of its read-only data:
//! most of the process's own start-up time. Linked at a fixed address, those relocations
//! are resolved by the linker instead.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os == "linux" {
        println!("cargo:rustc-link-arg-bin=hookhost=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
