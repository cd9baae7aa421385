//! Attacks: terminal (see attacks/mod.rs).
