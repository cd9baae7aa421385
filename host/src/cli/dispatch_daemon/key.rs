//! What every caller of a dispatch daemon keeps, once, for both programs that call one:
//! `hookhost dispatch` (this directory's `client.rs` and `place.rs`) and the small client
//! `hookhost-dispatch` (`src/dispatch_client.rs`, which compiles this very file as a
//! module of its own). Here are when a call has no daemon, where the daemon of a call
//! lives (its key), that it runs as this user, the input's bound and the answer on the
//! wire, so that both programs find the same daemon for the same call and read its
//! answer alike.
//!
//! It names nothing of either program but `super::env` (`config/env.rs`, which both
//! compile: every read of the environment is that file's) and `super::file::effective_uid`,
//! and otherwise only `std`, `libc` and `sha2`: nothing that would make the small client
//! large.

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The largest stdin a daemon takes, the one-shot process's own cap
/// (`hookhost::dispatch::input::MAX_INPUT_BYTES`, checked equal where `hookhost` compiles
/// this file): a caller with more has it answered in-process, with the same error (the
/// daemon must not hold what any process of the user claims to send).
pub const MAX_INPUT: usize = 64 << 20;
/// `sun_path` holds 108 bytes; a longer socket path cannot be bound.
pub const MAX_SOCKET_PATH: usize = 100;
/// Variables that differ on every call by design (W3C trace context, which Claude Code
/// sets when it propagates traces): a daemon keyed by them would serve one call, so they
/// are left out of the key ([`daemon_of`]) and sent with each request instead
/// ([`exchange`]; the daemon parents that request's span by them, and starts without
/// them). A caller with `CLAUDE_ENV_FILE` dispatches in-process (one file per session and
/// hook: the process that runs the hooks appends to it what they exported, and a daemon
/// would serve one call).
pub const PER_CALL_VARS: [&str; 2] = ["TRACEPARENT", "TRACESTATE"];
/// The most bytes of trace context a request carries (each variable is cut to
/// [`MAX_TRACE_VALUE`]).
#[allow(dead_code)] // `hookhost`'s daemon reads it; `hookhost-dispatch` only sends.
pub const MAX_TRACE: usize = 2 * MAX_TRACE_VALUE + 1;
/// The longest `TRACEPARENT` or `TRACESTATE` forwarded (W3C: 55 and 512 characters); a
/// longer one is not forwarded (nor used in-process).
pub const MAX_TRACE_VALUE: usize = 4096;
/// The events on which Claude Code ignores `onFailure: "block"` (a block there would trap
/// the agent in a loop): where a `--format claude` call that nothing could dispatch is a
/// host error (exit 1), not a block. `hookhost` checks this list against its event table
/// (`EventSpec::honours_on_failure`; the test `the_small_client_knows_the_loop_events`),
/// and `hookhost-dispatch` reads it when it cannot run `hookhost` at all.
#[allow(dead_code)] // `hookhost` only checks it (a test); `hookhost-dispatch` reads it.
pub const ON_FAILURE_IGNORED_EVENTS: [&str; 4] =
    ["Stop", "SubagentStop", "TaskCompleted", "TeammateIdle"];

