//! The adapters with recorded inputs: one `if` rule, `Bash(rm -rf *)`, means the same for
//! every agent's shell tool; Cursor (no CLI on a registry to run here) with inputs written
//! from its published hooks reference (Cursor 1.7: `beforeShellExecution`,
//! `beforeMCPExecution`, `beforeReadFile`, `afterFileEdit`, `beforeSubmitPrompt`, `stop`);
//! and `hookhost install --AGENT` for each agent: merged, idempotent, `--dry-run`, exact
//! uninstall.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::{TestEnv, deny_dangerous_bash};

/// Each agent's input for a shell call of `command`, as it sends it (Codex 0.171, Gemini
/// CLI 0.61, Copilot CLI 1.0.102 recorded on this machine kind; Cursor from its
/// reference; OpenCode as hookhost's plugin sends it), with the event argument it needs.
fn shell_inputs(command: &str) -> Vec<(&'static str, Option<&'static str>, Value)> {
    vec![
        (
            "codex",
            None,
            json!({"session_id": "s", "turn_id": "t", "cwd": "/w", "hook_event_name": "PreToolUse",
                   "model": "m", "permission_mode": "bypassPermissions", "tool_name": "Bash",
                   "tool_input": {"command": command}, "tool_use_id": "call_5"}),
        ),
        (
            "gemini",
            None,
            json!({"session_id": "s", "transcript_path": "/t", "cwd": "/w",
                   "hook_event_name": "BeforeTool", "timestamp": "2026-12-01T00:00:00Z",
                   "tool_name": "run_shell_command", "tool_input": {"command": command}}),
        ),
        (
            "copilot",
            Some("preToolUse"),
            json!({"sessionId": "s", "timestamp": 1796249496357u64, "cwd": "/w",
                   "toolName": "bash", "toolArgs": {"command": command, "description": "d"}}),
        ),
        (
            "cursor",
            None,
            json!({"conversation_id": "c", "generation_id": "g",
                   "hook_event_name": "beforeShellExecution", "workspace_roots": ["/w"],
                   "command": command, "cwd": "/w"}),
        ),
        (
            "opencode",
            None,
            json!({"event": "tool.execute.before", "tool": "bash", "sessionID": "s",
                   "callID": "k", "args": {"command": command, "description": "d"},
                   "directory": "/w"}),
        ),
    ]
}

/// Whether an agent's answer refuses the call, in its own words.
fn refuses(agent: &str, answer: &Value) -> bool {
    match agent {
        "codex" => answer["hookSpecificOutput"]["permissionDecision"] == "deny",
        "gemini" => answer["decision"] == "deny",
        "copilot" => answer["permissionDecision"] == "deny",
        "cursor" => answer["permission"] == "deny",
        "opencode" => answer["block"].is_string(),
        other => unreachable!("{other}"),
    }
}

fn dispatch(env: &TestEnv, agent: &str, event: Option<&str>, input: &Value) -> (Value, String) {
    let mut args = vec!["dispatch", "--format", agent];
    args.extend(event);
    let run = env.run(&args, &input.to_string());
    assert_eq!(run.code, 0, "{agent}: {}", run.stderr);
    let answer = if run.stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(run.stdout.trim())
            .unwrap_or_else(|e| panic!("{agent}: {e}: {}", run.stdout))
    };
    (answer, run.stderr)
}

#[test]
fn one_if_rule_means_the_same_for_every_agents_shell_tool() {
    let env = TestEnv::new();
    env.user_hooks(
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "if": "Bash(rm -rf *)",
         "command": "echo 'no recursive deletes here' >&2; exit 2"}]}]}}),
    );
    for (agent, event, input) in shell_inputs("rm -rf build") {
        let (answer, _) = dispatch(&env, agent, event, &input);
        assert!(refuses(agent, &answer), "{agent}: {answer}");
        assert!(
            answer.to_string().contains("no recursive deletes here"),
            "{agent}: {answer}"
        );
    }
    for (agent, event, input) in shell_inputs("ls -la") {
        let (answer, _) = dispatch(&env, agent, event, &input);
        assert!(!refuses(agent, &answer), "{agent}: {answer}");
    }
    // The audit log names each agent.
    let audit = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    for agent in ["codex", "gemini", "copilot", "cursor", "opencode"] {
        assert!(
            audit.contains(&format!("\"agent\":\"{agent}\"")),
            "{agent}: {audit}"
        );
    }
}

