//! How a wasm plugin's outgoing request is sent: wasmtime-wasi-http 48's
//! `default_send_request`, with one change, so that what a connection buffers follows
//! the plugin's memory limit ([`super::held_responses`]). wasmtime's sender builds its
//! hyper connection itself with hyper's default read buffer (about 400 KiB, whatever the
//! limit; its own code marks the builder as not plumbed through), so it is reproduced
//! here with `max_buf_size` set, rather than wrapped. The rest (connect and TLS with the
//! webpki roots, the timeouts, the request line) is wasmtime's.

use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::uri::Scheme;
use http::{Request, Response};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
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

/// hyper's incoming body with wasmtime's between-bytes timeout.
pub struct TimedBody {
    incoming: Incoming,
    timeout: tokio::time::Interval,
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(if err.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                Error::from(err)
            }))),
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.poll_tick(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// Sends `req` over a new connection whose read buffer is at most `read_buffer` bytes
/// (8 KiB or more: hyper's floor) and whose reads take at most as much, so no body
/// chunk is larger; answers the response and the connection's work.
pub async fn send(
    mut req: Request<wasmtime_wasi_http::WasiBody>,
    options: RequestOptions,
    read_buffer: usize,
) -> Result<(Response<TimedBody>, Io), Error> {
    let uri = req.uri();
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let use_tls = uri.scheme() == Some(&Scheme::HTTPS);
    let authority = match authority.port() {
        Some(_) => authority.to_string(),
        None => format!("{authority}:{}", if use_tls { 443 } else { 80 }),
    };
    let never = Duration::from_secs(600);
    let connect_timeout = options.connect_timeout.unwrap_or(never);
    let first_byte_timeout = options.first_byte_timeout.unwrap_or(never);
    let between_bytes_timeout = options
        .between_bytes_timeout
        .unwrap_or(never)
        .max(Duration::new(0, 1));

    let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect(&authority))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(Error::Connect)?;
    let stream: Box<dyn Stream> = if use_tls {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let domain = server_name(&authority).ok_or(Error::HttpRequestUriInvalid)?;
        Box::new(connector.connect(domain, tcp).await.map_err(Error::Tls)?)
    } else {
        Box::new(tcp)
    };
    let read_buffer = read_buffer.max(8192);
    let stream = CappedReads {
        inner: stream,
        cap: read_buffer,
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new()
            .max_buf_size(read_buffer)
            .handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // The request line carries the path only (no proxy is addressed).
    *req.uri_mut() = http::Uri::builder()
        .path_and_query(req.uri().path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    let response = async move {
        let res = tokio::time::timeout(first_byte_timeout, sender.send_request(req))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
        let mut timeout = tokio::time::interval(between_bytes_timeout);
        timeout.reset();
        Ok::<_, Error>(res.map(|incoming| TimedBody { incoming, timeout }))
    };
    let mut response = pin!(response);
    let mut conn = Some(conn);
    // Waits for the response while driving the connection.
    let res = poll_fn(|cx| match response.as_mut().poll(cx) {
        Poll::Ready(res) => Poll::Ready(res),
        Poll::Pending => {
            let Some(fut) = conn.as_mut() else {
                return Poll::Pending;
            };
            let done = ready!(Pin::new(fut).poll(cx));
            conn = None;
            match done {
                Ok(()) => response.as_mut().poll(cx),
                Err(err) => Poll::Ready(Err(Error::from(err))),
            }
        }
    })
    .await?;
    let io: Io = Box::pin(async move {
        let Some(conn) = conn.take() else {
            return Ok(());
        };
        conn.await.map_err(|err| {
            if err.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                err.into()
            }
        })
    });
    Ok((res, io))
}

/// The TLS server name of `authority` (`host:port`, an IPv6 host in brackets).
fn server_name(authority: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    use rustls::pki_types::ServerName;
    if let Ok(addr) = authority.parse::<std::net::SocketAddr>() {
        return Some(ServerName::from(addr.ip()));
    }
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    ServerName::try_from(host).ok().map(|n| n.to_owned())
}
