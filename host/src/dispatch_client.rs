//! `hookhost-dispatch ARGS…`: the same call as `hookhost dispatch ARGS…` (the same stdout,
//! stderr and exit code), in a program small enough that a call its dispatch daemon
//! answers costs little more than starting a process. It links `std`, `libc` and `sha2`
//! only (no async runtime, no wasm engine, no argument parser): it reads none of its
//! arguments, it forwards them. On Linux with glibc it is linked statically, a static
//! PIE (`host/build.rs`): no dynamic loader runs at its start.
//!
//! It takes the `hookhost` in its own directory for the daemon's key (that executable's
//! path and stamp, the arguments `dispatch ARGS…`, the directory, the user's home in the
//! password database and the environment: `cli/dispatch_daemon/key.rs`, the one file both
//! programs compile for it), so that one
//! daemon answers `hookhost-dispatch ARGS…` and `hookhost dispatch ARGS…` alike. When that
//! daemon answers, it prints the answer. In every other case `hookhost` decides:
//!
//! - no daemon for the call (`HOOKHOST_DISPATCH_DAEMON`, `CLAUDE_ENV_FILE`, none
//!   listening yet, one that is not this user's, a command line that has none), or a
//!   user whose home the password database's files cannot tell (only an NSS module
//!   could, and none may be loaded here: `config/passwd.rs`): it
//!   `exec`s `hookhost dispatch ARGS…` (the same process, its stdin untouched), which
//!   dispatches in-process and starts the daemon, or answers the bad command line;
//! - an input over the bound, or a daemon lost mid-request after the input was read: it
//!   runs `hookhost dispatch ARGS…` with `HOOKHOST_DISPATCH_DAEMON=off` as its child,
//!   the input written to its stdin through a pipe, its stdout and stderr this process's,
//!   and exits with its exit code (the call dispatched once more, in-process, as
//!   `hookhost dispatch` retries a lost daemon);
//! - nothing could run `hookhost` (none beside this program, `exec` or the child failed,
//!   the child killed by a signal): under `--format claude` the call is blocked (exit 2
//!   with the reason on stderr), except on the events where Claude Code ignores
//!   `onFailure` (a block there traps the agent in a loop: [`key::ON_FAILURE_IGNORED_EVENTS`]),
//!   which get the host error (exit 1), as the Outcome format does; under another
//!   agent's format it is blocked on that agent's guarding events
//!   ([`key::AGENT_BLOCKING_EVENTS`]) and when the event cannot be told.

// No `main` of std's: see [`main`] below.
#![no_main]

// The one reader of the environment, compiled here as well: what the key hashes
// (`snapshot`) and where the daemons live (`data_dir_judged`) are that file's reads.
#[allow(dead_code, unused_imports)]
#[path = "config/env.rs"]
mod env;
// The one reader of files, compiled here as well (the password database's files). Its
// documentation links into the library, which this program does not have.
#[allow(dead_code, rustdoc::broken_intra_doc_links)]
#[path = "config/file.rs"]
mod file;
#[path = "cli/dispatch_daemon/key.rs"]
mod key;
// The password database's home, read from its files only: this program is linked
// statically, and glibc's NSS modules must not be loaded into it (see that file; the
// library's NSS look-ups, `config/nss.rs`, are not compiled here).
// (The entry's login name is the library's, for the audit log.)
#[allow(dead_code)]
#[path = "config/passwd.rs"]
mod passwd;

/// The password database's home of the effective user as its files give it
/// ([`passwd::from_files`], read once); `None` when they cannot tell, and then this
/// program never computes a key: it `exec`s `hookhost`, which asks NSS.
fn files_home() -> Option<&'static Option<PathBuf>> {
    static HOME: std::sync::OnceLock<Option<Option<PathBuf>>> = std::sync::OnceLock::new();
    HOME.get_or_init(|| {
        passwd::from_files(file::effective_uid()).map(|entry| entry.and_then(|e| e.home))
    })
    .as_ref()
}

/// What `config/env.rs` asks for the password home: the files' answer ([`files_home`],
/// which [`dispatch`] made sure can tell before anything asks).
fn password_home_lookup() -> Option<PathBuf> {
    files_home().cloned().flatten()
}

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The program this one stands for, in the same directory.
const HOOKHOST: &str = "hookhost";
/// How much of an input is looked at for its `hook_event_name`, when nothing could run
/// `hookhost` and the command line names no event.
const EVENT_NAME_PREFIX: usize = 64 << 10;

/// The exit code of a call (what `main` returns to the C runtime).
type Exit = u8;

