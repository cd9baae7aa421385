//! `hookhost dispatch` and the background runner of async hooks.

use std::io::Read;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use hookhost::Host;
use serde_json::Value;

use super::{SourceArgs, one_shot_runtime};

/// What `dispatch` prints.
#[derive(Debug, Clone, Copy, ValueEnum, Default)]
enum Format {
    /// hookhost's Outcome JSON.
    #[default]
    Outcome,
    /// Claude Code's hook output JSON; exit 2 with the reason on stderr when blocked.
    Claude,
}

#[derive(Debug, Args)]
pub struct DispatchArgs {
    /// The event name (`PreToolUse`, `Stop`, ...); `hookhost events` lists them. With
    /// `--format claude` it may be omitted: the input's `hook_event_name` is used.
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

fn read_stdin() -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the input from stdin: {e}"))?;
    Ok(bytes)
}

/// The input JSON of `stdin` (empty: `{}`).
fn parse_input(stdin: &[u8]) -> Result<Value, String> {
    let text =
        std::str::from_utf8(stdin).map_err(|e| format!("the input on stdin is not UTF-8: {e}"))?;
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| format!("the input on stdin is not valid JSON: {e}"))
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
    let printed =
        one_shot_runtime()?.block_on(dispatch_stdin(&args, &stdin, || args.sources.host()));
    print!("{}", printed.stdout);
    eprint!("{}", printed.stderr);
    Ok(ExitCode::from(printed.code))
}

/// What `hookhost dispatch` prints for the event of `args` and its `stdin`, dispatched
/// on the host `host` builds (once the input is known to be valid); errors included. The
/// process and the dispatch daemon both answer through here, so they print the same
/// bytes.
pub async fn dispatch_stdin(
    args: &DispatchArgs,
    stdin: &[u8],
    host: impl FnOnce() -> Result<Host, String>,
) -> Printed {
    dispatch(args, stdin, host)
        .await
        .unwrap_or_else(|message| Printed::error(&message))
}

async fn dispatch(
    args: &DispatchArgs,
    stdin: &[u8],
    host: impl FnOnce() -> Result<Host, String>,
) -> Result<Printed, String> {
    let input = parse_input(stdin)?;
    let event = match (
        &args.event,
        input.get("hook_event_name").and_then(Value::as_str),
    ) {
        (Some(event), _) => event.clone(),
        (None, Some(event)) => event.to_string(),
        (None, None) => {
            return Err(
                "name the event (`hookhost dispatch PreToolUse`) or pass `hook_event_name`".into(),
            );
        }
    };
    let host = host()?;
    let outcome = host
        .dispatch(&event, input)
        .await
        .map_err(|e| e.to_string())?;
    match args.format {
        Format::Outcome => {
            let json = if args.pretty {
                serde_json::to_string_pretty(&outcome)
            } else {
                serde_json::to_string(&outcome)
            };
            Ok(Printed {
                stdout: json.map_err(|e| e.to_string())? + "\n",
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
            let response = hookhost::outcome::to_claude(spec, &outcome);
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
    one_shot_runtime()?.block_on(host.dispatcher().run_async_job(&job))?;
    Ok(ExitCode::SUCCESS)
}
