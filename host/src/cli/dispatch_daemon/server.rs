//! The daemon's side: serve this command line on its socket until idle, reusing the
//! host while the files it was built from are unchanged, one request per connection.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use hookhost::handlers::wasm::WasmRuntime;
use hookhost::serve::slots::{self, Slot, Slots};
use hookhost::{Host, SourcesFingerprint};

use super::super::dispatch::{DispatchArgs, Printed, dispatch_stdin};
use super::super::serve::DAEMON_STACK;
use super::place::{Place, still_at};
use super::wire::encode;
use super::{ACCEPT_BACKOFF, DEFAULT_IDLE, IDLE_VAR, MAX_CONNECTIONS, MAX_IDLE_SECS, MAX_INPUT};

/// The room made for a request's input before its bytes arrive (a usual input is 1–10 KB).
const READ_AHEAD: usize = 64 * 1024;

/// In a process started by [`super::place::Place::start_daemon`] (its stdin a listening
/// socket bound at the place of its own command line, its stdout the locked lock file):
/// serves its command line until idle, then exits. `None` in any other process.
pub fn serve_if_started() -> Option<ExitCode> {
    if !super::key::listening_stdin() {
        return None;
    }
    // Leave the caller's session and its descriptors: the agent may kill its process
    // group once `dispatch` returns, and reads hook pipes until every writer closed them.
    // SAFETY: setsid and close_range have no memory-safety preconditions, and no
    // descriptor above 2 is owned by anything in this process yet.
    unsafe {
        libc::setsid();
        #[cfg(target_os = "linux")]
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
    let (listener, lock) = match take_descriptors() {
        Ok(taken) => taken,
        Err(e) => {
            eprintln!("hookhost dispatch daemon: {e}");
            return Some(ExitCode::from(1));
        }
    };
    let socket = match listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf))
    {
        Some(socket) => socket,
        None => {
            eprintln!("hookhost dispatch daemon: its stdin is a socket without a path");
            return Some(ExitCode::from(1));
        }
    };
    // The socket must be this command line's: a listening socket from anywhere else is
    // not a reason to serve.
    if Place::of_this_process().is_none_or(|place| place.socket != socket) {
        eprintln!(
            "hookhost dispatch daemon: {} is not the socket of this command line",
            socket.display()
        );
        return Some(ExitCode::from(1));
    }
    Some(match serve(listener, lock, &socket) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("hookhost dispatch daemon: {message}");
            ExitCode::from(1)
        }
    })
}

