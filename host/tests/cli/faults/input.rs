//! Faults: input (see faults/mod.rs).