/// Other agents' events (`--format AGENT`, the agent's own event name) on which a call
/// that nothing could dispatch is blocked (exit 2, which Codex, Gemini CLI, Copilot CLI
/// and Cursor read as a block; the OpenCode plugin blocks on any exit but 0): those the
/// adapter maps to an event that honours `onFailure`. Elsewhere it is the host error
/// (exit 1), which those agents read as "go ahead". `hookhost` checks this list against
/// the adapters' table (the test `the_small_client_knows_the_agents_guarding_events`);
/// `hookhost-dispatch` reads it when it cannot run `hookhost` at all.
#[allow(dead_code)] // `hookhost` only checks it (a test); `hookhost-dispatch` reads it.
pub const AGENT_BLOCKING_EVENTS: &[(&str, &str)] = &[
    ("codex", "UserPromptSubmit"),
    ("codex", "PreToolUse"),
    ("codex", "PermissionRequest"),
    ("codex", "PostToolUse"),
    ("codex", "PreCompact"),
    ("gemini", "BeforeAgent"),
    ("gemini", "BeforeTool"),
    ("gemini", "AfterTool"),
    ("gemini", "PreCompress"),
    ("copilot", "userPromptSubmitted"),
    ("copilot", "preToolUse"),
    ("copilot", "postToolUse"),
    ("cursor", "beforeShellExecution"),
    ("cursor", "beforeMCPExecution"),
    ("cursor", "beforeReadFile"),
    ("cursor", "afterFileEdit"),
    ("cursor", "beforeSubmitPrompt"),
    ("opencode", "tool.execute.before"),
    ("opencode", "tool.execute.after"),
];

/// Whether this call is dispatched without a daemon whatever its command line:
/// `HOOKHOST_DISPATCH_DAEMON` turns daemons off, `CLAUDE_ENV_FILE` is set (even to a
/// value `config::env` refuses), or stdin is a listening socket (a daemon being started,
/// [`listening_stdin`], which never forwards). Trace context ([`PER_CALL_VARS`]) is
/// forwarded with the request instead.
pub fn in_process_only() -> bool {
    super::env::daemon_off()
        || !matches!(super::env::path_var("CLAUDE_ENV_FILE", &[]), Ok(None))
        || listening_stdin()
}

/// Whether this process's stdin is a listening socket: what only a caller starting a
/// daemon gives a process (an agent gives hooks a pipe or a connected socket pair). One
/// `getsockopt`.
pub fn listening_stdin() -> bool {
    let mut listening: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `listening` and `len` are valid for writes of the sizes given; descriptor 0
    // is only queried.
    let rc = unsafe {
        libc::getsockopt(
            0,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&raw mut listening).cast(),
            &raw mut len,
        )
    };
    rc == 0 && listening != 0
}

/// Where the daemon of the `hookhost` executable `exe` run with `args` (its arguments
/// after the program, `dispatch` first) in this directory and environment lives: the
/// daemons' directory and the name of its files (without extension). The key is
/// everything a dispatch depends on besides its stdin: the executable (its path as the
/// kernel names a running program, and its file stamp), the working directory, the
/// password database's home of the user, the arguments and the whole environment
/// (`config::env::snapshot`). `None` when there can
/// be none (the executable or the directory cannot be read, a socket path too long to
/// bind). Creates nothing.
pub fn daemon_of<'a>(
    exe: &Path,
    args: impl IntoIterator<Item = &'a OsStr>,
) -> Option<(PathBuf, String)> {
    let stamp = std::fs::metadata(exe).ok()?;
    let cwd = std::env::current_dir().ok()?;
    let mut key = Sha256::new();
    let mut field = |bytes: &[u8]| {
        key.update((bytes.len() as u64).to_le_bytes());
        key.update(bytes);
    };
    field(b"hookhost dispatch daemon 2");
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
    // Read once per process, so a daemon's stays as it started: a changed entry (or a
    // source that answers otherwise now) is another daemon's.
    field(
        super::env::password_home()
            .as_deref()
            .map_or(&[][..], |home| home.as_os_str().as_bytes()),
    );
    for arg in args {
        field(arg.as_bytes());
    }
    for (name, value) in &super::env::snapshot() {
        if PER_CALL_VARS.iter().any(|var| name == *var) {
            continue;
        }
        field(name.as_bytes());
        field(value.as_bytes());
    }
    let digest = key.finalize();
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let dir = super::env::data_dir_judged(&super::env::workspaces_of(None))
        .0
        .join("daemons");
    let fits = dir.join(format!("{name}.sock")).as_os_str().len() <= MAX_SOCKET_PATH;
    fits.then_some((dir, name))
}

