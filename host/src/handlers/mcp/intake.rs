//! **Every byte hookhost reads from an MCP server passes [`Metered::feed`]**, before the
//! protocol layer (rmcp) buffers it: a stdio server's stdout ([`MeteredRead`]) and every
//! HTTP body of a streamable-HTTP server, JSON or SSE (`super::http::BoundedHttp`).
//!
//! Two bounds, and the first one passed finishes the connection ([`Intake::tripped`]):
//! - one message (a stdio line, an SSE event, a JSON body) is at most
//!   [`super::MAX_MESSAGE`] bytes; the bytes past it are never handed on;
//! - a connection receives at most [`RECEIVED_PER_CALL`] bytes from the start of a call
//!   (an endless stream of small messages, or chatter while idle, ends there).
//!
//! A slow drip is the hook's timeout's: a call that times out drops its connection
//! (`super::clients`), so nothing more is read from that server.
//!
//! The intake also counts what went **to** the server since the call began
//! ([`Intake::sent`]: bytes written to a stdio server's stdin, [`MeteredWrite`]; HTTP
//! requests that reached it, `super::http::BoundedHttp`), so a call on a connection
//! found dead is repeated on a new one only when nothing of it can have reached the
//! server: a tool runs at most once per call.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::MAX_MESSAGE;

/// Bytes a connection may receive from the start of a call (counted again from zero at
/// each call's start): two messages of the largest size.
pub const RECEIVED_PER_CALL: usize = 2 * MAX_MESSAGE;

/// Which bound a server passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// One message over [`MAX_MESSAGE`].
    Message,
    /// More than [`RECEIVED_PER_CALL`] bytes since the call began.
    Total,
}

impl Overrun {
    /// What the hook's report says.
    pub fn describe(self) -> String {
        match self {
            Overrun::Message => format!("the server sent a message over {} MiB", MAX_MESSAGE >> 20),
            Overrun::Total => format!(
                "the server sent more than {} MiB while the call ran",
                RECEIVED_PER_CALL >> 20
            ),
        }
    }

    fn io_error(self) -> std::io::Error {
        std::io::Error::other(self.describe())
    }
}

/// One connection's intake: bytes received since the last call began, and the bound it
/// passed, if any (then the connection is finished: every later read fails).
#[derive(Debug, Default)]
pub struct Intake {
    received: AtomicUsize,
    sent: AtomicUsize,
    /// 0: none; 1: [`Overrun::Message`]; 2: [`Overrun::Total`].
    overrun: AtomicU8,
    tripped: tokio::sync::Notify,
}

impl Intake {
    /// A call begins: the count starts again.
    pub fn begin_call(&self) {
        self.received.store(0, Ordering::Relaxed);
        self.sent.store(0, Ordering::Relaxed);
    }

    /// Bytes (stdio) or requests (HTTP) that went to the server since the last call
    /// began: 0 means nothing of the call can have reached it.
    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::Relaxed)
    }

    /// Counts `n` more bytes or requests gone to the server.
    pub fn count_sent(&self, n: usize) {
        self.sent.fetch_add(n, Ordering::Relaxed);
    }

    /// The bound passed, if one was.
    pub fn overrun(&self) -> Option<Overrun> {
        match self.overrun.load(Ordering::Acquire) {
            0 => None,
            1 => Some(Overrun::Message),
            _ => Some(Overrun::Total),
        }
    }

    fn trip(&self, overrun: Overrun) -> Overrun {
        let code = match overrun {
            Overrun::Message => 1,
            Overrun::Total => 2,
        };
        let _ = self
            .overrun
            .compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
        self.tripped.notify_waiters();
        self.overrun().unwrap_or(overrun)
    }

    /// Waits until a bound is passed.
    pub async fn tripped(&self) -> Overrun {
        loop {
            let notified = self.tripped.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(overrun) = self.overrun() {
                return overrun;
            }
            notified.await;
        }
    }
}

