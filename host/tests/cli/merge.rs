//! Dispatch and merge: parallel and sequential runs, decision precedence, contexts,
//! rewrites, `continue`, the `if` filter and the Stop loop cap.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hooks};

fn decide(decision: &str, reason: &str) -> Value {
    let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision, "permissionDecisionReason": reason}});
    json!({"type": "command", "command": format!("echo '{out}'")})
}

#[test]
fn hooks_run_in_parallel_and_all_finish_before_the_merge() {
    let env = TestEnv::new();
    // `waits` can only finish if `signals` runs while it waits: sequentially it would
    // give up after 10 s and report a failure.
    env.project_hooks(hooks("PreToolUse", "Bash", json!([
        {"type": "command", "id": "waits", "command": "i=0; while [ ! -f b.flag ]; do sleep 0.05; i=$((i+1)); [ $i -gt 200 ] && exit 1; done; touch a.done"},
        {"type": "command", "id": "signals", "command": "touch b.flag; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"deny\"}}'"}
    ])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    assert!(
        env.project.join("a.done").exists(),
        "the first hook finished although the second denied"
    );
    assert_eq!(out["decision"], "deny");
}

#[test]
fn a_sequential_group_stops_at_a_block() {
    let env = TestEnv::new();
    env.project_hooks(
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "sequential": true, "hooks": [
            {"type": "command", "id": "first", "command": "touch first.ran"},
            {"type": "command", "id": "second", "command": "echo no >&2; exit 2"},
            {"type": "command", "id": "third", "command": "touch third.ran"}
        ]}]}}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny");
    let statuses: Vec<&str> = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "blocked", "skipped"]);
    assert!(env.project.join("first.ran").exists());
    assert!(!env.project.join("third.ran").exists());
    assert!(
        out["hooks"][2]["message"]
            .as_str()
            .unwrap()
            .contains("`second` blocked")
    );
}

#[test]
fn permission_precedence_is_deny_defer_ask_allow() {
    let cases: &[(&[&str], &str)] = &[
        (&["allow", "ask"], "ask"),
        (&["ask", "defer", "allow"], "defer"),
        (&["allow", "deny", "defer", "ask"], "deny"),
        (&["allow", "allow"], "allow"),
    ];
    for (decisions, expected) in cases {
        let env = TestEnv::new();
        let handlers: Vec<Value> = decisions
            .iter()
            .map(|d| decide(d, &format!("because {d}")))
            .collect();
        env.project_hooks(hooks("PreToolUse", "Bash", json!(handlers)));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        assert_eq!(out["decision"], *expected, "{decisions:?}");
        assert_eq!(out["reason"], format!("because {expected}"));
    }
}

#[test]
fn every_context_is_kept_in_config_order_and_continue_false_wins() {
    let env = TestEnv::new();
    let ctx = |text: &str| json!({"type": "command", "command": format!("echo '{{\"hookSpecificOutput\": {{\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"{text}\"}}}}'")});
    env.project_hooks(json!({"hooks": {"PostToolUse": [
        {"matcher": "Bash", "hooks": [ctx("one"), ctx("two")]},
        {"matcher": "*", "hooks": [
            ctx("three"),
            {"type": "command", "command": r#"echo '{"continue": false, "stopReason": "enough", "systemMessage": "stopping", "decision": "block", "reason": "r"}'"#}
        ]}
    ]}}));
    env.user_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [ctx("four")]}]}}));
    let out = env.dispatch(
        "PostToolUse",
        json!({"session_id": "s", "tool_name": "Bash", "tool_input": {}, "tool_response": {}}),
    );
    assert_eq!(
        out["additionalContext"],
        json!(["one", "two", "three", "four"])
    );
    assert_eq!(out["continue"], false);
    assert_eq!(out["stopReason"], "enough");
    assert_eq!(out["systemMessages"], json!(["stopping"]));
    assert_eq!(out["decision"], "block");
}

