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
//! Session state (the Stop cap, queued async results) lives in the daemon. When a config
//! source changes, the host of that project is rebuilt and its next outcome carries a
//! notice. On SIGTERM the daemon stops accepting, finishes in-flight requests, answers
//! them and exits. A socket client that disconnects cancels its in-flight requests (their
//! processes are killed); on stdio, the end of input means "finish and exit".
//!
//! The daemon protects itself from its clients ([`Limits`]): a bounded number of
//! connections, of requests in flight and of bytes held per connection (request lines
//! being served and answers the client has not read yet); a client that stops reading
//! stops being read. A line that is not a request (not JSON, not UTF-8, over the line
//! cap) is answered with an error and the connection goes on with the next line. A
//! request that panics is answered with an error; every other request carries on.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures_util::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::codec::{Decoder, FramedRead};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::outcome::Outcome;
use crate::session::{AsyncResult, MemoryStore, SessionStore};
use crate::{Host, SourcesFingerprint};

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
    /// Connections served at once; one more is answered with an error and closed.
    pub connections: usize,
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
            in_flight: 64,
            pending_bytes: 32 << 20,
            line: MAX_LINE,
            subscriptions: 64,
            projects: 64,
        }
    }
}

/// Builds the host of a project, with the daemon's session store; on a reload, given the
/// host built before (for [`crate::HostBuilder::reload_of`], which keeps the last good
/// version of a broken file in force).
pub type HostFactory =
    Arc<dyn Fn(&Path, Arc<dyn SessionStore>, Option<&Host>) -> Host + Send + Sync>;

struct Project {
    host: Host,
    fingerprint: SourcesFingerprint,
    /// A reload notice for the next outcome.
    notice: Option<String>,
}

/// Session state shared by every connection, which pushes async results to subscribers.
#[derive(Debug, Default)]
pub struct SubscribingStore {
    inner: MemoryStore,
    subscribers: Mutex<Subscribers>,
}

#[derive(Debug, Default)]
struct Subscribers {
    next_id: u64,
    by_session: HashMap<String, Vec<(u64, mpsc::Sender<AsyncResult>)>>,
}

/// One subscription to a session's async results; dropping it (its connection closed)
/// unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    store: Arc<SubscribingStore>,
    session: String,
    id: u64,
    results: mpsc::Receiver<AsyncResult>,
}

impl Subscription {
    /// The next async result of the session.
    pub async fn recv(&mut self) -> Option<AsyncResult> {
        self.results.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut subscribers = self.store.lock();
        if let Some(list) = subscribers.by_session.get_mut(&self.session) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                subscribers.by_session.remove(&self.session);
            }
        }
    }
}

impl SubscribingStore {
    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes to `session`: what finished before is delivered at once.
    pub fn subscribe(self: &Arc<Self>, session: &str) -> Subscription {
        let (sender, results) = mpsc::channel(SUBSCRIBER_QUEUE);
        let mut subscribers = self.lock();
        let id = subscribers.next_id;
        subscribers.next_id += 1;
        for result in self.inner.take_async(session) {
            if let Err(full) = sender.try_send(result) {
                self.inner.push_async(session, full.into_inner());
            }
        }
        subscribers
            .by_session
            .entry(session.to_string())
            .or_default()
            .push((id, sender));
        Subscription {
            store: self.clone(),
            session: session.to_string(),
            id,
            results,
        }
    }

    /// How many subscriptions are live (for tests of their clean-up).
    pub fn subscriptions(&self) -> usize {
        self.lock().by_session.values().map(Vec::len).sum()
    }
}

impl SessionStore for SubscribingStore {
    fn stop_blocks(&self, session: &str) -> u32 {
        self.inner.stop_blocks(session)
    }
    fn set_stop_blocks(&self, session: &str, count: u32) {
        self.inner.set_stop_blocks(session, count)
    }
    fn update_stop_blocks(
        &self,
        session: &str,
        update: &mut dyn FnMut(u32) -> u32,
    ) -> Result<(), String> {
        self.inner.update_stop_blocks(session, update)
    }
    fn push_async(&self, session: &str, result: AsyncResult) {
        let subscribers = self.lock();
        let mut delivered = false;
        if let Some(list) = subscribers.by_session.get(session) {
            for (_, s) in list {
                delivered |= s.try_send(result.clone()).is_ok();
            }
        }
        drop(subscribers);
        if !delivered {
            self.inner.push_async(session, result);
        }
    }
    fn take_async(&self, session: &str) -> Vec<AsyncResult> {
        self.inner.take_async(session)
    }
}

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

