//! The dispatch daemon: unless `HOOKHOST_DISPATCH_DAEMON=off`, `hookhost dispatch` hands
//! its stdin to a background process that runs the very same command line and stays
//! warm (compiled plugins in memory, pooled instances, no process start-up of its own),
//! and prints what that process answers.
//!
//! The daemon is keyed by everything a dispatch depends on besides its stdin: the
//! `hookhost` executable (path and file stamp), the working directory, the arguments and
//! the whole environment. Two callers share a daemon only when their dispatches would be
//! the same process, so command hooks see the caller's environment and directory. Every
//! request checks the files the config was built from (a `stat` each) and rebuilds it
//! when one changed, so it sees what a one-shot process would read; only the caches are
//! warm. With no daemon listening, the caller dispatches in-process and
//! starts one in the background for the next call, so the first call never waits.
//!
//! Protocol, one request per connection: the client writes the length of its stdin (u32,
//! little-endian) and its stdin, then waits; the daemon answers with the exit code
//! (1 byte), the lengths of stdout and stderr (u32 each), then stdout and stderr. A
//! caller that goes away before the answer (its agent killed it) closes the connection,
//! and the daemon cancels its dispatch: the hooks' processes are killed, as they would
//! be with the caller's process group.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures_util::FutureExt;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use hookhost::handlers::wasm::WasmRuntime;
use hookhost::{Host, SourcesFingerprint};

use super::dispatch::{DispatchArgs, Printed, dispatch_stdin};

/// Unset, empty or `auto`: use a dispatch daemon, starting one when none listens. `off`
/// (or any other value: a misspelt setting falls back to the plain process): dispatch
/// in-process.
const MODE_VAR: &str = "HOOKHOST_DISPATCH_DAEMON";
/// Seconds without a request after which a daemon exits (default 600).
const IDLE_VAR: &str = "HOOKHOST_DISPATCH_DAEMON_IDLE_SECS";
/// Set only in the environment of a daemon being started: the socket it serves on.
const SOCKET_VAR: &str = "HOOKHOST_DISPATCH_DAEMON_SOCKET";
const DEFAULT_IDLE: Duration = Duration::from_secs(600);
/// At most this many daemons per data directory; beyond, callers dispatch in-process
/// (an agent whose hook environment changes on every call must not fill the machine).
const MAX_DAEMONS: usize = 16;
/// A daemon's log is emptied when a new daemon starts with it beyond this size.
const LOG_CAP: u64 = 1 << 20;
/// `sun_path` holds 108 bytes; a longer socket path cannot be bound.
const MAX_SOCKET_PATH: usize = 100;
/// Variables that differ on every call by design (W3C trace context, which Claude Code
/// sets when it propagates traces): a daemon keyed by them would serve one call, so a
/// caller with one set dispatches in-process.
const PER_CALL_VARS: [&str; 2] = ["TRACEPARENT", "TRACESTATE"];
/// The largest stdin a daemon takes, the one-shot process's own cap; a caller with more
/// answers in-process with the same error (the daemon must not hold what any process of
/// the user claims to send).
const MAX_INPUT: usize = hookhost::dispatch::input::MAX_INPUT_BYTES;
/// Requests a daemon serves at once; beyond, it stops accepting until one is answered
/// (the callers wait in the socket's backlog).
const MAX_CONNECTIONS: usize = 256;
/// How long `accept` pauses after it failed (out of descriptors: `EMFILE`), instead of
/// retrying in a busy loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The files of a daemon that is gone (killed, or exited with an error) are removed by
/// the next daemon start in the same directory once they are this old: a starting
/// daemon's are fresh, and a failure's log stays readable for a while.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// Where the daemon of this process's command line lives.
struct Place {
    socket: PathBuf,
    lock: PathBuf,
    log: PathBuf,
    dir: PathBuf,
}

