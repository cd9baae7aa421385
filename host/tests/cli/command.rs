//! The command handler's contract: exit codes, JSON detection, stdin, cwd, environment,
//! timeouts and process groups.

use serde_json::json;

use crate::support::{TestEnv, bash_input, hooks, process_running};

fn one_hook(env: &TestEnv, handler: serde_json::Value) {
    env.project_hooks(hooks("PreToolUse", "Bash", json!([handler])));
}

#[test]
fn exit_0_with_json_decides() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "command": r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "nope"}}'"#}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny");
    assert_eq!(out["reason"], "nope");
    assert_eq!(out["hooks"][0]["status"], "blocked");
    assert_eq!(out["hooks"][0]["exitCode"], 0);
    assert_eq!(out["hooks"][0]["source"], "project");
    assert_eq!(out["hooks"][0]["type"], "command");
}

#[test]
fn stdout_is_json_only_when_it_starts_with_a_brace() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "printf '  \\n {\"hookSpecificOutput\": {\"hookEventName\": \"UserPromptSubmit\", \"additionalContext\": \"from json\"}}'"},
        {"type": "command", "command": "echo '[\"an array is text\"]'"},
        {"type": "command", "command": "echo 'plain words'"}
    ]}]}}));
    let out = env.dispatch(
        "UserPromptSubmit",
        json!({"session_id": "s", "prompt": "hi"}),
    );
    assert_eq!(
        out["additionalContext"],
        json!(["from json", "[\"an array is text\"]", "plain words"])
    );
    assert_eq!(out["notices"], json!([]));

    // plain stdout is not context on PreToolUse
    one_hook(&env, json!({"type": "command", "command": "echo plain"}));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["additionalContext"], json!([]));
    assert_eq!(out["decision"], "none");
}

#[test]
fn invalid_json_on_exit_0_is_a_non_blocking_error() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "id": "broken", "command": "echo '{not json'"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none");
    assert_eq!(out["hooks"][0]["status"], "failed");
    assert_eq!(out["notices"][0]["hook"], "broken");
    assert!(
        out["notices"][0]["message"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
}

#[test]
fn exit_2_blocks_with_stderr_and_json_cannot_undo_it() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "command": "echo 'dangerous' >&2; exit 2"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(out["decision"], "deny");
    assert_eq!(out["reason"], "dangerous");
    assert_eq!(out["hooks"][0]["exitCode"], 2);

    one_hook(
        &env,
        json!({"type": "command", "command": r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}'; echo 'still no' >&2; exit 2"#}),
    );
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(out["decision"], "deny");
    assert_eq!(out["reason"], "still no");

    // exit 2 on an event that cannot block is a notice, not a block
    env.project_hooks(json!({"hooks": {"SessionStart": [{"hooks": [{"type": "command", "id": "ss", "command": "echo 'hello user' >&2; exit 2"}]}]}}));
    let out = env.dispatch(
        "SessionStart",
        json!({"session_id": "s", "source": "startup"}),
    );
    assert_eq!(out["decision"], "none");
    assert_eq!(
        out["notices"],
        json!([{"hook": "ss", "message": "hello user"}])
    );
}

#[test]
fn other_exit_codes_are_non_blocking_unless_json_decides() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "id": "one", "command": "echo 'oops\nmore' >&2; exit 1"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none");
    assert_eq!(out["hooks"][0]["status"], "failed");
    assert_eq!(out["hooks"][0]["exitCode"], 1);
    assert_eq!(
        out["notices"][0]["message"],
        "Failed with non-blocking status code 1: oops"
    );

    one_hook(
        &env,
        json!({"type": "command", "command": r#"echo '{"decision": "block", "reason": "json says no"}'; exit 3"#}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(
        out["decision"], "deny",
        "deprecated top-level block on PreToolUse means deny"
    );
    assert_eq!(out["reason"], "json says no");
}

#[test]
fn a_hook_that_cannot_start_never_blocks() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "command", "id": "exec-missing", "command": "/nonexistent/hook", "args": ["x"]},
            {"type": "command", "id": "shell-missing", "command": "/nonexistent/hook.sh"},
            {"type": "command", "id": "python-missing", "command": "python3 /nonexistent/hook.py"}
        ]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    for hook in out["hooks"].as_array().unwrap() {
        assert_eq!(hook["status"], "failed", "{hook}");
    }
    let messages: Vec<&str> = out["notices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["message"].as_str().unwrap())
        .collect();
    assert!(
        messages[0].starts_with("cannot start `/nonexistent/hook`"),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("cannot start (exit 127)"),
        "{messages:?}"
    );
    assert!(
        messages[2].starts_with("cannot start (exit 2)"),
        "{messages:?}"
    );
}