/// One request line, parsed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The client's id, echoed in the answer.
    #[serde(default)]
    pub id: Value,
    /// The event to dispatch.
    #[serde(default)]
    pub event: Option<String>,
    /// The event's input JSON (default `{}`).
    #[serde(default)]
    pub input: Option<Value>,
    /// The project whose hooks run (default: the daemon's).
    #[serde(default)]
    pub project: Option<PathBuf>,
    /// A session to subscribe to instead of dispatching.
    #[serde(default)]
    pub subscribe: Option<String>,
}

/// A line that is not a valid request: the answer says why, with the request's id when
/// the line was JSON with one.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest {
    /// The id of the request, `null` when none could be read.
    pub id: Value,
    /// Why the line is not a request (starts with `bad request: `).
    pub message: String,
}

impl BadRequest {
    /// The answer line.
    pub fn answer(&self) -> String {
        json!({"id": self.id, "error": self.message}).to_string()
    }
}

/// Parses one request line (without its newline). Any bytes are accepted: what is not a
/// request is a [`BadRequest`], never a panic.
///
/// # Errors
///
/// The line is not UTF-8 JSON, not an object of the request's fields, or a field has the
/// wrong type.
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    // serde would read an array as the fields in order (`[1, "Stop"]`): only an object
    // is a request.
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(BadRequest {
            id: Value::Null,
            message: "bad request: a request is a JSON object".into(),
        });
    }
    serde_json::from_slice::<Request>(line).map_err(|e| BadRequest {
        // Salvage the id of a request that is JSON but not a valid request.
        id: serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(Value::Null),
        message: format!("bad request: {e}"),
    })
}

/// One unit of a request stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line, without its newline.
    Line(BytesMut),
    /// A line over the cap: reported once, as soon as it is known to be too long; its
    /// bytes are skipped up to the next newline.
    TooLong,
}

/// Splits a byte stream into request lines of at most `max` bytes. Unlike
/// `tokio_util`'s `LinesCodec` (whose `FramedRead` ends the stream after the first
/// error, taking the connection with it), nothing in the bytes is an error: a line that
/// is too long becomes [`Frame::TooLong`] and the next line is read as usual; bytes that
/// are not UTF-8 are the parser's to refuse.
#[derive(Debug)]
pub struct RequestLines {
    max: usize,
    /// How much of the buffer is known to hold no newline.
    scanned: usize,
    /// Inside a line over the cap, skipping to its end.
    discarding: bool,
}

/// The read buffer's usual size; a buffer grown past [`RequestLines::SHRINK_ABOVE`] by
/// a long line is given back once that line is out.
const READ_BUFFER: usize = 8 << 10;

impl RequestLines {
    const SHRINK_ABOVE: usize = 1 << 20;

    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> RequestLines {
        RequestLines {
            max,
            scanned: 0,
            discarding: false,
        }
    }

    fn shrink(buf: &mut BytesMut) {
        if buf.is_empty() && buf.capacity() > Self::SHRINK_ABOVE {
            *buf = BytesMut::with_capacity(READ_BUFFER);
        }
    }
}

impl Decoder for RequestLines {
    type Item = Frame;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        loop {
            let newline = buf[self.scanned..].iter().position(|&b| b == b'\n');
            if self.discarding {
                match newline {
                    Some(at) => {
                        buf.advance(self.scanned + at + 1);
                        self.scanned = 0;
                        self.discarding = false;
                        Self::shrink(buf);
                        continue;
                    }
                    None => {
                        buf.clear();
                        self.scanned = 0;
                        Self::shrink(buf);
                        return Ok(None);
                    }
                }
            }
            return Ok(match newline {
                Some(at) => {
                    let end = self.scanned + at;
                    self.scanned = 0;
                    if end > self.max {
                        buf.advance(end + 1);
                        Self::shrink(buf);
                        Some(Frame::TooLong)
                    } else {
                        let mut line = buf.split_to(end + 1);
                        line.truncate(end);
                        Self::shrink(buf);
                        Some(Frame::Line(line))
                    }
                }
                None if buf.len() > self.max => {
                    buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    Self::shrink(buf);
                    Some(Frame::TooLong)
                }
                None => {
                    self.scanned = buf.len();
                    None
                }
            });
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.scanned = 0;
        if self.discarding || buf.is_empty() {
            buf.clear();
            return Ok(None);
        }
        // The last line, without a newline.
        Ok(Some(Frame::Line(buf.split())))
    }
}

/// An answer waiting to be written, with what it holds of its connection's bounds.
struct Queued {
    text: String,
    _slot: Option<OwnedSemaphorePermit>,
    _bytes: Option<OwnedSemaphorePermit>,
}

/// `n` permits of `semaphore` (at most all of them), without waiting when they are free.
async fn take(semaphore: &Arc<Semaphore>, n: usize, all: usize) -> OwnedSemaphorePermit {
    let n = n.clamp(1, all) as u32;
    match semaphore.clone().try_acquire_many_owned(n) {
        Ok(permit) => permit,
        Err(_) => semaphore
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("a connection's semaphores are never closed"),
    }
}

