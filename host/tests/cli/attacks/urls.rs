//! Attacks: urls (see attacks/mod.rs).