#[test]
fn updated_input_is_deterministic_by_priority_then_config_order() {
    let env = TestEnv::new();
    let rewrite = |id: &str, command: &str, priority: i64| {
        let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"command": command}}});
        json!({"type": "command", "id": id, "priority": priority, "command": format!("echo '{out}'")})
    };
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            rewrite("low", "echo low", 0),
            rewrite("high", "echo high", 10),
            rewrite("high-later", "echo high later", 10)
        ]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["updatedInput"], json!({"command": "echo high"}));
    assert_eq!(out["updatedInputBy"], "high");

    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([rewrite("a", "echo a", 0), rewrite("b", "echo b", 0)]),
    ));
    for _ in 0..3 {
        assert_eq!(
            env.dispatch("PreToolUse", bash_input("ls"))["updatedInputBy"],
            "a"
        );
    }
}

#[test]
fn permission_request_uses_the_decision_object() {
    let env = TestEnv::new();
    let allow = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow", "updatedInput": {"command": "ls -l"}}}});
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "not today", "interrupt": true}}});
    env.project_hooks(hooks(
        "PermissionRequest",
        "Bash",
        json!([
            {"type": "command", "command": format!("echo '{allow}'")},
            {"type": "command", "command": format!("echo '{deny}'")},
            {"type": "command", "command": "echo ignored >&2; exit 2"}
        ]),
    ));
    let out = env.dispatch(
        "PermissionRequest",
        json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}}),
    );
    assert_eq!(out["decision"], "deny");
    assert_eq!(out["reason"], "not today");
    assert_eq!(
        out["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "not today", "interrupt": true})
    );
}

#[test]
fn matchers_and_if_rules_select_hooks() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PreToolUse": [
        {"matcher": "Edit|Write", "hooks": [{"type": "command", "id": "edits", "command": "true"}]},
        {"matcher": "Bash", "hooks": [
            {"type": "command", "id": "git-only", "if": "Bash(git push *)", "command": "true"},
            {"type": "command", "id": "all-bash", "command": "true"}
        ]},
        {"matcher": "^mcp__.*", "hooks": [{"type": "command", "id": "mcp", "command": "true"}]}
    ]}}));
    let ids = |out: &Value| -> Vec<String> {
        out["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(&env.dispatch("PreToolUse", bash_input("ls"))),
        ["all-bash"]
    );
    assert_eq!(
        ids(&env.dispatch("PreToolUse", bash_input("cd x && FOO=1 git push -f"))),
        ["git-only", "all-bash"]
    );
    let write = json!({"session_id": "s", "tool_name": "Write", "tool_input": {"file_path": "/x"}});
    assert_eq!(ids(&env.dispatch("PreToolUse", write)), ["edits"]);
    let mcp = json!({"session_id": "s", "tool_name": "mcp__memory__create", "tool_input": {}});
    assert_eq!(ids(&env.dispatch("PreToolUse", mcp)), ["mcp"]);
}

#[test]
fn stop_blocks_are_capped_per_session() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": r#"echo '{"decision": "block", "reason": "keep going"}'"#}
    ]}]}}));
    let stop = |session: &str, cap: Option<&str>| {
        let mut cmd = env.command();
        cmd.args(["dispatch", "Stop"]);
        if let Some(cap) = cap {
            cmd.env("HOOKHOST_STOP_BLOCK_CAP", cap);
        }
        env.run_with(
            &mut cmd,
            &json!({"session_id": session, "stop_hook_active": true}).to_string(),
        )
        .json()
    };
    for n in 1..=3 {
        assert_eq!(stop("a", Some("3"))["decision"], "block", "block {n}");
    }
    assert_eq!(
        stop("b", Some("3"))["decision"],
        "block",
        "sessions count apart"
    );
    let capped = stop("a", Some("3"));
    assert_eq!(capped["decision"], "none");
    assert!(
        capped["notices"][0]["message"]
            .as_str()
            .unwrap()
            .contains("blocked 3 times in a row"),
        "{capped}"
    );
    assert_eq!(
        stop("a", Some("3"))["decision"],
        "block",
        "the count starts again"
    );

    // The default cap is 8; 0 means no cap.
    for _ in 0..8 {
        assert_eq!(stop("c", None)["decision"], "block");
    }
    assert_eq!(stop("c", None)["decision"], "none");
    for _ in 0..12 {
        assert_eq!(stop("d", Some("0"))["decision"], "block");
    }
}
