//! `hookhost dispatch` and the background runner of async hooks.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use hookhost::Host;
use serde_json::Value;

use hookhost::text::escape;

use super::{SourceArgs, one_shot};

/// What `dispatch` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
enum Format {
    /// hookhost's Outcome JSON.
    #[default]
    Outcome,
    /// Claude Code's hook output JSON; exit 2 with the reason on stderr when blocked.
    Claude,
    /// Codex CLI 0.171's hook input and output (docs/book/src/agents/codex.md).
    Codex,
    /// Gemini CLI 0.61's (docs/book/src/agents/gemini.md).
    Gemini,
    /// GitHub Copilot CLI 1.0.102's; the event on the command line (docs/book/src/agents/copilot.md).
    Copilot,
    /// Cursor's, as its hooks reference (Cursor 1.7) has them (docs/book/src/agents/cursor.md).
    Cursor,
    /// hookhost's OpenCode plugin's (OpenCode 1.18; docs/book/src/agents/opencode.md).
    Opencode,
}

impl Format {
    /// The agent whose adapter the format is, if it is one.
    fn agent(self) -> Option<hookhost::agents::Agent> {
        use hookhost::agents::Agent;
        match self {
            Format::Outcome | Format::Claude => None,
            Format::Codex => Some(Agent::Codex),
            Format::Gemini => Some(Agent::Gemini),
            Format::Copilot => Some(Agent::Copilot),
            Format::Cursor => Some(Agent::Cursor),
            Format::Opencode => Some(Agent::OpenCode),
        }
    }
}

#[derive(Debug, Args)]
pub struct DispatchArgs {
    /// The event name (`PreToolUse`, `Stop`, ...); `hookhost events` lists them. With
    /// `--format claude` it may be omitted: the input's `hook_event_name` is used. With an
    /// agent's format it is the agent's event name (`preToolUse` for Copilot, whose input
    /// names none).
    event: Option<String>,
    #[command(flatten)]
    pub(super) sources: SourceArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Pretty-print the outcome.
    #[arg(long)]
    pretty: bool,
}

/// Reads stdin, at most one byte more than an input may have (so that a larger one is
/// refused, not held).
fn read_stdin() -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(hookhost::dispatch::input::MAX_INPUT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the input from stdin: {e}"))?;
    Ok(bytes)
}

/// The input JSON of `stdin` (empty: `{}`), with what had to be repaired for it to be
/// read (see [`hookhost::dispatch::input`]): an input the agent sent is never refused
/// for a lone surrogate, a byte that is not UTF-8 or its depth, since a refused input
/// reaches no hook.
fn parse_input(stdin: &[u8]) -> Result<hookhost::dispatch::input::Input, String> {
    hookhost::dispatch::input::parse(stdin).map_err(|e| format!("the input on stdin {e}"))
}

/// What one `hookhost dispatch` prints and its exit status.
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
    pub code: u8,
}

impl Printed {
    /// A host error, as `main` reports one.
    pub fn error(message: &str) -> Printed {
        Printed {
            stdout: String::new(),
            stderr: super::error_text(message),
            code: super::ERROR_EXIT,
        }
    }
}

pub fn run(args: DispatchArgs) -> Result<ExitCode, String> {
    let stdin = read_stdin()?;
    // A runtime that cannot start (out of descriptors: tokio panics when it cannot
    // create its signal pipe) or a dispatch that panics is no answer: under `--format
    // claude` on a guarding event it blocks ([`unanswered`]).
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let trace = hookhost::telemetry::TraceContext::from_env();
        one_shot(dispatch_stdin(&args, &stdin, trace.as_ref(), |project| {
            args.sources.host_guarded(project)
        }))
    }));
    let printed = match attempt {
        Ok(Ok(printed)) => printed,
        Ok(Err(e)) => unanswered(&args, &stdin, &e),
        Err(_) => unanswered(
            &args,
            &stdin,
            "internal error: the dispatch panicked (a bug in hookhost; please report it)",
        ),
    };
    // The hooks ran and the audit line is written: a reader that went away changes
    // nothing, so a closed stdout or stderr is not an error here.
    {
        use std::io::Write;
        let _ = std::io::stdout()
            .lock()
            .write_all(printed.stdout.as_bytes());
        let _ = std::io::stdout().lock().flush();
    }
    super::output::write_stderr(&printed.stderr);
    // The answer is out: what telemetry holds goes now, for a bounded time (a dead or
    // silent collector delays the exit by at most that, and changes nothing else).
    if !hookhost::telemetry::flush_all(hookhost::telemetry::EXIT_FLUSH) {
        tracing::debug!("telemetry: not everything was exported before the exit");
    }
    Ok(ExitCode::from(printed.code))
}

