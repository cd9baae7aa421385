//! Attacks: daemons (see attacks/mod.rs).
