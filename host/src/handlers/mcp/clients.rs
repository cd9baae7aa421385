//! Connections to MCP servers, kept per server (name and definition) for the life of the
//! process: warm across a daemon's events, restarted when their server died, and gone
//! with a one-shot `hookhost dispatch` (its servers are killed as it exits). A call that
//! times out or passes a bound of [`super::intake`] drops its connection: the next call
//! starts the server afresh.
//!
//! A stdio server is started here, through the same environment as command hooks
//! ([`crate::handlers::command::hook_env`]: scrubbed of credentials, an absolute `PATH`)
//! plus its own `env`, in its own process group, with its stderr kept to
//! [`STDERR_KEEP`] bytes. Its stdout, and every HTTP body of an HTTP server
//! ([`super::http::BoundedHttp`]), pass [`super::intake::Metered`].

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Map, Value};
use tokio::io::AsyncReadExt;

use super::intake::{Intake, MeteredRead, MeteredWrite};
use super::{CallFailure, McpToolResult};
use crate::handlers::{FailureKind, Invocation};
use crate::policy::Settings;
use crate::policy::mcp::McpServer;

/// Bytes of a stdio server's stderr kept for the hook's report.
pub const STDERR_KEEP: usize = 16 << 10;

/// A stdio server's process group, killed when dropped.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            // SAFETY: killpg has no memory effects; the group is the server's own.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

struct Connection {
    service: RunningService<RoleClient, ()>,
    intake: Arc<Intake>,
    stderr: Arc<Mutex<String>>,
    /// A stdio server's process has exited.
    exited: Arc<AtomicBool>,
    /// Dropped (the group killed) with the connection; declared last, so the service
    /// goes first.
    _group: Group,
}

impl Connection {
    /// Its server is gone (or the transport closed).
    fn dead(&self) -> bool {
        self.service.is_transport_closed() || self.exited.load(Ordering::Acquire)
    }

    fn usable(&self) -> bool {
        !self.dead() && self.intake.overrun().is_none()
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Connection>>>>;

/// The connections of this process.
#[derive(Default)]
pub struct McpClients {
    slots: Mutex<HashMap<String, Slot>>,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClients").finish_non_exhaustive()
    }
}

/// Drops `connection` from `slot` unless another has replaced it.
async fn discard(slot: &Slot, connection: &Arc<Connection>) {
    let mut held = slot.lock().await;
    if held.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection)) {
        *held = None;
    }
}

impl McpClients {
    /// The process's connections, shared by its hosts (a daemon's config reload keeps
    /// its servers warm).
    pub fn shared() -> Arc<McpClients> {
        static SHARED: OnceLock<Arc<McpClients>> = OnceLock::new();
        SHARED.get_or_init(Arc::default).clone()
    }

