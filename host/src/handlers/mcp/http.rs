//! The HTTP side of a streamable-HTTP MCP server, for rmcp's transport: rmcp's own
//! reqwest client reads a JSON body whole and an SSE body without bound, so hookhost
//! plugs in its own ([`BoundedHttp`], rmcp's `StreamableHttpClient` trait; rmcp's reqwest
//! feature is not compiled in). Every body passes [`super::intake::Metered`]: a JSON body
//! as one message, an SSE body event by event.
//!
//! Requests go through the HTTP hooks' reqwest client (no proxy, no redirects, the
//! system's and managed policy's roots). Closing a session waits at most
//! [`DELETE_WAIT`].

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Sse, SseStream};

use super::intake::{Framing, Intake, Metered};

const SESSION_ID: &str = "Mcp-Session-Id";
const LAST_EVENT_ID: &str = "Last-Event-Id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// The longest wait for a server to close a session (when a connection is dropped).
pub const DELETE_WAIT: Duration = Duration::from_secs(5);

type Failure = StreamableHttpError<reqwest::Error>;

/// An HTTP client whose every body is counted against one connection's [`Intake`].
#[derive(Clone)]
pub struct BoundedHttp {
    client: reqwest::Client,
    intake: Arc<Intake>,
}

impl BoundedHttp {
    /// `client`, counted against `intake`.
    pub fn new(client: reqwest::Client, intake: Arc<Intake>) -> BoundedHttp {
        BoundedHttp { client, intake }
    }

    /// A connection past a bound sends nothing more.
    fn finished(&self) -> Result<(), Failure> {
        match self.intake.overrun() {
            Some(overrun) => Err(StreamableHttpError::Io(std::io::Error::other(
                overrun.describe(),
            ))),
            None => Ok(()),
        }
    }

    /// An SSE body's events, only those rmcp hands on as messages ([`carries_a_message`]).
    fn events(&self, response: reqwest::Response) -> BoxStream<'static, Result<Sse, SseError>> {
        let body =
            Metered::new(self.intake.clone(), Framing::SseEvents).stream(response.bytes_stream());
        SseStream::from_bytes_stream(body)
            .filter(|event| std::future::ready(carries_a_message(event)))
            .boxed()
    }

    /// A JSON body, read as one message.
    async fn json(&self, response: reqwest::Response) -> Result<ServerJsonRpcMessage, Failure> {
        let mut body = std::pin::pin!(
            Metered::new(self.intake.clone(), Framing::Whole).stream(response.bytes_stream())
        );
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            bytes.extend_from_slice(&chunk?);
        }
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// Whether rmcp's SSE reader (`SseAutoReconnectStream::poll_next`) hands `event` on: an
/// error, or a `message` event (or one without a name) whose data is a JSON-RPC message.
/// Every other event it skips by calling itself again, one stack frame per event skipped
/// in a row: a server's burst of small events it skips (`id: 1`, `data: x`, `event: p`),
/// each a few bytes and far inside the bounds of [`super::intake`], overflowed the stack
/// and killed the process. They are dropped here (this filter loops), so rmcp never
/// skips one; the `id:` and `retry:` they carried go with them (a resumption starts
/// from an earlier event, a reconnect waits the client's own interval).
fn carries_a_message(event: &Result<Sse, SseError>) -> bool {
    let Ok(sse) = event else {
        return true;
    };
    matches!(sse.event.as_deref(), None | Some("" | "message"))
        && sse
            .data
            .as_deref()
            .is_some_and(|data| serde_json::from_str::<ServerJsonRpcMessage>(data).is_ok())
}

fn content_type(response: &reqwest::Response) -> Option<String> {
    response.headers().get(CONTENT_TYPE).map(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .chars()
            .take(200)
            .collect()
    })
}

impl StreamableHttpClient for BoundedHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        self.finished()?;
        let mut request = self
            .client
            .post(uri.as_ref())
            .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
            .json(&message);
        if let Some(session) = session_id {
            request = request.header(SESSION_ID, session.as_ref());
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| {
            // Refused at connect: the request never reached the server.
            if !e.is_connect() {
                self.intake.count_sent(1);
            }
            StreamableHttpError::Client(e)
        })?;
        self.intake.count_sent(1);
        if matches!(
            response.status(),
            StatusCode::ACCEPTED | StatusCode::NO_CONTENT
        ) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match content_type(&response) {
            Some(t) if t.starts_with(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                self.events(response),
                session,
            )),
            Some(t) if t.starts_with(JSON) => Ok(StreamableHttpPostResponse::Json(
                self.json(response).await?,
                session,
            )),
            other => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
    ) -> Result<(), Failure> {
        let mut request = self
            .client
            .delete(uri.as_ref())
            .header(SESSION_ID, session_id.as_ref());
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        // The body is never read.
        let response = tokio::time::timeout(DELETE_WAIT, request.send())
            .await
            .map_err(|_| {
                StreamableHttpError::UnexpectedServerResponse(Cow::Borrowed(
                    "no answer to closing the session",
                ))
            })?
            .map_err(StreamableHttpError::Client)?;
        if response.status() != StatusCode::METHOD_NOT_ALLOWED {
            response
                .error_for_status()
                .map_err(StreamableHttpError::Client)?;
        }
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.finished()?;
        let mut request = self
            .client
            .get(uri.as_ref())
            .header(ACCEPT, format!("{EVENT_STREAM}, {JSON}"))
            .header(SESSION_ID, session_id.as_ref());
        if let Some(last) = last_event_id {
            request = request.header(LAST_EVENT_ID, last);
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        match content_type(&response) {
            Some(t) if t.starts_with(EVENT_STREAM) => Ok(self.events(response)),
            other => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }
}
