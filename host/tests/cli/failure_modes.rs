//! Issue 25, items 2–4: every `onFailure` mode, a graceful kill (`SIGTERM`, then
//! `SIGKILL` after `killGrace`) with no wait for background children, and the event's
//! context in a command hook's environment (`contextEnv`).

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hooks, process_running};

/// A command hook that fails (exit 7, no JSON) with `onFailure: mode`.
fn failing(mode: &str) -> Value {
    json!({"type": "command", "id": format!("f-{mode}"), "command": "echo broken >&2; exit 7", "onFailure": mode})
}

fn notices(out: &Value) -> String {
    out["notices"].to_string()
}

#[test]
fn each_on_failure_mode_does_what_it_says() {
    let env = TestEnv::new();
    // continue: a notice, the call goes ahead.
    env.project_hooks(hooks("PreToolUse", "Bash", json!([failing("continue")])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert!(notices(&out).contains("broken"), "{out}");

    // ignore: no notice, but the report and the audit log keep the failure.
    env.project_hooks(hooks("PreToolUse", "Bash", json!([failing("ignore")])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert!(!notices(&out).contains("broken"), "{out}");
    assert_eq!(out["hooks"][0]["status"], "failed", "{out}");
    let audited = env.audit_entries();
    let last = audited.last().expect("an audit line").to_string();
    assert!(
        last.contains("f-ignore") && last.contains("failed"),
        "{last}"
    );

    // block: a deny.
    env.project_hooks(hooks("PreToolUse", "Bash", json!([failing("block")])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny", "{out}");

    // abort: the agent stops, and the stop reason names the hook.
    env.project_hooks(hooks("PreToolUse", "Bash", json!([failing("abort")])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["continue"], false, "{out}");
    let reason = out["stopReason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("f-abort") && reason.contains("abort"),
        "{out}"
    );
    // Claude Code's shape: `continue: false` with the stop reason.
    let run = env.run(
        &["dispatch", "--format", "claude", "PreToolUse"],
        &bash_input("ls").to_string(),
    );
    let claude: Value = serde_json::from_str(&run.stdout).expect(&run.stdout);
    assert_eq!(claude["continue"], false, "{}", run.stdout);
    assert!(
        claude["stopReason"]
            .as_str()
            .unwrap_or_default()
            .contains("f-abort"),
        "{}",
        run.stdout
    );
}

/// Claude Code 2.1.295 ignores `block` on Stop, SubagentStop, TaskCompleted and
/// TeammateIdle and on async hooks; hookhost does too, and says so.
#[test]
fn block_is_inert_on_stop_and_says_so() {
    let env = TestEnv::new();
    for event in ["Stop", "SubagentStop", "TaskCompleted", "TeammateIdle"] {
        env.project_hooks(hooks(event, "", json!([failing("block")])));
        let out = env.dispatch(event, json!({"session_id": format!("s-{event}")}));
        assert_eq!(out["decision"], "none", "{event}: {out}");
        assert!(
            notices(&out).contains(&format!(
                "not blocking (onFailure: \\\"block\\\" is ignored on {event})"
            )),
            "{event}: {out}"
        );
        let run = env.run(&["validate"], "");
        assert!(
            run.stderr.contains("$.hooks.") && run.stderr.contains("onFailure"),
            "{event}: {}",
            run.stderr
        );
    }
}

#[test]
fn validate_names_file_hook_and_field_of_a_bad_value() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "true", "onFailure": "explode"}
    ]}]}}));
    let run = env.run(&["validate"], "");
    let project = env.project.join(".hookhost/hooks.json");
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains(&format!(
            "{}: $.hooks.PreToolUse[0].hooks[0].onFailure: unknown variant `explode`",
            project.display()
        )) && run.stderr.contains("`abort`"),
        "{}",
        run.stderr
    );

    env.project_hooks(json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "command": "true", "killGrace": -1},
        {"type": "http", "url": "http://127.0.0.1:9/x", "killGrace": 1},
        {"type": "command", "command": "true", "async": true, "onFailure": "abort"}
    ]}]}}));
    let run = env.run(&["validate"], "");
    for expected in [
        "$.hooks.PreToolUse[0].hooks[0]: `killGrace` must be between 0 and 60 seconds",
        "$.hooks.PreToolUse[0].hooks[1]: `killGrace` is not a field of a http hook",
        "$.hooks.PreToolUse[0].hooks[2].onFailure: `onFailure: \"abort\"` has no effect here",
    ] {
        assert!(
            run.stderr.contains(expected),
            "missing {expected}: {}",
            run.stderr
        );
    }

    // `ignore` and `abort` are hookhost's: in a file Claude Code also reads, a warning.
    env.write(
        ".claude/settings.json",
        &json!({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": "true", "onFailure": "ignore"}
        ]}]}})
        .to_string(),
    );
    let run = env.run(&["validate", "--settings", ".claude/settings.json"], "");
    assert!(
        run.stderr
            .contains("Claude Code knows only `continue` and `block`"),
        "{}",
        run.stderr
    );
}

