//! wasi-http incoming responses charged to the store's memory limit by the bytes the host
//! holds for them, at the one place every response passes: the store's `send_request`
//! hook ([`super::http_policy`], which sends through [`super::http_send`]).
//!
//! - **A connection** is charged, while it is open, what hyper may buffer for it: its read
//!   buffer, capped at [`super::held::entry_bytes`] of the limit ([`super::http_send`]
//!   sets hyper's `max_buf_size` and caps each read at it), and one body chunk in flight to the reader (at most a
//!   read buffer), plus what TLS buffers on an `https` connection
//!   ([`connection_bytes`]).
//! - **Every frame** of a response body (data or trailers) is charged by its length when
//!   hyper hands it on ([`ChargedBody`]), and given back when wasi-http asks for the next
//!   one (its incoming stream asks only once the frame before is read to the end, so
//!   the frame is then in the guest's linear memory, which is charged on its own) or
//!   drops the body.
//!
//! Both charge the same ledger as linear memory and the other held resources
//! ([`NetHeld`], shared with [`super::state::Limiter`]); these are charged from the
//! connection's task, off the store, so the ledger is atomic. A response whose next
//! frame does not fit ends with an error the guest reads from its stream
//! (`HTTP-response-body-size`), and the hook's report names the target and the limit.
//! A body that never ends is ended by the call's deadline (every wasi-http timeout is
//! at most the time left, [`super::http_policy`]) and holds one frame at a time.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// Refused requests kept per call for the report; more are counted.
const MAX_DENIED_RECORDS: usize = 20;

/// Requests refused during a call: the first few targets and a count.
#[derive(Debug, Default)]
pub struct Denied {
    /// `scheme://host[:port]` of the first refused requests, and why.
    pub records: Vec<String>,
    /// Refused requests beyond [`MAX_DENIED_RECORDS`].
    pub more: usize,
}

impl Denied {
    /// Keeps `record`, or counts it past the first few.
    pub(super) fn push(&mut self, record: String) {
        if self.records.len() < MAX_DENIED_RECORDS {
            self.records.push(record);
        } else {
            self.more += 1;
        }
    }
}

/// What TLS may buffer for one `https` connection beyond hyper: a received record being
/// deframed and the plaintext of one more (rustls's records are at most 16 KiB + 2 KiB).
pub const TLS_BYTES: usize = 64 * 1024;

/// What hyper's read buffer may take whatever its size: its allocator keeps the
/// capacity a buffer began with (up to 64 KiB) when it makes room again.
pub const READ_ALLOCATION_FLOOR: usize = 64 * 1024;

/// What hyper collects of a chunked body's trailers before it hands them on (its
/// `TRAILER_LIMIT`; more is an error).
pub const TRAILER_BYTES: usize = 16 * 1024;

/// What one open connection holds on the host beyond the frame its reader holds:
/// hyper's read buffer (`read_buffer`, allocated at up to twice that or
/// [`READ_ALLOCATION_FLOOR`]), one chunk in flight to the body's reader (one read, at
/// most `read_buffer`) and the trailers being collected, plus TLS's buffers for
/// `https`.
pub fn connection_bytes(read_buffer: usize, tls: bool) -> usize {
    (2 * read_buffer).max(READ_ALLOCATION_FLOOR)
        + read_buffer
        + TRAILER_BYTES
        + if tls { TLS_BYTES } else { 0 }
}

/// The part of a store's memory ledger charged off the store (by connections and the
/// frames of response bodies), and the room the store's own charges leave it.
#[derive(Debug)]
pub struct NetHeld {
    /// The store's memory limit, in bytes.
    cap: usize,
    /// Bytes charged here now.
    held: AtomicUsize,
    /// What linear memory and the store's other held bytes leave of the limit
    /// (published by the limiter after each of its changes).
    room: AtomicUsize,
}

/// A charge [`NetHeld::charge`] refused: what the total would have been.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimit {
    /// Linear memory and every held byte, with the refused charge.
    pub total: usize,
    /// The memory limit.
    pub cap: usize,
}

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "memory limit of {} bytes ({} MiB) reached: linear memory and the host memory its \
             resources hold (HTTP connections and response bodies among them) would have been \
             {} bytes",
            self.cap,
            self.cap >> 20,
            self.total
        )
    }
}

impl NetHeld {
    /// An empty ledger under a memory limit of `cap` bytes.
    pub fn new(cap: usize) -> Arc<NetHeld> {
        Arc::new(NetHeld {
            cap,
            held: AtomicUsize::new(0),
            room: AtomicUsize::new(cap),
        })
    }

    /// Bytes charged here now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Records what the store's own charges (linear memory, held resources) are now.
    pub fn publish(&self, store_bytes: usize) {
        self.room
            .store(self.cap.saturating_sub(store_bytes), Ordering::Release);
    }

    /// Charges `bytes`, refused when the store's total would pass the limit.
    pub fn charge(&self, bytes: usize) -> Result<(), OverLimit> {
        let room = self.room.load(Ordering::Acquire);
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|total| *total <= room)
            })
            .map(drop)
            .map_err(|held| OverLimit {
                total: (self.cap - room).saturating_add(held).saturating_add(bytes),
                cap: self.cap,
            })
    }

    /// Gives back `bytes` charged by [`NetHeld::charge`].
    pub fn release(&self, bytes: usize) {
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(held.saturating_sub(bytes))
            });
    }
}