impl Place {
    /// The place for this process's executable, directory, arguments and environment;
    /// `None` when there can be none (no private directory for the socket, a socket path
    /// too long to bind).
    fn of_this_process() -> Option<Place> {
        let exe = std::env::current_exe().ok()?;
        let stamp = std::fs::metadata(&exe).ok()?;
        let cwd = std::env::current_dir().ok()?;
        let mut key = Sha256::new();
        let mut field = |bytes: &[u8]| {
            key.update((bytes.len() as u64).to_le_bytes());
            key.update(bytes);
        };
        field(b"hookhost dispatch daemon 1");
        field(exe.as_os_str().as_bytes());
        for n in [
            stamp.ino(),
            stamp.size(),
            stamp.mtime() as u64,
            stamp.mtime_nsec() as u64,
        ] {
            field(&n.to_le_bytes());
        }
        field(cwd.as_os_str().as_bytes());
        for arg in std::env::args_os().skip(1) {
            field(arg.as_bytes());
        }
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        env.sort();
        for (name, value) in &env {
            field(name.as_bytes());
            field(value.as_bytes());
        }
        let digest = key.finalize();
        let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let dir = hookhost::data_dir().join("daemons");
        let place = Place {
            socket: dir.join(format!("{name}.sock")),
            lock: dir.join(format!("{name}.lock")),
            log: dir.join(format!("{name}.log")),
            dir,
        };
        (place.socket.as_os_str().len() <= MAX_SOCKET_PATH && place.private_dir().is_ok())
            .then_some(place)
    }

    /// Creates the daemons' directory (mode 0700) and checks that only this user can
    /// reach it ([`hookhost::session::private_dir`]: not a symlink, this user's): a
    /// socket there is trusted with the caller's hook input and output. Unlike session
    /// state (whose files are each checked when opened), a directory found reachable by
    /// others is refused rather than narrowed: it may already hold their sockets. (One
    /// bound there before the user narrowed it is refused when connecting:
    /// [`served_by_this_user`].)
    fn private_dir(&self) -> Result<(), String> {
        if let Ok(meta) = std::fs::symlink_metadata(&self.dir)
            && meta.mode() & 0o077 != 0
        {
            return Err(format!(
                "{} is not private to this user",
                self.dir.display()
            ));
        }
        hookhost::session::private_dir(&self.dir).map_err(|e| e.to_string())
    }

    /// Starts a daemon for this command line in the background, unless one holds the
    /// lock already (it is starting) or the directory has its share of daemons.
    fn start_daemon(&self) {
        if !lock_is_free(&self.lock) || sweep_and_count_live(&self.dir) >= MAX_DAEMONS {
            return;
        }
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        // Appended to: a daemon started concurrently (which finds the lock taken and
        // exits) must not cut the log of the one that serves.
        let Ok(log) = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.log)
        else {
            return;
        };
        if log.metadata().is_ok_and(|m| m.len() > LOG_CAP) {
            let _ = log.set_len(0);
        }
        // Fresh: a concurrent sweep leaves the files of a starting daemon alone.
        let _ = log.set_modified(std::time::SystemTime::now());
        // The daemon must not hold the caller's pipes: an agent reads a hook's stdout
        // until every writer has closed it. It leaves the caller's session itself
        // (`setsid` refuses a process group leader, so no `process_group` here).
        let _ = Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(SOCKET_VAR, &self.socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
    }
}

/// Opens (creating) a daemon's lock file.
fn open_lock(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
}

/// Whether no daemon holds the lock at `path` (an exclusive `flock`, released when the
/// daemon exits, however it exits).
fn lock_is_free(path: &Path) -> bool {
    open_lock(path).is_ok_and(|file| file.try_lock().is_ok())
}

/// How many daemons of `dir` are alive (hold their lock); removes the files of dead
/// ones (lock free) older than [`STALE_AFTER`].
fn sweep_and_count_live(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut live = 0;
    for entry in entries.flatten() {
        let lock_path = entry.path();
        if lock_path.extension().is_none_or(|x| x != "lock") {
            continue;
        }
        let Ok(lock) = open_lock(&lock_path) else {
            continue;
        };
        if lock.try_lock().is_err() {
            live += 1;
            continue;
        }
        // Held by this process from here: a daemon that opened the file before it is
        // unlinked finds it gone once it gets the lock, and stands down.
        let files = ["sock", "log", "lock"].map(|x| lock_path.with_extension(x));
        let fresh = files.iter().any(|file| {
            std::fs::symlink_metadata(file)
                .and_then(|m| m.modified())
                .is_ok_and(|at| {
                    at.elapsed().is_ok_and(|age| age < STALE_AFTER) || at.elapsed().is_err()
                })
        });
        if !fresh {
            for file in &files {
                let _ = std::fs::remove_file(file);
            }
        }
    }
    live
}

