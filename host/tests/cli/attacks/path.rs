//! Attacks: path (see attacks/mod.rs).
