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
        HandlerSpec::Wasm(w) => {
            (!w.plugin.is_file()).then(|| format!("plugin `{}` does not exist", w.plugin.display()))
        }
        _ => None,
    }
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
            let state = match &l.why_not {
                None => "runs".to_string(),
                Some(why) => format!("skipped: {}", escape(why)),
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

pub fn validate(args: SourceArgs) -> Result<ExitCode, String> {
    let host = args.host()?;
    let policy = host.policy();
    print_problems(policy);
    let (lock_errors, lock_warnings) = super::oci::check_lock(&args.find_project(None)?, policy);
    for warning in &lock_warnings {
        errln!("warning: {}", escape(warning));
    }
    for error in &lock_errors {
        errln!("error: {}", escape(error));
    }
    if policy.errors.is_empty() && lock_errors.is_empty() {
        let sources: std::collections::BTreeSet<&str> = policy
            .hooks
            .iter()
            .map(|h| h.origin.location.as_str())
            .collect();
        outln!(
            "ok: {} hooks from {} sources, {} warnings",
            policy.hooks.len(),
            sources.len(),
            policy.warnings.len()
        );
        Ok(ExitCode::SUCCESS)
    } else {
        outln!(
            "{} errors, {} warnings",
            policy.errors.len() + lock_errors.len(),
            policy.warnings.len() + lock_warnings.len()
        );
        Ok(ExitCode::from(1))
    }
}

pub fn events() -> Result<ExitCode, String> {
    let catalogue = hookhost::EventCatalogue::default();
    outln!(
        "{:<21} {:<18} {:<8} {:<18} {:>8}  OUTPUTS",
        "EVENT",
        "MATCHER FIELD",
        "EXIT 2",
        "DECISION",
        "TIMEOUT"
    );
    for name in built_in_names() {
        let s = catalogue.get(name).expect("built-in event");
        outln!(
            "{:<21} {:<18} {:<8} {:<18} {:>7}s  {}",
            escape(&s.name),
            escape(s.matcher_field.as_deref().unwrap_or("-")),
            format!("{:?}", s.exit2).to_lowercase(),
            // Refuse-only events read every answer as a deny or nothing; on
            // timeout-blocking ones a timeout is a deny.
            match (s.refuses_only(), s.timeout_blocks()) {
                (true, _) => "RefuseOnly".to_string(),
                (_, true) => format!("{:?}+timeout", s.decision),
                _ => format!("{:?}", s.decision),
            },
            s.default_timeout.as_secs_f64(),
            escape(
                &s.specific_outputs
                    .iter()
                    .map(|k| k.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}