/// What `hookhost dispatch` prints for the event of `args` and its `stdin`, dispatched
/// on the host `host` builds for the project (found from the arguments, the environment
/// and the input's `cwd`, once the input is known to be valid), as a child of the
/// caller's trace context `trace`; errors included. The
/// process and the dispatch daemon both answer through here, so they print the same
/// bytes.
pub async fn dispatch_stdin(
    args: &DispatchArgs,
    stdin: &[u8],
    trace: Option<&hookhost::telemetry::TraceContext>,
    host: impl FnOnce(&Path) -> Result<Host, String>,
) -> Printed {
    dispatch(args, stdin, trace, host)
        .await
        .unwrap_or_else(|message| match args.format.agent() {
            // Claude Code's drop-in blocks on exit 1 where the event guards
            // (`onFailure: "block"`); no other agent has that key, and exit 1 is "go
            // ahead" to Gemini CLI and Codex: the agent's own block instead, wherever
            // the host failed before it could answer.
            Some(agent) => agent_blocked(args, agent, stdin, &message, false),
            None => Printed::error(&message),
        })
}

async fn dispatch(
    args: &DispatchArgs,
    stdin: &[u8],
    trace: Option<&hookhost::telemetry::TraceContext>,
    host: impl FnOnce(&Path) -> Result<Host, String>,
) -> Result<Printed, String> {
    let hookhost::dispatch::input::Input {
        value: input,
        repairs,
    } = match parse_input(stdin) {
        Ok(input) => input,
        // An input hookhost refuses to read reaches no hook: it cannot guard.
        Err(e) => return Ok(unreadable(args, stdin, &e)),
    };
    // Another agent's words become hookhost's before anything reads them.
    let (input, adapted) = match args.format.agent() {
        Some(agent) => {
            match hookhost::agents::to_canonical(agent, args.event.as_deref(), input) {
                Ok(canonical) => (
                    canonical.input,
                    Some((agent, canonical.event, canonical.call)),
                ),
                // What the adapter refuses to read (an argument named twice) reaches no
                // hook: the agent's own block where its event guards (`dispatch_stdin`).
                Err(e) => return Err(e),
            }
        }
        None => (input, None),
    };
    let named = match &adapted {
        Some((_, event, _)) => Some(event.canonical.to_string()),
        None => args.event.clone(),
    };
    let event = match (&named, input.get("hook_event_name").and_then(Value::as_str)) {
        (Some(event), _) => event.clone(),
        (None, Some(event)) => event.to_string(),
        (None, None) => {
            return Err(
                "name the event (`hookhost dispatch PreToolUse`) or pass `hook_event_name`".into(),
            );
        }
    };
    let project = args
        .sources
        .find_project(input.get("cwd").and_then(Value::as_str))?;
    let host = host(&project)?;
    // Project hooks skipped for trust, and hooks skipped for a config error, would
    // otherwise fail open in silence: both reach the user as a `systemMessage`, once per
    // session and text (computed only under `--format claude`, and costing nothing in a
    // trusted workspace with a clean config).
    let notices: Vec<(String, NoticeState)> = if args.format == Format::Claude || adapted.is_some()
    {
        let session = input.get("session_id").and_then(Value::as_str);
        [
            (untrusted_notice(host.policy()), "trust-notice"),
            (config_error_notice(host.policy()), "config-notice"),
        ]
        .into_iter()
        .filter_map(|(notice, file)| {
            notice.map(|notice| (notice, NoticeState::for_session(session, file)))
        })
        .collect()
    } else {
        Vec::new()
    };
    let agent_name = match (args.format, &adapted) {
        (_, Some((agent, _, _))) => Some(agent.id()),
        (Format::Claude, None) => Some("claude"),
        _ => None,
    };
    let dispatched = host.dispatch_from(&event, input, Some(stdin), agent_name, trace);
    let mut outcome = match dispatched.await {
        Ok(outcome) => outcome,
        // The host could not read its config: no answer, never "go ahead".
        Err(e @ hookhost::dispatch::DispatchError::CannotGuard(_)) => {
            return Ok(unanswered(args, stdin, &e.to_string()));
        }
        Err(e) => return Err(e.to_string()),
    };
    for repair in repairs {
        outcome.host_notice(repair);
    }
    if let Some((agent, agent_event, call)) = adapted {
        // The host's own notices (trust, config errors), once per session and text.
        for (i, (notice, state)) in notices.into_iter().enumerate() {
            if state.first_time(&notice) {
                outcome.system_messages.insert(i, notice);
            }
        }
        let response = hookhost::agents::render(agent, agent_event, &call, &outcome);
        return Ok(agent_printed(response));
    }
    match args.format {
        Format::Outcome
        | Format::Codex
        | Format::Gemini
        | Format::Copilot
        | Format::Cursor
        | Format::Opencode => {
            let json = if args.pretty {
                serde_json::to_string_pretty(&outcome)
            } else {
                serde_json::to_string(&outcome)
            };
            let json = json.map_err(|e| e.to_string())?;
            Ok(Printed {
                stdout: hookhost::text::escape_json(&json).into_owned() + "\n",
                stderr: String::new(),
                code: 0,
            })
        }
        Format::Claude => {
            let spec = host
                .policy()
                .catalogue
                .get(&event)
                .expect("dispatch checked the event");
            // Tell the user why hooks do not run (trust, a config error), once per
            // session and reason. Only with exit 0: on exit 2 Claude Code ignores
            // stdout, so the message would be lost.
            for (i, (notice, _)) in notices.iter().enumerate() {
                outcome.system_messages.insert(i, notice.clone());
            }
            let mut response = hookhost::outcome::to_claude(spec, &outcome);
            if !notices.is_empty() {
                let mut kept = 0;
                for (notice, state) in notices {
                    if response.exit_code == 0 && state.first_time(&notice) {
                        kept += 1;
                    } else {
                        outcome.system_messages.remove(kept);
                    }
                }
                response = hookhost::outcome::to_claude(spec, &outcome);
            }
            let stdout = if response.stdout.is_empty() {
                String::new()
            } else {
                response.stdout + "\n"
            };
            Ok(Printed {
                stdout,
                stderr: response.stderr,
                code: response.exit_code as u8,
            })
        }
    }
}

