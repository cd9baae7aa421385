//! The outgoing-HTTP policy of one plugin instance: which requests its hook's grants
//! allow, how many connections it may hold open, and timeouts bounded by the call's
//! deadline. wasi-http asks it before every request.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use wasmtime_wasi_http::WasiHttpHooks;

use super::held_responses::{Charge, ChargedBody, Denied, NetHeld, connection_bytes};
use super::http_send;
use crate::policy::capability::{Live, Scheme};

/// How long after the call's deadline a clamped sleep or request wakes: the guest then
/// runs wasm again and the epoch deadline interrupts it.
pub const SLEEP_GRACE: std::time::Duration = std::time::Duration::from_millis(20);

/// Outgoing connections one store may have open at once.
pub const MAX_CONNECTIONS: usize = 8;
/// Gives back a connection slot when the connection (or its attempt) ends; its memory
/// charge goes with it.
struct ConnectionSlot {
    open: Arc<AtomicUsize>,
    _charge: Charge,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The outgoing-HTTP policy of one instance: the hook's live grants, the call's
/// deadline, and the connection cap.
pub struct HttpPolicy {
    live: Arc<Live>,
    /// When the current call must end; requests are cut off then.
    pub deadline: Option<tokio::time::Instant>,
    /// Requests refused during the current call, for the report.
    pub denied: Arc<Mutex<Denied>>,
    /// Connections open (or being opened) now.
    connections: Arc<AtomicUsize>,
    /// The most an outgoing body's stream takes in one write ([`super::held::entry_bytes`]
    /// of the store's memory limit).
    body_chunk: usize,
    /// The store's memory ledger for connections and response bodies
    /// ([`super::held_responses`]).
    net: Arc<NetHeld>,
}

impl HttpPolicy {
    /// The policy of an instance whose hook has the `live` grants, and whose resource
    /// table entries may hold `entry_bytes` each, and whose connections and responses
    /// charge `net`; no call runs yet.
    pub fn new(live: Arc<Live>, entry_bytes: usize, net: Arc<NetHeld>) -> HttpPolicy {
        HttpPolicy {
            net,
            live,
            deadline: None,
            denied: Arc::default(),
            connections: Arc::default(),
            body_chunk: entry_bytes,
        }
    }

    /// The most an outgoing body's stream takes in one write.
    #[cfg(test)]
    pub fn body_chunk(&mut self) -> usize {
        self.body_chunk
    }

    fn deny(&self, record: String) {
        self.denied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
    }
}

/// The request options of a request made with `remaining` time left in the call: each
/// wasi-http timeout (connect, first byte, between bytes; 600 s by default) is at most
/// the time left, whatever the guest asked for.
fn bounded_options(
    asked: Option<wasmtime_wasi_http::RequestOptions>,
    remaining: std::time::Duration,
) -> wasmtime_wasi_http::RequestOptions {
    let cap = |t: Option<std::time::Duration>| Some(t.unwrap_or(remaining).min(remaining));
    let asked = asked.unwrap_or_default();
    wasmtime_wasi_http::RequestOptions {
        connect_timeout: cap(asked.connect_timeout),
        first_byte_timeout: cap(asked.first_byte_timeout),
        between_bytes_timeout: cap(asked.between_bytes_timeout),
    }
}

impl WasiHttpHooks for HttpPolicy {
    /// One chunk of an outgoing body is buffered per body (its stream's channel holds
    /// this plus one) ...
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    /// ... of at most the most one resource-table entry may hold under the store's
    /// memory limit ([`super::held::entry_bytes`]; wasmtime-wasi-http buffers 1 MiB):
    /// an outgoing body with its stream (two entries) holds at most two such chunks, so
    /// the table's cap bounds what bodies hold by the memory limit.
    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        self.body_chunk
    }

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
        let target = format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or("?"),
            host,
            port.map(|p| format!(":{p}")).unwrap_or_default()
        );
        let allowed = scheme.is_some_and(|s| self.live.allows_http(s, host, port));
        if !allowed {
            self.deny(format!("request to {target} denied (not granted)"));
            return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
        }
        if self.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            self.connections.fetch_sub(1, Ordering::AcqRel);
            self.deny(format!(
                "request to {target} refused: the cap of {MAX_CONNECTIONS} open connections per call is reached"
            ));
            return Box::new(async { Err(wasmtime_wasi_http::Error::ConnectionLimitReached) });
        }
        // What hyper and TLS may buffer for the connection, charged while it is open.
        let read_buffer = self.body_chunk;
        let tls = scheme == Some(Scheme::Https);
        let charge = match Charge::take(&self.net, connection_bytes(read_buffer, tls)) {
            Ok(charge) => charge,
            Err(over) => {
                self.connections.fetch_sub(1, Ordering::AcqRel);
                self.deny(format!("request to {target} refused: {over}"));
                let why = format!("memory limit of {} bytes reached", over.cap);
                return Box::new(async {
                    Err(wasmtime_wasi_http::Error::InternalError(Some(why)))
                });
            }
        };
        let slot = ConnectionSlot {
            open: self.connections.clone(),
            _charge: charge,
        };
        let _ = fut;
        let deadline = self.deadline;
        // As a clamped sleep: a request timeout fires just after the call's deadline, so
        // the deadline (a named timeout) ends the call, not a guest that got an error in
        // time to answer.
        let remaining = deadline.map_or(std::time::Duration::from_secs(600), |d| {
            d.saturating_duration_since(tokio::time::Instant::now())
                .max(std::time::Duration::from_millis(1))
                + SLEEP_GRACE
        });
        let options = bounded_options(options, remaining);
        let (net, denied, target) = (self.net.clone(), self.denied.clone(), Arc::from(target));
        Box::new(async move {
            use http_body_util::BodyExt;
            let send = http_send::send(request, options, read_buffer);
            let (response, io) = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline + SLEEP_GRACE, send)
                    .await
                    .map_err(|_| wasmtime_wasi_http::Error::ConnectionTimeout)??,
                None => send.await?,
            };
            // The slot (and its charge) is held as long as the connection runs.
            let io = async move {
                let _slot = slot;
                io.await
            };
            let response =
                response.map(|body| ChargedBody::new(body, net, target, denied).boxed_unsync());
            Ok((response, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_timeouts_never_exceed_the_time_left() {
        use std::time::Duration;
        let left = Duration::from_millis(1500);
        let none = bounded_options(None, left);
        assert_eq!(none.connect_timeout, Some(left));
        assert_eq!(none.first_byte_timeout, Some(left));
        assert_eq!(none.between_bytes_timeout, Some(left));
        let asked = wasmtime_wasi_http::RequestOptions {
            connect_timeout: Some(Duration::from_millis(10)),
            first_byte_timeout: Some(Duration::from_secs(900)),
            between_bytes_timeout: None,
        };
        let bounded = bounded_options(Some(asked), left);
        assert_eq!(bounded.connect_timeout, Some(Duration::from_millis(10)));
        assert_eq!(bounded.first_byte_timeout, Some(left));
        assert_eq!(bounded.between_bytes_timeout, Some(left));
    }
}
