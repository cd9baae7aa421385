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

    /// The host of a project, built on first use. A first build that panics is not kept:
    /// its request is answered by a host without hooks that says so, and the next request
    /// builds again.
    fn project(&self, dir: &Path) -> Arc<Mutex<Project>> {
        let mut projects = self.projects.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(project) = projects.get(dir) {
            return project.clone();
        }
        let sessions: Arc<dyn SessionStore> = self.sessions.clone();
        let (host, keep) = match Host::build_guarded(|| (self.factory)(dir, sessions, None)) {
            Ok(host) => (host, true),
            Err(why) => (Host::unbuilt(dir, &why), false),
        };
        let fingerprint = host.fingerprint();
        let project = Arc::new(Mutex::new(Project {
            host,
            fingerprint,
            notice: None,
        }));
        if keep {
            projects.insert(dir.to_path_buf(), project.clone());
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
