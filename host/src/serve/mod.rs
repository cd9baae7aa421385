//! `hookhost serve`: one warm host for many clients, over a unix socket or stdio.
//!
//! The protocol is newline-delimited JSON. A request is
//! `{"id": ..., "event": "PreToolUse", "input": {...}, "project": "/path"?}` and its
//! answer `{"id": ..., "outcome": {...}}`; a request that cannot be served gets
//! `{"id": ... or null, "error": "..."}` and the connection stays open. Requests on one
//! connection run concurrently; answers arrive as they finish, matched by `id`.
//!
//! `{"id": ..., "subscribe": "SESSION"}` subscribes the connection to a session: the
//! results of its async hooks (and `asyncRewake` wake-ups) are pushed as
//! `{"session": "...", "async": {...}}` the moment they finish, instead of waiting for
//! the session's next outcome.
//!
//! Session state (the Stop cap, queued async results) lives in the data directory's
//! shared session store ([`crate::session::DiskStore`], `<data dir>/sessions`), shared
//! with the one-shot CLI, the dispatch daemon and every other `serve`. When a config
//! source changes, the host of that project is rebuilt through the reload gate
//! ([`crate::gate::reload`], shared with the dispatch daemon: a file that fails a check
//! keeps its last good version) and its next outcome carries a notice. On SIGTERM the
//! daemon stops accepting, finishes in-flight requests, answers
//! them and exits. A socket client that disconnects cancels its in-flight requests (their
//! processes are killed); on stdio, the end of input means "finish and exit".
//!
//! The daemon protects itself from its clients ([`Limits`]): a bounded number of
//! connections (following `RLIMIT_NOFILE`, a share per client process, idle ones closed:
//! [`slots`]), of requests in flight and of bytes held per connection (request lines
//! being served and answers the client has not read yet); a client that stops reading
//! stops being read. A line that is not a request (not JSON, not UTF-8, over the line
//! cap) is answered with an error and the connection goes on with the next line. A
//! request that panics is answered with an error; every other request carries on.

mod client_calls;
mod client_mcp;
mod client_model;
mod connection;
mod projects;
mod protocol;
mod register;
mod reload;
mod sessions;
pub mod slots;
mod socket;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::Host;
use crate::handlers::wasm::WasmRuntime;
use crate::session::SessionStore;

pub use protocol::{BadRequest, Frame, Request, RequestLines, parse_request};
pub use sessions::{SubscribingStore, Subscription};
pub use socket::BoundSocket;

use crate::config::file::effective_uid;
use projects::Project;

/// Longest request line accepted: 16 MiB.
pub const MAX_LINE: usize = 16 << 20;
/// How often config sources are checked for changes.
pub const RELOAD_POLL: Duration = Duration::from_millis(250);
/// How long the accept loop pauses after a failed `accept` (out of descriptors:
/// `EMFILE`, `ENFILE`; out of memory), instead of retrying at once in a busy loop.
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// After shutdown, how long a connection's writer waits for a client that does not read
/// its answers before it gives up on them (the daemon must be able to exit).
pub const SHUTDOWN_WRITE_GRACE: Duration = Duration::from_secs(10);
/// Async results waiting for one subscriber; beyond, the subscriber misses pushes (and
/// when no subscriber of the session can take one, it waits in the session for its next
/// outcome, as without subscribers).
pub const SUBSCRIBER_QUEUE: usize = 64;
/// An event name that makes a request panic, to test that a panic is answered; only in
/// builds with debug assertions (the tests'), never in a release build.
#[cfg(debug_assertions)]
pub const DEBUG_PANIC_EVENT: &str = "hookhost-debug-panic";

/// What one client may make the daemon hold. Each bound applies per connection except
/// `connections`; memory per client is at most about `line` (its read buffer) plus
/// `pending_bytes` plus the answers of `in_flight` finished requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is answered with an error and closed. Lowered
    /// to a quarter of `RLIMIT_NOFILE` ([`slots::connection_cap`]), and one client process
    /// may hold a quarter of it ([`slots::Slots`]).
    pub connections: usize,
    /// How long a socket connection may be idle (no line read, no request in flight, no
    /// subscription) before it is closed with an error line ([`slots::DEFAULT_IDLE`],
    /// `HOOKHOST_CONNECTION_IDLE_SECS`). Not applied on stdio.
    pub idle: Duration,
    /// Lines of one connection being served or answered but not yet written to it;
    /// when all are taken, the daemon stops reading from that connection.
    pub in_flight: usize,
    /// Bytes of request lines being served plus answers not yet written, per
    /// connection; when they are used up, the daemon stops reading from that connection.
    /// One request or answer larger than this is served alone.
    pub pending_bytes: usize,
    /// Longest request line; a longer one is answered with an error and skipped.
    pub line: usize,
    /// Subscriptions per connection.
    pub subscriptions: usize,
    /// Project hosts kept warm; naming one more project evicts one not in use.
    pub projects: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 256,
            idle: slots::DEFAULT_IDLE,
            in_flight: 64,
            pending_bytes: 32 << 20,
            line: MAX_LINE,
            subscriptions: 64,
            projects: 64,
        }
    }
}