/// The program's entry, called by the C runtime in place of std's `main` wrapper
/// (`#![no_main]`). That wrapper's start-up was an eighth of this program's start, a
/// process per agent event: it reads `/proc/self/maps` for the main thread's stack guard
/// and sets up an alternate stack for a stack-overflow message, none of which a program
/// this small needs (measured: a Rust program that returns at once, 0.88x with this
/// entry). What this program needs of that start-up is done here: a standard stream the
/// agent left closed is opened on `/dev/null` (else the daemon's socket would take its
/// number, and the input be read from the daemon), and `SIGPIPE` is ignored, so that
/// writing to a reader that went away fails instead of ending the process. The arguments
/// are std's (`std::env::args_os`: glibc hands them to std before `main`).
#[unsafe(no_mangle)]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    let mut streams = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: first thing in the process, no other thread exists. `poll` reads and writes
    // only the three entries it is given (a closed one answers POLLNVAL); the descriptor
    // `open` returns is the lowest free one, the closed stream's, and stays open for the
    // process's life; ignoring a signal has no other precondition.
    unsafe {
        if libc::poll(streams.as_mut_ptr(), 3, 0) >= 0 {
            for stream in streams.iter().filter(|s| s.revents & libc::POLLNVAL != 0) {
                let opened = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                debug_assert!(opened == stream.fd || opened < 0);
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    libc::c_int::from(dispatch())
}

/// The call: the daemon's answer, or `hookhost`'s (see the module's documentation).
fn dispatch() -> Exit {
    // SAFETY: first thing in the process: no other thread exists yet. (`hookhost`
    // forgets the same variables before it computes the key, so the snapshots agree.)
    unsafe { env::forget_process_tunables() };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some(hookhost) = hookhost_beside_this_program() else {
        return unanswered(
            &args,
            None,
            &format!("no `{HOOKHOST}` beside this program to dispatch with"),
        );
    };
    // The password database's files cannot tell this user's home: only NSS can, which
    // `hookhost` asks.
    if key::in_process_only() || files_home().is_none() {
        return exec_hookhost(&hookhost, &args);
    }
    let keyed = [OsStr::new("dispatch")]
        .into_iter()
        .chain(args.iter().map(OsString::as_os_str));
    let Some((dir, name)) = key::daemon_of(&hookhost, keyed) else {
        return exec_hookhost(&hookhost, &args);
    };
    // No daemon, or not this user's: `hookhost` dispatches (and starts one).
    let Some(stream) = UnixStream::connect(dir.join(format!("{name}.sock")))
        .ok()
        .filter(key::served_by_this_user)
    else {
        return exec_hookhost(&hookhost, &args);
    };
    // Connected: the daemon reads stdin from here on.
    let input = match key::read_input() {
        Ok(input) => input,
        Err(e) => {
            eprintln!("hookhost: error: {}", escaped(&key::unreadable_stdin(&e)));
            return 1;
        }
    };
    if input.len() > key::MAX_INPUT {
        drop(stream);
        return run_hookhost_on(&hookhost, &args, &input);
    }
    let answer = key::exchange(stream, &input).ok();
    match answer.as_deref().and_then(key::split_answer) {
        Some((code, stdout, stderr)) => {
            // A reader that went away changes nothing: the hooks ran.
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(stdout);
            let _ = out.flush();
            let _ = std::io::stderr().lock().write_all(stderr);
            code
        }
        // Lost mid-request: once more, in-process (see the module's documentation).
        None => run_hookhost_on(&hookhost, &args, &input),
    }
}

/// The `hookhost` in this program's directory, resolved as the kernel names a running
/// program (what that `hookhost` takes for its own path in the key).
fn hookhost_beside_this_program() -> Option<PathBuf> {
    let this = std::env::current_exe().ok()?;
    std::fs::canonicalize(this.parent()?.join(HOOKHOST)).ok()
}

/// `hookhost dispatch ARGS…`, its `argv[0]` the path (so that its usage and errors name
/// `hookhost`).
fn hookhost_dispatch(hookhost: &Path, args: &[OsString]) -> Command {
    let mut command = Command::new(hookhost);
    command.arg0(hookhost).arg("dispatch").args(args);
    command
}

/// Replaces this process with `hookhost dispatch ARGS…` on the untouched stdin. Returns
/// only when that cannot be done, with the answer of a call nothing could dispatch.
fn exec_hookhost(hookhost: &Path, args: &[OsString]) -> Exit {
    let e = hookhost_dispatch(hookhost, args).exec();
    unanswered(
        args,
        None,
        &format!("cannot run `{}`: {e}", hookhost.display()),
    )
}

/// Runs `hookhost dispatch ARGS…` with the daemon off (the call dispatched in that
/// process) as a child, `input` written to its stdin, its stdout and stderr this
/// process's; its exit code. This program never adopts orphans, so its one child needs
/// no record (`handlers::descendants::spawn_own` is `hookhost`'s).
fn run_hookhost_on(hookhost: &Path, args: &[OsString], input: &[u8]) -> Exit {
    let mut command = hookhost_dispatch(hookhost, args);
    command
        .env("HOOKHOST_DISPATCH_DAEMON", "off")
        .stdin(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let why = format!("cannot run `{}`: {e}", hookhost.display());
            return unanswered(args, Some(input), &why);
        }
    };
    // Written whole before the wait: `hookhost` reads all of its stdin before it writes
    // (and one that stops early, on a bad flag, makes this write fail, not block), and
    // its output goes to this process's stdout and stderr, not to a pipe of ours.
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input);
    }
    let why = match child.wait() {
        Ok(status) => match status.code() {
            Some(code) => return u8::try_from(code).unwrap_or(1),
            None => format!(
                "`{}` ended without an answer ({status})",
                hookhost.display()
            ),
        },
        Err(e) => format!("cannot wait for `{}`: {e}", hookhost.display()),
    };
    unanswered(args, Some(input), &why)
}

