//! Tried as a user would, against Claude Code 2.1.332 itself: a `prompt` hook in
//! `.claude/settings.json`, run by Claude Code, beside the same file moved unchanged into
//! `.hookhost/hooks.json` with hookhost as Claude Code's one command hook. Both run
//! offline against one loopback Messages API that answers the session (a Bash call, then
//! a final text) and every hook's verdict request, in the shape each asked for (Claude
//! Code: `output_config.format`, a JSON text; hookhost: a forced `hook_verdict` tool).
//! What Claude Code then does must be the same: whether the command ran, whether the
//! call was denied, whether the turn ended (`terminal_reason`), and what the model was
//! told (`tool_result`). `.ci/run` installs Claude Code under `<target>/claude-code`;
//! where it is missing the test says SKIPPED.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::skip::skipped;
use crate::support::{TestEnv, TestServer, run_until};

/// The `claude` binary `.ci/run` installs, if there.
fn claude_binary() -> Option<PathBuf> {
    let target = PathBuf::from(env!("CARGO_BIN_EXE_hookhost"))
        .parent()?
        .parent()?
        .to_path_buf();
    let binary = target.join("claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    binary.is_file().then_some(binary)
}

/// The file the command the session's Bash call runs creates.
const MARKER: &str = "the-command-ran";

/// The Messages API as the session and the hooks meet it; `verdict` is every hook's.
fn answer(body: &str, verdict: &Value) -> Value {
    let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let (content, stop) = if tools.contains(&"Bash") {
        if request["messages"].to_string().contains("tool_result") {
            (json!([{"type": "text", "text": "done"}]), "end_turn")
        } else {
            (
                json!([{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                        "input": {"command": format!("touch {MARKER}"), "description": "touch"}}]),
                "tool_use",
            )
        }
    } else if let Some(tool) = request["tool_choice"]["name"].as_str() {
        // hookhost's structured output: the forced tool.
        (
            json!([{"type": "tool_use", "id": "toolu_v", "name": tool, "input": verdict}]),
            "tool_use",
        )
    } else {
        // Claude Code's (`output_config.format`), and its other small requests.
        (
            json!([{"type": "text", "text": verdict.to_string()}]),
            "end_turn",
        )
    };
    json!({"id": "msg_1", "type": "message", "role": "assistant",
           "model": request["model"].as_str().unwrap_or("m"), "content": content,
           "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 1, "output_tokens": 1}})
}

/// What Claude Code did with the session's one Bash call.
#[derive(Debug, PartialEq, Eq)]
struct Observed {
    /// The command ran.
    ran: bool,
    /// Claude Code lists the call among its permission denials.
    denied: bool,
    /// Why the turn ended (`completed`, `hook_stopped`, …).
    terminal_reason: String,
    /// The tool result sent back to the model, if the turn went on: `(is_error, the
    /// hook's reason is in it)`.
    told: Option<(bool, bool)>,
}

/// Runs `claude -p` in `env.project` (with `.claude/settings.json` as the test wrote it)
/// against a fresh server answering `verdict`; returns what happened and how many
/// verdict requests hookhost sent.
fn session(claude: &Path, env: &TestEnv, verdict: &Value, reason: &str) -> (Observed, usize) {
    let _ = std::fs::remove_file(env.project.join(MARKER));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (seen, verdict_) = (requests.clone(), verdict.clone());
    let server = TestServer::start(move |request| {
        seen.lock().unwrap().push(request.body.clone());
        (
            200,
            answer(&request.body, &verdict_).to_string(),
            Duration::ZERO,
        )
    });
    let claude_home = env.data.parent().unwrap().join("claude-home");
    std::fs::create_dir_all(claude_home.join(".claude")).unwrap();
    let mut cmd = Command::new(claude);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &claude_home)
        .env("ANTHROPIC_BASE_URL", &server.url)
        .env("ANTHROPIC_API_KEY", "dummy")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("HOOKHOST_HOME", &env.home)
        .env("HOOKHOST_MANAGED_DIR", &env.managed)
        .env("HOOKHOST_DATA_DIR", &env.data)
        .env("HOOKHOST_CACHE_DIR", env.data.join("cache"))
        .env("HOOKHOST_DISPATCH_DAEMON", "off")
        .env("HOOKHOST_TRUST_WORKSPACE", "1")
        .args([
            "-p",
            "touch the marker",
            "--allowedTools",
            "Bash",
            "--output-format",
            "json",
        ])
        .current_dir(&env.project);
    let run = run_until(&mut cmd, "", Duration::from_secs(300)).expect("claude -p finished");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let result: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr));
    let bodies = requests.lock().unwrap().clone();
    let told = bodies
        .iter()
        .filter_map(|b| serde_json::from_str::<Value>(b).ok())
        .filter_map(|b| {
            let last = b["messages"].as_array()?.last()?.clone();
            last["content"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "tool_result")
                .cloned()
        })
        .map(|r| {
            (
                r["is_error"] == true,
                r["content"].to_string().contains(reason),
            )
        })
        .next();
    let hookhost_asked = bodies
        .iter()
        .filter(|b| b.contains("\"tool_choice\"") && b.contains("hook_verdict"))
        .count();
    let observed = Observed {
        ran: env.project.join(MARKER).exists(),
        denied: result["permission_denials"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d["tool_name"] == "Bash")),
        terminal_reason: result["terminal_reason"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        told,
    };
    (observed, hookhost_asked)
}

