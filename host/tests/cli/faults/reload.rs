//! Faults: reload (see faults/mod.rs).