/// What `hookhost dispatch` prints when it could not dispatch at all (`why`: no runtime,
/// a panic, its daemon lost and no dispatch in-process either, a config the host could
/// not read for want of descriptors or memory; a host error that is an
/// answer stays exit 1, issue 15.9; an input it refuses to read is [`unreadable`]): under
/// `--format claude`, on an event that honours `onFailure` (`EventSpec::honours_on_failure`:
/// PreToolUse, PermissionRequest, UserPromptSubmit, PostToolUse, …), Claude Code's block
/// or deny for the event (exit 2 with the reason on stderr; PermissionRequest: a deny in
/// JSON), since exit 1 is a non-blocking error that lets the action go ahead where the
/// drop-in has no `onFailure: "block"` (an older install, an older Claude Code);
/// elsewhere, and for the Outcome format, the host error (exit 1).
pub fn unanswered(args: &DispatchArgs, stdin: &[u8], why: &str) -> Printed {
    if let Some(agent) = args.format.agent() {
        return agent_blocked(args, agent, stdin, why, false);
    }
    let Format::Claude = args.format else {
        return Printed::error(why);
    };
    let named = args
        .event
        .clone()
        .or_else(|| match hookhost::dispatch::input::parse(stdin) {
            Ok(input) => input
                .value
                .get("hook_event_name")
                .and_then(Value::as_str)
                .map(str::to_string),
            Err(_) => hookhost::dispatch::input::event_name_in_prefix(stdin),
        });
    let catalogue = hookhost::event::EventCatalogue::default();
    let Some(spec) = named.as_deref().and_then(|name| catalogue.get(name)) else {
        return Printed::error(why);
    };
    blocked_for(spec, why)
}

/// What `hookhost dispatch` prints for an input it refuses to read (over
/// [`hookhost::dispatch::input::MAX_INPUT_BYTES`], or not JSON): the agent writes the
/// input (a command padded past the limit), and a refused input reaches no hook, so under
/// `--format claude` hookhost cannot guard: as [`unanswered`], the event's block where it
/// can block. The event is the argument's, else the `hook_event_name` of the input's first
/// [`hookhost::dispatch::input::EVENT_NAME_PREFIX`] bytes (the drop-in names no event on
/// its command line); when neither names an event hookhost knows, it blocks too (exit 2:
/// a block where the event can block, an error shown elsewhere). The Outcome format keeps
/// the host error.
fn unreadable(args: &DispatchArgs, stdin: &[u8], why: &str) -> Printed {
    if let Some(agent) = args.format.agent() {
        return agent_blocked(args, agent, stdin, why, true);
    }
    let Format::Claude = args.format else {
        return Printed::error(why);
    };
    let named = args
        .event
        .clone()
        .or_else(|| hookhost::dispatch::input::event_name_in_prefix(stdin));
    let catalogue = hookhost::event::EventCatalogue::default();
    match named.as_deref().and_then(|name| catalogue.get(name)) {
        Some(spec) => blocked_for(spec, why),
        None => Printed {
            stdout: String::new(),
            stderr: format!(
                "hookhost could not check this action: {} (and no event it knows is named in \
                 its first {} bytes); blocked (fail closed)\n",
                escape(why),
                hookhost::dispatch::input::EVENT_NAME_PREFIX
            ),
            code: 2,
        },
    }
}

