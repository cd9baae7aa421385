//! Attacks: files (see attacks/mod.rs).
