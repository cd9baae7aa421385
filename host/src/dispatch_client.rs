//! `hookhost-dispatch ARGS…`: the same call as `hookhost dispatch ARGS…`, in a program
//! small enough that a call its dispatch daemon answers costs little more than starting
//! a process. It takes the `hookhost` installed beside it for its daemon's key, speaks to
//! that daemon, and in every other case `exec`s that `hookhost` with the same arguments,
//! so that it never answers differently from `hookhost dispatch`:
//!
//! - no daemon listens (or the call has none: `HOOKHOST_DISPATCH_DAEMON`, a per-call
//!   variable), or the one listening is not this user's, or the arguments are not ones it
//!   reads for sure (a small grammar; anything else, `--help` included): `hookhost
//!   dispatch` on the untouched stdin (it dispatches in-process and starts the daemon);
//! - an input over the bound, or a daemon lost mid-request: `hookhost dispatch` with
//!   the input already read as its stdin and `HOOKHOST_DISPATCH_DAEMON=off`, so that the
//!   call is dispatched once more, in-process (as `hookhost dispatch` retries a lost
//!   daemon);
//! - no `hookhost` to run: under `--format claude`, on an event that honours
//!   `onFailure`, the call is blocked; elsewhere a host error (exit 1).
//!
//! Every rule of a daemon's caller (its key, the uid check, the input bound, the wire,
//! the fail-closed answer) is the file `cli/dispatch_daemon/link.rs`, which `hookhost`
//! compiles too; the environment is read through `hookhost::config::env` alone.

#[path = "cli/dispatch_daemon/link.rs"]
mod link;

