//! What a `Store` holds for one plugin instance: the WASI and wasi-http contexts, the
//! memory limiter that records the peak, capped stdout/stderr pipes, the log sink and the
//! outgoing-HTTP policy.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings;
use super::grants::PlaceGuard;
use super::held::{
    DescriptorShare, MIN_RESOURCE_ENTRIES, NoDescriptor, POLLABLE_BYTES, RESOURCE_ENTRY_BYTES,
    entry_bytes,
};
use super::held_responses::NetHeld;
use super::http_policy::{HttpPolicy, SLEEP_GRACE};
use crate::policy::capability::Live;

/// Log records kept per call; more are counted, not kept.
const MAX_LOG_RECORDS: usize = 200;
/// Bytes of log text kept per call.
const MAX_LOG_BYTES: usize = 64 * 1024;

/// Elements all the tables of one store may hold together (the pool's per-table cap,
/// `super::engine`): the example Python and JS components use about 5,700 and 7,700.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Core instances, tables and linear memories one store may create: far above what
/// the example components use (a handful each), and a bound on the host memory their
/// bookkeeping and reservations take.
pub const MAX_INSTANCES: usize = 1_000;
/// See [`MAX_INSTANCES`].
pub const MAX_TABLES: usize = 1_000;
/// See [`MAX_INSTANCES`].
pub const MAX_MEMORIES: usize = 100;

/// Entries of the resource table (WASI and wasi-http resources) of a store whose plugin
/// may use `memory_bytes` of linear memory.
pub fn resource_table_cap(memory_bytes: usize) -> usize {
    (memory_bytes / RESOURCE_ENTRY_BYTES).max(MIN_RESOURCE_ENTRIES)
}

/// A growth the limiter refused during the current call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Linear memory: the total size, across the store's memories, it would have had.
    Memory(usize),
    /// Tables: the total elements, across the store's tables, they would have had.
    Table(usize),
    /// A descriptor: the budget that was full.
    Descriptor(NoDescriptor),
    /// Host memory for a resource: the total, with linear memory, it would have made.
    Held(usize),
}

/// The store's limiter: all linear memories together stay under the plugin's memory
/// limit, and all tables together under [`MAX_TABLE_ELEMENTS`] (a per-memory cap would
/// let a component with many memories take many times its limit); records the peak and
/// what it refused.
pub struct Limiter {
    counts: StoreLimits,
    memory_cap: usize,
    memory: usize,
    /// Host memory the store's resources hold, charged with `memory` ([`Limiter::hold`]).
    held: usize,
    elements: usize,
    /// Bytes charged off the store (HTTP connections and response frames), in the same
    /// limit ([`super::held_responses`]).
    pub net: Arc<NetHeld>,
    /// Largest total linear memory allowed so far, in bytes.
    pub peak: usize,
    /// A growth refused during the current call.
    pub refused: Option<Refused>,
}

impl Limiter {
    /// A limiter capping all linear memories together at `bytes`.
    pub fn new(bytes: usize) -> Limiter {
        let counts = StoreLimitsBuilder::new()
            .instances(MAX_INSTANCES)
            .tables(MAX_TABLES)
            .memories(MAX_MEMORIES)
            .trap_on_grow_failure(false)
            .build();
        Limiter {
            counts,
            memory_cap: bytes,
            memory: 0,
            held: 0,
            elements: 0,
            net: NetHeld::new(bytes),
            peak: 0,
            refused: None,
        }
    }

    /// The linear memory the store's memories hold now, in bytes.
    pub fn memory(&self) -> usize {
        self.memory
    }

    /// Host memory the store's resources hold now, in bytes (charged by [`Limiter::hold`]).
    pub fn held(&self) -> usize {
        self.held.saturating_add(self.net.held())
    }

    /// Tells the ledger charged off the store what the store's own charges leave.
    fn publish(&self) {
        self.net.publish(self.memory.saturating_add(self.held));
    }