/// Whether `lock`, locked by this process, is still the file at `path` (a sweep may
/// have removed it between open and lock).
fn still_at(lock: &File, path: &Path) -> bool {
    match (lock.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(now)) => held.ino() == now.ino() && held.dev() == now.dev(),
        _ => false,
    }
}

/// Whether this process's command line is a valid `hookhost dispatch` one: `--help`, a
/// bad flag or another command never starts a daemon (its "bad command line" would be
/// left behind in the daemon's files).
fn parsed_dispatch_args() -> Option<DispatchArgs> {
    match super::Cli::try_parse() {
        Ok(super::Cli {
            command: super::Command::Dispatch(args),
        }) => Some(args),
        _ => None,
    }
}

/// In a `hookhost dispatch` process, unless `HOOKHOST_DISPATCH_DAEMON` turns the daemon
/// off: the exit code after a daemon answered, or `None` to dispatch in-process (no
/// daemon listens yet; one is being started). Runs before anything else of the process,
/// so that a forwarded dispatch costs little more than the process start.
pub fn forward() -> Option<ExitCode> {
    if std::env::var_os(MODE_VAR).is_some_and(|mode| !mode.is_empty() && mode != "auto")
        || std::env::var_os(SOCKET_VAR).is_some()
        || PER_CALL_VARS
            .iter()
            .any(|var| std::env::var_os(var).is_some())
        || std::env::args_os()
            .nth(1)
            .is_none_or(|cmd| cmd != "dispatch")
    {
        return None;
    }
    let place = Place::of_this_process()?;
    let Ok(stream) = UnixStream::connect(&place.socket) else {
        // Cold path only: parsing here costs the forwarded calls nothing.
        if parsed_dispatch_args().is_some() {
            place.start_daemon();
        }
        return None;
    };
    if !served_by_this_user(&stream) {
        // Nothing was sent: this call dispatches in-process, as with no daemon at all.
        return None;
    }
    // Connected: the daemon reads stdin from here on, so a failure is reported rather
    // than dispatched again in-process (its hooks may have run).
    Some(match exchange(stream) {
        Ok(printed) => {
            let mut out = io::stdout().lock();
            let _ = out.write_all(printed.stdout.as_bytes());
            let _ = out.flush();
            let _ = io::stderr().write_all(printed.stderr.as_bytes());
            ExitCode::from(printed.code)
        }
        Err(e) => {
            eprint!(
                "{}",
                super::error_text(&format!(
                    "the dispatch daemon at {} did not answer: {e} \
                     ({MODE_VAR}=off dispatches in-process)",
                    place.socket.display()
                ))
            );
            ExitCode::from(super::ERROR_EXIT)
        }
    })
}

/// Whether the process listening on `stream`'s other end runs as this user (or root):
/// the caller's hook input goes to it and its answer decides the tool call, so a socket
/// that another user bound while the directory was open to them is not spoken to. One
/// `getsockopt` per forwarded call.
fn served_by_this_user(stream: &UnixStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut peer = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `peer` and `len` are valid for writes of the sizes given, and the
    // descriptor is open for the duration of the call (borrowed from `stream`).
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut peer).cast(),
            &raw mut len,
        )
    };
    let me = hookhost::config::file::effective_uid();
    rc == 0 && (peer.uid == me || peer.uid == 0)
}

/// Sends stdin, reads the answer; a stdin over [`MAX_INPUT`] is dispatched here instead.
fn exchange(mut stream: UnixStream) -> io::Result<Printed> {
    let mut input = Vec::new();
    // One byte past the cap is enough to know the input is too big: an agent's input of
    // gigabytes is never held whole by the client.
    io::stdin()
        .lock()
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(&mut input)?;
    if input.len() > MAX_INPUT {
        drop(stream);
        return Ok(dispatch_here(&input));
    }
    let len = u32::try_from(input.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "stdin over 4 GiB"))?;
    stream.write_all(&len.to_le_bytes())?;
    stream.write_all(&input)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    decode(&answer).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before a whole answer",
        )
    })
}

/// What `hookhost dispatch` prints for `input`, dispatched in this process.
fn dispatch_here(input: &[u8]) -> Printed {
    let Some(args) = parsed_dispatch_args() else {
        return Printed::error("not a `hookhost dispatch` command line");
    };
    match super::one_shot_runtime() {
        Ok(runtime) => runtime.block_on(dispatch_stdin(&args, input, |project| {
            args.sources.host_for(project)
        })),
        Err(message) => Printed::error(&message),
    }
}