/// How a stream's bytes divide into messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// A message per line (stdio).
    Lines,
    /// A message per SSE event: lines up to an empty line (LF, CRLF or CR ends a line).
    SseEvents,
    /// The whole stream is one message (a JSON body).
    Whole,
}

/// One stream of a connection's bytes, counted as it is read.
#[derive(Debug)]
pub struct Metered {
    intake: Arc<Intake>,
    framing: Framing,
    /// Bytes of the message being read.
    message: usize,
    /// SSE: bytes of the line being read, and whether the last byte was a CR.
    line: usize,
    after_cr: bool,
}

impl Metered {
    /// Counts a stream of `intake`'s connection.
    pub fn new(intake: Arc<Intake>, framing: Framing) -> Metered {
        Metered {
            intake,
            framing,
            message: 0,
            line: 0,
            after_cr: false,
        }
    }

    /// Counts `chunk`, which the caller hands on only when this says yes.
    ///
    /// # Errors
    ///
    /// The bound the chunk passes (or one passed before, on this connection).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Overrun> {
        if let Some(overrun) = self.intake.overrun() {
            return Err(overrun);
        }
        let total = self
            .intake
            .received
            .fetch_add(chunk.len(), Ordering::Relaxed)
            .saturating_add(chunk.len());
        if total > RECEIVED_PER_CALL {
            return Err(self.intake.trip(Overrun::Total));
        }
        match self.framing {
            Framing::Whole => self.message = self.message.saturating_add(chunk.len()),
            Framing::Lines => {
                for &byte in chunk {
                    self.message = if byte == b'\n' { 0 } else { self.message + 1 };
                    if self.message > MAX_MESSAGE {
                        break;
                    }
                }
            }
            Framing::SseEvents => {
                for &byte in chunk {
                    match byte {
                        b'\n' if self.after_cr => self.after_cr = false,
                        b'\n' | b'\r' => {
                            if self.line == 0 {
                                self.message = 0;
                            }
                            self.line = 0;
                            self.after_cr = byte == b'\r';
                        }
                        _ => {
                            self.after_cr = false;
                            self.line += 1;
                            self.message += 1;
                            if self.message > MAX_MESSAGE {
                                break;
                            }
                        }
                    }
                }
            }
        }
        if self.message > MAX_MESSAGE {
            return Err(self.intake.trip(Overrun::Message));
        }
        Ok(())
    }

    /// Counts a stream of byte chunks: an overrun (or the stream's own error) is its last
    /// item.
    pub fn stream<S, B, E>(
        self,
        stream: S,
    ) -> impl futures_util::Stream<Item = Result<B, std::io::Error>> + Send + 'static
    where
        S: futures_util::Stream<Item = Result<B, E>> + Send + 'static,
        B: AsRef<[u8]> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        use futures_util::StreamExt;
        stream.scan((self, false), |(meter, ended), item| {
            let next = if *ended {
                None
            } else {
                let item = item.map_err(std::io::Error::other).and_then(|chunk| {
                    meter
                        .feed(chunk.as_ref())
                        .map(|()| chunk)
                        .map_err(Overrun::io_error)
                });
                *ended = item.is_err();
                Some(item)
            };
            std::future::ready(next)
        })
    }
}

/// A stdio server's stdout, counted by [`Metered`] with [`Framing::Lines`].
pub struct MeteredRead<R> {
    inner: R,
    meter: Metered,
}

impl<R> MeteredRead<R> {
    /// `inner`, counted against `intake`.
    pub fn new(inner: R, intake: Arc<Intake>) -> MeteredRead<R> {
        MeteredRead {
            inner,
            meter: Metered::new(intake, Framing::Lines),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for MeteredRead<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => match this.meter.feed(&buf.filled()[before..]) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(overrun) => {
                    // An error reports nothing read (AsyncRead's contract).
                    buf.set_filled(before);
                    Poll::Ready(Err(overrun.io_error()))
                }
            },
            other => other,
        }
    }
}

