//! `hookhost hooks`, `hookhost validate` and `hookhost events`.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use hookhost::event::built_in_names;
use hookhost::policy::{HandlerSpec, Hook, Policy};
use hookhost::text::escape;

use super::SourceArgs;

#[derive(Debug, Args)]
pub struct HooksArgs {
    #[command(flatten)]
    sources: SourceArgs,
    /// Only hooks of this event.
    #[arg(long)]
    event: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One line of `hookhost hooks`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HookLine {
    id: String,
    source: String,
    file: String,
    event: String,
    matcher: String,
    #[serde(rename = "type")]
    kind: String,
    handler: String,
    runs: bool,
    why_not: Option<String>,
    /// A required hook: when it matches but gives no verdict, the event fails closed
    /// (docs/book/src/required-hooks.md).
    required: bool,
}

/// Why a hook would not run, from policy or from a quick look at what it names.
fn why_not(hook: &Hook, policy: &Policy) -> Option<String> {
    if let Some(skip) = &hook.skip {
        return Some(skip.clone());
    }
    match &hook.handler {
        HandlerSpec::Command(c) if c.args.is_some() => {
            (!hookhost::handlers::command::program_exists(&c.command, &policy.project_dir))
                .then(|| format!("program `{}` is not found or not executable", c.command))
        }
        HandlerSpec::Http(h) => match policy.settings.url_allowlist_for(hook.origin.kind) {
            Some(list) if !list.allows(&h.url) => {
                Some(format!("URL `{}` is not in `allowedHttpHookUrls`", h.url))
            }
            _ => None,
        },
        HandlerSpec::Wasm(w) if w.oci.is_some() => None,
        HandlerSpec::Wasm(w) => plugin_refused(w, policy),
        _ => None,
    }
}

/// Why a wasm hook's plugin would not be admitted now (`gate::plugin_refusal`: the
/// loader's look, taken now; the loader decides again at every load).
fn plugin_refused(w: &hookhost::policy::WasmSpec, policy: &Policy) -> Option<String> {
    let list = &policy.settings.plugin_allowlist;
    hookhost::gate::plugin_refusal(&w.plugin, w.sha256.as_deref(), list)
        .map(|(check, _, message)| format!("{}: {message}", check.words()))
}

/// `hookhost hooks`: the table is for people, so every field that came from a config file
/// (ids, matchers, commands, reasons) is escaped; `--json` stays JSON.
pub fn run(args: HooksArgs) -> Result<ExitCode, String> {
    let host = args.sources.host()?;
    let policy = host.policy();
    let mut lines = Vec::new();
    for hook in &policy.hooks {
        if args.event.as_deref().is_some_and(|e| e != hook.event) {
            continue;
        }
        let matcher = policy
            .groups(&hook.event)
            .iter()
            .find(|g| g.hooks.iter().any(|h| h.id == hook.id))
            .and_then(|g| g.matcher_source.clone())
            .unwrap_or_else(|| "*".into());
        let why_not = why_not(hook, policy);
        lines.push(HookLine {
            id: hook.id.clone(),
            source: hook.origin.kind.to_string(),
            file: hook.origin.location.clone(),
            event: hook.event.clone(),
            matcher,
            kind: hook.handler.type_name().into(),
            handler: hook.handler.summary(),
            runs: why_not.is_none(),
            why_not,
            required: hook.required,
        });
    }
    if args.json {
        let json = serde_json::to_string_pretty(&lines).map_err(|e| e.to_string())?;
        outln!("{}", hookhost::text::escape_json(&json));
    } else if lines.is_empty() {
        outln!("no hooks configured");
    } else {
        outln!(
            "{:<9} {:<18} {:<14} {:<8} {:<34} STATE",
            "SOURCE",
            "EVENT",
            "MATCHER",
            "TYPE",
            "ID"
        );
        for l in &lines {
            let state = match (&l.why_not, l.required) {
                (None, false) => "runs".to_string(),
                (None, true) => "required, runs".to_string(),
                (Some(why), false) => format!("skipped: {}", escape(why)),
                (Some(why), true) => {
                    format!("required, would not run (fails closed): {}", escape(why))
                }
            };
            outln!(
                "{:<9} {:<18} {:<14} {:<8} {:<34} {state}",
                l.source,
                escape(&l.event),
                escape(&l.matcher),
                l.kind,
                escape(&l.id)
            );
            outln!("{:<9} {}", "", escape(&l.handler));
        }
    }
    print_problems(policy);
    for warning in super::install::agent_warnings() {
        errln!("warning: {}", escape(&warning));
    }
    Ok(ExitCode::SUCCESS)
}

/// The config's warnings and errors on stderr, one escaped line each (they quote values
/// and paths from the files).
fn print_problems(policy: &Policy) {
    for warning in &policy.warnings {
        errln!("warning: {}", escape(&warning.to_string()));
    }
    for error in &policy.errors {
        errln!("error: {}", escape(&error.to_string()));
    }
}

/// Arguments of `hookhost validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    sources: SourceArgs,
    /// Print one JSON object (`ok`, `hooks`, `sources`, `errors`, `warnings`;
    /// docs/book/src/json-output.md) instead of text; the exit status is the same.
    #[arg(long)]
    json: bool,
}

