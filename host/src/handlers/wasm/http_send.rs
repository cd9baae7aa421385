//! How a wasm plugin's outgoing request is sent, in our own design, so that what a
//! connection buffers follows the plugin's memory limit ([`super::held_responses`]).
//!
//! Modelled on wasmtime-wasi-http 48's `default_send_request` (read, not copied): it
//! builds its hyper connection itself with hyper's default read buffer (about 400 KiB,
//! whatever the limit; its code marks the builder as not plumbed through), so it cannot
//! be wrapped. The guarantees are the same as there, plus the buffer: connect (TCP, TLS
//! with the webpki roots, and the HTTP handshake, here under ONE connect timeout), a
//! first-byte timeout, a between-bytes timeout, a request line that carries the path
//! only (no proxy is addressed). The design differs: the hyper connection runs as its
//! own task ([`ConnectionTask`]), aborted when the work handed to wasi-http is dropped,
//! and the between-bytes timeout is one re-armed `Sleep` ([`TimedBody`]).

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::uri::Scheme;
use http::{Request, Response};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions};

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T> Stream for T where T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}

/// A connection whose reads take at most `cap` bytes each: hyper reads into all the
/// spare room of its buffer, which its allocator may make larger than the buffer size
/// asked for, and a body chunk is what one read brought.
struct CappedReads {
    inner: Box<dyn Stream>,
    cap: usize,
}

impl AsyncRead for CappedReads {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let cap = self.cap.min(buf.remaining());
        // SAFETY: only initialized bytes are handed out (`ReadBuf` tracks them), and
        // the filled count is advanced by what the inner read filled.
        let mut part = tokio::io::ReadBuf::uninit(unsafe { &mut buf.unfilled_mut()[..cap] });
        ready!(Pin::new(&mut self.inner).poll_read(cx, &mut part))?;
        let n = part.filled().len();
        // SAFETY: the inner read initialized and filled these `n` bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for CappedReads {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The connection's work, run by wasi-http beside the response.
pub type Io = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// The hyper connection, driven by a task of its own; dropping this aborts the task
/// (and so closes the socket), whether the response arrived or not.
struct ConnectionTask(JoinHandle<Result<(), hyper::Error>>);

impl Drop for ConnectionTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Future for ConnectionTask {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(Pin::new(&mut self.0).poll(cx)) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) if err.is_timeout() => Err(Error::HttpResponseTimeout),
            Ok(Err(err)) => Err(err.into()),
            Err(joined) => Err(Error::InternalError(Some(format!(
                "connection task ended: {joined}"
            )))),
        })
    }
}

/// hyper's incoming body, failing with [`Error::ConnectionReadTimeout`] when no frame
/// came for `gap` (the sleep is pushed out by `gap` on each frame).
pub struct TimedBody {
    incoming: Incoming,
    gap: Duration,
    silence: Pin<Box<Sleep>>,
}

impl TimedBody {
    fn new(incoming: Incoming, gap: Duration) -> Self {
        TimedBody {
            incoming,
            gap,
            silence: Box::pin(tokio::time::sleep(gap)),
        }
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.incoming).poll_frame(cx) {
            if let Some(Ok(_)) = frame {
                this.silence.as_mut().reset(Instant::now() + this.gap);
            }
            return Poll::Ready(frame.map(|f| {
                f.map_err(|err| match err.is_timeout() {
                    true => Error::HttpResponseTimeout,
                    false => Error::from(err),
                })
            }));
        }
        ready!(this.silence.as_mut().poll(cx));
        Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// Where a request goes: its host (an IPv6 address without brackets), its port (the
/// default of its scheme when it names none) and whether it is TLS.
struct Target {
    host: String,
    port: u16,
    tls: bool,
}

impl Target {
    fn of(uri: &http::Uri) -> Result<Self, Error> {
        let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
        let tls = uri.scheme() == Some(&Scheme::HTTPS);
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        Ok(Target {
            host: host.to_owned(),
            port: authority.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            tls,
        })
    }

    /// A TCP connection to the target, wrapped in TLS (webpki roots) when it asks it.
    async fn open(&self) -> Result<Box<dyn Stream>, Error> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(Error::Connect)?;
        if !self.tls {
            return Ok(Box::new(tcp));
        }
        // A DNS name or an IP address, as rustls reads them.
        let name = rustls::pki_types::ServerName::try_from(self.host.clone())
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        Ok(Box::new(tls))
    }
}

/// A timeout the plugin left unset: ten minutes (the call's deadline, applied by the
/// caller, ends it sooner).
const UNSET: Duration = Duration::from_secs(600);

/// Sends `req` over a new connection whose read buffer is at most `read_buffer` bytes
/// (8 KiB or more: hyper's floor) and whose reads take at most as much, so no body
/// chunk is larger; answers the response and the connection's work.
pub async fn send(
    mut req: Request<wasmtime_wasi_http::WasiBody>,
    options: RequestOptions,
    read_buffer: usize,
) -> Result<(Response<TimedBody>, Io), Error> {
    let target = Target::of(req.uri())?;
    let read_buffer = read_buffer.max(8192);
    let connect = async {
        let stream = CappedReads {
            inner: target.open().await?,
            cap: read_buffer,
        };
        hyper::client::conn::http1::Builder::new()
            .max_buf_size(read_buffer)
            .handshake(TokioIo::new(stream))
            .await
            .map_err(Error::from)
    };
    let (mut sender, conn) =
        tokio::time::timeout(options.connect_timeout.unwrap_or(UNSET), connect)
            .await
            .map_err(|_| Error::ConnectionTimeout)??;
    // From here the connection runs on its own; `task` aborts it if this future is
    // dropped before the response (the caller's deadline) or with the work it returns.
    let task = ConnectionTask(tokio::spawn(conn));

    // The request line carries the path only (no proxy is addressed).
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    *req.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    let first_byte = options.first_byte_timeout.unwrap_or(UNSET);
    // Zero would time a body out before its first poll: the smallest wait instead.
    let gap = options
        .between_bytes_timeout
        .unwrap_or(UNSET)
        .max(Duration::from_nanos(1));
    let response = tokio::time::timeout(first_byte, sender.send_request(req))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)??;
    Ok((
        response.map(|incoming| TimedBody::new(incoming, gap)),
        Box::pin(task),
    ))
}