    /// Charges `bytes` of host memory kept for a resource to the memory limit, which
    /// linear memory and held bytes share; refused (and recorded) past the limit.
    pub fn hold(&mut self, bytes: usize) -> Result<(), Refused> {
        let total = self
            .memory
            .saturating_add(self.held())
            .saturating_add(bytes);
        if total > self.memory_cap {
            let refused = Refused::Held(total);
            self.refused = Some(refused);
            return Err(refused);
        }
        self.held += bytes;
        self.peak = self.peak.max(total);
        self.publish();
        Ok(())
    }

    /// Gives back `bytes` charged by [`Limiter::hold`] (the resource was dropped).
    pub fn release(&mut self, bytes: usize) {
        self.held = self.held.saturating_sub(bytes);
        self.publish();
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.memory - current.min(self.memory)).saturating_add(desired);
        let held = self.held();
        if total.saturating_add(held) > self.memory_cap {
            self.refused = Some(Refused::Memory(total.saturating_add(held)));
            return Ok(false);
        }
        self.memory = total;
        self.peak = self.peak.max(total + held);
        self.publish();
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = (self.elements - current.min(self.elements)).saturating_add(desired);
        if total > MAX_TABLE_ELEMENTS {
            self.refused = Some(Refused::Table(total));
            return Ok(false);
        }
        self.elements = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.counts.instances()
    }

    fn tables(&self) -> usize {
        self.counts.tables()
    }

    fn memories(&self) -> usize {
        self.counts.memories()
    }
}

#[derive(Debug, Default)]
struct PipeState {
    buffer: Vec<u8>,
    /// Bytes the guest tried to write beyond the cap during the current call.
    overflow: usize,
}

/// A captured stdout or stderr: keeps up to `cap` bytes per call; writing more traps the
/// guest, and the host reports the cap as the limit that was hit.
#[derive(Debug, Clone)]
pub struct CappedPipe {
    cap: usize,
    state: Arc<Mutex<PipeState>>,
}

impl CappedPipe {
    /// A pipe that keeps at most `cap` bytes per call.
    pub fn new(cap: usize) -> CappedPipe {
        CappedPipe {
            cap,
            state: Arc::default(),
        }
    }

    /// Takes what was written since the last call, and whether the guest overflowed.
    pub fn take(&self) -> (Vec<u8>, bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let overflow = std::mem::take(&mut state.overflow) > 0;
        (std::mem::take(&mut state.buffer), overflow)
    }

    /// Whether the guest wrote past the cap during the current call; clears the flag.
    pub fn take_overflow(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut state.overflow) > 0
    }

    /// The last line of the current call's output that contains `needle`, and the line
    /// after it (Rust panics print the message there).
    pub fn last_line_matching(&self, needle: &str) -> Option<String> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&state.buffer);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().rposition(|l| l.contains(needle))?;
        let mut found = lines[at].trim().to_string();
        if let Some(next) = lines
            .get(at + 1)
            .filter(|l| !l.trim().is_empty() && !l.starts_with("note:"))
        {
            found.push_str(": ");
            found.push_str(next.trim());
        }
        Some(cap_line(&found))
    }

    fn push(&self, bytes: &[u8]) -> Result<(), usize> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.cap.saturating_sub(state.buffer.len());
        if bytes.len() > room {
            state.buffer.extend_from_slice(&bytes[..room]);
            state.overflow += bytes.len() - room;
            return Err(self.cap);
        }
        state.buffer.extend_from_slice(bytes);
        Ok(())
    }
}

fn cap_line(line: &str) -> String {
    match line.char_indices().nth(500) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes).map_err(|cap| {
            StreamError::Trap(wasmtime::format_err!(
                "output exceeded its cap of {cap} bytes"
            ))
        })
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(match self.push(buf) {
            Ok(()) => Ok(buf.len()),
            Err(cap) => Err(std::io::Error::other(format!(
                "output exceeded its cap of {cap} bytes"
            ))),
        })
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Log records of the current call.
#[derive(Debug, Default)]
pub struct LogSink {
    /// Formatted records.
    pub records: Vec<String>,
    bytes: usize,
    /// Records dropped over the caps.
    pub dropped: usize,
}

