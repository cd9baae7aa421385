//! `hookhost audit`: the audit log for people. Entries one per line (or as stored, with
//! `--json`), or a summary table (`--summary`); filtered by session, event, hook,
//! decision and time; `--tail N` reads the log backward from its end
//! ([`hookhost::audit::AuditLog::read_tail`]), so it costs what the last entries take,
//! whatever the size of the log. Every field that came from the log is escaped and
//! bounded before the terminal shows it. `hookhost audit verify` checks the log's chain
//! (`verify.rs`, `docs/book/src/audit-chain.md`).

mod summary;
mod verify;
mod when;

use std::ops::ControlFlow;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;

use hookhost::HostBuilder;
use hookhost::text::escape;

/// A merged decision, as the log spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DecisionArg {
    None,
    Allow,
    Ask,
    Defer,
    Deny,
    Block,
}

impl DecisionArg {
    fn as_str(self) -> &'static str {
        match self {
            DecisionArg::None => "none",
            DecisionArg::Allow => "allow",
            DecisionArg::Ask => "ask",
            DecisionArg::Defer => "defer",
            DecisionArg::Deny => "deny",
            DecisionArg::Block => "block",
        }
    }
}

/// What `hookhost audit` does besides reading the log.
#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Check the log's chain and signatures offline: exit 0 when intact, 1 on any break
    /// (docs/book/src/audit-chain.md).
    Verify(verify::VerifyArgs),
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: Option<AuditCommand>,
    /// Only the last N entries (of those the filters keep), read backward from the end
    /// of the log: a log of any size answers at once.
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
    /// Only the entries of this session.
    #[arg(long, value_name = "S")]
    session: Option<String>,
    /// Only the entries of this event (`PreToolUse`, `Stop`, …).
    #[arg(long, value_name = "EVENT")]
    event: Option<String>,
    /// Only the entries in which the hook with this id ran (with `--summary`: only that
    /// hook's rows).
    #[arg(long, value_name = "ID")]
    hook: Option<String>,
    /// Only the entries whose merged decision is this one.
    #[arg(long, value_enum, value_name = "DECISION")]
    decision: Option<DecisionArg>,
    /// Only entries at or after this time: `2026-12-01`, `2026-12-01T09:30`,
    /// `2026-12-01T09:30:00Z` (UTC), or an age: `90s`, `30m`, `12h`, `7d`.
    #[arg(long, value_name = "TIME", value_parser = when::parse)]
    since: Option<String>,
    /// Only entries before this time (same forms as `--since`).
    #[arg(long, value_name = "TIME", value_parser = when::parse)]
    until: Option<String>,
    /// A table instead of entries: events, decisions and failures per day and per hook,
    /// the slowest hooks, and wasm hooks' fuel and memory percentiles.
    #[arg(long, conflicts_with = "json")]
    summary: bool,
    /// Print the entries as JSON lines, as stored.
    #[arg(long)]
    json: bool,
}

impl AuditArgs {
    /// Whether `entry` passes every filter given.
    fn keeps(&self, entry: &Value) -> bool {
        let text = |key: &str| entry[key].as_str();
        // The chain's own lines (genesis, checkpoints) are no dispatch's entry.
        if entry.get("kind").is_some() {
            return false;
        }
        if self
            .session
            .as_deref()
            .is_some_and(|s| text("session") != Some(s))
        {
            return false;
        }
        if self
            .event
            .as_deref()
            .is_some_and(|e| text("event") != Some(e))
        {
            return false;
        }
        if self
            .decision
            .is_some_and(|d| text("decision") != Some(d.as_str()))
        {
            return false;
        }
        if let Some(id) = &self.hook {
            let ran = entry["hooks"]
                .as_array()
                .is_some_and(|hooks| hooks.iter().any(|h| h["id"].as_str() == Some(id)));
            if !ran {
                return false;
            }
        }
        if self.since.is_some() || self.until.is_some() {
            // Only a time of the shape the log writes compares as text.
            let Some(time) = text("time").filter(|t| when::is_log_time(t)) else {
                return false;
            };
            if self.since.as_deref().is_some_and(|since| time < since) {
                return false;
            }
            if self.until.as_deref().is_some_and(|until| time >= until) {
                return false;
            }
        }
        true
    }
}

pub fn run(args: AuditArgs) -> Result<ExitCode, String> {
    if let Some(AuditCommand::Verify(verify)) = args.command {
        return verify::run(verify);
    }
    let log = configured_log()?;
    let shown = escape(&log.path().display().to_string()).into_owned();
    let warn = |problem: &str| errln!("warning: {shown}: {}", escape(problem));
    let mut summary = summary::Summary::new(args.hook.clone());
    let mut each = |entry: &Value| {
        if args.summary {
            summary.add(entry);
        } else if args.json {
            outln!("{}", hookhost::text::escape_json(&entry.to_string()));
        } else {
            outln!("{}", line(entry));
        }
    };
    match args.tail {
        Some(n) => {
            let tail = log.read_tail(n, |e| args.keeps(e))?;
            for problem in &tail.problems {
                warn(problem);
            }
            tail.entries.iter().for_each(&mut each);
        }
        None => log.read_each(|entry| {
            match entry {
                Ok(entry) if args.keeps(&entry) => each(&entry),
                Ok(_) => {}
                Err(problem) => warn(&problem),
            }
            ControlFlow::Continue(())
        })?,
    }
    if args.summary {
        out!("{}", summary.table());
    }
    Ok(ExitCode::SUCCESS)
}

/// The log dispatch writes, chosen by the same rules (managed `auditLog`, then an
/// accepted `HOOKHOST_AUDIT_LOG`, then the data directory's): a variable dispatch refuses
/// (relative, inside the workspace) must not make a reader take a repository's forged
/// log instead.
fn configured_log() -> Result<hookhost::audit::AuditLog, String> {
    let project = super::project::find(None, None)?;
    let host = HostBuilder::new(&project).standard_sources().build();
    host.dispatcher()
        .audit_log()
        .cloned()
        .ok_or_else(|| "no audit log is configured".to_string())
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
            // Bounded as in the summary: `1e308` is 309 digits once shown (red team, stop 37).
            if let Some(ms) = h["durationMs"]
                .as_f64()
                .filter(|ms| (0.0..=summary::MAX_DURATION_MS).contains(ms))
            {
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
