//! Faults: dispatch (see faults/mod.rs).
