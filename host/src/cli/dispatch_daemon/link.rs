//! The caller's side of the dispatch daemon, one copy for both programs that call one:
//! `hookhost dispatch` (`cli/dispatch_daemon/client.rs`) and the small `hookhost-dispatch` client
//! (`host/src/dispatch_client.rs`, which includes this very file by path). Each rule a
//! caller keeps is here once: when a call has no daemon, where the daemon of a command
//! line lives (its key), that the daemon runs as this user, the input's bound, the wire,
//! and the answer when nothing could dispatch (fail closed under `--format claude`).
//!
//! It names nothing of either program (no `super::`, no `crate::`): only the library and
//! the standard library, so that both compile it alike. The environment is read through
//! [`hookhost::config::env`] alone.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The largest stdin a daemon takes, the one-shot process's own cap; a caller with more
/// answers in-process with the same error (the daemon must not hold what any process of
/// the user claims to send).
pub const MAX_INPUT: usize = hookhost::dispatch::input::MAX_INPUT_BYTES;
/// `sun_path` holds 108 bytes; a longer socket path cannot be bound.
pub const MAX_SOCKET_PATH: usize = 100;
/// Variables that differ on every call by design (W3C trace context, which Claude Code
/// sets when it propagates traces): a daemon keyed by them would serve one call, so a
/// caller with one set dispatches in-process. So does one with `CLAUDE_ENV_FILE` (one file
/// per session and hook: the process that runs the hooks appends to it what they
/// exported, and a daemon would serve one call).
pub const PER_CALL_VARS: [&str; 2] = ["TRACEPARENT", "TRACESTATE"];
/// The exit status of a host error (see `cli::ERROR_EXIT`).
pub const ERROR_EXIT: u8 = 1;

/// What one `hookhost dispatch` prints and its exit status: what a daemon answers on the
/// wire, and what either program prints.
pub struct Printed {
    /// Its standard output, byte for byte.
    pub stdout: String,
    /// Its standard error, byte for byte.
    pub stderr: String,
    /// Its exit status.
    pub code: u8,
}

impl Printed {
    /// A host error, as `main` reports one.
    pub fn error(message: &str) -> Printed {
        Printed {
            stdout: String::new(),
            stderr: error_text(message),
            code: ERROR_EXIT,
        }
    }

    /// Writes it to this process's stdout and stderr (a reader that went away changes
    /// nothing: the hooks ran) and returns its exit status.
    pub fn print(&self) -> std::process::ExitCode {
        let mut out = io::stdout().lock();
        let _ = out.write_all(self.stdout.as_bytes());
        let _ = out.flush();
        let _ = io::stderr().lock().write_all(self.stderr.as_bytes());
        std::process::ExitCode::from(self.code)
    }
}

/// How a host error is reported on stderr: one line, with every control character
/// escaped (messages quote config values, paths and plugin output).
pub fn error_text(message: &str) -> String {
    let message = message.strip_prefix("hookhost: ").unwrap_or(message);
    let message = message.strip_prefix("error: ").unwrap_or(message);
    format!("hookhost: error: {}\n", hookhost::text::escape(message))
}

