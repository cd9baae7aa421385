//! Faults: daemon (see faults/mod.rs).