    /// Calls `tool` on `server`, connecting (or reconnecting a dead connection) first,
    /// all within `timeout`.
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
        timeout: Duration,
    ) -> Result<McpToolResult, CallFailure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || CallFailure {
            kind: FailureKind::Timeout,
            message: format!("no answer within {timeout:?}"),
            stderr: None,
            oversized: false,
        };
        let key = format!("{name}\u{0}{server:?}");
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .clone();
        // A warm connection found dead by the call (its server exited since the last
        // event) is restarted once within this call.
        let mut warm_tries = 1;
        loop {
            let connecting = async {
                let mut held = slot.lock().await;
                match held.as_ref() {
                    Some(c) if c.usable() => Ok((c.clone(), true)),
                    _ => {
                        *held = None;
                        let c = Arc::new(connect(server, invocation, settings, http).await?);
                        *held = Some(c.clone());
                        Ok((c, false))
                    }
                }
            };
            let (connection, warm) = match tokio::time::timeout_at(deadline, connecting).await {
                Err(_) => return Err(timed_out()),
                Ok(connected) => connected?,
            };
            connection.intake.begin_call();
            let params = CallToolRequestParams {
                meta: None,
                name: tool.to_string().into(),
                arguments: Some(arguments.clone()),
                task: None,
            };
            let answered = tokio::time::timeout_at(deadline, async {
                tokio::select! {
                    result = connection.service.peer().call_tool(params) => result.map_err(Some),
                    _ = connection.intake.tripped() => Err(None),
                }
            })
            .await;
            let failure = match answered {
                Ok(Ok(result)) => return Ok(result.into()),
                // A server that does not answer in time is not trusted with the next call.
                Err(_) => timed_out(),
                Ok(Err(e)) => {
                    let overrun = connection.intake.overrun();
                    // Repeated on a new connection only when nothing of the call reached
                    // the dead one: a tool runs at most once per call.
                    let unsent = connection.intake.sent() == 0;
                    if overrun.is_none() && warm && warm_tries > 0 && connection.dead() && unsent {
                        warm_tries -= 1;
                        discard(&slot, &connection).await;
                        continue;
                    }
                    CallFailure {
                        kind: if overrun.is_some() {
                            FailureKind::Limit
                        } else {
                            FailureKind::CannotStart
                        },
                        message: match (overrun, e) {
                            (Some(overrun), _) => overrun.describe(),
                            (None, _) if connection.dead() && !unsent => {
                                "the server closed the connection during the call; not \
                                 repeated, as the tool may have run"
                                    .into()
                            }
                            (None, Some(e)) => {
                                crate::handlers::output::cap_text(&format!("not connected: {e}"))
                            }
                            (None, None) => "not connected".into(),
                        },
                        stderr: stderr_of(&connection.stderr),
                        oversized: overrun.is_some(),
                    }
                }
            };
            // A dead, broken, overrun or stuck connection is not kept: the next call
            // restarts it.
            discard(&slot, &connection).await;
            return Err(failure);
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

/// Why the handshake failed: a bound passed, or the transport's error.
fn handshake_failed(
    what: String,
    e: impl std::fmt::Display,
    intake: &Intake,
    stderr: Option<String>,
) -> CallFailure {
    let overrun = intake.overrun();
    CallFailure {
        kind: if overrun.is_some() {
            FailureKind::Limit
        } else {
            FailureKind::CannotStart
        },
        message: match overrun {
            Some(overrun) => format!("{what}: {}", overrun.describe()),
            None => crate::handlers::output::cap_text(&format!("{what}: {e}")),
        },
        stderr,
        oversized: overrun.is_some(),
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
            use rmcp::transport::common::client_side_sse::ExponentialBackoff;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let intake = Arc::new(Intake::default());
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            // A dropped event stream is reopened twice at most (rmcp's default: forever).
            config.retry_config = Arc::new(ExponentialBackoff {
                max_times: Some(2),
                base_duration: Duration::from_millis(500),
            });
            let transport = StreamableHttpClientTransport::with_client(
                super::http::BoundedHttp::new(http.clone(), intake.clone()),
                config,
            );
            let service = rmcp::serve_client((), transport).await.map_err(|e| {
                handshake_failed(format!("cannot connect to `{url}`"), e, &intake, None)
            })?;
            Ok(Connection {
                service,
                intake,
                stderr: Arc::default(),
                exited: Arc::default(),
                _group: Group(None),
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
            // From here on, leaving early (an error, or the hook's timeout dropping this
            // future) kills the server's group.
            let group = Group(child.id().and_then(|g| i32::try_from(g).ok()));
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
            let exited = Arc::new(AtomicBool::new(false));
            let reaped = exited.clone();
            tokio::spawn(async move {
                let _ = child.wait().await;
                reaped.store(true, Ordering::Release);
            });
            let intake = Arc::new(Intake::default());
            let reader = MeteredRead::new(stdout, intake.clone());
            let writer = MeteredWrite::new(stdin, intake.clone());
            let service = match rmcp::serve_client((), (reader, writer)).await {
                Ok(service) => service,
                Err(e) => {
                    let what = format!("cannot start `{command}`");
                    return Err(handshake_failed(what, e, &intake, stderr_of(&stderr)));
                }
            };
            Ok(Connection {
                service,
                intake,
                stderr,
                exited,
                _group: group,
            })
        }
    }
}
