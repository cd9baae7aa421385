//! Attacks: if_rule (see attacks/mod.rs).
