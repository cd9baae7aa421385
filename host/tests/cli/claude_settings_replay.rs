//! Tried as a user would: a Claude Code user's `.claude/settings.json` with `prompt`,
//! `agent` and `mcp_tool` hooks (and Claude Code's other keys), and the project's
//! `.mcp.json`, run by hookhost as they are — pointed at with `--settings`, and with the
//! `hooks` moved unchanged into `.hookhost/hooks.json` — through `hookhost dispatch
//! --format claude` with Claude Code's own inputs. Every answer is what Claude Code
//! does with those hooks (§1.10 of the hooks reference: the outcome of `ok: false` per
//! event, `continueOnBlock`, `impossible`, agent hooks as `continueOnBlock: true`, no
//! effect on PermissionRequest; an `mcp_tool` text answer is context on
//! UserPromptSubmit), and the two ways give the same bytes. The model is the loopback
//! server; the MCP server is `@modelcontextprotocol/server-everything` as `.ci/run`
//! installs it (SKIPPED without it).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::model_server::{ModelServer, Reply};
use crate::skip::skipped;
use crate::support::{Run, TestEnv};

const KEY: &str = "sk-ant-replay-key";

/// The user's file as Claude Code reads it.
fn claude_settings() -> Value {
    json!({
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "model": "sonnet",
        "permissions": {"allow": ["Bash(cargo test:*)"], "deny": ["Read(./.env)"]},
        "env": {"CARGO_TERM_COLOR": "always"},
        "hooks": {
            "UserPromptSubmit": [{"hooks": [
                {"type": "prompt", "prompt": "Refuse prompts that ask to print secrets. $ARGUMENTS"},
                {"type": "mcp_tool", "server": "everything", "tool": "echo",
                 "input": {"message": "prompt seen: ${prompt}"}}
            ]}],
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [
                    {"type": "prompt", "prompt": "Is this command safe to run? $ARGUMENTS",
                     "model": "haiku", "timeout": 20}
                ]},
                {"matcher": "Edit|Write", "hooks": [
                    {"type": "agent", "prompt": "Does this change follow STYLE.md? $ARGUMENTS"}
                ]}
            ],
            "PermissionRequest": [{"matcher": "Bash", "hooks": [
                {"type": "prompt", "prompt": "Should this be allowed? $ARGUMENTS"}
            ]}],
            "Stop": [{"hooks": [
                {"type": "prompt", "prompt": "Did the tests pass in this session? $ARGUMENTS"}
            ]}]
        }
    })
}

fn everything() -> Option<PathBuf> {
    let dir = std::env::var_os("HOOKHOST_MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../mcp-servers"));
    let program = dir.join("everything/node_modules/.bin/mcp-server-everything");
    program.exists().then_some(program)
}

fn no(reason: &str, impossible: bool) -> Reply {
    Reply::Verdict(json!({"ok": false, "reason": reason, "impossible": impossible}))
}

/// One event of the session: its input (as Claude Code sends it), what the model
/// answers, and a check of hookhost's answer against Claude Code's semantics.
struct Step {
    event: &'static str,
    input: Value,
    replies: Vec<Reply>,
    check: fn(&Run, &Value),
}

fn input(project: &Path, event: &str, extra: Value) -> Value {
    let mut input = json!({
        "session_id": "0b7c3a52-replay", "transcript_path": "/tmp/transcript.jsonl",
        "cwd": project, "permission_mode": "default", "hook_event_name": event,
    });
    input
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    input
}

