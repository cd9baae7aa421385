//! Attacks: managed (see attacks/mod.rs).
