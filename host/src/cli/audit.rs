//! `hookhost audit [--tail N] [--session S] [--json]`: read the audit log.

use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use hookhost::HostBuilder;
use hookhost::text::escape;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only the last N entries (after `--session`).
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
    /// Only the entries of this session.
    #[arg(long, value_name = "S")]
    session: Option<String>,
    /// Print the entries as JSON lines, as stored.
    #[arg(long)]
    json: bool,
}

pub fn run(args: AuditArgs) -> Result<ExitCode, String> {
    // The log dispatch writes, chosen by the same rules (managed `auditLog`, then an
    // accepted `HOOKHOST_AUDIT_LOG`, then the data directory's): a variable dispatch
    // refuses (relative, inside the workspace) must not make this read a repository's
    // forged log instead.
    let project = super::project::find(None, None)?;
    let host = HostBuilder::new(&project).standard_sources().build();
    let log = host
        .dispatcher()
        .audit_log()
        .ok_or("no audit log is configured")?;
    let mut entries = Vec::new();
    for entry in log.read()? {
        match entry {
            Ok(value) => entries.push(value),
            Err(e) => errln!(
                "warning: {}: {}",
                escape(&log.path().display().to_string()),
                escape(&e.to_string())
            ),
        }
    }
    if let Some(session) = &args.session {
        entries.retain(|e| e["session"].as_str() == Some(session.as_str()));
    }
    if let Some(n) = args.tail {
        let skip = entries.len().saturating_sub(n);
        entries.drain(..skip);
    }
    for entry in &entries {
        if args.json {
            outln!("{}", hookhost::text::escape_json(&entry.to_string()));
        } else {
            outln!("{}", line(entry));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One entry for people: time, session, event, tool, decision, and each hook's status.
/// Every field is escaped: session ids, tool names and hook ids come from the agent and
/// the config, and a `\r` or ESC in one must not make a line display as another entry.
fn line(entry: &Value) -> String {
    let text = |v: &Value| escape(v.as_str().unwrap_or("-")).into_owned();
    let hooks: Vec<String> = entry["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| {
            let mut s = format!(
                "{}({}:{})={}",
                text(&h["id"]),
                text(&h["source"]),
                text(&h["type"]),
                text(&h["status"])
            );
            if let Some(ms) = h["durationMs"].as_f64() {
                s.push_str(&format!(" {ms}ms"));
            }
            if let Some(fuel) = h["fuel"].as_u64() {
                s.push_str(&format!(" fuel={fuel}"));
            }
            s
        })
        .collect();
    format!(
        "{} {} {} {} {} [{}]",
        text(&entry["time"]),
        text(&entry["session"]),
        text(&entry["event"]),
        text(&entry["toolName"]),
        text(&entry["decision"]),
        hooks.join(", ")
    )
}