fn encode(printed: &Printed) -> Vec<u8> {
    let (stdout, stderr) = (printed.stdout.as_bytes(), printed.stderr.as_bytes());
    let mut bytes = Vec::with_capacity(9 + stdout.len() + stderr.len());
    bytes.push(printed.code);
    bytes.extend_from_slice(&(stdout.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(stderr.len() as u32).to_le_bytes());
    bytes.extend_from_slice(stdout);
    bytes.extend_from_slice(stderr);
    bytes
}

/// The answer in `bytes`, if they are exactly one whole answer.
fn decode(bytes: &[u8]) -> Option<Printed> {
    let (&code, rest) = bytes.split_first()?;
    let (stdout_len, rest) = rest.split_first_chunk::<4>()?;
    let (stderr_len, rest) = rest.split_first_chunk::<4>()?;
    let stdout_len = u32::from_le_bytes(*stdout_len) as usize;
    if rest.len() != stdout_len.checked_add(u32::from_le_bytes(*stderr_len) as usize)? {
        return None;
    }
    let (stdout, stderr) = rest.split_at(stdout_len);
    Some(Printed {
        stdout: String::from_utf8_lossy(stdout).into_owned(),
        stderr: String::from_utf8_lossy(stderr).into_owned(),
        code,
    })
}

/// In a process started by [`Place::start_daemon`]: serves its command line until idle,
/// then exits. `None` in any other process.
pub fn serve_if_started() -> Option<ExitCode> {
    let socket = PathBuf::from(std::env::var_os(SOCKET_VAR)?);
    // SAFETY: the process is single-threaded here (nothing has started a thread yet), so
    // nothing reads the environment concurrently; hooks must see the caller's
    // environment, without this variable.
    unsafe { std::env::remove_var(SOCKET_VAR) };
    // Leave the caller's session and its descriptors: the agent may kill its process
    // group once `dispatch` returns, and reads hook pipes until every writer closed them.
    // SAFETY: setsid and close_range have no memory-safety preconditions, and no
    // descriptor above 2 is owned by anything in this process yet.
    unsafe {
        libc::setsid();
        #[cfg(target_os = "linux")]
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
    }
    Some(match serve(&socket) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("hookhost dispatch daemon: {message}");
            ExitCode::from(1)
        }
    })
}

