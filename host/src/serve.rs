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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::outcome::Outcome;
use crate::session::{AsyncResult, MemoryStore, SessionStore};
use crate::{Host, SourcesFingerprint};

/// Longest request line accepted: 16 MiB.
pub const MAX_LINE: usize = 16 << 20;
/// How often config sources are checked for changes.
pub const RELOAD_POLL: Duration = Duration::from_millis(250);

/// Builds the host of a project, with the daemon's session store.
pub type HostFactory = Arc<dyn Fn(&Path, Arc<dyn SessionStore>) -> Host + Send + Sync>;

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
    subscribers: Mutex<HashMap<String, Vec<mpsc::UnboundedSender<AsyncResult>>>>,
}

impl SubscribingStore {
    fn subscribe(&self, session: &str) -> mpsc::UnboundedReceiver<AsyncResult> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        subscribers
            .entry(session.to_string())
            .or_default()
            .push(sender);
        // Anything that finished before the subscription is delivered now.
        for result in self.inner.take_async(session) {
            for s in &subscribers[session] {
                let _ = s.send(result.clone());
            }
        }
        receiver
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
        let mut subscribers = self.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(list) = subscribers.get_mut(session) {
            list.retain(|s| !s.is_closed());
            if !list.is_empty() {
                for s in list.iter() {
                    let _ = s.send(result.clone());
                }
                return;
            }
        }
        drop(subscribers);
        self.inner.push_async(session, result);
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
    sessions: Arc<SubscribingStore>,
    shutdown: CancellationToken,
    connections: TaskTracker,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("default_project", &self.default_project)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    #[serde(default)]
    id: Value,
    #[serde(default)]
    event: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    project: Option<PathBuf>,
    #[serde(default)]
    subscribe: Option<String>,
}

impl Server {
    /// A server whose requests without `project` go to `default_project`.
    pub fn new(default_project: PathBuf, factory: HostFactory) -> Arc<Server> {
        Arc::new(Server {
            factory,
            default_project,
            projects: Mutex::new(HashMap::new()),
            sessions: Arc::new(SubscribingStore::default()),
            shutdown: CancellationToken::new(),
            connections: TaskTracker::new(),
        })
    }

    /// Asks the server to stop: no new connections or requests; in-flight ones finish.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The host of a project, built on first use.
    fn project(&self, dir: &Path) -> Arc<Mutex<Project>> {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        projects
            .entry(dir.to_path_buf())
            .or_insert_with(|| {
                let host = (self.factory)(dir, self.sessions.clone());
                let fingerprint = host.fingerprint();
                Arc::new(Mutex::new(Project {
                    host,
                    fingerprint,
                    notice: None,
                }))
            })
            .clone()
    }

    /// Rebuilds the hosts whose config files changed.
    pub fn reload_changed(&self) {
        let projects: Vec<(PathBuf, Arc<Mutex<Project>>)> = self
            .projects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (dir, project) in projects {
            let (old, now) = {
                let project = project.lock().unwrap_or_else(|e| e.into_inner());
                (project.fingerprint.clone(), project.host.fingerprint())
            };
            if now == old {
                continue;
            }
            let host = (self.factory)(&dir, self.sessions.clone());
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

    /// Answers one request line, parsed as `request`; returns the answer line.
    async fn answer(&self, request: Result<Request, serde_json::Error>, line: &str) -> String {
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                // Salvage the id of a request that is JSON but not a valid request.
                let id = serde_json::from_str::<Value>(line)
                    .ok()
                    .and_then(|v| v.get("id").cloned())
                    .unwrap_or(Value::Null);
                return json!({"id": id, "error": format!("bad request: {e}")}).to_string();
            }
        };
        let Some(event) = request.event else {
            return json!({"id": request.id, "error": "bad request: `event` is required"})
                .to_string();
        };
        let dir = request
            .project
            .unwrap_or_else(|| self.default_project.clone());
        let project = self.project(&dir);
        let (host, notice) = {
            let mut project = project.lock().unwrap_or_else(|e| e.into_inner());
            (project.host.clone(), project.notice.take())
        };
        match host
            .dispatch(&event, request.input.unwrap_or_else(|| json!({})))
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

    /// Serves one connection until it closes or the server shuts down. With
    /// `finish_on_eof`, the end of input waits for in-flight requests (stdio); otherwise it
    /// cancels them (a socket client that went away).
    pub async fn serve_connection<R, W>(self: Arc<Self>, reader: R, writer: W, finish_on_eof: bool)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, mut outgoing) = mpsc::unbounded_channel::<String>();
        let writer_task = tokio::spawn(async move {
            let mut writer = writer;
            while let Some(mut line) = outgoing.recv().await {
                line.push('\n');
                if writer.write_all(line.as_bytes()).await.is_err() || writer.flush().await.is_err()
                {
                    break;
                }
            }
        });
        let mut lines = FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE));
        let mut requests = JoinSet::new();
        let mut subscriptions = JoinSet::new();
        let eof = loop {
            let next = tokio::select! {
                _ = self.shutdown.cancelled() => break false,
                next = lines.next() => next,
                // Reap answered requests so a long connection does not accumulate them.
                Some(_) = requests.join_next(), if !requests.is_empty() => continue,
            };
            match next {
                None | Some(Err(LinesCodecError::Io(_))) => break true,
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                    let error = format!("bad request: line longer than {MAX_LINE} bytes");
                    let _ = out.send(json!({"id": null, "error": error}).to_string());
                }
                Some(Ok(line)) if line.trim().is_empty() => {}
                Some(Ok(line)) => {
                    let request = serde_json::from_str::<Request>(&line);
                    if let Ok(Request {
                        id,
                        subscribe: Some(session),
                        ..
                    }) = request
                    {
                        let mut results = self.sessions.subscribe(&session);
                        let _ = out.send(json!({"id": id, "subscribed": session}).to_string());
                        let out = out.clone();
                        subscriptions.spawn(async move {
                            while let Some(result) = results.recv().await {
                                let push = json!({"session": session, "async": result}).to_string();
                                if out.send(push).is_err() {
                                    break;
                                }
                            }
                        });
                        continue;
                    }
                    let (server, out) = (self.clone(), out.clone());
                    requests.spawn(async move {
                        let _ = out.send(server.answer(request, &line).await);
                    });
                }
            }
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

impl Server {
    /// Accepts connections on a unix socket until shutdown, then waits for every
    /// connection to finish its in-flight requests. The socket file is created with mode
    /// 0600 and removed at the end.
    ///
    /// # Errors
    ///
    /// The socket cannot be bound (a live daemon already listens there, or the path is
    /// not writable).
    pub async fn serve_unix(self: Arc<Self>, path: &Path) -> std::io::Result<()> {
        if path.exists() {
            if tokio::net::UnixStream::connect(path).await.is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("a daemon already listens on {}", path.display()),
                ));
            }
            std::fs::remove_file(path)?; // a stale socket of a daemon that died
        }
        let listener = tokio::net::UnixListener::bind(path)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        }
        let reloader = self.clone().spawn_reloader();
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let (reader, writer) = stream.into_split();
                    self.connections.spawn(self.clone().serve_connection(reader, writer, false));
                }
            }
        }
        drop(listener);
        let _ = std::fs::remove_file(path);
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
