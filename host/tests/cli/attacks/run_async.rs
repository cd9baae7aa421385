//! Attacks: run_async (see attacks/mod.rs).