impl LogSink {
    /// Takes the records of the current call, with a line for the dropped ones.
    pub fn take(&mut self) -> Vec<String> {
        let mut records = std::mem::take(&mut self.records);
        if self.dropped > 0 {
            records.push(format!("[{} more log records dropped]", self.dropped));
        }
        self.bytes = 0;
        self.dropped = 0;
        records
    }
}

/// The guest's monotonic clock: nanoseconds since the instance's context was built.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: std::time::Instant,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Clock {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    /// The instant of a guest timestamp.
    pub fn instant(&self, nanos: u64) -> std::time::Instant {
        self.start + std::time::Duration::from_nanos(nanos)
    }
}

impl wasmtime_wasi::HostMonotonicClock for Clock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// A sleep of the guest (`monotonic-clock.subscribe-*`), cut short at the call's
/// deadline so that a plugin blocked in `sleep` cannot outlive its timeout.
pub struct Sleep {
    until: tokio::time::Instant,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Sleep {
    async fn ready(&mut self) {
        tokio::time::sleep_until(self.until).await;
    }
}

impl State {
    /// A pollable for a sleep until `until`, clamped to the call's deadline.
    pub fn sleep_until(
        &mut self,
        until: std::time::Instant,
    ) -> wasmtime::Result<wasmtime::component::Resource<wasmtime_wasi::p2::DynPollable>> {
        let mut until = tokio::time::Instant::from_std(until);
        if let Some(deadline) = self.http_policy.deadline {
            until = until.min(deadline + SLEEP_GRACE);
        }
        let sleep = self.table.push(Sleep { until })?;
        wasmtime_wasi::p2::subscribe(&mut self.table, sleep)
    }
}

/// The data of one `Store`.
pub struct State {
    /// WASI context.
    pub wasi: WasiCtx,
    /// Resources of WASI and wasi-http.
    pub table: ResourceTable,
    /// wasi-http context.
    pub http: WasiHttpCtx,
    /// Outgoing-HTTP policy.
    pub http_policy: HttpPolicy,
    /// Memory limiter.
    pub limiter: Limiter,
    /// Captured stdout.
    pub stdout: CappedPipe,
    /// Captured stderr.
    pub stderr: CappedPipe,
    /// Log records from the `host` import.
    pub log: LogSink,
    /// The plugin, for tracing.
    pub plugin: Arc<str>,
    /// The guest's monotonic clock.
    pub clock: Clock,
    /// Fuel charged for host work during the current call.
    pub host_fuel: u64,
    /// Transitions from wasm into the host during the current call.
    pub host_calls: u64,
    /// The descriptors this store holds, from the host's budget.
    pub descriptors: DescriptorShare,
    /// The host-owned places the guest's filesystem calls are checked against
    /// ([`super::guest_fs`]).
    pub places: Arc<PlaceGuard>,
    /// Filesystem calls refused during the current call, for the diagnostics.
    pub fs_refused: Vec<String>,
    /// Refusals beyond those kept.
    pub fs_refused_more: usize,
    /// Git directories found for the current call ([`super::gitdir_cache::GitDirs`]).
    pub git_dirs: super::gitdir_cache::GitDirs,
    /// Bytes of wasi-http `fields` charged to the memory limit ([`super::held_fields`]).
    pub field_bytes: super::held::FieldBytes,
    /// Bytes of wasi-http outgoing bodies charged to the memory limit
    /// ([`super::held_bodies`]).
    pub body_bytes: super::held::BodyBytes,
    /// The most one resource-table entry may hold under this store's memory limit
    /// ([`entry_bytes`]).
    pub entry_bytes: usize,
    /// The model of the current call, when the hook's grant makes it live
    /// ([`super::model_call`]).
    pub model: Option<Arc<super::model_budget::PluginModel>>,
}

impl State {
    /// A state for a store of `plugin`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        plugin: Arc<str>,
        wasi: WasiCtx,
        clock: Clock,
        live: Arc<Live>,
        memory_bytes: usize,
        stdout: CappedPipe,
        stderr: CappedPipe,
        descriptors: DescriptorShare,
        places: Arc<PlaceGuard>,
    ) -> State {
        let mut table = ResourceTable::new();
        table.set_max_capacity(resource_table_cap(memory_bytes));
        let entry_bytes = entry_bytes(memory_bytes);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(entry_bytes);
        let limiter = Limiter::new(memory_bytes);
        State {
            wasi,
            table,
            http,
            host_fuel: 0,
            host_calls: 0,
            descriptors,
            places,
            fs_refused: Vec::new(),
            fs_refused_more: 0,
            git_dirs: Default::default(),
            field_bytes: Default::default(),
            body_bytes: Default::default(),
            entry_bytes,
            model: None,
            http_policy: HttpPolicy::new(live, entry_bytes, limiter.net.clone()),
            limiter,
            stdout,
            stderr,
            log: LogSink::default(),
            plugin,
            clock,
        }
    }
}

