//! The caller's side: forward this process's stdin to the daemon of its command line,
//! or dispatch in-process (and start a daemon for the next call).

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use clap::Parser;

use super::super::dispatch::{DispatchArgs, Printed, dispatch_stdin};
use super::key::{exchange, in_process_only, read_input, served_by_this_user, unreadable_stdin};
use super::place::Place;
use super::wire::decode;
use super::{MAX_INPUT, MODE_VAR};

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
/// ([`super::key::listening_stdin`]), and never forwards. (The small client
/// `hookhost-dispatch` decides the same way, through the same [`super::key`].)
pub fn forward() -> Option<ExitCode> {
    if in_process_only()
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
            eprint!("{}", super::super::error_text(&unreadable_stdin(&e)));
            return Some(ExitCode::from(super::super::ERROR_EXIT));
        }
    };
    let printed = if input.len() > MAX_INPUT {
        drop(stream);
        dispatch_here(&input).unwrap_or_else(|message| Printed::error(&message))
    } else {
        match exchange(stream, &input).and_then(|answer| {
            decode(&answer).ok_or_else(|| io::Error::other("an answer that is not whole"))
        }) {
            Ok(printed) => printed,
            Err(e) => retry_here(&input, &place.socket, &e),
        }
    };
    let mut out = io::stdout().lock();
    let _ = out.write_all(printed.stdout.as_bytes());
    let _ = out.flush();
    let _ = io::stderr().write_all(printed.stderr.as_bytes());
    // Dispatched here after all (a lost daemon, a large input): its telemetry, bounded.
    hookhost::telemetry::flush_all(hookhost::telemetry::EXIT_FLUSH);
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

/// What `hookhost dispatch` prints for `input`, dispatched in this process; `Err` when
/// it could not run at all (no runtime).
fn dispatch_here(input: &[u8]) -> Result<Printed, String> {
    let Some(args) = parsed_dispatch_args() else {
        return Ok(Printed::error("not a `hookhost dispatch` command line"));
    };
    let trace = hookhost::telemetry::TraceContext::from_env();
    super::super::one_shot(dispatch_stdin(&args, input, trace.as_ref(), |project| {
        args.sources.host_guarded(project)
    }))
}
