//! Issue 25, item 6: loop brakes on every loop-extending path. SubagentStop blocks and
//! `asyncRewake` wake-ups count with Stop blocks against `stopBlockCap`; a Stop block may
//! carry the `stopEscapeHatch` sentence; the depth guard (`HOOKHOST_DEPTH`,
//! `maxHookDepth`) runs no hook past its limit and fails closed where `onFailure` applies.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, wait_until};

const BLOCK: &str = r#"echo '{"decision": "block", "reason": "not done"}'"#;

fn dispatch_capped(env: &TestEnv, event: &str, input: Value, cap: &str) -> Value {
    let mut cmd = env.command();
    cmd.args(["dispatch", event])
        .env("HOOKHOST_STOP_BLOCK_CAP", cap);
    env.run_with(&mut cmd, &input.to_string()).json()
}

#[test]
fn subagent_stop_blocks_count_with_stop_blocks() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": BLOCK}]}],
        "SubagentStop": [{"matcher": "blocker", "hooks": [{"type": "command", "command": BLOCK}]}]
    }}));
    let stop = || dispatch_capped(&env, "Stop", json!({"session_id": "l"}), "3");
    let subagent = |agent: &str| {
        dispatch_capped(
            &env,
            "SubagentStop",
            json!({"session_id": "l", "agent_type": agent}),
            "3",
        )
    };
    assert_eq!(subagent("blocker")["decision"], "block");
    // A subagent that stops does not end the session's loop: no reset.
    assert_eq!(subagent("other")["decision"], "none");
    assert_eq!(stop()["decision"], "block");
    assert_eq!(subagent("blocker")["decision"], "block");
    let capped = subagent("blocker");
    assert_eq!(capped["decision"], "none", "{capped}");
    assert!(
        capped["notices"]
            .to_string()
            .contains("blocked 3 times in a row"),
        "{capped}"
    );
}

#[test]
fn an_async_rewake_counts_and_is_not_delivered_past_the_cap() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": BLOCK}]}],
        "PostToolUse": [{"hooks": [
            {"type": "command", "id": "waker", "asyncRewake": true,
             "command": "echo 'tests failed' >&2; exit 2"}
        ]}]
    }}));
    let session = |s: &str| json!({"session_id": s, "tool_name": "Bash"});
    let wake_then_prompt = |s: &str| {
        dispatch_capped(&env, "PostToolUse", session(s), "1");
        let dir = env
            .data
            .join("sessions")
            .join(hookhost::session::session_key(s))
            .join("async");
        wait_until("the wake-up", || {
            std::fs::read_dir(&dir).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.path().extension().is_some_and(|x| x == "json"))
            })
        });
        dispatch_capped(
            &env,
            "UserPromptSubmit",
            json!({"session_id": s, "prompt": "p"}),
            "1",
        )
    };
    // Under the cap: delivered.
    let fresh = wake_then_prompt("w1");
    assert_eq!(
        fresh["additionalContext"],
        json!(["tests failed"]),
        "{fresh}"
    );
    // After a Stop block, the wake-up is one step too many for a cap of 1.
    let stop = dispatch_capped(&env, "Stop", json!({"session_id": "w2"}), "1");
    assert_eq!(stop["decision"], "block");
    let late = wake_then_prompt("w2");
    assert_eq!(late["additionalContext"], json!([]), "{late}");
    assert!(
        late["notices"]
            .to_string()
            .contains("the wake-up from `waker` is not delivered"),
        "{late}"
    );
}

#[test]
fn a_stop_block_carries_the_escape_hatch_when_configured() {
    let env = TestEnv::new();
    let reason = |config: Value| {
        env.project_hooks(config);
        let out = env.dispatch("Stop", json!({"session_id": "e"}));
        // Each call starts a fresh count.
        let _ = std::fs::remove_dir_all(env.data.join("sessions"));
        out["reason"].as_str().unwrap_or_default().to_string()
    };
    let stop_hooks = json!({"Stop": [{"hooks": [{"type": "command", "command": BLOCK}]}]});
    assert_eq!(reason(json!({"hooks": stop_hooks})), "not done");
    assert_eq!(
        reason(json!({"hooks": stop_hooks, "stopEscapeHatch": true})),
        "not done\nif you truly cannot fix this, explain why and stop"
    );
    assert_eq!(
        reason(json!({"hooks": stop_hooks, "stopEscapeHatch": "Give up politely."})),
        "not done\nGive up politely."
    );
    assert_eq!(
        reason(json!({"hooks": stop_hooks, "stopEscapeHatch": false})),
        "not done"
    );
    env.project_hooks(json!({"hooks": stop_hooks, "stopEscapeHatch": " "}));
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr
            .contains("$.stopEscapeHatch: `stopEscapeHatch` must be"),
        "{}",
        run.stderr
    );
}

fn at_depth(env: &TestEnv, depth: &str, event: &str, input: Value) -> Value {
    let mut cmd = env.command();
    cmd.args(["dispatch", event]).env("HOOKHOST_DEPTH", depth);
    let run = env.run_with(&mut cmd, &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

#[test]
fn the_depth_guard_runs_no_hook_past_max_hook_depth_and_fails_closed() {
    let env = TestEnv::new();
    let seen = env.project.join("depth.txt");
    let record = format!("echo \"$HOOKHOST_DEPTH\" > {}", seen.display());
    env.project_hooks(json!({"hooks": {
        "PreToolUse": [{"hooks": [{"type": "command", "command": record}]}],
        "Stop": [{"hooks": [{"type": "command", "command": record}]}]
    }}));
    // Depth 3 of 4: the hook runs and hands on 4.
    let out = at_depth(&env, "3", "PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "4");
    std::fs::remove_file(&seen).unwrap();

    // At the limit, and every hostile value: no hook runs; the guard event is denied,
    // Stop goes ahead with a notice.
    for depth in ["4", "5", "x", "-1", "99999999999999999999", "4 ", "０"] {
        let out = at_depth(&env, depth, "PreToolUse", bash_input("ls"));
        assert_eq!(out["decision"], "deny", "{depth}: {out}");
        assert_eq!(out["hooks"][0]["status"], "skipped", "{depth}: {out}");
        assert!(
            out["reason"].as_str().unwrap().contains("HOOKHOST_DEPTH"),
            "{depth}: {out}"
        );
        let stop = at_depth(&env, depth, "Stop", json!({"session_id": "d"}));
        assert_eq!(stop["decision"], "none", "{depth}: {stop}");
        assert!(
            stop["notices"].to_string().contains("runs no hook"),
            "{depth}: {stop}"
        );
        assert!(!seen.exists(), "{depth}: a hook ran");
    }

    // Empty is unset (depth 0); `maxHookDepth` raises the limit.
    let out = at_depth(&env, "", "PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "1");
    env.project_hooks(json!({"maxHookDepth": 6, "hooks": {
        "PreToolUse": [{"hooks": [{"type": "command", "command": record}]}]
    }}));
    let out = at_depth(&env, "5", "PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(std::fs::read_to_string(&seen).unwrap().trim(), "6");
    env.project_hooks(json!({"maxHookDepth": 0}));
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr
            .contains("$.maxHookDepth: `maxHookDepth` must be from 1 to 64"),
        "{}",
        run.stderr
    );
}
