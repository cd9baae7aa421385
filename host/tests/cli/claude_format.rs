//! `--format claude`: Claude Code's output JSON, exit 2 with the reason on stderr when
//! blocked.

use serde_json::json;

use crate::support::{TestEnv, bash_input, hooks};

#[test]
fn deny_exits_2_with_the_reason_on_stderr() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo 'no rm' >&2; exit 2"}]),
    ));
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("rm -rf /").to_string(),
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, "no rm\n");
    assert_eq!(
        run.json(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm"}})
    );
}

#[test]
fn allow_with_rewrite_exits_0() {
    let env = TestEnv::new();
    let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "ls -la"}, "additionalContext": "ctx"}});
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": format!("echo '{out}'")}]),
    ));
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json(), out);
}

#[test]
fn the_event_may_come_from_the_input() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": r#"echo '{"decision": "block", "reason": "tests first"}'"#}]}]}}));
    let run = env.run(
        &["dispatch", "--format", "claude"],
        &json!({"session_id": "s", "hook_event_name": "Stop"}).to_string(),
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, "tests first\n");
    assert_eq!(
        run.json(),
        json!({"decision": "block", "reason": "tests first"})
    );
}

#[test]
fn nothing_to_say_prints_nothing() {
    let env = TestEnv::new();
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "");
}