/// The listening socket (stdin) and the lock (stdout), moved to descriptors of their own;
/// stdin and stdout become `/dev/null` (nothing the daemon runs may write into its lock).
fn take_descriptors() -> io::Result<(std::os::unix::net::UnixListener, std::fs::File)> {
    use std::os::fd::AsFd;
    let listener = io::stdin().as_fd().try_clone_to_owned()?;
    let lock = io::stdout().as_fd().try_clone_to_owned()?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for fd in [0, 1] {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto 0 and 1, whose previous descriptions are kept by the clones
        // above; no Rust object owns descriptors 0 and 1.
        if unsafe { libc::dup2(null.as_raw_fd(), fd) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((listener.into(), lock.into()))
}

fn serve(
    listener: std::os::unix::net::UnixListener,
    lock: std::fs::File,
    socket: &Path,
) -> Result<(), String> {
    let args = match super::super::Cli::try_parse() {
        Ok(super::super::Cli {
            command: super::super::Command::Dispatch(args),
        }) => args,
        Ok(_) => return Err("not a `hookhost dispatch` command line".into()),
        Err(e) => return Err(format!("bad command line: {e}")),
    };
    let lock_path = socket.with_extension("lock");
    // Locked already by the caller that started this daemon (the same open file, so this
    // succeeds); a lock file that is not the one at the path is not this daemon's.
    if lock.try_lock().is_err() || !still_at(&lock, &lock_path) {
        return Err(format!("{} is not this daemon's lock", lock_path.display()));
    }
    let idle = match hookhost::config::env::number(IDLE_VAR, 1, MAX_IDLE_SECS) {
        Ok(secs) => secs.map_or(DEFAULT_IDLE, Duration::from_secs),
        Err(notice) => {
            eprintln!("hookhost dispatch daemon: {notice}");
            DEFAULT_IDLE
        }
    };
    let inode = std::fs::metadata(socket).map_err(|e| e.to_string())?.ino();
    eprintln!(
        "hookhost dispatch daemon {} on {}: serving until {}s idle",
        std::process::id(),
        socket.display(),
        idle.as_secs()
    );
    let (read_idle, notice) = slots::idle_timeout();
    if let Some(notice) = notice {
        eprintln!("hookhost dispatch daemon: {notice}");
    }
    hookhost::telemetry::warn_on_failures();
    // One thread: the daemon answers one agent's events, mostly one at a time, and a
    // request that hops between workers pays a wake-up per hop (measured: 0.89× the round
    // trip and 0.87× the CPU of a two-worker runtime). Requests still run concurrently:
    // hooks' processes and sockets are I/O this thread multiplexes, wasm hooks yield at
    // every epoch tick, and file I/O of the guests runs on the blocking pool. The thread
    // has the daemon's stack ([`DAEMON_STACK`], as `serve`'s workers), whatever the
    // `ulimit -s` of the caller that started the daemon gave the main thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .thread_stack_size(DAEMON_STACK)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let daemon = Arc::new(Daemon {
        args,
        wasm: Arc::new(WasmRuntime::default()),
        host: Mutex::new(None),
        read_idle,
    });
    let reason = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("hookhost-daemon".into())
            .stack_size(DAEMON_STACK)
            .spawn_scoped(scope, || {
                runtime.block_on(accept_until_idle(listener, daemon, socket, inode, idle))
            })
            .map_err(|e| format!("cannot start the daemon's thread: {e}"))?
            .join()
            .map_err(|_| "the daemon's thread panicked".to_string())
    })?;
    // Not joined: a blocking thread stuck on a FIFO must not keep the daemon alive.
    runtime.shutdown_background();
    hookhost::telemetry::flush_all(hookhost::telemetry::EXIT_FLUSH);
    // The lines this daemon wrote end signed (docs/book/src/audit-chain.md).
    for problem in hookhost::audit::checkpoint_written() {
        eprintln!("hookhost dispatch daemon: audit: {problem}");
    }
    let reason = reason?;
    eprintln!("hookhost dispatch daemon {}: {reason}", std::process::id());
    // A clean exit leaves nothing behind: the socket (when it is still this daemon's),
    // the log, and last the lock, removed while held.
    if std::fs::symlink_metadata(socket).is_ok_and(|m| m.ino() == inode) {
        let _ = std::fs::remove_file(socket);
    }
    let _ = std::fs::remove_file(socket.with_extension("log"));
    let _ = std::fs::remove_file(&lock_path);
    drop(lock);
    Ok(())
}

/// Answers connections until the daemon has been idle for `idle` or its socket file was
/// removed or replaced; then stops listening, answers what was already queued, waits for
/// the requests in flight and returns why it stopped.
async fn accept_until_idle(
    listener: std::os::unix::net::UnixListener,
    daemon: Arc<Daemon>,
    socket: &Path,
    inode: u64,
    idle: Duration,
) -> Result<&'static str, String> {
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let listener = tokio::net::UnixListener::from_std(listener).map_err(|e| e.to_string())?;
    let mut requests = tokio::task::JoinSet::new();
    // The cap follows the descriptor limit, and one client process holds a share of it.
    let slots = Slots::new(slots::connection_cap(MAX_CONNECTIONS));
    let admit = |stream, requests: &mut tokio::task::JoinSet<()>| {
        let Some((stream, pid)) = from_this_user(stream) else {
            return;
        };
        match slots.take(pid) {
            Ok(slot) => {
                requests.spawn(answer(stream, daemon.clone(), slot));
            }
            Err(refusal) => {
                tracing::warn!("dispatch daemon: refused a connection: {refusal}");
                let printed = Printed::error(&format!("hookhost dispatch daemon: {refusal}"));
                let _ = stream.try_write(&encode(&printed));
            }
        }
    };
    const CHECK_EVERY: Duration = Duration::from_secs(1);
    let mut last_active = Instant::now();
    let mut last_check = Instant::now();
    let mut failing = false;
    let reason = loop {
        if slots.held() >= slots.cap() {
            // Full: callers wait in the backlog until a request is answered (an idle
            // connection gives its slot back after the idle timeout).
            let _ = tokio::time::timeout(CHECK_EVERY, requests.join_next()).await;
        } else {
            match tokio::time::timeout(CHECK_EVERY, listener.accept()).await {
                Ok(Ok((stream, _))) => {
                    failing = false;
                    admit(stream, &mut requests);
                }
                Ok(Err(e)) => {
                    if !failing {
                        tracing::warn!(
                            "dispatch daemon: accept: {e}; retrying every {ACCEPT_BACKOFF:?}"
                        );
                    }
                    failing = true;
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                Err(_elapsed) => {}
            }
        }
        while requests.try_join_next().is_some() {
            last_active = Instant::now();
        }
        if !requests.is_empty() {
            last_active = Instant::now();
        }
        // Under load, not on every request.
        if last_check.elapsed() < CHECK_EVERY {
            continue;
        }
        last_check = Instant::now();
        if std::fs::metadata(socket).map_or(true, |m| m.ino() != inode) {
            break "its socket was removed";
        }
        if last_active.elapsed() >= idle {
            // Unlink first: from now on a caller finds no daemon and dispatches itself.
            let _ = std::fs::remove_file(socket);
            break "idle";
        }
    };
    // Connections queued before the socket went away are answered, not dropped.
    while let Ok(Ok((stream, _))) =
        tokio::time::timeout(Duration::from_millis(10), listener.accept()).await
    {
        admit(stream, &mut requests);
    }
    while requests.join_next().await.is_some() {}
    Ok(reason)
}

