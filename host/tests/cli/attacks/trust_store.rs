//! Attacks: trust_store (see attacks/mod.rs).
