//! The caller's side: forward this process's stdin to the daemon of its command line,
//! or dispatch in-process (and start a daemon for the next call).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use clap::Parser;

use super::super::dispatch::{DispatchArgs, Printed, dispatch_stdin};
use super::place::Place;
use super::wire::decode;
use super::{MAX_INPUT, MODE_VAR, PER_CALL_VARS};

/// Whether this process's command line is a valid `hookhost dispatch` one: `--help`, a
/// bad flag or another command never starts a daemon (its "bad command line" would be
/// left behind in the daemon's files).
fn parsed_dispatch_args() -> Option<DispatchArgs> {
    match super::super::Cli::try_parse() {
        Ok(super::super::Cli {
            command: super::super::Command::Dispatch(args),
        }) => Some(args),
        _ => None,
    }
}

/// In a `hookhost dispatch` process, unless `HOOKHOST_DISPATCH_DAEMON` turns the daemon
/// off: the exit code after a daemon answered, or `None` to dispatch in-process (no
/// daemon listens yet; one is being started). Runs before anything else of the process,
/// so that a forwarded dispatch costs little more than the process start. A process
/// whose stdin is a listening socket is a daemon being started
/// ([`super::server::listening_stdin`]), and never forwards.
pub fn forward() -> Option<ExitCode> {
    if hookhost::config::env::daemon_off()
        || PER_CALL_VARS
            .iter()
            .any(|var| hookhost::config::env::var(var).is_some())
        // Claude Code names one env file per session and hook: the process that runs the
        // hooks appends to it what they exported, and a daemon would serve one call.
        || !matches!(
            hookhost::config::env::path_var("CLAUDE_ENV_FILE", &[]),
            Ok(None)
        )
        || super::server::listening_stdin()
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
    // Connected: the daemon reads stdin from here on.
    let input = match read_input() {
        Ok(input) => input,
        Err(e) => {
            eprint!(
                "{}",
                super::super::error_text(&format!("cannot read the input from stdin: {e}"))
            );
            return Some(ExitCode::from(super::super::ERROR_EXIT));
        }
    };
    let printed = if input.len() > MAX_INPUT {
        drop(stream);
        dispatch_here(&input).unwrap_or_else(|message| Printed::error(&message))
    } else {
        match exchange(stream, &input) {
            Ok(printed) => printed,
            Err(e) => retry_here(&input, &place.socket, &e),
        }
    };
    let mut out = io::stdout().lock();
    let _ = out.write_all(printed.stdout.as_bytes());
    let _ = out.flush();
    let _ = io::stderr().write_all(printed.stderr.as_bytes());
    Some(ExitCode::from(printed.code))
}

/// The answer after the daemon was lost mid-request (killed, crashed, its connection
/// closed or reset before a whole answer): the call is dispatched once more, in this
/// process. In-process rather than by a fresh daemon: whatever ended the daemon (a kill
/// of its process, a crash on this input, memory) may end the next one the same way,
/// and this process already holds the input and needs no socket or start-up. The
/// daemon's hooks for the request end with it (their keepers' `PR_SET_PDEATHSIG`), but
/// one may have acted already, so a hook can run twice for one call: at least once,
/// never zero times. Only when the dispatch here cannot
/// run either (no runtime: out of descriptors or threads) is there no answer, and then,
/// under `--format claude` on an event that honours `onFailure`, the call is blocked
/// ([`super::super::dispatch::unanswered`]), never let through as exit 1.
fn retry_here(input: &[u8], socket: &std::path::Path, lost: &io::Error) -> Printed {
    let why = format!(
        "the dispatch daemon at {} was lost mid-request ({lost})",
        socket.display()
    );
    match dispatch_here(input) {
        Ok(printed) => printed,
        Err(e) => match parsed_dispatch_args() {
            Some(args) => super::super::dispatch::unanswered(
                &args,
                input,
                &format!(
                    "{why}, and dispatching in-process failed too: {e} ({MODE_VAR}=off \
                     dispatches in-process only)"
                ),
            ),
            None => Printed::error(&why),
        },
    }
}

/// Whether the process listening on `stream`'s other end runs as this user (or root):
/// the caller's hook input goes to it and its answer decides the tool call, so a socket
/// that another user bound while the directory was open to them is not spoken to. One
/// `getsockopt` per forwarded call (by hand: std's `UnixStream::peer_cred` is unstable;
/// `serve`, on tokio's stream, uses tokio's).
pub(super) fn served_by_this_user(stream: &UnixStream) -> bool {
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
fn read_input() -> io::Result<Vec<u8>> {
    let mut input = Vec::new();
    io::stdin()
        .lock()
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(&mut input)?;
    Ok(input)
}

/// Sends `input`, reads the answer; an error is the daemon lost (the connection closed
/// or reset before a whole answer).
fn exchange(mut stream: UnixStream, input: &[u8]) -> io::Result<Printed> {
    let len = u32::try_from(input.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "stdin over 4 GiB"))?;
    stream.write_all(&len.to_le_bytes())?;
    stream.write_all(input)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    decode(&answer).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the connection closed before a whole answer",
        )
    })
}

/// What `hookhost dispatch` prints for `input`, dispatched in this process; `Err` when
/// it could not run at all (no runtime).
fn dispatch_here(input: &[u8]) -> Result<Printed, String> {
    let Some(args) = parsed_dispatch_args() else {
        return Ok(Printed::error("not a `hookhost dispatch` command line"));
    };
    super::super::one_shot(dispatch_stdin(&args, input, |project| {
        args.sources.host_guarded(project)
    }))
}