/// Whether the process listening on `stream`'s other end runs as this user (or root):
/// the caller's hook input goes to it and its answer decides the tool call, so a socket
/// that another user bound while the directory was open to them is not spoken to. One
/// `getsockopt` per forwarded call (by hand: std's `UnixStream::peer_cred` is unstable;
/// the daemon, on tokio's stream, uses tokio's).
pub fn served_by_this_user(stream: &UnixStream) -> bool {
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
    let me = super::file::effective_uid();
    rc == 0 && (peer.uid == me || peer.uid == 0)
}

/// This process's stdin, up to one byte past [`MAX_INPUT`]: an agent's input of
/// gigabytes is never held whole by the client.
pub fn read_input() -> io::Result<Vec<u8>> {
    let mut input = Vec::new();
    io::stdin()
        .lock()
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(&mut input)?;
    Ok(input)
}

/// A request up to this size is sent in one write.
const ONE_WRITE: usize = 64 << 10;

/// The buffer an answer is read into at first (it grows for a larger one).
const ANSWER_ROOM: usize = 16 << 10;

/// The host error of a stdin that could not be read (after the connection to the daemon,
/// which then has nothing to answer), as both programs report it.
pub fn unreadable_stdin(e: &io::Error) -> String {
    format!("cannot read the input from stdin: {e}")
}

/// This call's trace context as a request carries it: `TRACEPARENT`, a newline,
/// `TRACESTATE` (empty without a `TRACEPARENT`; a value over [`MAX_TRACE_VALUE`] bytes or
/// not UTF-8 is left out, as the in-process dispatch leaves it).
pub fn trace_context() -> Vec<u8> {
    let value = |name| {
        super::env::var(name)
            .and_then(|v| v.into_string().ok())
            .filter(|v| v.len() <= MAX_TRACE_VALUE && !v.contains('\n'))
    };
    let Some(parent) = value(PER_CALL_VARS[0]) else {
        return Vec::new();
    };
    let state = value(PER_CALL_VARS[1]).unwrap_or_default();
    format!("{parent}\n{state}").into_bytes()
}

/// Sends `input` and this call's [`trace_context`] (the length of the input and of the
/// trace context, u32 little-endian each, then the input's bytes and the context's) and
/// reads the answer to the end: one whole answer ([`split_answer`]), or an error when
/// the daemon was lost (the connection closed or reset before a whole answer).
pub fn exchange(mut stream: UnixStream, input: &[u8]) -> io::Result<Vec<u8>> {
    let len = u32::try_from(input.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "stdin over 4 GiB"))?;
    let trace = trace_context();
    let head = [len.to_le_bytes(), (trace.len() as u32).to_le_bytes()].concat();
    if input.len() <= ONE_WRITE {
        // One write, one wake-up of the daemon.
        stream.write_all(&[&head[..], input, &trace].concat())?;
    } else {
        stream.write_all(&head)?;
        stream.write_all(input)?;
        stream.write_all(&trace)?;
    }
    // Room for a usual answer, read in one `read` (from empty, the buffer grew from 32
    // bytes: eight reads for an answer of 1.5 KB).
    let mut answer = Vec::with_capacity(ANSWER_ROOM);
    stream.read_to_end(&mut answer)?;
    if split_answer(&answer).is_none() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before a whole answer",
        ));
    }
    Ok(answer)
}

/// An answer's exit code, stdout and stderr, if `bytes` are exactly one whole answer: the
/// exit code (1 byte), the lengths of stdout and stderr (u32 little-endian each), then
/// stdout and stderr.
pub fn split_answer(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&code, rest) = bytes.split_first()?;
    let (stdout_len, rest) = rest.split_first_chunk::<4>()?;
    let (stderr_len, rest) = rest.split_first_chunk::<4>()?;
    let stdout_len = u32::from_le_bytes(*stdout_len) as usize;
    if rest.len() != stdout_len.checked_add(u32::from_le_bytes(*stderr_len) as usize)? {
        return None;
    }
    let (stdout, stderr) = rest.split_at(stdout_len);
    Some((code, stdout, stderr))
}
