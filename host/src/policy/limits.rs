//! The sandbox's default limits. They are policy (a ceiling compares a hook's limits with
//! them, `hookhost hooks` shows them), so they live here; the sandbox reads them from here.

/// Fuel per call unless the hook sets `limits.fuel`.
pub const DEFAULT_FUEL: u64 = 100_000_000;
/// Linear memory cap unless the hook sets `limits.memoryMb`: 64 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 64 << 20;
