//! `hookhost demo` driven as a user runs it: the binary, in a directory of the test's own,
//! with `--json`, and its printed session read back into steps.
//!
//! Include it with `#[path]` (it is not a test target of its own):
//! `#[path = "common/demo.rs"] mod demo_run;` from `host/tests/`,
//! `#[path = "../common/demo.rs"] mod demo_run;` from `host/tests/it/`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The example plugins the demo runs (package names in `plugins/`), in the order it
/// builds and compiles them.
pub const PLUGINS: &[&str] = &[
    "deny-dangerous-bash",
    "protect-paths",
    "redact-secrets",
    "test-gate",
    "hostile",
];

/// `hookhost demo` with nothing of the real user's: a home, data, cache and managed dir
/// under `root`, which the demo must not write to either. Its MCP steps are skipped
/// (`HOOKHOST_DEMO_TIME_SERVER` names no program) unless a test points it at
/// [`time_server`].
pub fn demo_command(root: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost"));
    cmd.env(
        "HOOKHOST_DEMO_TIME_SERVER",
        root.join("no-time-server-here"),
    )
    .env("HOME", root.join("user-home"))
    .env("HOOKHOST_HOME", root.join("user-config"))
    .env("HOOKHOST_DATA_DIR", root.join("user-data"))
    .env("HOOKHOST_MANAGED_DIR", root.join("user-managed"))
    .env("HOOKHOST_CACHE_DIR", root.join("user-cache"))
    .stdin(Stdio::null());
    cmd
}

/// `mcp-server-time` where `.ci/run` installs it (`<target>/mcp-servers`, or
/// `HOOKHOST_MCP_SERVERS_DIR`), if it is there.
pub fn time_server() -> Option<PathBuf> {
    let dir = std::env::var_os("HOOKHOST_MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../mcp-servers"));
    let program = dir.join("time-venv/bin/mcp-server-time");
    program
        .is_file()
        .then(|| program.canonicalize().unwrap_or(program))
}

/// One step of the session as `hookhost demo --json` printed it.
#[derive(Debug, Clone)]
pub struct Step {
    /// What happens (without the event name that heads an event's step).
    pub caption: String,
    /// The event's outcome as JSON; `None` for a step that is not an event (trusting the
    /// workspace) or that was skipped.
    pub outcome: Option<Value>,
    /// What the agent gets (`systemMessage: …`, `stderr: …`), or for a step that is not
    /// an event the lines under it.
    pub agent_sees: Vec<String>,
}

impl Step {
    /// The outcome's `decision` (`none`, `deny`, `allow`, `block`, …), if an event.
    pub fn decision(&self) -> Option<&str> {
        self.outcome
            .as_ref()
            .map(|o| o["decision"].as_str().unwrap())
    }

    /// The outcome; panics naming the step when there is none.
    pub fn outcome(&self) -> &Value {
        self.outcome
            .as_ref()
            .unwrap_or_else(|| panic!("no outcome: {self:#?}"))
    }

    /// The hook reports of the outcome (empty when there is none).
    pub fn hooks(&self) -> Vec<&Value> {
        self.outcome
            .as_ref()
            .and_then(|o| o["hooks"].as_array())
            .map(|h| h.iter().collect())
            .unwrap_or_default()
    }

    /// The report of hook `id`; panics when it did not run in this step.
    pub fn hook(&self, id: &str) -> &Value {
        self.hooks()
            .into_iter()
            .find(|h| h["id"] == id)
            .unwrap_or_else(|| panic!("no hook {id} in {self:#?}"))
    }
}

/// A finished run of `hookhost demo --keep DIR --json`.
#[derive(Debug)]
pub struct DemoRun {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Everything on stdout.
    pub stdout: String,
    /// Everything on stderr (build and compile progress, warnings).
    pub stderr: String,
}

/// Runs `cmd` (from [`demo_command`]) as `hookhost demo --keep kept --json`; panics with
/// its output when it fails.
pub fn run_demo(mut cmd: Command, kept: &Path) -> DemoRun {
    let out = cmd
        .args(["demo", "--json", "--keep"])
        .arg(kept)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    DemoRun {
        steps: parse_steps(&stdout),
        stdout,
        stderr,
    }
}

/// The steps of the demo's stdout: each starts with `▶ `; the lines under it are
/// indented by four spaces; an event's step has a `decision:` line and, with `--json`,
/// its outcome as a pretty-printed JSON object (from a `{` line to a `}` line).
pub fn parse_steps(stdout: &str) -> Vec<Step> {
    let lines: Vec<&str> = stdout.lines().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(header) = lines[i].strip_prefix("▶ ") else {
            i += 1;
            continue;
        };
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && lines[i].starts_with("    ") {
            body.push(&lines[i][4..]);
            i += 1;
        }
        let is_event = body.iter().any(|l| l.starts_with("decision: "));
        if !is_event {
            steps.push(Step {
                caption: header.to_string(),
                outcome: None,
                agent_sees: body.iter().map(|l| l.to_string()).collect(),
            });
            continue;
        }
        while i < lines.len() && lines[i].is_empty() {
            i += 1;
        }
        assert_eq!(lines.get(i), Some(&"{"), "no JSON outcome after `{header}`");
        let start = i;
        while lines[i] != "}" {
            i += 1;
        }
        let outcome: Value = serde_json::from_str(&lines[start..=i].join("\n")).unwrap();
        i += 1;
        let event = outcome["event"].as_str().unwrap();
        let caption = header
            .strip_prefix(event)
            .unwrap_or_else(|| panic!("`{header}` does not start with {event}"))
            .trim_start()
            .to_string();
        let agent_sees = body
            .iter()
            .filter_map(|l| l.strip_prefix("agent ⟵  "))
            .map(String::from)
            .collect();
        steps.push(Step {
            caption,
            outcome: Some(outcome),
            agent_sees,
        });
    }
    steps
}

/// The demo's directories under the kept root.
pub fn project_hooks(kept: &Path) -> PathBuf {
    kept.join("project/.hookhost/hooks.json")
}