/// `hookhost validate --json`: the verdict and every problem with its file, JSON path
/// and message. The field names are stable (docs/book/src/json-output.md).
#[derive(Debug, Serialize)]
struct ValidateReport<'a> {
    ok: bool,
    hooks: usize,
    sources: usize,
    errors: &'a [hookhost::config::ConfigError],
    warnings: &'a [hookhost::config::ConfigWarning],
    /// What `hookhost.lock` says of the config's `oci://` plugins (a missing or moved pin).
    #[serde(rename = "lockErrors")]
    lock_errors: &'a [String],
    /// A registry that could not be asked whether a tag moved.
    #[serde(rename = "lockWarnings")]
    lock_warnings: &'a [String],
    /// An agent that will not run hookhost's drop-in yet (Codex's hook trust).
    #[serde(rename = "agentWarnings")]
    agent_warnings: &'a [String],
}

pub fn validate(args: ValidateArgs) -> Result<ExitCode, String> {
    let host = args.sources.host()?;
    let policy = host.policy();
    let sources: std::collections::BTreeSet<&str> = policy
        .hooks
        .iter()
        .map(|h| h.origin.location.as_str())
        .collect();
    let (lock_errors, lock_warnings) =
        super::oci::check_lock(&args.sources.find_project(None)?, policy);
    let ok = policy.errors.is_empty() && lock_errors.is_empty();
    let agent_warnings = super::install::agent_warnings();
    if args.json {
        let report = ValidateReport {
            ok,
            hooks: policy.hooks.len(),
            sources: sources.len(),
            errors: &policy.errors,
            warnings: &policy.warnings,
            lock_errors: &lock_errors,
            lock_warnings: &lock_warnings,
            agent_warnings: &agent_warnings,
        };
        let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        outln!("{}", hookhost::text::escape_json(&json));
    } else {
        print_problems(policy);
        for warning in lock_warnings.iter().chain(&agent_warnings) {
            errln!("warning: {}", escape(warning));
        }
        for error in &lock_errors {
            errln!("error: {}", escape(error));
        }
        if ok {
            outln!(
                "ok: {} hooks from {} sources, {} warnings",
                policy.hooks.len(),
                sources.len(),
                policy.warnings.len() + lock_warnings.len() + agent_warnings.len()
            );
        } else {
            outln!(
                "{} errors, {} warnings",
                policy.errors.len() + lock_errors.len(),
                policy.warnings.len() + lock_warnings.len()
            );
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Arguments of `hookhost events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Print a JSON array (one object per event; docs/book/src/json-output.md) instead of a table.
    #[arg(long)]
    json: bool,
}

/// One event of `hookhost events --json`. The field names are stable
/// (docs/book/src/json-output.md).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EventLine {
    name: String,
    /// The input field its matcher tests; `null` when matchers are ignored.
    matcher_field: Option<String>,
    /// What exit code 2 does: `blocks`, `notice` or `ignored`.
    exit2: &'static str,
    /// How hooks state a decision: `none`, `block`, `permission`, `permissionRequest`,
    /// `continueOnly`.
    decision: &'static str,
    /// Every answer is read as a deny or nothing.
    refuses_only: bool,
    /// A hook's timeout blocks the event.
    timeout_blocks: bool,
    /// Whether the event carries a tool call (`tool_name`, `tool_input`).
    tool_event: bool,
    default_timeout_seconds: f64,
    /// The `hookSpecificOutput` keys the event honours.
    outputs: Vec<&'static str>,
}

pub fn events(args: EventsArgs) -> Result<ExitCode, String> {
    use hookhost::event::{DecisionStyle, Exit2};
    let catalogue = hookhost::EventCatalogue::default();
    let mut lines = Vec::new();
    let mut decisions = Vec::new();
    for name in built_in_names() {
        let s = catalogue.get(name).expect("built-in event");
        // The table's decision column: refuse-only events read every answer as a deny or
        // nothing; on timeout-blocking ones a timeout is a deny.
        decisions.push(match (s.refuses_only(), s.timeout_blocks()) {
            (true, _) => "RefuseOnly".to_string(),
            (_, true) => format!("{:?}+timeout", s.decision),
            _ => format!("{:?}", s.decision),
        });
        lines.push(EventLine {
            name: s.name.to_string(),
            matcher_field: s.matcher_field.as_deref().map(str::to_string),
            exit2: match s.exit2 {
                Exit2::Blocks => "blocks",
                Exit2::Notice => "notice",
                Exit2::Ignored => "ignored",
            },
            decision: match s.decision {
                DecisionStyle::None => "none",
                DecisionStyle::Block => "block",
                DecisionStyle::Permission => "permission",
                DecisionStyle::PermissionRequest => "permissionRequest",
                DecisionStyle::ContinueOnly => "continueOnly",
            },
            refuses_only: s.refuses_only(),
            timeout_blocks: s.timeout_blocks(),
            tool_event: s.tool_event,
            default_timeout_seconds: s.default_timeout.as_secs_f64(),
            outputs: s.specific_outputs.iter().map(|k| k.name).collect(),
        });
    }
    if args.json {
        let json = serde_json::to_string_pretty(&lines).map_err(|e| e.to_string())?;
        outln!("{}", hookhost::text::escape_json(&json));
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<21} {:<18} {:<8} {:<18} {:>8}  OUTPUTS",
        "EVENT",
        "MATCHER FIELD",
        "EXIT 2",
        "DECISION",
        "TIMEOUT"
    );
    for (e, decision) in lines.iter().zip(&decisions) {
        outln!(
            "{:<21} {:<18} {:<8} {:<18} {:>7}s  {}",
            escape(&e.name),
            escape(e.matcher_field.as_deref().unwrap_or("-")),
            e.exit2,
            decision,
            e.default_timeout_seconds,
            escape(&e.outputs.join(", "))
        );
    }
    Ok(ExitCode::SUCCESS)
}