impl State {
    /// What the store holds on the host, as kept session instances are counted: its
    /// linear memory, the host memory charged for its resources ([`Limiter::hold`]), a
    /// pollable's fixed size ([`POLLABLE_BYTES`]) for each pollable, and for every other
    /// entry of its resource table the most one entry may hold under its limit
    /// ([`State::entry_bytes`]).
    pub fn footprint(&mut self) -> usize {
        // `fields` are charged by their bytes (in `held`), pollables by their size, every
        // other entry at the most one entry may hold.
        let (mut pollables, mut entries) = (0usize, 0usize);
        for entry in self.table.iter_mut() {
            if entry.is::<wasmtime_wasi::p2::DynPollable>() || entry.is::<Sleep>() {
                pollables += 1;
            } else {
                entries += 1;
            }
        }
        let entries = entries.saturating_sub(self.field_bytes.count());
        self.limiter
            .memory()
            .saturating_add(self.limiter.held())
            .saturating_add(pollables.saturating_mul(POLLABLE_BYTES))
            .saturating_add(entries.saturating_mul(self.entry_bytes))
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_policy,
        }
    }
}

impl bindings::hookhost::hook::types::Host for State {}

impl bindings::v0_2::hookhost::hook::host::Host for State {
    fn log(&mut self, level: bindings::Level, message: String, fields: Vec<(String, String)>) {
        self.record_log(level, &message, &fields);
    }
}

impl bindings::hookhost::hook::host::Host for State {
    fn log(&mut self, level: bindings::Level, message: String, fields: Vec<(String, String)>) {
        self.record_log(level, &message, &fields);
    }
}

