//! The drop-in with the real client: Claude Code 2.1.332 itself (`claude -p`, offline,
//! against a loopback server that speaks the Anthropic Messages API), with hookhost
//! installed by `hookhost install --claude`. `.ci/run` installs the npm package into
//! `<target>/claude-code`; where it is missing the test says `SKIPPED` (CI fails on that).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::skip::skipped;
use crate::support::{TestEnv, TestServer, hooks, run_until};

/// The version the drop-in is proven with.
const VERSION: &str = "2.1.332";

/// The `claude` binary of the platform package `.ci/run` installs, if there.
fn claude_binary() -> Option<PathBuf> {
    let target = PathBuf::from(env!("CARGO_BIN_EXE_hookhost"))
        .parent()?
        .parent()?
        .to_path_buf();
    let binary = target.join("claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude");
    binary.is_file().then_some(binary)
}

/// The Messages API, as much of it as one tool call needs: a request that offers the
/// Bash tool and has no tool result yet gets a `tool_use` of `echo FOO=[$FOO]`; every
/// other request gets a final text. (Non-streaming JSON answers a streaming request too.)
fn answer(body: &str) -> Value {
    let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let offers_bash = request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == "Bash"));
    let has_result = request["messages"].to_string().contains("tool_result");
    let (content, stop) = if offers_bash && !has_result {
        (
            json!([{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                    "input": {"command": "echo FOO=[$FOO]", "description": "print FOO"}}]),
            "tool_use",
        )
    } else {
        (json!([{"type": "text", "text": "done"}]), "end_turn")
    };
    json!({"id": "msg_1", "type": "message", "role": "assistant",
           "model": request["model"].as_str().unwrap_or("m"), "content": content,
           "stop_reason": stop, "stop_sequence": null,
           "usage": {"input_tokens": 1, "output_tokens": 1}})
}

#[test]
fn a_session_start_export_reaches_claude_codes_bash_through_the_drop_in() {
    let test = "claude_real::a_session_start_export_reaches_claude_codes_bash_through_the_drop_in";
    let Some(claude) = claude_binary() else {
        skipped(
            test,
            &format!("@anthropic-ai/claude-code@{VERSION} is not installed (.ci/run installs it)"),
        );
        return;
    };
    let env = TestEnv::new();
    let server =
        TestServer::start(|request| (200, answer(&request.body).to_string(), Duration::ZERO));
    // Claude Code's own home, outside the project, with the drop-in installed by hookhost.
    let claude_home = env.data.parent().unwrap().join("claude-home");
    std::fs::create_dir_all(claude_home.join(".claude")).unwrap();
    let hookhost = env!("CARGO_BIN_EXE_hookhost");
    let install = Command::new(hookhost)
        .args(["install", "--claude", "--command"])
        .arg(format!("{hookhost} dispatch --format claude"))
        .env("HOME", &claude_home)
        .env("CLAUDE_CONFIG_DIR", claude_home.join(".claude"))
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "{}",
        String::from_utf8_lossy(&install.stderr)
    );
    // The user's hookhost hook: what an environment set-up hook does.
    env.user_hooks(hooks(
        "SessionStart",
        "",
        json!([{"type": "command",
                "command": "echo 'export FOO=from-hookhost' >> \"$CLAUDE_ENV_FILE\""}]),
    ));
    let mut cmd = Command::new(&claude);
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
        .args(["-p", "print FOO", "--allowedTools", "Bash"])
        .current_dir(&env.project);
    let run = run_until(&mut cmd, "", Duration::from_secs(300)).expect("claude -p finished");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let results: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| r.body.contains("tool_result"))
        .map(|r| r.body.clone())
        .collect();
    assert!(
        !results.is_empty(),
        "Claude Code ran the Bash tool and sent its result: {:?}",
        server
            .requests()
            .iter()
            .map(|r| &r.path)
            .collect::<Vec<_>>()
    );
    assert!(
        results
            .iter()
            .any(|body| body.contains("FOO=[from-hookhost]")),
        "the hook's export reached Claude Code's Bash: {}",
        results[0]
            .get(results[0].len().saturating_sub(600)..)
            .unwrap_or("")
    );
}