/// Claude Code's block of `spec` for a dispatch that could not guard (`why`), where the
/// event honours `onFailure`; elsewhere the host error.
fn blocked_for(spec: &hookhost::event::EventSpec, why: &str) -> Printed {
    if !spec.honours_on_failure() {
        return Printed::error(why);
    }
    let response = hookhost::outcome::to_claude(spec, &hookhost::outcome::unanswered(spec, why));
    answer_printed(response.stdout, response.stderr, response.exit_code)
}

/// An agent's answer as printed: JSON on stdout (with a newline), its exit status.
fn agent_printed(response: hookhost::agents::AgentResponse) -> Printed {
    answer_printed(response.stdout, response.stderr, response.exit_code)
}

/// An answer's stdout (a newline added unless empty), stderr and exit status, printed.
fn answer_printed(stdout: String, stderr: String, code: impl TryInto<u8>) -> Printed {
    Printed {
        stdout: if stdout.is_empty() {
            stdout
        } else {
            stdout + "\n"
        },
        stderr,
        code: code.try_into().unwrap_or(1),
    }
}

/// What an agent's format prints for a dispatch that could not guard (`why`): as
/// [`unanswered`] for Claude Code, the agent's own deny or block where the event (by its
/// canonical name) honours `onFailure`, and the host error elsewhere. The event is the
/// argument's, else the one the input names in the agent's event field: read from the
/// input's first [`hookhost::dispatch::input::EVENT_NAME_PREFIX`] bytes when hookhost
/// refused to read it (`unread`: over the limit, not JSON; the drop-ins of Codex, Gemini
/// CLI, Cursor and OpenCode name no event on their command line). An unread input whose
/// event cannot be told blocks as [`unreadable`] does for Claude Code (exit 2 with the
/// reason on stderr, a block to Codex, Gemini CLI and Copilot CLI, and to the OpenCode
/// plugin, which blocks on any exit but 0): exit 1 would let the call go ahead.
fn agent_blocked(
    args: &DispatchArgs,
    agent: hookhost::agents::Agent,
    stdin: &[u8],
    why: &str,
    unread: bool,
) -> Printed {
    let named = args.event.clone().or_else(|| {
        let field = hookhost::agents::vocabulary::event_field(agent)?;
        match hookhost::dispatch::input::parse(stdin) {
            Ok(input) => input.value.get(field)?.as_str().map(str::to_string),
            Err(_) => hookhost::dispatch::input::string_in_prefix(stdin, field),
        }
    });
    let Some(event) = named
        .as_deref()
        .and_then(|name| hookhost::agents::vocabulary::event(agent, name))
    else {
        if !unread {
            return Printed::error(why);
        }
        return Printed {
            stdout: String::new(),
            stderr: format!(
                "hookhost could not check this action: {} (and no {} event it maps is named \
                 in its first {} bytes); blocked (fail closed)\n",
                escape(why),
                agent.shown(),
                hookhost::dispatch::input::EVENT_NAME_PREFIX
            ),
            code: 2,
        };
    };
    let catalogue = hookhost::event::EventCatalogue::default();
    let Some(spec) = catalogue.get(event.canonical) else {
        return Printed::error(why);
    };
    if !spec.honours_on_failure() {
        return Printed::error(why);
    }
    let outcome = hookhost::outcome::unanswered(spec, why);
    agent_printed(hookhost::agents::render(
        agent,
        event,
        &hookhost::agents::Call::default(),
        &outcome,
    ))
}

/// The notice of project hooks skipped for trust, for the policy of a dispatch.
fn untrusted_notice(policy: &hookhost::policy::Policy) -> Option<String> {
    // Cheap unless the workspace is untrusted: the canonical path costs a syscall only
    // then.
    let untrusted = policy
        .workspace_trust
        .as_ref()
        .is_some_and(|decision| !decision.is_trusted());
    if !untrusted {
        return None;
    }
    let workspace = hookhost::trust::canonical_workspace(&policy.project_dir);
    hookhost::outcome::untrusted_notice(policy, &workspace)
}

