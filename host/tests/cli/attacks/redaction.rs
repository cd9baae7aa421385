//! Attacks: redaction (see attacks/mod.rs).