/// A hook that traps `TERM` gets it first: it writes its marker and exits within its
/// `killGrace` (a `SIGKILL` cannot be trapped).
#[test]
fn a_timeout_sends_term_first() {
    let env = TestEnv::new();
    let marker = env.project.join("termed");
    let command = format!(
        "trap 'touch {}; exit 0' TERM; while :; do sleep 0.05; done",
        marker.display()
    );
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "timeout": 1.5, "command": command}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "timeout", "{out}");
    assert!(marker.exists(), "the hook never saw SIGTERM: {out}");
    assert!(
        out["hooks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("ended within its killGrace (3s)"),
        "{out}"
    );
}

/// A hook that ignores `TERM` is killed once its `killGrace` has passed.
#[test]
fn a_hook_ignoring_term_is_killed_after_its_grace() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "timeout": 1, "killGrace": 0.5,
                "command": "trap '' TERM; while :; do sleep 0.05; done; : deaf-hook-4251"}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "timeout", "{out}");
    assert!(
        out["hooks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did not end within its killGrace (0.5s) and was killed (SIGKILL)"),
        "{out}"
    );
    assert!(!process_running("deaf-hook-4251"), "the deaf hook survived");
}

/// `sleep & echo '{}'`: the hook is answered when its own process exits (plus a short
/// drain), and the background child, still holding stdout, is killed rather than waited
/// for: it never gets to write its marker.
#[test]
fn a_background_child_holding_stdout_is_not_waited_for() {
    let env = TestEnv::new();
    let natural = env.project.join("natural-end");
    let command = format!("(sleep 5.4252; touch {}) & echo '{{}}'", natural.display());
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": command}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    assert!(
        !process_running("sleep 5.4252"),
        "the background child outlived the answer"
    );
    // Had the answer waited for the child, the child would have written its marker.
    assert!(!natural.exists(), "the background child ran to its end");
}