#[test]
fn a_prompt_hook_moved_into_hookhost_does_what_claude_code_does_with_it() {
    let test =
        "claude_real_hooks::a_prompt_hook_moved_into_hookhost_does_what_claude_code_does_with_it";
    let Some(claude) = claude_binary() else {
        skipped(
            test,
            "@anthropic-ai/claude-code is not installed (.ci/run installs it)",
        );
        return;
    };
    const REASON: &str = "the judge says this command must not run";
    let no = json!({"ok": false, "reason": REASON});
    let yes = json!({"ok": true, "reason": "fine"});
    let hookhost = env!("CARGO_BIN_EXE_hookhost");
    // (the hook's extra fields, the verdict, what §1.10 says Claude Code does)
    let cases = [
        (
            json!({}),
            no.clone(),
            // PreToolUse, ok false: denied, and the turn ends.
            Observed {
                ran: false,
                denied: true,
                terminal_reason: "hook_stopped".into(),
                told: None,
            },
        ),
        (
            json!({"continueOnBlock": true}),
            no,
            // continueOnBlock: denied, the reason is the tool's error, the turn goes on.
            Observed {
                ran: false,
                denied: true,
                terminal_reason: "completed".into(),
                told: Some((true, true)),
            },
        ),
        (
            json!({}),
            yes,
            Observed {
                ran: true,
                denied: false,
                terminal_reason: "completed".into(),
                told: Some((false, false)),
            },
        ),
    ];
    for (extra, verdict, expected) in cases {
        let mut hook = json!({"type": "prompt", "prompt": "Judge this command: $ARGUMENTS"});
        hook.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}});

        // Claude Code runs the hook itself.
        let env = TestEnv::new();
        env.write(".claude/settings.json", &settings.to_string());
        let (native, asked) = session(&claude, &env, &verdict, REASON);
        assert_eq!(asked, 0, "Claude Code asked in its own shape");
        assert_eq!(native, expected, "Claude Code itself, {hook}");

        // The same file, unchanged, as hookhost's project hooks; hookhost is Claude
        // Code's one command hook.
        let env = TestEnv::new();
        env.write(".hookhost/hooks.json", &settings.to_string());
        let drop_in = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": format!("{hookhost} dispatch --format claude")}
        ]}]}});
        env.write(".claude/settings.json", &drop_in.to_string());
        let (through_hookhost, asked) = session(&claude, &env, &verdict, REASON);
        assert!(asked >= 1, "hookhost asked the model for the verdict");
        assert_eq!(
            through_hookhost, native,
            "the hook moved into hookhost, {hook}"
        );
    }
}