/// A stdio server's stdin, counting what is written to it ([`Intake::sent`]).
#[derive(Debug)]
pub struct MeteredWrite<W> {
    inner: W,
    intake: Arc<Intake>,
}

impl<W> MeteredWrite<W> {
    /// `inner`, counted into `intake`.
    pub fn new(inner: W, intake: Arc<Intake>) -> MeteredWrite<W> {
        MeteredWrite { inner, intake }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for MeteredWrite<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            this.intake.count_sent(n);
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn read_all(data: Vec<u8>) -> (std::io::Result<usize>, Option<Overrun>) {
        let intake = Arc::new(Intake::default());
        let mut reader = MeteredRead::new(std::io::Cursor::new(data), intake.clone());
        let mut sink = Vec::new();
        let read = reader.read_to_end(&mut sink).await;
        (read, intake.overrun())
    }

    #[tokio::test]
    async fn a_line_past_the_bound_fails_the_stream_and_shorter_ones_pass() {
        // Two messages that together nearly fill the call's budget, each under the bound.
        let mut two = Vec::new();
        for _ in 0..2 {
            two.extend(std::iter::repeat_n(b'x', MAX_MESSAGE - 1));
            two.push(b'\n');
        }
        let (read, over) = read_all(two).await;
        assert_eq!(read.unwrap(), 2 * MAX_MESSAGE);
        assert_eq!(over, None);
        // One message a byte past it: refused, and said so.
        let (read, over) = read_all(vec![b'x'; MAX_MESSAGE + 1]).await;
        assert!(read.is_err());
        assert_eq!(over, Some(Overrun::Message));
    }

    #[test]
    fn sse_events_end_at_an_empty_line_of_any_line_ending() {
        for ending in ["\n\n", "\r\n\r\n", "\r\r"] {
            let intake = Arc::new(Intake::default());
            let mut meter = Metered::new(intake.clone(), Framing::SseEvents);
            let half = format!("data: {}", "x".repeat(MAX_MESSAGE / 2));
            // Many events, each half the bound: each ends, none passes it.
            for _ in 0..3 {
                intake.begin_call();
                meter.feed(half.as_bytes()).unwrap();
                meter.feed(ending.as_bytes()).unwrap();
            }
            // Lines of one event (a single line ending between them) add up.
            intake.begin_call();
            meter.feed(half.as_bytes()).unwrap();
            meter.feed(&ending.as_bytes()[..ending.len() / 2]).unwrap();
            assert_eq!(
                meter.feed(half.as_bytes()),
                Err(Overrun::Message),
                "{ending:?}"
            );
            // Finished: nothing more passes.
            assert_eq!(meter.feed(b"\n"), Err(Overrun::Message));
        }
    }

    #[test]
    fn small_messages_pass_until_the_calls_budget_is_spent_and_a_new_call_counts_anew() {
        let intake = Arc::new(Intake::default());
        let mut meter = Metered::new(intake.clone(), Framing::SseEvents);
        let event = format!("data: {}\n\n", "x".repeat(64 << 10));
        let fits = RECEIVED_PER_CALL / event.len();
        for _ in 0..fits {
            meter.feed(event.as_bytes()).unwrap();
        }
        intake.begin_call();
        for _ in 0..fits {
            meter.feed(event.as_bytes()).unwrap();
        }
        assert_eq!(meter.feed(event.as_bytes()), Err(Overrun::Total));
        assert_eq!(intake.overrun(), Some(Overrun::Total));
        // Another stream of the same connection is finished too.
        let mut other = Metered::new(intake, Framing::Whole);
        assert_eq!(other.feed(b"{}"), Err(Overrun::Total));
    }

    #[test]
    fn a_whole_body_is_one_message() {
        let intake = Arc::new(Intake::default());
        let mut meter = Metered::new(intake, Framing::Whole);
        let chunk = vec![b'\n'; 1 << 20];
        for _ in 0..(MAX_MESSAGE >> 20) {
            meter.feed(&chunk).unwrap();
        }
        assert_eq!(meter.feed(b"x"), Err(Overrun::Message));
    }
}