impl State {
    /// Keeps a `host.log` record, within [`MAX_LOG_RECORDS`] and [`MAX_LOG_BYTES`] per
    /// call: a record that does not fit is counted, never formatted.
    pub fn record_log(
        &mut self,
        level: bindings::Level,
        message: &str,
        fields: &[(String, String)],
    ) {
        let size = message.len()
            + fields
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>()
            + 8;
        if self.log.records.len() >= MAX_LOG_RECORDS || self.log.bytes + size > MAX_LOG_BYTES {
            self.log.dropped += 1;
            return;
        }
        let level = match level {
            bindings::Level::Trace => "trace",
            bindings::Level::Debug => "debug",
            bindings::Level::Info => "info",
            bindings::Level::Warn => "warn",
            bindings::Level::Error => "error",
        };
        let mut line = format!("[{level}] {message}");
        for (k, v) in fields {
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(v);
        }
        tracing::debug!(plugin = %self.plugin, "{line}");
        self.log.bytes += line.len();
        self.log.records.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_keeps_the_cap_and_reports_overflow_once_per_take() {
        let pipe = CappedPipe::new(4);
        assert!(pipe.push(b"ab").is_ok());
        assert_eq!(pipe.push(b"cdef"), Err(4));
        let (bytes, overflow) = pipe.take();
        assert_eq!(bytes, b"abcd");
        assert!(overflow);
        assert!(pipe.push(b"xy").is_ok());
        assert_eq!(pipe.take(), (b"xy".to_vec(), false));
    }

    #[test]
    fn limiter_records_peak_and_refusal() {
        let mut limiter = Limiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 65536, None).unwrap());
        assert!(limiter.memory_growing(65536, 1 << 20, None).unwrap());
        assert!(!limiter.memory_growing(1 << 20, 2 << 20, None).unwrap());
        assert_eq!(limiter.peak, 1 << 20);
        assert_eq!(limiter.refused, Some(Refused::Memory(2 << 20)));
    }

    #[test]
    fn limits_hold_for_all_memories_and_tables_together() {
        // Two memories of 600 KiB each are over a 1 MiB limit together.
        let mut limiter = Limiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 600 << 10, None).unwrap());
        assert!(!limiter.memory_growing(0, 600 << 10, None).unwrap());
        assert_eq!(limiter.refused, Some(Refused::Memory(1200 << 10)));
        assert!(limiter.memory_growing(0, 400 << 10, None).unwrap());
        assert_eq!(limiter.peak, 1000 << 10);
        // A memory that grows counts its growth only.
        assert!(limiter.memory_growing(400 << 10, 424 << 10, None).unwrap());
        assert_eq!(limiter.peak, 1 << 20);

        assert!(
            limiter
                .table_growing(0, MAX_TABLE_ELEMENTS - 10, None)
                .unwrap()
        );
        assert!(!limiter.table_growing(0, 11, None).unwrap());
        assert_eq!(
            limiter.refused,
            Some(Refused::Table(MAX_TABLE_ELEMENTS + 1))
        );
        assert!(limiter.table_growing(0, 10, None).unwrap());
    }

    #[test]
    fn held_host_memory_shares_the_limit_with_linear_memory() {
        let mut limiter = Limiter::new(1 << 20);
        assert!(limiter.memory_growing(0, 512 << 10, None).unwrap());
        limiter.hold(256 << 10).unwrap();
        assert_eq!(
            limiter.hold(257 << 10),
            Err(Refused::Held((1 << 20) + 1024))
        );
        // Memory cannot grow into what resources hold.
        assert!(!limiter.memory_growing(512 << 10, 800 << 10, None).unwrap());
        assert_eq!(limiter.refused, Some(Refused::Memory(1056 << 10)));
        limiter.release(256 << 10);
        assert!(limiter.memory_growing(512 << 10, 800 << 10, None).unwrap());
        assert_eq!(limiter.held(), 0);
        assert_eq!(limiter.peak, 800 << 10);
    }

    #[test]
    fn resource_tables_grow_with_the_memory_limit() {
        assert_eq!(resource_table_cap(0), MIN_RESOURCE_ENTRIES);
        assert_eq!(resource_table_cap(64 << 20), 1024);
        assert_eq!(resource_table_cap(1 << 30), 16384);
    }

    /// wasi-http's buffers follow the memory limit: a full table of entries at the most
    /// one may hold stays within the limit (from 2 MiB up; below, at 2 MiB).
    #[test]
    fn what_a_full_table_may_hold_stays_within_the_memory_limit() {
        for mb in [1usize, 2, 3, 4, 8, 10, 16, 17, 64, 100, 1024] {
            let limit = mb << 20;
            let entry = entry_bytes(limit);
            assert!(
                resource_table_cap(limit) * entry <= limit.max(2 << 20),
                "{mb} MiB: {} entries of {entry} bytes",
                resource_table_cap(limit)
            );
            assert!((super::super::held::MIN_ENTRY_BYTES..=RESOURCE_ENTRY_BYTES).contains(&entry));
        }
        assert_eq!(entry_bytes(64 << 20), RESOURCE_ENTRY_BYTES);
        assert_eq!(entry_bytes(4 << 20), 16 << 10);
    }
}