/// The text of a panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
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
            sessions: Arc::new(SubscribingStore::default()),
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

    /// Before a project is built: with the table full, forgets one project host not in
    /// use (a client naming ever new projects must not grow the daemon without bound;
    /// a forgotten project is rebuilt when named again).
    fn make_room_for(&self, dir: &Path) {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        if projects.len() < self.limits.projects || projects.contains_key(dir) {
            return;
        }
        let idle = projects
            .iter()
            .find(|(key, project)| Arc::strong_count(project) == 1 && *key != &self.default_project)
            .map(|(key, _)| key.clone());
        if let Some(key) = idle
            && let Some(project) = projects.remove(&key)
        {
            let host = project
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .host
                .clone();
            let mut forgotten = self.forgotten.lock().unwrap_or_else(|e| e.into_inner());
            *forgotten = Some(match forgotten.take() {
                Some(kept) => kept.remembering(&host),
                None => host,
            });
        }
    }

    /// The host of a project, built on first use (with what forgotten projects left
    /// behind as its previous version). A first build that panics is not kept (the panic
    /// is its request's answer, and the next request builds again).
    fn project(&self, dir: &Path) -> Arc<Mutex<Project>> {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(project) = projects.get(dir) {
            return project.clone();
        }
        // The files this project shares with the others (the user's, managed policy) have
        // a last good version in the default project's host, and its own files may have
        // one in what forgotten hosts left behind.
        let default = projects
            .get(&self.default_project)
            .map(|p| p.lock().unwrap_or_else(|e| e.into_inner()).host.clone());
        let forgotten = self
            .forgotten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let previous = match (default, forgotten) {
            (Some(default), Some(forgotten)) => Some(default.remembering(&forgotten)),
            (default, forgotten) => default.or(forgotten),
        };
        let host = (self.factory)(dir, self.sessions.clone(), previous.as_ref());
        let fingerprint = host.fingerprint();
        let project = Arc::new(Mutex::new(Project {
            host,
            fingerprint,
            notice: None,
        }));
        projects.insert(dir.to_path_buf(), project.clone());
        project
    }

    /// Rebuilds the hosts whose config files changed. A rebuild never leaves a project
    /// less guarded: a file that fails to load keeps its last good version in force (see
    /// [`crate::HostBuilder::reload_of`]), and a rebuild that panics keeps the previous
    /// host serving, with a notice on every outcome, until the files change again (it is
    /// not retried on every poll).
    pub fn reload_changed(&self) {
        let projects: Vec<(PathBuf, Arc<Mutex<Project>>)> = self
            .projects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (dir, project) in projects {
            let (old, now, previous) = {
                let project = project.lock().unwrap_or_else(|e| e.into_inner());
                (
                    project.fingerprint.clone(),
                    project.host.fingerprint(),
                    project.host.clone(),
                )
            };
            if now == old {
                continue;
            }
            let sessions: Arc<dyn SessionStore> = self.sessions.clone();
            let host = previous.rebuild(|previous| (self.factory)(&dir, sessions, Some(previous)));
            let new = host.fingerprint();
            let changed: Vec<String> = new
                .changed_since(&old)
                .iter()
                .map(|path| path.display().to_string())
                .collect();
            let mut project = project.lock().unwrap_or_else(|e| e.into_inner());
            project.host = host;
            project.fingerprint = new;
            let errors = project.host.policy().errors.len();
            project.notice = Some(format!(
                "config reloaded ({} changed){}",
                changed.join(", "),
                if errors > 0 {
                    format!("; {errors} errors, see `hookhost validate`")
                } else {
                    String::new()
                }
            ));
        }
    }

    /// Answers one request; returns the answer line.
    async fn answer(&self, request: &mut Request) -> String {
        let Some(event) = request.event.as_deref() else {
            return json!({"id": request.id, "error": "bad request: `event` is required"})
                .to_string();
        };
        #[cfg(debug_assertions)]
        if event == DEBUG_PANIC_EVENT {
            panic!("a request for `{DEBUG_PANIC_EVENT}` (debug builds only)");
        }
        let dir = match request.project.take() {
            None => self.default_project.clone(),
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => {
                return json!({"id": request.id, "error": format!(
                    "bad request: `project` must be an absolute path, not `{}`",
                    dir.display()
                )})
                .to_string();
            }
        };
        if dir != self.default_project {
            self.make_room_for(&dir);
        }
        let project = self.project(&dir);
        let (host, notice) = {
            let mut project = project.lock().unwrap_or_else(|e| e.into_inner());
            (project.host.clone(), project.notice.take())
        };
        drop(project);
        match host
            .dispatch(event, request.input.take().unwrap_or_else(|| json!({})))
            .await
        {
            Ok(mut outcome) => {
                if let Some(notice) = notice {
                    outcome.host_notice(notice);
                }
                /// `{"id": …, "outcome": …}`, serialized without an intermediate `Value`.
                #[derive(Serialize)]
                struct Answer<'a> {
                    id: &'a Value,
                    outcome: &'a Outcome,
                }
                serde_json::to_string(&Answer {
                    id: &request.id,
                    outcome: &outcome,
                })
                .unwrap_or_else(|e| {
                    json!({"id": request.id, "error": format!("cannot encode the outcome: {e}")})
                        .to_string()
                })
            }
            Err(e) => json!({"id": request.id, "error": e.to_string()}).to_string(),
        }
    }

    /// [`Server::answer`], with a panic answered as an error of this request: the
    /// connection and every other request carry on.
    async fn answer_caught(&self, request: &mut Request) -> String {
        match AssertUnwindSafe(self.answer(request)).catch_unwind().await {
            Ok(answer) => answer,
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                tracing::error!("a request panicked: {message}");
                json!({"id": request.id, "error": format!(
                    "internal error: the request panicked ({message}); the daemon serves on"
                )})
                .to_string()
            }
        }
    }

    /// Serves one connection until it closes or the server shuts down. With
    /// `finish_on_eof`, the end of input waits for in-flight requests (stdio); otherwise it
    /// cancels them (a socket client that went away).
    pub async fn serve_connection<R, W>(self: Arc<Self>, reader: R, writer: W, finish_on_eof: bool)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let limits = self.limits;
        // Unbounded as a channel, bounded by the permits each queued answer holds.
        let (out, outgoing) = mpsc::unbounded_channel::<Queued>();
        let writer_task = tokio::spawn(write_answers(writer, outgoing, self.shutdown.clone()));
        let mut lines =
            FramedRead::with_capacity(reader, RequestLines::new(limits.line), READ_BUFFER);
        let slots = Arc::new(Semaphore::new(limits.in_flight));
        let bytes = Arc::new(Semaphore::new(limits.pending_bytes));
        let mut requests = JoinSet::new();
        let mut subscriptions = JoinSet::new();
        // An answer the reading loop makes itself (errors, acks, pushes): small, so it
        // holds a slot but no bytes.
        let small = |text: String, slot| Queued {
            text,
            _slot: Some(slot),
            _bytes: None,
        };
        let eof = loop {
            // A slot for whatever the next line is answered with. When the client
            // leaves its answers unread and every slot is taken, reading stops here.
            let slot = tokio::select! {
                biased;
                slot = take(&slots, 1, limits.in_flight) => slot,
                _ = self.shutdown.cancelled() => break false,
            };
            let next = tokio::select! {
                _ = self.shutdown.cancelled() => break false,
                next = lines.next() => next,
            };
            let line = match next {
                None | Some(Err(_)) => break true,
                Some(Ok(Frame::TooLong)) => {
                    let message = format!(
                        "bad request: line longer than {} bytes (skipped to its end)",
                        limits.line
                    );
                    let _ = out.send(small(
                        json!({"id": null, "error": message}).to_string(),
                        slot,
                    ));
                    continue;
                }
                Some(Ok(Frame::Line(line))) => line,
            };
            if line.first() != Some(&b'{') && line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // The line's bytes count until its answer exists.
            let held = tokio::select! {
                biased;
                held = take(&bytes, line.len(), limits.pending_bytes) => held,
                _ = self.shutdown.cancelled() => break false,
            };
            let mut request = match parse_request(&line) {
                Ok(request) => request,
                Err(bad) => {
                    let _ = out.send(small(bad.answer(), slot));
                    continue;
                }
            };
            drop(line);
            if let Some(session) = request.subscribe.take() {
                drop(held);
                if subscriptions.len() >= limits.subscriptions {
                    let message = format!(
                        "bad request: at most {} subscriptions per connection",
                        limits.subscriptions
                    );
                    let _ = out.send(small(
                        json!({"id": request.id, "error": message}).to_string(),
                        slot,
                    ));
                    continue;
                }
                let mut subscription = self.sessions.subscribe(&session);
                let ack = json!({"id": request.id, "subscribed": session}).to_string();
                let _ = out.send(small(ack, slot));
                let (out, slots) = (out.clone(), slots.clone());
                subscriptions.spawn(async move {
                    while let Some(result) = subscription.recv().await {
                        // Waits while the client leaves its answers unread; meanwhile
                        // the subscription's own queue is bounded.
                        let slot = take(&slots, 1, limits.in_flight).await;
                        let push = json!({"session": session, "async": result}).to_string();
                        if out.send(small(push, slot)).is_err() {
                            break;
                        }
                    }
                });
                continue;
            }
            let (server, out, bytes) = (self.clone(), out.clone(), bytes.clone());
            requests.spawn(async move {
                let text = server.answer_caught(&mut request).await;
                drop(request);
                drop(held);
                let held = take(&bytes, text.len(), limits.pending_bytes).await;
                let _ = out.send(Queued {
                    text,
                    _slot: Some(slot),
                    _bytes: Some(held),
                });
            });
            // Reap answered requests so a long connection does not accumulate them.
            while requests.try_join_next().is_some() {}
        };
        if eof && !finish_on_eof {
            // The client is gone: cancel its requests; dropping their futures kills their
            // processes.
            requests.shutdown().await;
        } else {
            // Shutdown, or the end of stdin: answer what was asked.
            while requests.join_next().await.is_some() {}
        }
        subscriptions.shutdown().await;
        drop(out);
        let _ = writer_task.await;
    }
}