/// The answer of a call that nothing could dispatch (`why`): under `--format claude` a
/// block (exit 2, the reason on stderr), except on an event where Claude Code ignores
/// `onFailure` (named on the command line, else by the input's `hook_event_name`); a host
/// error (exit 1) there and under the Outcome format.
fn unanswered(args: &[OsString], input: Option<&[u8]>, why: &str) -> Exit {
    eprintln!("hookhost: error: {}", escaped(why));
    let agent = agent_format(args);
    if !claude_format(args) && agent.is_none() {
        return 1;
    }
    let read;
    let input = match input {
        Some(input) => input,
        None => {
            read = key::read_input().unwrap_or_default();
            &read
        }
    };
    let event = event_argument(args).or_else(|| event_in(input));
    if let Some(agent) = agent {
        // Another agent's format: its block where its event guards, or when the event
        // cannot be told (the OpenCode plugin's `event` is not read here: that plugin
        // blocks on any exit but 0).
        let guards = event.is_none_or(|event| key::AGENT_BLOCKING_EVENTS.contains(&(agent, event)));
        return if guards { 2 } else { 1 };
    }
    let loops = event.is_some_and(|event| key::ON_FAILURE_IGNORED_EVENTS.contains(&event));
    if loops { 1 } else { 2 }
}

/// The agent whose format the command line asks for (`--format codex` or
/// `--format=codex`, …: an agent of [`key::AGENT_BLOCKING_EVENTS`]), if any.
fn agent_format(args: &[OsString]) -> Option<&'static str> {
    let named = args.iter().enumerate().find_map(|(i, arg)| {
        let arg = arg.to_str()?;
        match arg.strip_prefix("--format=") {
            Some(value) => Some(value),
            None if arg == "--format" => args.get(i + 1)?.to_str(),
            None => None,
        }
    })?;
    key::AGENT_BLOCKING_EVENTS
        .iter()
        .map(|&(agent, _)| agent)
        .find(|&agent| agent == named)
}

/// Whether the command line asks for Claude Code's format (`--format claude` or
/// `--format=claude`, anywhere: when in doubt, the block).
fn claude_format(args: &[OsString]) -> bool {
    args.iter().any(|a| a == "--format=claude")
        || args
            .windows(2)
            .any(|pair| pair[0] == "--format" && pair[1] == "claude")
}

/// The event the command line names: its first argument that is neither a flag nor the
/// value of one.
fn event_argument(args: &[OsString]) -> Option<&str> {
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let arg = arg.to_str()?;
        if matches!(arg, "--format" | "--project" | "--settings") {
            args.next();
        } else if !arg.starts_with('-') {
            return Some(arg);
        }
    }
    None
}

/// The value of the one `"hook_event_name"` in the first [`EVENT_NAME_PREFIX`] bytes of
/// `input`, when it is a plain string of letters (`None` otherwise, or when the key
/// appears twice: then the block).
fn event_in(input: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"hook_event_name\"";
    let input = &input[..input.len().min(EVENT_NAME_PREFIX)];
    let mut found = input
        .windows(KEY.len())
        .enumerate()
        .filter(|(_, w)| *w == KEY);
    let (at, _) = found.next()?;
    if found.next().is_some() {
        return None;
    }
    let rest = input[at + KEY.len()..].trim_ascii_start();
    let rest = rest.strip_prefix(b":")?.trim_ascii_start();
    let rest = rest.strip_prefix(b"\"")?;
    let end = rest.iter().position(|b| !b.is_ascii_alphabetic())?;
    if rest[end] != b'"' {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok()
}

/// A message for one line of stderr: control characters escaped (it quotes paths).
fn escaped(message: &str) -> String {
    message
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