/// `stream` and its peer's pid when its peer runs as this daemon's effective uid
/// (`SO_PEERCRED`); else
/// `None`, the connection closed unanswered and the refusal logged. Checked on every
/// connection, whatever the socket's or its directory's mode: hook input and the answer
/// that decides a tool call are this user's alone.
fn from_this_user(stream: tokio::net::UnixStream) -> Option<(tokio::net::UnixStream, Option<i32>)> {
    let me = hookhost::config::file::effective_uid();
    match stream.peer_cred() {
        Ok(peer) if peer.uid() == me => Some((stream, peer.pid())),
        Ok(peer) => {
            tracing::warn!(
                "dispatch daemon: refused a connection from uid {} (pid {}): it serves only \
                 uid {me}",
                peer.uid(),
                peer.pid().map_or_else(|| "?".into(), |p| p.to_string())
            );
            None
        }
        Err(e) => {
            tracing::warn!("dispatch daemon: refused a connection: its peer is unknown ({e})");
            None
        }
    }
}

/// The daemon's command line and what its requests share: the wasm runtime, and the
/// host of the last request, reused while the files it was built from are unchanged.
struct Daemon {
    args: DispatchArgs,
    wasm: Arc<WasmRuntime>,
    host: Mutex<Option<Cached>>,
    /// How long a connection may take to send its request
    /// ([`hookhost::serve::slots::idle_timeout`]): one that sends nothing gives its slot
    /// back then.
    read_idle: Duration,
}

/// The host built last, and the state of its files then.
struct Cached {
    host: Host,
    built_from: SourcesFingerprint,
    /// Whether its files had settled ([`hookhost::gate::Reloaded::dirty`]): a file changed
    /// while it was built, or written so recently that it could change again without its
    /// stamp showing it, makes the host rebuilt next time (it is still the previous host
    /// of that rebuild).
    settled: bool,
}

impl Daemon {
    /// The host for a request about `project`: the cached one while it is of that project
    /// and its files are unchanged (and were not changing while it was built), else one
    /// built through the reload gate ([`hookhost::gate::reload`]) with the cached one as
    /// its previous version, so that a file that fails a check keeps its last good version
    /// in force (also across requests about other projects) and a rebuild of the same
    /// project that panics keeps the previous host serving, with a notice. A first build
    /// that panics is not cached: the request's panic is its answer, and the next request
    /// builds again.
    fn host(&self, project: &Path) -> Result<Host, String> {
        let mut cached = self.host.lock().unwrap_or_else(|e| e.into_inner());
        // The project can differ between requests (it may come from the input's `cwd`).
        if let Some(c) = cached.as_ref()
            && c.settled
            && c.host.policy().project_dir == project
            && c.host.fingerprint() == c.built_from
        {
            return Ok(c.host.clone());
        }
        let previous = cached.as_ref().map(|c| c.host.clone());
        let reloaded = hookhost::gate::reload(project, previous.as_ref(), &self.wasm, |gate| {
            self.args
                .sources
                .host_built(project, self.wasm.clone(), |builder| gate.apply(builder))
        })?;
        *cached = Some(Cached {
            host: reloaded.host.clone(),
            settled: !reloaded.dirty,
            built_from: reloaded.fingerprint,
        });
        Ok(reloaded.host)
    }
}