#[test]
fn cursor_follows_its_published_reference() {
    let env = TestEnv::new();
    env.user_hooks(json!({"hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "wasm", "plugin": deny_dangerous_bash()}]},
            {"matcher": "Read", "hooks": [{"type": "command", "if": "Read(*.env)",
                "command": "echo 'secrets stay unread' >&2; exit 2"}]},
            {"matcher": "mcp__cursor__drop_table", "hooks": [{"type": "command",
                "command": "echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\"}}'"}]}],
        "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command",
            "command": "echo '{\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\",\"additionalContext\":\"edited\"}}'"}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command",
            "command": "echo 'no prompts about passwords' >&2; exit 2"}]}]}}));
    let base = json!({"conversation_id": "c", "generation_id": "g", "workspace_roots": ["/w"]});
    let with = |fields: Value| {
        let mut input = base.clone();
        input
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        input
    };
    // A shell command the sandboxed plugin refuses: Cursor's `permission: deny`, with
    // the reason for the user and for the agent.
    let (answer, _) = dispatch(
        &env,
        "cursor",
        None,
        &with(json!({
        "hook_event_name": "beforeShellExecution", "cwd": "/w",
        "command": "mkfs.ext4 /dev/sda1"})),
    );
    assert_eq!(answer["permission"], "deny", "{answer}");
    assert!(
        answer["agentMessage"]
            .as_str()
            .unwrap()
            .contains("raw disk device"),
        "{answer}"
    );
    assert!(
        answer["userMessage"]
            .as_str()
            .unwrap()
            .contains("raw disk device"),
        "{answer}"
    );
    // A file read: `permission: deny` (it has no userMessage).
    let (answer, _) = dispatch(
        &env,
        "cursor",
        None,
        &with(json!({
        "hook_event_name": "beforeReadFile", "file_path": "/w/.env", "content": "K=V",
        "attachments": []})),
    );
    assert_eq!(answer["permission"], "deny", "{answer}");
    // An MCP call whose hook asks: Cursor's `ask`; its `tool_input` is JSON text.
    let (answer, _) = dispatch(
        &env,
        "cursor",
        None,
        &with(json!({
        "hook_event_name": "beforeMCPExecution", "tool_name": "drop_table",
        "tool_input": "{\"table\":\"users\"}", "url": "http://127.0.0.1:1/mcp"})),
    );
    assert_eq!(answer["permission"], "ask", "{answer}");
    // After an edit Cursor reads nothing: the context is a notice on stderr.
    let (answer, stderr) = dispatch(
        &env,
        "cursor",
        None,
        &with(json!({
        "hook_event_name": "afterFileEdit", "file_path": "/w/a.rs",
        "edits": [{"old_string": "a", "new_string": "b"}]})),
    );
    assert_eq!(answer, Value::Null);
    assert!(
        stderr.contains("Cursor 1.7 cannot take context for the model: edited"),
        "{stderr}"
    );
    // A prompt that is blocked: `continue: false`; the reason, which Cursor's answer
    // cannot carry, is a notice.
    let (answer, stderr) = dispatch(
        &env,
        "cursor",
        None,
        &with(json!({
        "hook_event_name": "beforeSubmitPrompt", "prompt": "my password is", "attachments": []})),
    );
    assert_eq!(answer["continue"], false, "{answer}");
    assert!(stderr.contains("no prompts about passwords"), "{stderr}");
}