fn steps(project: &Path) -> Vec<Step> {
    let bash = |command: &str| {
        json!({"tool_name": "Bash", "tool_input": {"command": command},
                                      "tool_use_id": "toolu_01"})
    };
    vec![
        Step {
            event: "UserPromptSubmit",
            input: input(
                project,
                "UserPromptSubmit",
                json!({"prompt": "summarise the repo"}),
            ),
            replies: vec![Reply::Verdict(
                json!({"ok": true, "reason": "", "impossible": false}),
            )],
            // Allowed; the MCP tool's text is context for the model.
            check: |run, out| {
                assert_eq!(run.code, 0, "{}", run.stderr);
                assert_eq!(
                    out["hookSpecificOutput"]["additionalContext"],
                    "Echo: prompt seen: summarise the repo",
                    "{out}"
                );
                assert!(out.get("decision").is_none(), "{out}");
            },
        },
        Step {
            event: "UserPromptSubmit",
            input: input(
                project,
                "UserPromptSubmit",
                json!({"prompt": "print the AWS keys"}),
            ),
            replies: vec![no("this asks for secrets", false)],
            // UserPromptSubmit: the prompt is blocked and the turn ends.
            check: |run, out| {
                assert_eq!(run.code, 2, "{}", run.stdout);
                assert_eq!(out["decision"], "block", "{out}");
                assert_eq!(out["continue"], false, "{out}");
                assert!(
                    run.stderr.contains("this asks for secrets"),
                    "{}",
                    run.stderr
                );
            },
        },
        Step {
            event: "PreToolUse",
            input: input(project, "PreToolUse", bash("rm -rf ~/src")),
            replies: vec![no("deletes the user's sources", false)],
            // PreToolUse: denied, and the turn ends (no `continueOnBlock`).
            check: |run, out| {
                assert_eq!(
                    out["hookSpecificOutput"]["permissionDecision"], "deny",
                    "{out}"
                );
                assert_eq!(out["continue"], false, "{out}");
                assert!(
                    format!("{out}{}", run.stderr).contains("deletes the user's sources"),
                    "{out}"
                );
            },
        },
        Step {
            event: "PreToolUse",
            input: input(
                project,
                "PreToolUse",
                json!({"tool_name": "Write", "tool_use_id": "toolu_02",
                       "tool_input": {"file_path": project.join("src/lib.rs"),
                                      "content": "\tfn main() {}\n"}}),
            ),
            replies: vec![
                Reply::Tool("Read", json!({"file_path": "STYLE.md"})),
                no("STYLE.md: indent with spaces, never tabs", false),
            ],
            // An agent hook is a prompt hook with `continueOnBlock: true`: denied, the
            // reason goes back to the model, the turn goes on.
            check: |run, out| {
                assert_eq!(
                    out["hookSpecificOutput"]["permissionDecision"], "deny",
                    "{out}"
                );
                assert_ne!(out["continue"], false, "{out}");
                assert!(
                    format!("{out}{}", run.stderr).contains("never tabs"),
                    "{out}"
                );
            },
        },
        Step {
            event: "PermissionRequest",
            input: input(
                project,
                "PermissionRequest",
                json!({"tool_name": "Bash", "tool_input": {"command": "cargo publish"}}),
            ),
            replies: vec![no("not without review", false)],
            // PermissionRequest: `ok: false` has no effect.
            check: |run, out| {
                assert_eq!(run.code, 0, "{}", run.stderr);
                assert!(out.get("hookSpecificOutput").is_none(), "{out}");
                assert!(out.get("decision").is_none(), "{out}");
            },
        },
        Step {
            event: "Stop",
            input: input(project, "Stop", json!({"stop_hook_active": false})),
            replies: vec![no("the tests were not run", false)],
            // Stop: the reason is fed back and the agent goes on.
            check: |run, out| {
                assert_eq!(run.code, 2, "{}", run.stdout);
                assert_eq!(out["decision"], "block", "{out}");
                assert_ne!(out["continue"], false, "{out}");
                assert!(
                    run.stderr.contains("the tests were not run"),
                    "{}",
                    run.stderr
                );
            },
        },
        Step {
            event: "Stop",
            input: input(project, "Stop", json!({"stop_hook_active": true})),
            replies: vec![no("there are no tests to run", true)],
            // `impossible`: the stop goes ahead.
            check: |run, out| {
                assert_eq!(run.code, 0, "{}", run.stderr);
                assert!(out.get("decision").is_none(), "{out}");
            },
        },
    ]
}

/// Runs the session's steps with `args` after `dispatch --format claude`; returns each
/// step's (exit code, stdout) and the model server's requests.
fn replay(env: &TestEnv, args: &[&str]) -> (Vec<(i32, String)>, ModelServer) {
    let steps = steps(&env.project);
    let replies = steps.iter().flat_map(|s| s.replies.clone()).collect();
    let server = ModelServer::start(replies);
    // The user's own hooks.json names the loopback endpoint (the key goes nowhere else).
    env.vouch_for_model_server(&server.url);
    let mut answers = Vec::new();
    for step in &steps {
        let mut cmd = env.command();
        cmd.args(["dispatch", "--format", "claude"])
            .args(args)
            .env("ANTHROPIC_BASE_URL", &server.url)
            .env("ANTHROPIC_API_KEY", KEY)
            .env("CLAUDE_PROJECT_DIR", &env.project);
        let run = env.run_with(&mut cmd, &step.input.to_string());
        let out: Value = if run.stdout.trim().is_empty() {
            json!({})
        } else {
            run.json()
        };
        // The harness prints this with a failing check: which event of the session it was.
        eprintln!("replayed {}: exit {}", step.event, run.code);
        (step.check)(&run, &out);
        answers.push((run.code, run.stdout));
    }
    (answers, server)
}

#[test]
fn a_claude_code_settings_file_with_model_and_mcp_hooks_runs_unchanged() {
    let test = "claude_settings_replay::a_claude_code_settings_file_with_model_and_mcp_hooks_runs_unchanged";
    let Some(everything) = everything() else {
        skipped(
            test,
            "MCP server-everything is not installed (.ci/run installs it)",
        );
        return;
    };
    let env = TestEnv::new();
    env.write("STYLE.md", "# Style\nIndent with spaces, never tabs.\n");
    let mcp_json =
        json!({"mcpServers": {"everything": {"command": everything, "args": ["stdio"]}}});
    env.write(".mcp.json", &mcp_json.to_string());
    let settings = env.write(".claude/settings.json", &claude_settings().to_string());

    // 1. Kept where it is, pointed at with `--settings`.
    let (pointed, server) = replay(&env, &["--settings", settings.to_str().unwrap()]);
    // The agent hook read STYLE.md in the workspace and the model got it.
    let read = server
        .requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .find(|(text, _)| text.contains("never tabs"));
    assert!(
        read.is_some_and(|(_, error)| !error),
        "{:?}",
        server.requests()
    );
    // The prompt hooks asked the fast model Claude Code would (the `haiku` alias).
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.body["model"] == "claude-haiku-4-5"),
        "{:?}",
        server
            .requests()
            .iter()
            .map(|r| &r.body["model"])
            .collect::<Vec<_>>()
    );

    // 2. The hooks moved unchanged into hookhost's project file: the same answers.
    std::fs::remove_file(&settings).unwrap();
    let hooks = json!({"hooks": claude_settings()["hooks"].clone()});
    env.project_hooks(hooks);
    let (moved, _) = replay(&env, &[]);
    assert_eq!(moved, pointed);
}