/// Builds the host of a project, with the daemon's session store, through the reload gate
/// it is given ([`crate::gate::Gate::apply`]: it keeps the last good version of a file
/// that fails a check in force).
pub type HostFactory =
    Arc<dyn Fn(&Path, Arc<dyn SessionStore>, crate::gate::Gate<'_>) -> Host + Send + Sync>;

/// The daemon.
pub struct Server {
    factory: HostFactory,
    default_project: PathBuf,
    projects: Mutex<HashMap<PathBuf, Arc<Mutex<Project>>>>,
    /// What the project hosts forgotten to bound the table leave behind: their files'
    /// last good versions ([`Host::remembering`]), so that a project built again while
    /// one of its files is broken still has that file's previous version in force.
    forgotten: Mutex<Option<Host>>,
    sessions: Arc<SubscribingStore>,
    /// Runs the hosts' wasm hooks and the reload gate's plugin checks.
    wasm: Arc<WasmRuntime>,
    shutdown: CancellationToken,
    connections: TaskTracker,
    limits: Limits,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("default_project", &self.default_project)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Server {
    /// A server whose requests without `project` go to `default_project`.
    pub fn new(default_project: PathBuf, factory: HostFactory) -> Arc<Server> {
        Server::with_limits(default_project, factory, Limits::default())
    }

    /// [`Server::new`] with other bounds on what clients may make it hold.
    pub fn with_limits(
        default_project: PathBuf,
        factory: HostFactory,
        limits: Limits,
    ) -> Arc<Server> {
        let limits = Limits {
            connections: limits.connections.max(1),
            idle: limits.idle.max(Duration::from_millis(1)),
            in_flight: limits.in_flight.clamp(1, Semaphore::MAX_PERMITS),
            pending_bytes: limits.pending_bytes.clamp(1, u32::MAX as usize),
            line: limits.line.max(1),
            subscriptions: limits.subscriptions,
            projects: limits.projects.max(1),
        };
        Arc::new(Server {
            factory,
            default_project,
            projects: Mutex::new(HashMap::new()),
            forgotten: Mutex::new(None),
            sessions: Arc::new(SubscribingStore::new(crate::host::shared_session_store())),
            wasm: Arc::new(WasmRuntime::default()),
            shutdown: CancellationToken::new(),
            connections: TaskTracker::new(),
            limits,
        })
    }

    /// The session state shared by every connection.
    pub fn sessions(&self) -> &Arc<SubscribingStore> {
        &self.sessions
    }

    /// Asks the server to stop: no new connections or requests; in-flight ones finish.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

/// Best effort, without waiting: one error line to a connection that is refused.
fn refuse_connection(stream: &tokio::net::UnixStream, message: &str) {
    let line = json!({"id": null, "error": message}).to_string() + "\n";
    let _ = stream.try_write(line.as_bytes());
}

impl Server {
    /// Binds `path` ([`BoundSocket::bind`]) and serves on it ([`Server::serve_bound`]).
    ///
    /// # Errors
    ///
    /// The socket cannot be bound (a live daemon already listens there, the path is
    /// taken or its directory unsafe or missing).
    pub async fn serve_unix(self: Arc<Self>, path: &Path) -> io::Result<()> {
        let socket = BoundSocket::bind(path).await?;
        self.serve_bound(socket).await
    }

    /// Accepts connections until shutdown, then waits for every connection to finish its
    /// in-flight requests and removes the socket file. Connections from another user
    /// (but root) are refused, as are connections beyond [`Limits::connections`] (as
    /// lowered by `RLIMIT_NOFILE`) or beyond their process's share of it
    /// ([`slots::Slots`]), each with an error line; when `accept` fails (out of
    /// descriptors), the loop pauses [`ACCEPT_BACKOFF`] and serves on.
    ///
    /// # Errors
    ///
    /// The listener cannot be registered with the runtime.
    pub async fn serve_bound(self: Arc<Self>, socket: BoundSocket) -> io::Result<()> {
        socket.listener.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(socket.listener.try_clone()?)?;
        let reloader = self.clone().spawn_reloader();
        let slots = slots::Slots::new(slots::connection_cap(self.limits.connections));
        if slots.cap() < self.limits.connections {
            tracing::warn!(
                "hookhost serve: at most {} connections (a quarter of the descriptor limit, \
                 RLIMIT_NOFILE)",
                slots.cap()
            );
        }
        let me = effective_uid();
        let mut failing = false;
        loop {
            let accepted = tokio::select! {
                _ = self.shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => {
                    failing = false;
                    stream
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(
                            "hookhost serve: accept: {e}; retrying every {ACCEPT_BACKOFF:?}"
                        );
                    }
                    failing = true;
                    tokio::select! {
                        _ = self.shutdown.cancelled() => break,
                        _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                    }
                }
            };
            let pid = match stream.peer_cred() {
                Ok(peer) if peer.uid() == me || peer.uid() == 0 => peer.pid(),
                Ok(peer) => {
                    tracing::warn!(
                        "hookhost serve: refused a connection from uid {}",
                        peer.uid()
                    );
                    refuse_connection(&stream, "this daemon serves only its own user");
                    continue;
                }
                Err(e) => {
                    tracing::warn!("hookhost serve: cannot tell who connected ({e}); refused");
                    continue;
                }
            };
            let slot = match slots.take(pid) {
                Ok(slot) => slot,
                Err(refusal) => {
                    refuse_connection(&stream, &refusal.to_string());
                    continue;
                }
            };
            let (reader, writer) = stream.into_split();
            let server = self.clone();
            self.connections.spawn(async move {
                server.serve_connection(reader, writer, false).await;
                drop(slot);
            });
        }
        drop(listener);
        socket.remove();
        self.connections.close();
        self.connections.wait().await;
        reloader.abort();
        Ok(())
    }

    /// Serves one client on stdin and stdout until the input ends or shutdown.
    pub async fn serve_stdio(self: Arc<Self>) {
        let reloader = self.clone().spawn_reloader();
        self.clone()
            .serve_connection(tokio::io::stdin(), tokio::io::stdout(), true)
            .await;
        reloader.abort();
    }
}