#[test]
fn an_agent_the_host_cannot_answer_is_refused_in_its_own_words() {
    // Unreadable input on a guarding event: the agent's deny, never "go ahead".
    let env = TestEnv::new();
    let run = env.run(
        &["dispatch", "--format", "copilot", "preToolUse"],
        "{not json",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(answer["permissionDecision"], "deny", "{answer}");
    let run = env.run(&["dispatch", "--format", "gemini"], "{not json");
    // Gemini's event is in the input, which cannot be read: blocked (exit 2, which Gemini
    // CLI reads as a block; exit 1 would be a warning, and the call would go ahead).
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(run.stderr.contains("blocked"), "{}", run.stderr);
}

/// `hookhost install`/`uninstall` for `agent` with HOME at `home`.
fn install(
    env: &TestEnv,
    home: &std::path::Path,
    verb: &str,
    agent: &str,
    extra: &[&str],
) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .arg(verb)
        .arg(format!("--{agent}"))
        .args(["--command", "hookhost dispatch --format x"])
        .args(extra)
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOOKHOST_HOME", &env.home)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{verb} --{agent}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn install_for_every_agent_merges_is_idempotent_and_uninstalls_exactly() {
    let env = TestEnv::new();
    let home = env.data.parent().unwrap().join("agent-home");
    // (agent, its user file, what the user had there)
    let cases = [
        (
            "codex",
            ".codex/hooks.json",
            Some(
                "{\n  \"hooks\": {\n    \"Stop\": [\n      {\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"./mine\"\n          }\n        ]\n      }\n    ]\n  }\n}\n",
            ),
        ),
        (
            "gemini",
            ".gemini/settings.json",
            Some("{\n  \"general\": {\n    \"disableAutoUpdate\": true\n  }\n}\n"),
        ),
        (
            "cursor",
            ".cursor/hooks.json",
            Some(
                "{\n  \"version\": 1,\n  \"hooks\": {\n    \"stop\": [\n      {\n        \"command\": \"./audit.sh\"\n      }\n    ]\n  }\n}\n",
            ),
        ),
        ("copilot", ".copilot/hooks/hookhost.json", None),
        ("opencode", ".config/opencode/plugins/hookhost.js", None),
    ];
    for (agent, file, before) in cases {
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if let Some(before) = before {
            std::fs::write(&path, before).unwrap();
        }
        // A dry run writes nothing.
        let shown = install(&env, &home, "install", agent, &["--dry-run"]);
        assert!(shown.contains("dry run"), "{agent}: {shown}");
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            before,
            "{agent}"
        );
        install(&env, &home, "install", agent, &[]);
        let installed = std::fs::read_to_string(&path).unwrap();
        assert!(
            installed.contains("hookhost dispatch --format x"),
            "{agent}: {installed}"
        );
        if agent == "copilot" {
            let v: Value = serde_json::from_str(&installed).unwrap();
            assert_eq!(v["version"], 1);
            assert_eq!(
                v["hooks"]["preToolUse"][0]["bash"],
                "hookhost dispatch --format x preToolUse"
            );
        }
        if agent == "gemini" {
            let v: Value = serde_json::from_str(&installed).unwrap();
            assert_eq!(v["hooks"]["BeforeTool"][0]["matcher"], ".*");
            assert_eq!(v["general"]["disableAutoUpdate"], true);
        }
        // Idempotent.
        let again = install(&env, &home, "install", agent, &[]);
        assert!(again.contains("nothing changed"), "{agent}: {again}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            installed,
            "{agent}"
        );
        // Exact uninstall: the user's bytes back, or no file where there was none.
        install(&env, &home, "uninstall", agent, &[]);
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            before,
            "{agent}"
        );
    }
}

#[test]
fn a_hook_for_some_agents_runs_only_when_they_call() {
    let env = TestEnv::new();
    env.user_hooks(
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "agents": ["codex", "gemini"],
         "command": "echo 'not on codex or gemini' >&2; exit 2"}]}]}}),
    );
    for (agent, event, input) in shell_inputs("ls") {
        let (answer, _) = dispatch(&env, agent, event, &input);
        let limited = matches!(agent, "codex" | "gemini");
        assert_eq!(refuses(agent, &answer), limited, "{agent}: {answer}");
    }
    // A dispatch that names no agent (the Outcome format) runs it.
    let outcome = env.dispatch("PreToolUse", crate::support::bash_input("ls"));
    assert_eq!(outcome["decision"], "deny", "{outcome}");
    // An agent hookhost does not know is a config error naming the field.
    env.user_hooks(json!({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "agents": ["windsurf"], "command": "true"}]}]}}));
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr.contains("`agents`: `windsurf`"),
        "{}",
        run.stderr
    );
}