use std::ffi::OsString;
use std::io::{Seek, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The program this one stands for, in the same directory.
const HOOKHOST: &str = "hookhost";

fn main() -> ExitCode {
    survive_file_size_limit();
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let call = Call::read(&args);
    let Some(hookhost) = hookhost_beside_this_program() else {
        return without_hookhost(
            call.as_ref(),
            None,
            &format!("no `{HOOKHOST}` beside this program to dispatch with"),
        );
    };
    let Some(call) = call.filter(|_| !link::in_process_only()) else {
        return run_hookhost(&hookhost, &args, None, None);
    };
    let mut keyed = Vec::with_capacity(args.len() + 1);
    keyed.push(OsString::from("dispatch"));
    keyed.extend(args.iter().cloned());
    let Some(socket) =
        link::daemon_place(&hookhost, &keyed).map(|(dir, name)| dir.join(format!("{name}.sock")))
    else {
        return run_hookhost(&hookhost, &args, None, Some(&call));
    };
    // No daemon, or not this user's: `hookhost` dispatches (and starts one).
    let Some(stream) = UnixStream::connect(&socket)
        .ok()
        .filter(link::served_by_this_user)
    else {
        return run_hookhost(&hookhost, &args, None, Some(&call));
    };
    let input = match link::read_input() {
        Ok(input) => input,
        Err(e) => {
            return link::Printed::error(&format!("cannot read the input from stdin: {e}")).print();
        }
    };
    if input.len() > link::MAX_INPUT {
        drop(stream);
        return run_hookhost(&hookhost, &args, Some(&input), Some(&call));
    }
    match link::exchange(stream, &input) {
        Ok(printed) => printed.print(),
        // Lost mid-request: once more, in-process (see the module's documentation).
        Err(_) => run_hookhost(&hookhost, &args, Some(&input), Some(&call)),
    }
}

/// What this program reads of its arguments, when it reads all of them for sure: the
/// format and the event. A small grammar of the forms `hookhost dispatch` takes
/// (`EVENT`, `--format claude|outcome`, `--format=…`, `--pretty`, `--trust-workspace`,
/// `--project DIR`, `--settings FILE|JSON`, `--project=…`, `--settings=…`); anything
/// else goes to `hookhost` untouched. By hand, not by clap: what it decides is only
/// whether to forward, and building a parser costs every call.
struct Call {
    claude: bool,
    event: Option<String>,
}

impl Call {
    fn read(args: &[OsString]) -> Option<Call> {
        let format = |value: &str| match value {
            "claude" => Some(true),
            "outcome" => Some(false),
            _ => None,
        };
        let mut call = Call {
            claude: false,
            event: None,
        };
        let (mut formats, mut args) = (0, args.iter().map(|a| a.to_str()));
        while let Some(arg) = args.next() {
            let arg = arg?;
            if let Some(value) = arg.strip_prefix("--format=") {
                call.claude = format(value)?;
                formats += 1;
            } else if arg.starts_with("--project=") || arg.starts_with("--settings=") {
            } else {
                match arg {
                    "--pretty" | "--trust-workspace" => {}
                    "--format" => {
                        call.claude = format(args.next()??)?;
                        formats += 1;
                    }
                    "--project" | "--settings" => {
                        if args.next()??.starts_with('-') {
                            return None;
                        }
                    }
                    event if !event.starts_with('-') && call.event.is_none() => {
                        call.event = Some(event.to_string());
                    }
                    _ => return None,
                }
            }
        }
        (formats <= 1).then_some(call)
    }
}

/// The `hookhost` in this program's directory (both resolved, as the kernel names a
/// running program), whose path and stamp key its daemons.
fn hookhost_beside_this_program() -> Option<PathBuf> {
    let this = std::env::current_exe().ok()?;
    std::fs::canonicalize(this.parent()?.join(HOOKHOST)).ok()
}

/// Replaces this process with `hookhost dispatch ARGS…`: on this stdin, or with `input`
/// as its stdin and its daemon off (the call dispatched in that process). Returns only
/// when that cannot be done, with the answer of a call nothing could dispatch.
fn run_hookhost(
    hookhost: &Path,
    args: &[OsString],
    input: Option<&[u8]>,
    call: Option<&Call>,
) -> ExitCode {
    let mut command = Command::new(hookhost);
    command.arg0(HOOKHOST).arg("dispatch").args(args);
    if let Some(input) = input {
        match input_file(input) {
            Ok(file) => {
                command
                    .stdin(Stdio::from(file))
                    .env("HOOKHOST_DISPATCH_DAEMON", "off");
            }
            Err(e) => {
                return without_hookhost(
                    call,
                    Some(input),
                    &format!("cannot hand the input to `{}`: {e}", hookhost.display()),
                );
            }
        }
    }
    let e = command.exec();
    without_hookhost(
        call,
        input,
        &format!("cannot run `{}`: {e}", hookhost.display()),
    )
}

/// `input` in an anonymous file, read from its start: the stdin of the `hookhost` that
/// dispatches it.
fn input_file(input: &[u8]) -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // Close-on-exec: `hookhost` gets it as its stdin only (a `dup2`, which clears it).
    // SAFETY: the name is a NUL-terminated string; the descriptor returned is new and
    // owned by the file made from it alone.
    let fd = unsafe { libc::memfd_create(c"hookhost-dispatch-input".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: see above.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(input)?;
    file.rewind()?;
    Ok(file)
}

/// The answer when no `hookhost` could dispatch the call: under `--format claude`, on an
/// event that honours `onFailure`, a block ([`link::blocked`]); else a host error.
fn without_hookhost(call: Option<&Call>, input: Option<&[u8]>, why: &str) -> ExitCode {
    let read;
    let input = match input {
        Some(input) => input,
        None => {
            read = link::read_input().unwrap_or_default();
            &read
        }
    };
    match call {
        Some(call) if call.claude => link::blocked(call.event.as_deref(), input, why),
        _ => link::Printed::error(why),
    }
    .print()
}

/// As `hookhost`'s: a write past `RLIMIT_FSIZE` fails with `EFBIG` instead of killing the
/// process before it answers (a handler, not `SIG_IGN`: `exec` resets it).
fn survive_file_size_limit() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe (it does
    // nothing) and lives as long as the process.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_grammar_reads_what_it_knows_and_nothing_else() {
        for (args, claude, event) in [
            (&["--format", "claude"][..], true, None),
            (
                &["PreToolUse", "--format=claude"][..],
                true,
                Some("PreToolUse"),
            ),
            (
                &["--format", "outcome", "--pretty", "Stop"][..],
                false,
                Some("Stop"),
            ),
            (
                &["--project", "/p", "--settings", "{}", "--trust-workspace"][..],
                false,
                None,
            ),
            (
                &["--settings={\"a\":1}", "--project=/x", "Stop"][..],
                false,
                Some("Stop"),
            ),
        ] {
            let call = Call::read(&os(args)).unwrap_or_else(|| panic!("{args:?}"));
            assert_eq!((call.claude, call.event.as_deref()), (claude, event));
        }
        for args in [
            &["--help"][..],
            &["-h"],
            &["--format"],
            &["--format", "json"],
            &["--format", "claude", "--format", "claude"],
            &["--project"],
            &["--project", "--format"],
            &["A", "B"],
            &["--"],
            &["--event", "Stop"],
            &["--pretty=yes"],
        ] {
            assert!(Call::read(&os(args)).is_none(), "{args:?} was read");
        }
    }
}
