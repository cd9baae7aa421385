//! What a `Store` holds for one plugin instance: the WASI and wasi-http contexts, the
//! memory limiter that records the peak, capped stdout/stderr pipes, the log sink and the
//! outgoing-HTTP policy.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use super::bindings;
use crate::policy::capability::{Live, Scheme};

/// Log records kept per call; more are counted, not kept.
const MAX_LOG_RECORDS: usize = 200;
/// Bytes of log text kept per call.
const MAX_LOG_BYTES: usize = 64 * 1024;

/// The memory limiter: [`StoreLimits`] plus the peak it allowed and the growth it refused.
pub struct Limiter {
    inner: StoreLimits,
    /// Largest linear memory size allowed so far, in bytes.
    pub peak: usize,
    /// A growth refused by the cap during the current call: the size asked for.
    pub refused: Option<usize>,
}

impl Limiter {
    /// A limiter capping every linear memory at `bytes`.
    pub fn new(bytes: usize) -> Limiter {
        let inner = StoreLimitsBuilder::new()
            .memory_size(bytes)
            .trap_on_grow_failure(false)
            .build();
        Limiter {
            inner,
            peak: 0,
            refused: None,
        }
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum)?;
        if allowed {
            self.peak = self.peak.max(desired);
        } else {
            self.refused = Some(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
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

/// The outgoing-HTTP policy of one instance: the hook's live grants.
pub struct HttpPolicy {
    live: Arc<Live>,
    /// When the current call must end; requests are cut off then.
    pub deadline: Option<tokio::time::Instant>,
    /// Requests refused during the current call, for the report.
    pub denied: Arc<Mutex<Vec<String>>>,
}

impl WasiHttpHooks for HttpPolicy {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        let uri = request.uri();
        let scheme = uri.scheme_str().and_then(Scheme::parse);
        let host = uri.host().unwrap_or("");
        let port = uri.port_u16();
        let allowed = scheme.is_some_and(|s| self.live.allows_http(s, host, port));
        if !allowed {
            let mut denied = self.denied.lock().unwrap_or_else(|e| e.into_inner());
            denied.push(format!(
                "{}://{}{}",
                uri.scheme_str().unwrap_or("?"),
                host,
                port.map(|p| format!(":{p}")).unwrap_or_default()
            ));
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        let _ = fut;
        let deadline = self.deadline;
        Box::new(async move {
            use http_body_util::BodyExt;
            let send = wasmtime_wasi_http::default_send_request(request, options);
            let (response, io) = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline + SLEEP_GRACE, send)
                    .await
                    .map_err(|_| wasmtime_wasi_http::Error::ConnectionTimeout)??,
                None => send.await?,
            };
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

/// How long after the call's deadline a clamped sleep or request wakes: the guest then
/// runs wasm again and the epoch deadline interrupts it.
pub const SLEEP_GRACE: std::time::Duration = std::time::Duration::from_millis(20);

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
}

impl State {
    /// A state for a store of `plugin`.
    pub fn new(
        plugin: Arc<str>,
        wasi: WasiCtx,
        clock: Clock,
        live: Arc<Live>,
        memory_bytes: usize,
        stdout: CappedPipe,
        stderr: CappedPipe,
    ) -> State {
        State {
            wasi,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            http_policy: HttpPolicy {
                live,
                deadline: None,
                denied: Arc::default(),
            },
            limiter: Limiter::new(memory_bytes),
            stdout,
            stderr,
            log: LogSink::default(),
            plugin,
            clock,
        }
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

impl bindings::hookhost::hook::host::Host for State {
    fn log(&mut self, level: bindings::Level, message: String, fields: Vec<(String, String)>) {
        let level = match level {
            bindings::Level::Trace => "trace",
            bindings::Level::Debug => "debug",
            bindings::Level::Info => "info",
            bindings::Level::Warn => "warn",
            bindings::Level::Error => "error",
        };
        let mut line = format!("[{level}] {message}");
        for (k, v) in &fields {
            line.push_str(&format!(" {k}={v}"));
        }
        tracing::debug!(plugin = %self.plugin, "{line}");
        if self.log.records.len() >= MAX_LOG_RECORDS || self.log.bytes + line.len() > MAX_LOG_BYTES
        {
            self.log.dropped += 1;
            return;
        }
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
        assert_eq!(limiter.refused, Some(2 << 20));
    }
}