/// Writes answers as they come, batching those that are ready into one write. Gives up
/// when the client is gone, or when, after shutdown, it has not taken an answer within
/// [`SHUTDOWN_WRITE_GRACE`].
async fn write_answers<W: AsyncWrite + Unpin>(
    writer: W,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    shutdown: CancellationToken,
) {
    let mut writer = BufWriter::with_capacity(16 << 10, writer);
    let give_up = || async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_WRITE_GRACE).await;
    };
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(answer) = next {
            let written = tokio::select! {
                biased;
                written = async {
                    writer.write_all(answer.text.as_bytes()).await?;
                    writer.write_all(b"\n").await
                } => written.is_ok(),
                _ = give_up() => false,
            };
            if !written {
                return;
            }
            drop(answer);
            next = queue.try_recv().ok();
        }
        let flushed = tokio::select! {
            biased;
            flushed = writer.flush() => flushed.is_ok(),
            _ = give_up() => false,
        };
        if !flushed {
            return;
        }
    }
}

/// A unix socket bound for [`Server::serve_bound`]: created with mode 0600 in a private
/// directory and only then linked at its path, so that no other user can connect to it
/// at any moment, whatever the umask.
#[derive(Debug)]
pub struct BoundSocket {
    listener: std::os::unix::net::UnixListener,
    path: PathBuf,
    inode: u64,
}

