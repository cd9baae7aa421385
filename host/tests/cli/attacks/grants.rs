//! Attacks: grants (see attacks/mod.rs).