#[test]
fn context_env_puts_the_events_context_in_the_environment() {
    let env = TestEnv::new();
    let dump = "env | grep -a '^HOOKHOST_' | sort > env.txt";
    let input = json!({
        "session_id": "ctx-1",
        "tool_name": "Write",
        "tool_input": {"file_path": "/x", "content": "é".repeat(12_000)},
        "tool_response": "done",
        "cwd": env.project,
    });
    env.project_hooks(hooks(
        "PostToolUse",
        "Write",
        json!([{"type": "command", "command": dump, "contextEnv": true}]),
    ));
    env.dispatch("PostToolUse", input.clone());
    let seen = std::fs::read_to_string(env.project.join("env.txt")).unwrap();
    let get = |name: &str| {
        seen.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
    };
    assert_eq!(get("HOOKHOST_TOOL_NAME").as_deref(), Some("Write"));
    assert_eq!(get("HOOKHOST_TOOL_RESULT").as_deref(), Some("done"));
    assert_eq!(get("HOOKHOST_SESSION_ID").as_deref(), Some("ctx-1"));
    assert_eq!(get("HOOKHOST_EVENT").as_deref(), Some("PostToolUse"));
    assert_eq!(
        get("HOOKHOST_CWD").as_deref(),
        Some(env.project.to_str().unwrap())
    );
    let tool_input = get("HOOKHOST_TOOL_INPUT").unwrap();
    assert_eq!(tool_input.chars().count(), 10_000);
    assert!(
        tool_input.starts_with(r#"{"file_path":"/x","content":"éé"#),
        "{}",
        &tool_input[..40]
    );
    assert_eq!(get("HOOKHOST_TOOL_INPUT_TRUNCATED").as_deref(), Some("1"));
    assert_eq!(get("HOOKHOST_TOOL_RESULT_TRUNCATED"), None);
    assert_eq!(get("HOOKHOST_DEPTH").as_deref(), Some("1"));

    // Off by default; and a NUL in a value does not keep the hook from starting.
    env.project_hooks(hooks(
        "PostToolUse",
        "*",
        json!([{"type": "command", "command": dump}]),
    ));
    env.dispatch("PostToolUse", input);
    let seen = std::fs::read_to_string(env.project.join("env.txt")).unwrap();
    assert!(!seen.contains("HOOKHOST_TOOL_"), "{seen}");
    env.project_hooks(hooks(
        "PostToolUse",
        "*",
        json!([{"type": "command", "command": dump, "contextEnv": true}]),
    ));
    let out = env.dispatch(
        "PostToolUse",
        json!({"session_id": "n", "tool_name": "A\u{0}B", "tool_input": {"k": "v\u{0}"}}),
    );
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    let seen = std::fs::read_to_string(env.project.join("env.txt")).unwrap();
    assert!(seen.contains("HOOKHOST_TOOL_NAME=AB\n"), "{seen}");
}

/// A cancelled dispatch (a `serve` client that went away) ends its hook gracefully too:
/// `SIGTERM` first, with the hook's pipes still read, so its trap runs.
#[test]
fn a_cancelled_dispatch_sends_term_first() {
    let env = TestEnv::new();
    let marker = env.project.join("termed");
    let command = format!(
        "trap 'echo cleaning up >&2; touch {}; exit 0' TERM; touch started; \
         while :; do sleep 0.05; done",
        marker.display()
    );
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": command}]),
    ));
    let daemon = crate::serve::Daemon::start(&env);
    {
        let mut client = daemon.client();
        client.request(json!(1), "PreToolUse", bash_input("ls"));
        crate::support::wait_until("the hook to start", || env.project.join("started").exists());
    } // the client goes away
    crate::support::wait_until("the hook's TERM trap to run", || marker.exists());
}

/// Async hooks: `block` is ignored there and the notice says so; `ignore` leaves no
/// notice.
#[test]
fn an_async_hooks_failure_follows_its_mode_too() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "bg-block", "async": true, "onFailure": "block", "command": "exit 7"},
        {"type": "command", "id": "bg-ignore", "async": true, "onFailure": "ignore", "command": "exit 7"}
    ]}]}}));
    let input = json!({"session_id": "as", "tool_name": "Bash"});
    env.dispatch("PostToolUse", input.clone());
    let dir = env
        .data
        .join("sessions")
        .join(hookhost::session::session_key("as"))
        .join("async");
    crate::support::wait_until("both async results", || {
        std::fs::read_dir(&dir).is_ok_and(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .count()
                == 2
        })
    });
    let next = env.dispatch(
        "UserPromptSubmit",
        json!({"session_id": "as", "prompt": "p"}),
    );
    let notices = notices(&next);
    assert!(
        notices.contains("bg-block")
            && notices
                .contains("not blocking (onFailure: \\\"block\\\" is ignored on async hooks)"),
        "{next}"
    );
    assert!(!notices.contains("bg-ignore"), "{next}");
    assert_eq!(next["decision"], "none", "{next}");
}