/// `sun_path` holds 108 bytes with its terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

fn refused(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{}: {why}", path.display()))
}

/// The effective uid of this process.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

impl BoundSocket {
    /// Binds a socket at `path`. Only a stale socket of this user (one nothing listens
    /// on) is replaced; anything else at `path` (a live socket, a regular file, a
    /// symlink, a directory) is an error, and so is a directory that another user owns
    /// or may write to (without the sticky bit), since that user could swap the socket.
    ///
    /// # Errors
    ///
    /// The directory is missing or unsafe, the path is taken or too long, or binding
    /// fails; each message names the path.
    pub async fn bind(path: &Path) -> io::Result<BoundSocket> {
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            return Err(refused(
                path,
                format!("a socket path holds at most {MAX_SOCKET_PATH} bytes; this one has {len}"),
            ));
        }
        if path.file_name().is_none() {
            return Err(refused(path, "not a file name"));
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let dir = match std::fs::metadata(&parent) {
            Ok(meta) if meta.is_dir() => meta,
            Ok(_) => return Err(refused(&parent, "not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refused(
                    &parent,
                    "the directory does not exist (create it first)",
                ));
            }
            Err(e) => return Err(refused(&parent, e)),
        };
        let me = euid();
        if dir.uid() != me && dir.uid() != 0 {
            return Err(refused(
                &parent,
                format!(
                    "the directory belongs to uid {}, who could replace the socket",
                    dir.uid()
                ),
            ));
        }
        if dir.mode() & 0o022 != 0 && dir.mode() & 0o1000 == 0 {
            return Err(refused(
                &parent,
                "other users may write to this directory (and it has no sticky bit): they could replace the socket",
            ));
        }
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(refused(path, e)),
            Ok(meta) if !meta.file_type().is_socket() => {
                let kind = crate::config::file::kind_name(&meta);
                return Err(refused(
                    path,
                    format!("exists and is {kind}, not a socket (only a stale socket is replaced)"),
                ));
            }
            Ok(meta) if meta.uid() != me => {
                return Err(refused(
                    path,
                    format!("the socket belongs to uid {}; not replacing it", meta.uid()),
                ));
            }
            Ok(_) => match tokio::net::UnixStream::connect(path).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(|e| refused(path, e))?; // stale
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("a daemon already listens on {}", path.display()),
                    ));
                }
            },
        }
        // Bound where nobody else can reach it, made 0600, then linked into place: a
        // hard link fails if anything appeared at `path` meanwhile.
        let private = tempfile::Builder::new()
            .prefix(".hh")
            .rand_bytes(6)
            .tempdir_in(&parent)
            .map_err(|e| refused(&parent, format!("cannot create a private directory: {e}")))?;
        let staged = private.path().join("s");
        if staged.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(refused(
                path,
                format!(
                    "too long to bind safely: {} with a short file name fits in {MAX_SOCKET_PATH} bytes",
                    parent.display()
                ),
            ));
        }
        let listener = std::os::unix::net::UnixListener::bind(&staged)
            .map_err(|e| refused(path, format!("cannot bind: {e}")))?;
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| refused(path, e))?;
        std::fs::hard_link(&staged, path).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                refused(
                    path,
                    "something appeared at this path while the socket was bound",
                )
            } else {
                refused(path, e)
            }
        })?;
        drop(private); // removes the staging name and its directory
        let inode = std::fs::symlink_metadata(path)
            .map_err(|e| refused(path, e))?
            .ino();
        Ok(BoundSocket {
            listener,
            path: path.to_path_buf(),
            inode,
        })
    }

    /// Where it is bound.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the socket file, if it is still this one.
    fn remove(&self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
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
    /// (but root) are refused, as are connections beyond [`Limits::connections`]; when
    /// `accept` fails (out of descriptors), the loop pauses [`ACCEPT_BACKOFF`].
    ///
    /// # Errors
    ///
    /// The listener cannot be registered with the runtime.
    pub async fn serve_bound(self: Arc<Self>, socket: BoundSocket) -> io::Result<()> {
        socket.listener.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(socket.listener.try_clone()?)?;
        let reloader = self.clone().spawn_reloader();
        let slots = Arc::new(Semaphore::new(self.limits.connections));
        let me = euid();
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
            match stream.peer_cred() {
                Ok(peer) if peer.uid() == me || peer.uid() == 0 => {}
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
            }
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                refuse_connection(
                    &stream,
                    &format!("too many connections (at most {})", self.limits.connections),
                );
                continue;
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

    fn spawn_reloader(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(RELOAD_POLL);
            loop {
                tick.tick().await;
                let server = self.clone();
                // Rebuilding reads files: keep it off the async workers.
                let _ = tokio::task::spawn_blocking(move || server.reload_changed()).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostBuilder;
    use crate::policy::FunctionHook;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    fn frames(chunks: &[&[u8]], max: usize) -> Vec<Frame> {
        let mut decoder = RequestLines::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                out.push(frame);
            }
        }
        while let Some(frame) = decoder.decode_eof(&mut buf).unwrap() {
            out.push(frame);
        }
        out
    }

    fn line(text: &[u8]) -> Frame {
        Frame::Line(BytesMut::from(text))
    }

    #[test]
    fn lines_are_split_and_a_long_one_is_skipped_to_its_end() {
        assert_eq!(
            frames(&[b"ab\ncd", b"e\n\xff\xfe\nlast"], 8),
            [line(b"ab"), line(b"cde"), line(b"\xff\xfe"), line(b"last")]
        );
        // Too long before its newline arrives: reported at once, once; the rest of it,
        // in later chunks, is skipped; the next line is read as usual.
        assert_eq!(
            frames(&[b"0123456789", b"abcdef", b"gh\nok\n"], 8),
            [Frame::TooLong, line(b"ok")]
        );
        // Too long with its newline in the same chunk; exactly the cap is accepted.
        assert_eq!(
            frames(&[b"012345678\n01234567\n"], 8),
            [Frame::TooLong, line(b"01234567")]
        );
        // A long line at the end of input is not a request.
        assert_eq!(
            frames(&[b"ok\n0123456789"], 8),
            [line(b"ok"), Frame::TooLong]
        );
    }

    #[test]
    fn a_long_line_gives_its_buffer_back() {
        let mut decoder = RequestLines::new(4 << 20);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&vec![b'x'; 3 << 20]);
        buf.extend_from_slice(b"\n");
        assert!(matches!(
            decoder.decode(&mut buf).unwrap(),
            Some(Frame::Line(_))
        ));
        assert!(buf.capacity() <= READ_BUFFER, "{}", buf.capacity());
    }

    #[test]
    fn bad_lines_keep_their_id_when_they_have_one() {
        let bad = parse_request(br#"{"id": 3, "evnt": "Stop"}"#).unwrap_err();
        assert_eq!(bad.id, json!(3));
        assert!(
            bad.message.contains("unknown field `evnt`"),
            "{}",
            bad.message
        );
        for line in [
            &b"\xff\xfe"[..],
            b"{\"id\": 1, \"ev",
            b"[]",
            b"[1, \"Stop\"]",
            b"{\"id\": \"\xff\"}",
        ] {
            let bad = parse_request(line).unwrap_err();
            assert_eq!(bad.id, Value::Null);
            assert!(bad.message.starts_with("bad request: "));
        }
    }

    /// A server over a host with one function hook on PreToolUse that sleeps 200 ms and
    /// one on PostToolUse that panics while it is called; the factory itself panics for
    /// the project `/boom`.
    fn server(limits: Limits) -> Arc<Server> {
        let factory: HostFactory = Arc::new(|dir, sessions, _previous| {
            assert!(dir != Path::new("/boom"), "the factory panics for /boom");
            HostBuilder::new(dir)
                .function_hook(FunctionHook::new("PreToolUse", "slow", |_| async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(json!({"decision": "block", "reason": "slow"}))
                }))
                .function_hook(FunctionHook::new(
                    "PostToolUse",
                    "boom",
                    |_| -> std::future::Ready<Result<Value, String>> { panic!("boom") },
                ))
                .session_store(sessions)
                .build()
        });
        Server::with_limits(std::env::temp_dir(), factory, limits)
    }

    /// Sends `lines` on a fresh connection and reads `answers` answers.
    async fn exchange(server: &Arc<Server>, lines: &str, answers: usize) -> Vec<Value> {
        let (client, daemon) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(daemon);
        let served = tokio::spawn(server.clone().serve_connection(reader, writer, true));
        let (client_reader, mut client_writer) = tokio::io::split(client);
        client_writer.write_all(lines.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(client_reader).lines();
        let mut out = Vec::new();
        for _ in 0..answers {
            let line = lines.next_line().await.unwrap().expect("an answer");
            out.push(serde_json::from_str(&line).unwrap());
        }
        // Both halves: the daemon sees the end of input once the whole stream is gone.
        drop((lines, client_writer));
        served.await.unwrap();
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_is_the_answer_of_its_own_request_only() {
        let server = server(Limits::default());
        let lines = [
            json!({"id": "slow", "event": "PreToolUse", "input": {"tool_name": "Bash"}}),
            json!({"id": "factory", "event": "Stop", "project": "/boom"}),
            json!({"id": "hook", "event": "PostToolUse", "input": {"tool_name": "Bash"}}),
            json!({"id": "after", "event": "Stop"}),
        ]
        .iter()
        .map(|l| l.to_string() + "\n")
        .collect::<String>();
        let answers = exchange(&server, &lines, 4).await;
        let by_id = |id: &str| answers.iter().find(|a| a["id"] == id).unwrap().clone();
        assert_eq!(by_id("slow")["outcome"]["decision"], "deny", "{answers:?}");
        let factory = by_id("factory");
        assert!(
            factory["error"]
                .as_str()
                .unwrap()
                .contains("the request panicked (the factory panics for /boom)"),
            "{factory}"
        );
        // The hook's panic is either the hook's failure or the request's error; never
        // a lost answer.
        let hook = by_id("hook");
        assert!(
            hook["outcome"].is_object() || hook["error"].is_string(),
            "{hook}"
        );
        assert_eq!(by_id("after")["outcome"]["event"], "Stop");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_is_not_read() {
        let server = server(Limits {
            in_flight: 4,
            ..Limits::default()
        });
        let (client, daemon) = tokio::io::duplex(1024);
        let (reader, writer) = tokio::io::split(daemon);
        let served = tokio::spawn(server.clone().serve_connection(reader, writer, false));
        let (client_reader, mut client_writer) = tokio::io::split(client);
        let request = json!({"id": 1, "event": "Stop"}).to_string() + "\n";
        // Nothing is read: after the in-flight slots, the pipe's 1 KiB and the
        // daemon's read buffer, writing blocks.
        let mut sent = 0;
        while sent < 10_000 {
            let write = client_writer.write_all(request.as_bytes());
            if tokio::time::timeout(Duration::from_secs(2), write)
                .await
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        assert!(sent < 1000, "{sent} requests were read");
        // Reading frees the slots, and what was sent is answered.
        let mut lines = BufReader::new(client_reader).lines();
        for _ in 0..sent {
            let answer: Value =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            assert_eq!(answer["outcome"]["event"], "Stop");
        }
        drop((lines, client_writer));
        served.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_connection_takes_its_subscriptions_with_it() {
        let server = server(Limits::default());
        let lines: String = (0..50)
            .map(|n| json!({"id": n, "subscribe": format!("s{n}")}).to_string() + "\n")
            .collect();
        let answers = exchange(&server, &lines, 50).await;
        assert!(answers.iter().all(|a| a["subscribed"].is_string()));
        assert_eq!(server.sessions().subscriptions(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn naming_ever_new_projects_keeps_a_bounded_table() {
        let server = server(Limits {
            projects: 4,
            ..Limits::default()
        });
        let dirs = tempfile::tempdir().unwrap();
        let lines: String = (0..20)
            .map(|n| {
                let project = dirs.path().join(n.to_string());
                json!({"id": n, "event": "Stop", "project": project}).to_string() + "\n"
            })
            .collect();
        let relative =
            json!({"id": "rel", "event": "Stop", "project": "x/../y"}).to_string() + "\n";
        let answers = exchange(&server, &(lines + &relative), 21).await;
        assert!(answers.iter().filter(|a| a["outcome"].is_object()).count() == 20);
        let rel = answers.iter().find(|a| a["id"] == "rel").unwrap();
        assert!(
            rel["error"].as_str().unwrap().contains("absolute path"),
            "{rel}"
        );
        assert!(server.projects.lock().unwrap().len() <= 4);
    }

    /// A project built while a file is broken gets that file's last good version: the
    /// user's (shared) from the default project's host, its own from the host that was
    /// forgotten to bound the table. Checked to fail when new project hosts were built
    /// without a previous version (both guards were skipped).
    #[test]
    fn projects_built_while_a_file_is_broken_keep_its_last_good_version() {
        let root = tempfile::tempdir().unwrap();
        let user = root.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let guard = |id: &str| {
            format!(
                r#"{{"hooks": {{"Stop": [{{"hooks": [{{"type": "command", "id": "{id}", "command": "exit 2"}}]}}]}}}}"#
            )
        };
        std::fs::write(user.join("hooks.json"), guard("user-guard")).unwrap();
        let project_a = root.path().join("a");
        std::fs::create_dir_all(project_a.join(".hookhost")).unwrap();
        std::fs::write(project_a.join(".hookhost/hooks.json"), guard("a-guard")).unwrap();
        let u = user.clone();
        let factory: HostFactory = Arc::new(move |dir, sessions, previous| {
            crate::HostBuilder::new(dir)
                .user_dir(&u)
                .workspace_trust(crate::WorkspaceTrust::Explicit)
                .session_store(sessions)
                .reload_of(previous)
                .build()
        });
        let default = root.path().join("default");
        let server = Server::with_limits(
            default.clone(),
            factory,
            Limits {
                projects: 2,
                ..Limits::default()
            },
        );
        let running = |dir: &Path| -> Vec<String> {
            let project = server.project(dir);
            let host = project.lock().unwrap().host.clone();
            let mut ids: Vec<String> = host
                .policy()
                .hooks
                .iter()
                .filter(|h| h.skip.is_none())
                .map(|h| h.id.clone())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(running(&default), ["user-guard"]);
        assert_eq!(running(&project_a), ["a-guard", "user-guard"]);
        std::fs::write(user.join("hooks.json"), "{ broken").unwrap();
        std::fs::write(project_a.join(".hookhost/hooks.json"), "{ broken").unwrap();
        // A new project: the user's guard from the default project's host.
        let b = root.path().join("b");
        server.make_room_for(&b);
        assert_eq!(running(&b), ["user-guard"]);
        assert!(!server.projects.lock().unwrap().contains_key(&project_a));
        // `a`, forgotten to make room for `b`, is built again with both guards.
        server.make_room_for(&project_a);
        assert_eq!(running(&project_a), ["a-guard", "user-guard"]);
    }

    #[test]
    fn a_reload_that_panics_keeps_the_old_host_and_is_not_retried_until_files_change() {
        let root = tempfile::tempdir().unwrap();
        let user = root.path().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let file = user.join("hooks.json");
        let guard = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "id": "guard", "command": "exit 2"}]}]}}"#;
        std::fs::write(&file, guard).unwrap();
        let panics = Arc::new(AtomicBool::new(false));
        let builds = Arc::new(AtomicUsize::new(0));
        let (p, b, u) = (panics.clone(), builds.clone(), user.clone());
        let factory: HostFactory = Arc::new(move |dir, sessions, previous| {
            b.fetch_add(1, Ordering::SeqCst);
            assert!(!p.load(Ordering::SeqCst), "the new config cannot be built");
            crate::HostBuilder::new(dir)
                .user_dir(&u)
                .session_store(sessions)
                .reload_of(previous)
                .build()
        });
        let server = Server::new(root.path().to_path_buf(), factory);
        let project = server.project(root.path());
        assert_eq!(builds.load(Ordering::SeqCst), 1);

        panics.store(true, Ordering::SeqCst);
        std::fs::write(&file, guard.replace("exit 2", "exit 1")).unwrap();
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 2);
        let host = project.lock().unwrap().host.clone();
        assert_eq!(host.policy().hooks[0].id, "guard");
        assert!(
            host.policy()
                .notices
                .iter()
                .any(|n| n.contains("config reload failed")),
            "{:?}",
            host.policy().notices
        );
        // Not rebuilt on every poll while nothing changes.
        server.reload_changed();
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 2);

        panics.store(false, Ordering::SeqCst);
        std::fs::write(&file, guard).unwrap();
        server.reload_changed();
        assert_eq!(builds.load(Ordering::SeqCst), 3);
        let host = project.lock().unwrap().host.clone();
        assert!(
            host.policy().notices.is_empty(),
            "{:?}",
            host.policy().notices
        );
    }
}