/// The most config errors a `systemMessage` names; the rest are counted.
const NOTICE_ERRORS: usize = 5;
/// The most characters of one config error in a `systemMessage` (the file, the JSON path
/// and the message; the whole error is on stderr).
const NOTICE_ERROR_CHARS: usize = 400;

/// The notice of hooks skipped for config errors (a trusted project's `hooks.json` with a
/// typo, a user file that does not parse): each error with its file, JSON path and
/// message, escaped and cut, since a guard that silently went away is what the user must
/// hear about.
fn config_error_notice(policy: &hookhost::policy::Policy) -> Option<String> {
    if policy.errors.is_empty() {
        return None;
    }
    let mut lines: Vec<String> = policy
        .errors
        .iter()
        .take(NOTICE_ERRORS)
        .map(|error| {
            let text = escape(&error.to_string()).into_owned();
            match text.char_indices().nth(NOTICE_ERROR_CHARS) {
                Some((at, _)) => format!("{}…", &text[..at]),
                None => text,
            }
        })
        .collect();
    if policy.errors.len() > NOTICE_ERRORS {
        lines.push(format!(
            "and {} more (`hookhost validate` lists them)",
            policy.errors.len() - NOTICE_ERRORS
        ));
    }
    let (what, until) = if policy.errors.len() == 1 {
        ("a config error", "it is")
    } else {
        ("config errors", "they are")
    };
    Some(format!(
        "hookhost: hooks are skipped for {what} until {until} fixed: {}",
        lines.join("; ")
    ))
}

/// Which notice of a kind (a file name in the session's directory) a session was last
/// shown, kept in the session's private directory of the CLI's session store, so that
/// one-shot processes and dispatch daemons agree.
struct NoticeState {
    /// `None`: no session id, so nothing to remember: the notice is shown every time.
    session: Option<String>,
    /// The file that remembers it.
    file: &'static str,
}

impl NoticeState {
    fn for_session(session: Option<&str>, file: &'static str) -> NoticeState {
        NoticeState {
            session: session.filter(|s| !s.is_empty()).map(str::to_string),
            file,
        }
    }

    /// Whether `notice` is new to the session (then it is recorded as shown). A state
    /// that cannot be read or written shows the notice again rather than hide it.
    fn first_time(&self, notice: &str) -> bool {
        use std::io::{Read, Seek, Write};
        let Some(session) = &self.session else {
            return true;
        };
        let store = hookhost::session::DiskStore::new(super::sessions_dir());
        let recorded = store
            .create_session_dir(session)
            .map_err(String::from)
            .and_then(|dir| {
                let file = dir.join(self.file);
                let mut file = hookhost::session::open_private_file(&file, true)?
                    .ok_or_else(|| format!("cannot create `{}`", file.display()))?;
                let mut shown = Vec::new();
                let cap = notice.len() as u64 + 1;
                (&mut file)
                    .take(cap)
                    .read_to_end(&mut shown)
                    .map_err(|e| e.to_string())?;
                if shown == notice.as_bytes() {
                    return Ok(false);
                }
                file.set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| file.write_all(notice.as_bytes()))
                    .map_err(|e| e.to_string())?;
                Ok(true)
            });
        recorded.unwrap_or_else(|e| {
            tracing::warn!("cannot record the notice `{}`: {e}", self.file);
            true
        })
    }
}

/// `hookhost run-async`: the detached runner of a dispatch's async hooks. Its job (the
/// input and the admission record of each hook) comes on stdin, a pipe from the
/// dispatch: nothing in argv, the environment or a file that another user could read or
/// swap.
#[derive(Debug, Args)]
pub struct RunAsyncArgs {
    #[command(flatten)]
    sources: SourceArgs,
}

pub fn run_async(args: RunAsyncArgs) -> Result<ExitCode, String> {
    // Leave the caller's session and process group: the agent may kill those as soon as
    // `dispatch` returns, and an async hook must outlive it.
    // SAFETY: setsid has no memory-safety preconditions.
    unsafe {
        libc::setsid();
    }
    let mut job = Vec::new();
    std::io::stdin()
        .take(hookhost::dispatch::ASYNC_JOB_CAP + 1)
        .read_to_end(&mut job)
        .map_err(|e| format!("cannot read the async job from stdin: {e}"))?;
    if job.len() as u64 > hookhost::dispatch::ASYNC_JOB_CAP {
        return Err(format!(
            "the async job on stdin is larger than {} bytes",
            hookhost::dispatch::ASYNC_JOB_CAP
        ));
    }
    let host = args.sources.host()?;
    one_shot(host.dispatcher().run_async_job(&job))??;
    Ok(ExitCode::SUCCESS)
}