/// One request: stdin in, what `hookhost dispatch` would print out. `slot` is held until
/// the answer is written; a request not received within the idle timeout is dropped.
async fn answer(mut stream: tokio::net::UnixStream, daemon: Arc<Daemon>, slot: Slot) {
    let _slot = slot;
    let mut head = [0; 8];
    let mut input = Vec::new();
    let mut trace = Vec::new();
    let read = async {
        stream.read_exact(&mut head).await?;
        let [a, b, c, d, e, f, g, h] = head;
        let len = u32::from_le_bytes([a, b, c, d]) as usize;
        let trace_len = u32::from_le_bytes([e, f, g, h]) as usize;
        if len > MAX_INPUT || trace_len > super::key::MAX_TRACE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a request of {len} bytes (at most {MAX_INPUT}) with {trace_len} bytes of \
                     trace context (at most {})",
                    super::key::MAX_TRACE
                ),
            ));
        }
        // A length is a claim, not an allocation: room for a usual input at once (one
        // read instead of a read per doubling), grown past it as bytes arrive.
        input.reserve_exact(len.min(READ_AHEAD));
        (&mut stream)
            .take(len as u64)
            .read_to_end(&mut input)
            .await?;
        (&mut stream)
            .take(trace_len as u64)
            .read_to_end(&mut trace)
            .await?;
        if input.len() == len && trace.len() == trace_len {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::UnexpectedEof))
        }
    };
    match tokio::time::timeout(daemon.read_idle, read).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!("dispatch daemon: reading a request: {e}");
            return;
        }
        Err(_) => {
            tracing::warn!(
                "dispatch daemon: a connection sent no request within {} s; closed",
                daemon.read_idle.as_secs_f64()
            );
            return;
        }
    }
    let (mut reader, mut writer) = stream.split();
    // A panic answers this request with an error (exit 1), as a host error would be;
    // the daemon serves on.
    let dispatched = AssertUnwindSafe(async {
        #[cfg(debug_assertions)]
        if input
            .windows(hookhost::serve::DEBUG_PANIC_EVENT.len())
            .any(|w| w == hookhost::serve::DEBUG_PANIC_EVENT.as_bytes())
        {
            panic!(
                "a request for `{}` (debug builds only)",
                hookhost::serve::DEBUG_PANIC_EVENT
            );
        }
        let trace = trace_context(&trace);
        dispatch_stdin(&daemon.args, &input, trace.as_ref(), |project| {
            daemon.host(project)
        })
        .await
    })
    .catch_unwind()
    .map(|caught| {
        caught.unwrap_or_else(|payload| {
            let message = hookhost::text::panic_message(payload.as_ref());
            tracing::error!("dispatch daemon: a request panicked: {message}");
            Printed::error(&format!(
                "internal error: the dispatch panicked ({message}); the daemon serves on"
            ))
        })
    });
    // The caller sends nothing more: anything readable is the end of the connection.
    let printed = tokio::select! {
        printed = dispatched => printed,
        _ = reader.read_u8() => {
            tracing::debug!("dispatch daemon: the caller went away; dispatch cancelled");
            return;
        }
    };
    if let Err(e) = writer.write_all(&encode(&printed)).await {
        // The caller went away just now; nothing to print to.
        tracing::debug!("dispatch daemon: writing an answer: {e}");
    }
}

/// The caller's trace context as its request carried it (`TRACEPARENT`, a newline,
/// `TRACESTATE`: [`super::key::trace_context`]); `None` without one.
fn trace_context(bytes: &[u8]) -> Option<hookhost::telemetry::TraceContext> {
    let text = std::str::from_utf8(bytes).ok()?;
    let (parent, state) = text.split_once('\n').unwrap_or((text, ""));
    (!parent.is_empty()).then(|| hookhost::telemetry::TraceContext {
        traceparent: parent.to_string(),
        tracestate: (!state.is_empty()).then(|| state.to_string()),
    })
}