#[test]
fn on_failure_block_fails_closed() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "id": "strict", "command": "/nonexistent/x", "args": [], "onFailure": "block"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny");
    assert!(
        out["reason"].as_str().unwrap().contains("`strict` failed"),
        "{out}"
    );

    one_hook(
        &env,
        json!({"type": "command", "command": "echo '{bad'", "onFailure": "block"}),
    );
    assert_eq!(
        env.dispatch("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );

    one_hook(
        &env,
        json!({"type": "command", "command": "exit 7", "onFailure": "block"}),
    );
    assert_eq!(
        env.dispatch("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );
}

#[test]
fn timeout_kills_the_whole_process_group() {
    let env = TestEnv::new();
    // The hook forks a sleeper and then hangs; both carry a marker we look for.
    one_hook(
        &env,
        json!({"type": "command", "id": "hang", "timeout": 1, "command": "sleep 3131 & sleep 3132"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "timeout");
    assert_eq!(out["decision"], "none", "a timeout renders no decision");
    assert!(
        out["notices"][0]["message"]
            .as_str()
            .unwrap()
            .contains("timed out after 1s")
    );
    assert!(
        !process_running("sleep 3131"),
        "the forked sleeper survived"
    );
    assert!(!process_running("sleep 3132"), "the hook survived");

    one_hook(
        &env,
        json!({"type": "command", "timeout": 0.5, "command": "sleep 3133", "onFailure": "block"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny");
    assert!(!process_running("sleep 3133"));
}

#[test]
fn stdin_is_one_compact_line_and_cwd_is_the_project() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "command": "cat > stdin.txt; pwd > cwd.txt"}),
    );
    env.dispatch("PreToolUse", bash_input("ls -la"));
    let stdin = std::fs::read_to_string(env.project.join("stdin.txt")).unwrap();
    assert_eq!(stdin.lines().count(), 1, "{stdin:?}");
    let got: serde_json::Value = serde_json::from_str(&stdin).unwrap();
    assert_eq!(got["tool_input"]["command"], "ls -la");
    assert_eq!(got["hook_event_name"], "PreToolUse");
    let cwd = std::fs::read_to_string(env.project.join("cwd.txt")).unwrap();
    assert_eq!(cwd.trim(), env.project.display().to_string());
}

#[test]
fn environment_is_set_and_scrubbed() {
    let env = TestEnv::new();
    let dump = "env | sort > \"env-$HOOKHOST_EVENT.txt\"";
    env.project_hooks(json!({
        "envAllowlist": ["ALLOWED_*"],
        "hooks": {
            "PreToolUse": [{"hooks": [{"type": "command", "command": dump}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": dump}]}]
        }
    }));
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"])
        .env("MY_API_TOKEN", "secret1")
        .env("AWS_SECRET_ACCESS_KEY", "secret2")
        .env("ALLOWED_TOKEN", "kept")
        .env("PLAIN_SETTING", "visible");
    env.run_with(&mut cmd, &bash_input("ls").to_string());
    let vars = std::fs::read_to_string(env.project.join("env-PreToolUse.txt")).unwrap();
    let project = env.project.display().to_string();
    assert!(
        vars.contains(&format!("CLAUDE_PROJECT_DIR={project}\n")),
        "{vars}"
    );
    assert!(vars.contains(&format!("HOOKHOST_PROJECT_DIR={project}\n")));
    assert!(vars.contains("CLAUDE_CODE_SESSION_ID=s1\n"));
    assert!(vars.contains("PLAIN_SETTING=visible\n"));
    assert!(vars.contains("ALLOWED_TOKEN=kept\n"));
    assert!(
        !vars.contains("secret1") && !vars.contains("secret2"),
        "credentials leaked: {vars}"
    );
    assert!(
        !vars.contains("CLAUDE_ENV_FILE="),
        "CLAUDE_ENV_FILE is only for four events"
    );

    env.dispatch(
        "SessionStart",
        json!({"session_id": "s2", "source": "startup"}),
    );
    let vars = std::fs::read_to_string(env.project.join("env-SessionStart.txt")).unwrap();
    let env_file = vars
        .lines()
        .find_map(|l| l.strip_prefix("CLAUDE_ENV_FILE="))
        .expect("CLAUDE_ENV_FILE on SessionStart");
    assert!(std::path::Path::new(env_file).is_file(), "{env_file}");
    assert!(env_file.starts_with(&env.data.display().to_string()));
}

#[test]
fn exec_form_passes_arguments_without_a_shell() {
    let env = TestEnv::new();
    let script = env.script("args.sh", "printf '%s\\n' \"$@\" > args.txt");
    one_hook(
        &env,
        json!({"type": "command", "command": script, "args": ["${CLAUDE_PROJECT_DIR}/x", "a b; rm -rf /", "$HOME"]}),
    );
    env.dispatch("PreToolUse", bash_input("ls"));
    let args = std::fs::read_to_string(env.project.join("args.txt")).unwrap();
    let project = env.project.display().to_string();
    assert_eq!(args, format!("{project}/x\na b; rm -rf /\n$HOME\n"));
}

#[test]
fn output_text_is_capped_at_10000_characters() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "head -c 20000 /dev/zero | tr '\\0' 'a'"}
    ]}]}}));
    let out = env.dispatch(
        "UserPromptSubmit",
        json!({"session_id": "s", "prompt": "p"}),
    );
    let context = out["additionalContext"][0].as_str().unwrap();
    // 10,000 characters with the marker saying how much of the 20,000 was cut.
    assert_eq!(context.chars().count(), 10_000);
    let kept = context.chars().take_while(|&c| c == 'a').count();
    assert!(kept > 9_900, "{kept}");
    assert!(
        context.ends_with(&format!("… [{} characters truncated]", 20_000 - kept)),
        "{}",
        &context[9900..]
    );
}