/// Whether this call is dispatched without a daemon whatever its command line:
/// `HOOKHOST_DISPATCH_DAEMON` turns daemons off, a per-call variable is set
/// ([`PER_CALL_VARS`], `CLAUDE_ENV_FILE`), or stdin is a listening socket (a daemon being
/// started, [`listening_stdin`], which never forwards).
pub fn in_process_only() -> bool {
    hookhost::config::env::daemon_off()
        || PER_CALL_VARS
            .iter()
            .any(|var| hookhost::config::env::var(var).is_some())
        || !matches!(
            hookhost::config::env::path_var("CLAUDE_ENV_FILE", &[]),
            Ok(None)
        )
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

/// Where the daemon of `hookhost` run with `args` (its arguments after the program,
/// `dispatch` first) in this directory and environment lives: the daemons' directory and
/// the name of its files (without extension). The key is everything a dispatch depends
/// on besides its stdin: the executable (path and file stamp), the working directory,
/// the arguments and the whole environment. `None` when there can be none (no private
/// directory for the socket, a socket path too long to bind).
pub fn daemon_place(exe: &Path, args: &[OsString]) -> Option<(PathBuf, String)> {
    let stamp = std::fs::metadata(exe).ok()?;
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
    for arg in args {
        field(arg.as_bytes());
    }
    for (name, value) in &hookhost::config::env::snapshot() {
        field(name.as_bytes());
        field(value.as_bytes());
    }
    let digest = key.finalize();
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let dir = hookhost::data_dir().join("daemons");
    let fits = dir.join(format!("{name}.sock")).as_os_str().len() <= MAX_SOCKET_PATH;
    (fits && private_dir(&dir).is_ok()).then_some((dir, name))
}

/// Creates the daemons' directory (mode 0700) and checks that only this user can reach
/// it ([`hookhost::session::private_dir`]: not a symlink, this user's): a socket there is
/// trusted with the caller's hook input and output. Unlike session state (whose files
/// are each checked when opened), a directory found reachable by others is refused
/// rather than narrowed: it may already hold their sockets. (One bound there before the
/// user narrowed it is refused when connecting: [`served_by_this_user`].)
pub fn private_dir(dir: &Path) -> Result<(), String> {
    if let Ok(meta) = std::fs::symlink_metadata(dir)
        && hookhost::config::file::Rule::Private.mode_exceeds(&meta)
    {
        return Err(format!("{} is not private to this user", dir.display()));
    }
    hookhost::session::private_dir(dir).map_err(|e| e.to_string())
}

/// Whether the process listening on `stream`'s other end runs as this user (or root):
/// the caller's hook input goes to it and its answer decides the tool call, so a socket
/// that another user bound while the directory was open to them is not spoken to. One
/// `getsockopt` per forwarded call (by hand: std's `UnixStream::peer_cred` is unstable;
/// `serve`, on tokio's stream, uses tokio's).
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
    let me = hookhost::config::file::effective_uid();
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

/// Sends `input`, reads the answer; an error is the daemon lost (the connection closed
/// or reset before a whole answer).
pub fn exchange(mut stream: UnixStream, input: &[u8]) -> io::Result<Printed> {
    let len = u32::try_from(input.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "stdin over 4 GiB"))?;
    // One write for a request that fits a page: one wake-up of the daemon.
    let mut request = Vec::with_capacity(4 + input.len().min(4096));
    request.extend_from_slice(&len.to_le_bytes());
    if input.len() <= 4096 {
        request.extend_from_slice(input);
        stream.write_all(&request)?;
    } else {
        stream.write_all(&request)?;
        stream.write_all(input)?;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    decode(&answer).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before a whole answer",
        )
    })
}

/// The answer in `bytes` (exit code, the lengths of stdout and stderr as u32
/// little-endian, then both), if they are exactly one whole answer.
pub fn decode(bytes: &[u8]) -> Option<Printed> {
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

/// What a `--format claude` dispatch that could not dispatch at all prints (`why`: no
/// runtime, a panic, its daemon lost and no dispatch in-process either): on an event
/// that honours `onFailure` (`event`, else the input's `hook_event_name`;
/// [`hookhost::event::EventSpec::honours_on_failure`]: PreToolUse, PermissionRequest,
/// UserPromptSubmit, PostToolUse, …), Claude Code's block or deny for the event (exit 2
/// with the reason on stderr; PermissionRequest: a deny in JSON), since exit 1 is a
/// non-blocking error that lets the action go ahead where the drop-in has no
/// `onFailure: "block"`; elsewhere the host error (exit 1).
pub fn blocked(event: Option<&str>, stdin: &[u8], why: &str) -> Printed {
    let named = event.map(str::to_string).or_else(|| {
        match hookhost::dispatch::input::parse(stdin) {
            Ok(input) => input
                .value
                .get("hook_event_name")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            Err(_) => hookhost::dispatch::input::event_name_in_prefix(stdin),
        }
    });
    let catalogue = hookhost::event::EventCatalogue::default();
    let Some(spec) = named.as_deref().and_then(|name| catalogue.get(name)) else {
        return Printed::error(why);
    };
    blocked_for(spec, why)
}

/// Claude Code's block of `spec` for a dispatch that could not guard (`why`), where the
/// event honours `onFailure`; elsewhere the host error.
pub fn blocked_for(spec: &hookhost::event::EventSpec, why: &str) -> Printed {
    if !spec.honours_on_failure() {
        return Printed::error(why);
    }
    let response = hookhost::outcome::to_claude(spec, &hookhost::outcome::unanswered(spec, why));
    Printed {
        stdout: if response.stdout.is_empty() {
            String::new()
        } else {
            response.stdout + "\n"
        },
        stderr: response.stderr,
        code: response.exit_code as u8,
    }
}
