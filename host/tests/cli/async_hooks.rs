//! `async` and `asyncRewake`: results arrive with a later outcome of the same session.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, wait_until};

/// Waits (bounded) until the session has a queued async result.
fn wait_for_result(env: &TestEnv, session: &str) {
    let dir = env
        .data
        .join("sessions")
        .join(hookhost::session::session_key(session))
        .join("async");
    wait_until(&format!("an async result in {}", dir.display()), || {
        std::fs::read_dir(&dir).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "json"))
        })
    });
}

fn input(session: &str) -> Value {
    let mut input = bash_input("ls");
    input["session_id"] = json!(session);
    input
}

#[test]
fn async_results_join_a_later_outcome_of_the_session() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "id": "bg", "async": true, "command": r#"sleep 0.3; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "lint found 2 warnings", "permissionDecision": "deny"}, "systemMessage": "lint done"}'"#}
    ]}]}}));
    let first = env.dispatch("PreToolUse", input("sa"));
    assert_eq!(first["hooks"][0]["status"], "async");
    assert_eq!(first["decision"], "none", "async hooks cannot decide");
    assert_eq!(first["additionalContext"], json!([]));

    wait_for_result(&env, "sa");
    // The async run has an audit line of its own, after its event's line.
    let mut async_line = None;
    wait_until("the async run's audit line", || {
        async_line = env.audit_entries().into_iter().find(|e| e["async"] == true);
        async_line.is_some()
    });
    let async_line = async_line.unwrap();
    assert_eq!(async_line["session"], "sa");
    assert_eq!(async_line["event"], "PreToolUse");
    assert_eq!(async_line["hooks"][0]["id"], "bg");
    // What the hook answered, though an async hook cannot decide.
    assert_eq!(async_line["hooks"][0]["status"], "blocked");
    assert_eq!(async_line["decision"], "deny");

    let other = env.dispatch(
        "PostToolUse",
        json!({"session_id": "other", "tool_name": "Bash"}),
    );
    assert_eq!(
        other["additionalContext"],
        json!([]),
        "results stay in their session"
    );
    let second = env.dispatch(
        "PostToolUse",
        json!({"session_id": "sa", "tool_name": "Bash"}),
    );
    assert_eq!(
        second["additionalContext"],
        json!(["lint found 2 warnings"])
    );
    assert_eq!(second["systemMessages"], json!(["lint done"]));
    assert_eq!(second["decision"], "none");
    let third = env.dispatch(
        "PostToolUse",
        json!({"session_id": "sa", "tool_name": "Bash"}),
    );
    assert_eq!(third["additionalContext"], json!([]), "delivered once");
}

#[test]
fn async_rewake_exit_2_wakes_the_session() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "tests", "asyncRewake": true, "command": "echo 'tests failed: 3' >&2; exit 2"}
    ]}]}}));
    let first = env.dispatch(
        "PostToolUse",
        json!({"session_id": "sr", "tool_name": "Bash"}),
    );
    assert_eq!(first["hooks"][0]["status"], "async");
    assert_eq!(first["decision"], "none");
    wait_for_result(&env, "sr");
    let next = env.dispatch(
        "UserPromptSubmit",
        json!({"session_id": "sr", "prompt": "next"}),
    );
    assert_eq!(next["additionalContext"], json!(["tests failed: 3"]));
    assert!(
        next["notices"][0]["message"]
            .as_str()
            .unwrap()
            .contains("asyncRewake"),
        "{next}"
    );
}

/// The detached runner loads the config the dispatch loaded: a relative `--settings`
/// file, dispatched from another directory than the project, is found again and its
/// async hook runs (it is not refused as missing or changed).
#[test]
fn the_runner_loads_the_same_relative_settings_file() {
    let env = TestEnv::new();
    let dir = env.home.join("elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "bg", "async": true, "command": "touch async-ran"}
    ]}]}});
    std::fs::write(dir.join("s.json"), settings.to_string()).unwrap();
    let dispatch = |input: Value| {
        let run = env.run_with(
            env.command()
                .args([
                    "dispatch",
                    "PostToolUse",
                    "--settings",
                    "s.json",
                    "--project",
                ])
                .arg(&env.project)
                .current_dir(&dir),
            &input.to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.json()
    };
    let first = dispatch(json!({"session_id": "rel", "tool_name": "Bash"}));
    assert_eq!(first["hooks"][0]["status"], "async", "{first}");
    wait_for_result(&env, "rel");
    assert!(env.project.join("async-ran").exists());
    let next = dispatch(json!({"session_id": "rel", "tool_name": "Bash"}));
    assert!(!next["notices"].to_string().contains("refused"), "{next}");
}
