//! The dispatch daemon: unless `HOOKHOST_DISPATCH_DAEMON=off`, `hookhost dispatch` hands
//! its stdin to a background process that runs the very same command line and stays
//! warm (compiled plugins in memory, pooled instances, no process start-up of its own),
//! and prints what that process answers.
//!
//! A daemon is told it is one by descriptors, never by a variable (a repository can set
//! variables for the `hookhost dispatch` that Claude Code runs, and one that turned it
//! into a daemon would answer nothing): the caller takes the daemon's lock, binds its
//! socket, and starts the daemon with the listening socket as its stdin and the locked
//! lock file as its stdout. An agent gives a hook a pipe (or a connected socket pair) as
//! stdin, never a listening socket, so no environment can make a dispatch a daemon; and
//! the daemon checks that the socket is bound at the place of its own command line.
//!
//! The server checks every connection's peer credentials (`SO_PEERCRED`): it answers
//! only its own effective uid, whatever its socket's or directory's mode; another uid's
//! connection is closed unanswered and logged. (The client checks the daemon's uid too.)
//!
//! The daemon is keyed by everything a dispatch depends on besides its stdin: the
//! `hookhost` executable (path and file stamp), the working directory, the user's home
//! in the password database, the arguments and the whole environment. Two callers share
//! a daemon only when their dispatches would be the same process, so command hooks see
//! the caller's environment and directory. Every
//! request checks the files the config was built from (a `stat` each) and rebuilds it
//! when one changed, so it sees what a one-shot process would read; only the caches are
//! warm. With no daemon listening, the caller dispatches in-process and
//! starts one in the background for the next call, so the first call never waits.
//!
//! Protocol, one request per connection: the client writes the length of its stdin and
//! of its trace context (u32, little-endian, each), its stdin, and its trace context
//! (`TRACEPARENT`, a newline, `TRACESTATE`; empty without one: never part of the key,
//! so a traced caller keeps its daemon), then waits; the daemon answers with the exit code
//! (1 byte), the lengths of stdout and stderr (u32 each), then stdout and stderr. A
//! caller that goes away before the answer (its agent killed it) closes the connection,
//! and the daemon cancels its dispatch: the hooks' processes are killed, as they would
//! be with the caller's process group.

use std::time::Duration;

mod client;
mod key;
mod place;
mod server;
mod wire;

// What `key.rs` names as `super::env` and `super::file` (the small client
// `hookhost-dispatch` compiles the same file beside `config/env.rs` and a `file` of its own).
use hookhost::config::{env, file};

pub use client::forward;
pub use server::serve_if_started;

/// Unset, empty or `auto`: use a dispatch daemon, starting one when none listens. `off`
/// (or any other value: a misspelt setting falls back to the plain process): dispatch
/// in-process.
const MODE_VAR: &str = "HOOKHOST_DISPATCH_DAEMON";
/// Seconds without a request after which a daemon exits (default 600; 1 to 86400).
const IDLE_VAR: &str = "HOOKHOST_DISPATCH_DAEMON_IDLE_SECS";
/// The longest idle time `IDLE_VAR` may set.
const MAX_IDLE_SECS: u64 = 86_400;
const DEFAULT_IDLE: Duration = Duration::from_secs(600);
/// At most this many daemons per data directory; beyond, callers dispatch in-process
/// (an agent whose hook environment changes on every call must not fill the machine).
const MAX_DAEMONS: usize = 16;
/// A daemon's log is emptied when a new daemon starts with it beyond this size.
const LOG_CAP: u64 = 1 << 20;
/// The largest stdin a daemon takes ([`key::MAX_INPUT`]), the one-shot process's own cap.
const MAX_INPUT: usize = key::MAX_INPUT;
const _: () = assert!(MAX_INPUT == hookhost::dispatch::input::MAX_INPUT_BYTES);
/// Requests a daemon serves at once, lowered to a quarter of `RLIMIT_NOFILE`
/// (`hookhost::serve::slots::connection_cap`); beyond, it stops accepting until one is
/// answered (the callers wait in the socket's backlog). One client process holds at most a
/// quarter of them (more are answered with an error), and a connection that sends no
/// request within `HOOKHOST_CONNECTION_IDLE_SECS` (60) is closed.
const MAX_CONNECTIONS: usize = 256;
/// How long `accept` pauses after it failed (out of descriptors: `EMFILE`), instead of
/// retrying in a busy loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// The files of a daemon that is gone (killed, or exited with an error) are removed by
/// the next daemon start in the same directory once they are this old: a starting
/// daemon's are fresh, and a failure's log stays readable for a while.
const STALE_AFTER: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    /// The events `hookhost-dispatch` answers with a host error rather than a block when
    /// it cannot run `hookhost` at all are exactly those of the event table that can
    /// block but do not honour `onFailure`.
    #[test]
    fn the_small_client_knows_the_loop_events() {
        let catalogue = hookhost::event::EventCatalogue::default();
        let mut table: Vec<&str> = catalogue
            .names()
            .into_iter()
            .filter(|name| {
                let spec = catalogue.get(name).expect("named by the catalogue");
                spec.can_block() && !spec.honours_on_failure()
            })
            .collect();
        table.sort_unstable();
        let mut listed = super::key::ON_FAILURE_IGNORED_EVENTS.to_vec();
        listed.sort_unstable();
        assert_eq!(listed, table);
    }

    /// The agents' events on which `hookhost-dispatch` blocks when it cannot run
    /// `hookhost` are exactly the adapters' events whose canonical event honours
    /// `onFailure` (red team, issue 30: the client answered every agent's format with
    /// exit 1, which Gemini CLI and Codex read as "go ahead").
    #[test]
    fn the_small_client_knows_the_agents_guarding_events() {
        let catalogue = hookhost::event::EventCatalogue::default();
        let mut table: Vec<(&str, &str)> = hookhost::agents::vocabulary::EVENTS
            .iter()
            .filter(|e| {
                catalogue
                    .get(e.canonical)
                    .is_some_and(|spec| spec.honours_on_failure())
            })
            .map(|e| (e.agent.id(), e.name))
            .collect();
        table.sort_unstable();
        let mut listed = super::key::AGENT_BLOCKING_EVENTS.to_vec();
        listed.sort_unstable();
        assert_eq!(listed, table);
    }
}
