//! Connections to MCP servers, kept per server (name and definition) for the life of the
//! process: warm across a daemon's events, restarted when their server died, and gone
//! with a one-shot `hookhost dispatch` (its servers are killed as it exits).
//!
//! A stdio server is started here, through the same environment as command hooks
//! ([`crate::handlers::command::hook_env`]: scrubbed of credentials, an absolute `PATH`)
//! plus its own `env`, in its own process group, with its stderr kept to
//! [`STDERR_KEEP`] bytes. Its stdout passes [`Bounded`], which refuses a message past
//! [`super::MAX_MESSAGE`] before the protocol layer buffers it.

use std::collections::HashMap;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use super::{CallFailure, MAX_MESSAGE};
use crate::handlers::{FailureKind, Invocation};
use crate::policy::Settings;
use crate::policy::mcp::McpServer;

/// Bytes of a stdio server's stderr kept for the hook's report.
pub const STDERR_KEEP: usize = 16 << 10;

/// MCP servers an embedder provides, by name, besides those of `mcpServers` (which win).
pub trait McpServerSource: Send + Sync {
    /// The server called `name`, if the embedder has one.
    fn server(&self, name: &str) -> Option<McpServer>;
}

struct Connection {
    service: RunningService<RoleClient, ()>,
    oversized: Arc<AtomicBool>,
    stderr: Arc<Mutex<String>>,
    /// The stdio server's process group, killed with the connection.
    group: Option<u32>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(group) = self.group.and_then(|g| i32::try_from(g).ok()) {
            // SAFETY: killpg has no memory effects; the group is the server's own.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Connection>>>>;

/// The connections of this process, and the embedder's servers.
#[derive(Default)]
pub struct McpClients {
    slots: Mutex<HashMap<String, Slot>>,
    source: Option<Arc<dyn McpServerSource>>,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClients").finish_non_exhaustive()
    }
}

impl McpClients {
    /// The process's connections, shared by its hosts (a daemon's config reload keeps
    /// its servers warm).
    pub fn shared() -> Arc<McpClients> {
        static SHARED: OnceLock<Arc<McpClients>> = OnceLock::new();
        SHARED.get_or_init(Arc::default).clone()
    }

    /// Connections of their own, with the embedder's servers.
    pub fn with_source(source: Arc<dyn McpServerSource>) -> McpClients {
        McpClients {
            slots: Mutex::default(),
            source: Some(source),
        }
    }

    pub(super) fn embedder_server(&self, name: &str) -> Option<McpServer> {
        self.source.as_ref().and_then(|s| s.server(name))
    }

    /// Calls `tool` on `server`, connecting (or reconnecting a dead connection) first.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn call(
        &self,
        name: &str,
        server: &McpServer,
        tool: &str,
        arguments: Map<String, Value>,
        invocation: &Invocation,
        settings: &Settings,
        http: &reqwest::Client,
    ) -> Result<CallToolResult, CallFailure> {
        let key = format!("{name}\u{0}{server:?}");
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .clone();
        let connection = {
            let mut held = slot.lock().await;
            match held.as_ref() {
                Some(c) if !c.service.is_transport_closed() => c.clone(),
                _ => {
                    *held = None;
                    let c = Arc::new(connect(server, invocation, settings, http).await?);
                    *held = Some(c.clone());
                    c
                }
            }
        };
        let params = CallToolRequestParams {
            meta: None,
            name: tool.to_string().into(),
            arguments: Some(arguments),
            task: None,
        };
        match connection.service.peer().call_tool(params).await {
            Ok(result) => Ok(result),
            Err(e) => {
                // A dead or broken connection is not kept: the next call restarts it.
                let mut held = slot.lock().await;
                if held.as_ref().is_some_and(|c| Arc::ptr_eq(c, &connection)) {
                    *held = None;
                }
                let oversized = connection.oversized.load(Ordering::Relaxed);
                let stderr = stderr_of(&connection.stderr);
                Err(CallFailure {
                    kind: FailureKind::CannotStart,
                    message: if oversized {
                        format!("the server sent a message over {} MiB", MAX_MESSAGE >> 20)
                    } else {
                        crate::handlers::output::cap_text(&format!("not connected: {e}"))
                    },
                    stderr,
                    oversized,
                })
            }
        }
    }
}

fn stderr_of(kept: &Mutex<String>) -> Option<String> {
    let text = kept.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (!text.trim().is_empty()).then(|| crate::handlers::output::cap_text(&text))
}

fn cannot_start(message: String) -> CallFailure {
    CallFailure {
        kind: FailureKind::CannotStart,
        message,
        stderr: None,
        oversized: false,
    }
}