fn serve(socket: &Path) -> Result<(), String> {
    let args = match super::Cli::try_parse() {
        Ok(super::Cli {
            command: super::Command::Dispatch(args),
        }) => args,
        Ok(_) => return Err("not a `hookhost dispatch` command line".into()),
        Err(e) => return Err(format!("bad command line: {e}")),
    };
    let lock_path = socket.with_extension("lock");
    let lock = open_lock(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    if lock.try_lock().is_err() || !still_at(&lock, &lock_path) {
        return Ok(()); // another daemon serves this command line, or a sweep removed it
    }
    let idle = std::env::var(IDLE_VAR)
        .ok()
        .and_then(|secs| secs.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_IDLE);
    let _ = std::fs::remove_file(socket); // left by a daemon that was killed
    let listener = std::os::unix::net::UnixListener::bind(socket)
        .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    let inode = std::fs::metadata(socket).map_err(|e| e.to_string())?.ino();
    eprintln!(
        "hookhost dispatch daemon {} on {}: serving until {}s idle",
        std::process::id(),
        socket.display(),
        idle.as_secs()
    );
    let runtime = super::serve::daemon_runtime()?;
    let daemon = Arc::new(Daemon {
        args,
        wasm: Arc::new(WasmRuntime::default()),
        host: Mutex::new(None),
    });
    let reason = runtime.block_on(accept_until_idle(listener, daemon, socket, inode, idle))?;
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
    const CHECK_EVERY: Duration = Duration::from_secs(1);
    let mut last_active = Instant::now();
    let mut last_check = Instant::now();
    let mut failing = false;
    let reason = loop {
        if requests.len() >= MAX_CONNECTIONS {
            // Full: callers wait in the backlog until a request is answered.
            let _ = tokio::time::timeout(CHECK_EVERY, requests.join_next()).await;
        } else {
            match tokio::time::timeout(CHECK_EVERY, listener.accept()).await {
                Ok(Ok((stream, _))) => {
                    failing = false;
                    requests.spawn(answer(stream, daemon.clone()));
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
        requests.spawn(answer(stream, daemon.clone()));
    }
    while requests.join_next().await.is_some() {}
    Ok(reason)
}

/// The daemon's command line and what its requests share: the wasm runtime, and the
/// host of the last request, reused while the files it was built from are unchanged.
struct Daemon {
    args: DispatchArgs,
    wasm: Arc<WasmRuntime>,
    host: Mutex<Option<Cached>>,
}

/// The host built last, and the state of its files then.
struct Cached {
    host: Host,
    built_from: SourcesFingerprint,
    /// Whether its files had settled: a file written within the last second could change
    /// again without its stamp showing it, so such a host is rebuilt next time (and is
    /// still the previous host of that rebuild).
    settled: bool,
}

impl Daemon {
    /// The host for a request about `project`: the cached one while it is of that project
    /// and its files are unchanged, else one built again with the cached one as its
    /// previous version, so that a file that stopped loading keeps its last good version
    /// in force (also across requests about other projects) and a rebuild of the same
    /// project that panics keeps the previous host serving, with a notice (see
    /// [`Host::rebuild`]).
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
        let host = match cached.as_ref().map(|c| c.host.clone()) {
            // The same project: a rebuild that panics keeps its previous host serving.
            Some(previous) if previous.policy().project_dir == project => {
                let mut failed = None;
                let host = previous.rebuild(|previous| {
                    match self.args.sources.host_reloading(
                        project,
                        self.wasm.clone(),
                        Some(previous),
                    ) {
                        Ok(host) => host,
                        Err(e) => {
                            failed = Some(e);
                            previous.clone()
                        }
                    }
                });
                if let Some(e) = failed {
                    return Err(e);
                }
                host
            }
            // Another project's host cannot serve this one, but it carries the last good
            // versions of the files both share (the user's, managed policy) and of this
            // project's files from before the switch. A first build that panics is not
            // cached: the request's panic is its answer, and the next request builds
            // again.
            previous => {
                self.args
                    .sources
                    .host_reloading(project, self.wasm.clone(), previous.as_ref())?
            }
        };
        let built_from = host.fingerprint();
        *cached = Some(Cached {
            host: host.clone(),
            settled: built_from.is_settled(),
            built_from,
        });
        Ok(host)
    }
}

/// One request: stdin in, what `hookhost dispatch` would print out.
async fn answer(mut stream: tokio::net::UnixStream, daemon: Arc<Daemon>) {
    let mut len = [0; 4];
    let mut input = Vec::new();
    let read = async {
        stream.read_exact(&mut len).await?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_INPUT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a request of {len} bytes (at most {MAX_INPUT})"),
            ));
        }
        // Grown as bytes arrive: a length is a claim, not an allocation.
        (&mut stream)
            .take(len as u64)
            .read_to_end(&mut input)
            .await?;
        if input.len() == len {
            Ok(())
        } else {
            Err(io::Error::from(io::ErrorKind::UnexpectedEof))
        }
    };
    if let Err(e) = read.await {
        tracing::warn!("dispatch daemon: reading a request: {e}");
        return;
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
        dispatch_stdin(&daemon.args, &input, |project| daemon.host(project)).await
    })
    .catch_unwind()
    .map(|caught| {
        caught.unwrap_or_else(|payload| {
            let message = hookhost::serve::panic_message(payload.as_ref());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_survive_the_wire() {
        let printed = Printed {
            stdout: "{\"decision\":\"deny\"}\n".into(),
            stderr: "blocked: rm -rf\n".into(),
            code: 2,
        };
        let decoded = decode(&encode(&printed)).expect("a whole answer");
        assert_eq!(
            (decoded.stdout, decoded.stderr, decoded.code),
            (printed.stdout, printed.stderr, printed.code)
        );
        let empty = decode(&encode(&Printed::error("x"))).expect("a whole answer");
        assert_eq!((empty.stdout.as_str(), empty.code), ("", 1));
    }

    #[test]
    fn a_cut_answer_is_not_an_answer() {
        let bytes = encode(&Printed {
            stdout: "0123456789".into(),
            stderr: "warning".into(),
            code: 0,
        });
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut} decoded");
        }
    }
}