#[test]
fn a_hook_that_ignores_stdin_and_floods_stdout_does_not_hang() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "command": "head -c 5000000 /dev/zero; echo"}),
    );
    let big = "x".repeat(2_000_000);
    let out = env.dispatch("PreToolUse", bash_input(&big));
    assert_eq!(out["hooks"][0]["status"], "ok");
}

#[test]
fn disabled_hooks_are_reported_as_skipped() {
    let env = TestEnv::new();
    one_hook(
        &env,
        json!({"type": "command", "id": "off", "enabled": false, "command": "touch ran"}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "skipped");
    assert!(
        out["hooks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("enabled: false")
    );
    assert!(!env.project.join("ran").exists());
}

/// Where SessionStart hooks export variables (secrets too): 0600, in a 0700 directory,
/// and a planted symlink is not handed to the hooks.
#[test]
fn the_env_file_is_private_and_never_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": "echo \"file=${CLAUDE_ENV_FILE:-unset}\"; [ -n \"$CLAUDE_ENV_FILE\" ] && echo 'export API_TOKEN=t0k3n' >> \"$CLAUDE_ENV_FILE\"; true"}
    ]}]}}));
    let start = |session: &str| {
        env.dispatch(
            "SessionStart",
            json!({"session_id": session, "source": "startup"}),
        )
    };
    let out = start("private");
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    let dir = env
        .data
        .join("sessions")
        .join(hookhost::session::session_key("private"));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&env.data.join("sessions")), 0o700);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("env")), 0o600);
    assert_eq!(
        std::fs::read_to_string(dir.join("env")).unwrap(),
        "export API_TOKEN=t0k3n\n"
    );

    // A symlink where the env file goes (planted by someone who could write there).
    let dir = env
        .data
        .join("sessions")
        .join(hookhost::session::session_key("planted"));
    std::fs::create_dir_all(&dir).unwrap();
    let victim = env.home.join("victim");
    std::fs::write(&victim, "").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("env")).unwrap();
    let out = start("planted");
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "", "followed");
    assert!(
        out["notices"]
            .to_string()
            .contains("CLAUDE_ENV_FILE is not set"),
        "{out}"
    );
    assert_eq!(out["additionalContext"], json!(["file=unset"]), "{out}");
}