/// A charge on a [`NetHeld`], given back when dropped.
#[derive(Debug)]
pub struct Charge {
    ledger: Arc<NetHeld>,
    bytes: usize,
}

impl Charge {
    /// Charges `bytes` to `ledger`.
    pub fn take(ledger: &Arc<NetHeld>, bytes: usize) -> Result<Charge, OverLimit> {
        ledger.charge(bytes)?;
        Ok(Charge {
            ledger: ledger.clone(),
            bytes,
        })
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.ledger.release(self.bytes);
    }
}

/// The bytes a frame holds: a data frame's length, or the names and values of its
/// trailers.
fn frame_bytes(frame: &Frame<Bytes>) -> usize {
    if let Some(data) = frame.data_ref() {
        return data.len();
    }
    frame.trailers_ref().map_or(0, |trailers| {
        trailers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len())
            .sum()
    })
}

/// A response body whose frames are charged to the store's ledger while wasi-http holds
/// them ([`crate::handlers::wasm::held_responses`]).
pub struct ChargedBody<B> {
    inner: B,
    ledger: Arc<NetHeld>,
    /// The charge of the frame handed out last.
    held: usize,
    /// Body bytes received so far.
    received: u64,
    /// `scheme://host[:port]` of the request, for the report.
    target: Arc<str>,
    denied: Arc<Mutex<Denied>>,
    /// A frame was refused: the body ends.
    cut: bool,
}

impl<B> ChargedBody<B> {
    /// `inner`, charged to `ledger`; a refusal is reported in `denied` naming `target`.
    pub fn new(
        inner: B,
        ledger: Arc<NetHeld>,
        target: Arc<str>,
        denied: Arc<Mutex<Denied>>,
    ) -> ChargedBody<B> {
        ChargedBody {
            inner,
            ledger,
            held: 0,
            received: 0,
            target,
            denied,
            cut: false,
        }
    }

    fn give_back(&mut self) {
        self.ledger.release(std::mem::take(&mut self.held));
    }
}

impl<B> Drop for ChargedBody<B> {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl<B> Body for ChargedBody<B>
where
    B: Body<Data = Bytes, Error = wasmtime_wasi_http::Error> + Unpin,
{
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        // Asked for the next frame: the one before is read to its end.
        self.give_back();
        if self.cut {
            return Poll::Ready(None);
        }
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        let bytes = frame_bytes(&frame);
        match self.ledger.charge(bytes) {
            Ok(()) => {
                self.held = bytes;
                if let Some(data) = frame.data_ref() {
                    self.received += data.len() as u64;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Err(over) => {
                self.cut = true;
                let record = format!(
                    "response body from {} cut after {} bytes: {over}",
                    self.target, self.received
                );
                self.denied
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(record);
                Poll::Ready(Some(Err(wasmtime_wasi_http::Error::HttpResponseBodySize(
                    Some(self.received),
                ))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.cut || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_share_the_room_the_store_leaves() {
        let ledger = NetHeld::new(1000);
        ledger.publish(600);
        let a = Charge::take(&ledger, 300).unwrap();
        let refused = Charge::take(&ledger, 101).unwrap_err();
        assert_eq!(
            refused,
            OverLimit {
                total: 1001,
                cap: 1000
            }
        );
        assert!(refused.to_string().contains("memory limit of 1000 bytes"));
        drop(a);
        assert_eq!(ledger.held(), 0);
        assert!(Charge::take(&ledger, 400).is_ok());
    }

    /// A frame is charged while it is the one handed out last; one that does not fit
    /// ends the body with `HTTP-response-body-size` and a record naming target and limit.
    #[test]
    fn frames_are_charged_one_at_a_time_and_one_past_the_room_cuts_the_body() {
        use http_body_util::{BodyExt, StreamBody};
        let frames = [300usize, 500, 601, 10]
            .map(|n| Ok::<_, wasmtime_wasi_http::Error>(Frame::data(Bytes::from(vec![b'x'; n]))));
        let ledger = NetHeld::new(1000);
        ledger.publish(400);
        let denied = Arc::new(Mutex::new(Denied::default()));
        let mut body = ChargedBody::new(
            StreamBody::new(futures_util::stream::iter(frames)),
            ledger.clone(),
            Arc::from("http://peer"),
            denied.clone(),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            assert_eq!(
                body.frame()
                    .await
                    .unwrap()
                    .unwrap()
                    .into_data()
                    .unwrap()
                    .len(),
                300
            );
            assert_eq!(ledger.held(), 300);
            // 300 given back, 500 taken: 900 of 1000 with the store's 400.
            assert_eq!(
                body.frame()
                    .await
                    .unwrap()
                    .unwrap()
                    .into_data()
                    .unwrap()
                    .len(),
                500
            );
            assert_eq!(ledger.held(), 500);
            let cut = body.frame().await.unwrap().unwrap_err();
            assert!(matches!(
                cut,
                wasmtime_wasi_http::Error::HttpResponseBodySize(Some(800))
            ));
            assert!(body.frame().await.is_none());
        });
        assert_eq!(ledger.held(), 0);
        let records = &denied.lock().unwrap().records;
        assert_eq!(
            records.as_slice(),
            [
                "response body from http://peer cut after 800 bytes: memory limit of 1000 bytes \
              (0 MiB) reached: linear memory and the host memory its resources hold (HTTP \
              connections and response bodies among them) would have been 1001 bytes"
            ]
        );
        drop(body);
    }
}