async fn connect(
    server: &McpServer,
    invocation: &Invocation,
    settings: &Settings,
    http: &reqwest::Client,
) -> Result<Connection, CallFailure> {
    match server {
        McpServer::Http { url } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let transport = StreamableHttpClientTransport::with_client(
                http.clone(),
                StreamableHttpClientTransportConfig::with_uri(url.as_str()),
            );
            let service = rmcp::serve_client((), transport)
                .await
                .map_err(|e| cannot_start(format!("cannot connect to `{url}`: {e}")))?;
            Ok(Connection {
                service,
                oversized: Arc::default(),
                stderr: Arc::default(),
                group: None,
            })
        }
        McpServer::Stdio { command, args, env } => {
            let mut vars = crate::handlers::command::hook_env(invocation, settings, false);
            vars.extend(env.iter().map(|(k, v)| (k.into(), v.into())));
            let search = vars
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone());
            let program = crate::handlers::command::resolve_program(
                std::ffi::OsStr::new(command),
                search.as_deref(),
                &invocation.project_dir,
            )
            .map_err(|why| cannot_start(format!("cannot start `{command}`: {why}")))?;
            let mut server = tokio::process::Command::new(&program);
            server
                .args(args)
                .current_dir(&invocation.project_dir)
                .env_clear()
                .envs(vars)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            // Recorded as hookhost's own child, so the end-of-dispatch sweep of adopted
            // orphans (`descendants::end_adopted`) leaves a warm server alone.
            let mut child = crate::handlers::descendants::spawn_own(|| server.spawn(), |c| c.id())
                .map_err(|e| cannot_start(format!("cannot start `{command}`: {e}")))?;
            let group = child.id();
            let (Some(stdin), Some(stdout), Some(mut err)) =
                (child.stdin.take(), child.stdout.take(), child.stderr.take())
            else {
                return Err(cannot_start(format!("cannot start `{command}`: no pipes")));
            };
            let stderr = Arc::new(Mutex::new(String::new()));
            let kept = stderr.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut held = kept.lock().unwrap_or_else(|e| e.into_inner());
                    let room = STDERR_KEEP.saturating_sub(held.len());
                    held.push_str(&String::from_utf8_lossy(&buf[..n.min(room)]));
                }
            });
            // The child is reaped when it exits; its group is killed with the connection.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            let oversized = Arc::new(AtomicBool::new(false));
            let reader = Bounded {
                inner: stdout,
                line: 0,
                over: oversized.clone(),
            };
            let mut connection = Connection {
                service: match rmcp::serve_client((), (reader, stdin)).await {
                    Ok(service) => service,
                    Err(e) => {
                        let failure = CallFailure {
                            kind: FailureKind::CannotStart,
                            message: crate::handlers::output::cap_text(&format!(
                                "cannot start `{command}`: {e}"
                            )),
                            stderr: stderr_of(&stderr),
                            oversized: oversized.load(Ordering::Relaxed),
                        };
                        if let Some(g) = group.and_then(|g| i32::try_from(g).ok()) {
                            // SAFETY: as in `Connection::drop`.
                            unsafe {
                                libc::killpg(g, libc::SIGKILL);
                            }
                        }
                        return Err(failure);
                    }
                },
                oversized,
                stderr,
                group: None,
            };
            connection.group = group;
            Ok(connection)
        }
    }
}

/// A server's stdout that fails once one line (one JSON-RPC message) passes
/// [`MAX_MESSAGE`] bytes, setting `over`.
struct Bounded<R> {
    inner: R,
    line: usize,
    over: Arc<AtomicBool>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                for &byte in &buf.filled()[before..] {
                    if byte == b'\n' {
                        this.line = 0;
                    } else {
                        this.line += 1;
                    }
                    if this.line > MAX_MESSAGE {
                        this.over.store(true, Ordering::Relaxed);
                        // An error reports nothing read (AsyncRead's contract).
                        buf.set_filled(before);
                        return Poll::Ready(Err(std::io::Error::other(
                            "an MCP message over 16 MiB",
                        )));
                    }
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read_all(data: Vec<u8>) -> (std::io::Result<usize>, bool) {
        let over = Arc::new(AtomicBool::new(false));
        let mut reader = Bounded {
            inner: std::io::Cursor::new(data),
            line: 0,
            over: over.clone(),
        };
        let mut sink = Vec::new();
        let read = reader.read_to_end(&mut sink).await;
        (read, over.load(Ordering::Relaxed))
    }

    #[tokio::test]
    async fn a_message_past_the_bound_fails_the_stream_and_shorter_ones_pass() {
        // Many messages that together pass the bound, each under it: read whole.
        let mut many = Vec::new();
        for _ in 0..3 {
            many.extend(std::iter::repeat_n(b'x', MAX_MESSAGE - 1));
            many.push(b'\n');
        }
        let (read, over) = read_all(many).await;
        assert_eq!(read.unwrap(), 3 * MAX_MESSAGE);
        assert!(!over);
        // One message a byte past it: refused, and said so.
        let (read, over) = read_all(vec![b'x'; MAX_MESSAGE + 1]).await;
        assert!(read.is_err());
        assert!(over);
    }
}
