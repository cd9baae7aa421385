//! Claude Code parity through 2.1.332 (issue 25 item 5): the model-switch events, the
//! refuse-only PreSkillShellCommand, Elicitation blocks, a block beside another event's
//! `hookSpecificOutput`, input pass-through, managed `continue: false`, HTTP framing
//! headers, managed allowlists, unloadable managed guard entries and unknown settings keys.

use serde_json::{Value, json};

use crate::support::{TestEnv, TestServer, hooks};

/// A command hook that prints `answer` (JSON) on stdout.
fn says(env: &TestEnv, name: &str, answer: Value) -> Value {
    let file = env.write(format!("answers/{name}.json"), &answer.to_string());
    json!({"type": "command", "id": name, "command": format!("cat '{}'", file.display())})
}

fn switch_input(to: &str) -> Value {
    json!({"session_id": "s", "from_model": "sonnet", "to_model": to, "requested_model": to,
           "source": "command", "context_tokens": 1200, "prompt_cache_warm": true})
}

#[test]
fn pre_model_switch_deny_beats_ask_beats_allow_and_matches_to_model() {
    let env = TestEnv::new();
    let decision = |d: &str| json!({"hookSpecificOutput": {"hookEventName": "PreModelSwitch", "permissionDecision": d, "permissionDecisionReason": format!("said {d}")}});
    let allow = says(&env, "allow", decision("allow"));
    let ask = says(&env, "ask", decision("ask"));
    let deny = says(&env, "deny", decision("deny"));
    env.project_hooks(json!({"hooks": {"PreModelSwitch": [
        {"matcher": "opus", "hooks": [allow.clone(), ask.clone()]},
        {"matcher": "haiku", "hooks": [allow, ask, deny]},
    ]}}));
    let out = env.dispatch("PreModelSwitch", switch_input("opus"));
    assert_eq!(out["decision"], "ask", "{out:#}");
    let out = env.dispatch("PreModelSwitch", switch_input("haiku"));
    assert_eq!(out["decision"], "deny", "{out:#}");
    assert_eq!(out["reason"], "said deny");
    let out = env.dispatch("PreModelSwitch", switch_input("sonnet"));
    assert_eq!(out["decision"], "none", "no group matches sonnet: {out:#}");
    // Claude Code's form: exit 2 with the reason.
    let run = env.run(
        &["dispatch", "PreModelSwitch", "--format", "claude"],
        &switch_input("haiku").to_string(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("said deny"), "{}", run.stderr);
}

#[test]
fn a_timeout_blocks_pre_model_switch_and_nothing_else() {
    let env = TestEnv::new();
    let slow =
        json!([{"type": "command", "id": "slow", "command": "exec sleep 30", "timeout": 0.3}]);
    for event in ["PreModelSwitch", "PostModelSwitch", "UserPromptSubmit"] {
        env.project_hooks(hooks(event, "", slow.clone()));
        let out = env.dispatch(event, switch_input("opus"));
        let blocked = out["decision"] == "deny" || out["decision"] == "block";
        assert_eq!(blocked, event == "PreModelSwitch", "{event}: {out:#}");
        if blocked {
            let reason = out["reason"].as_str().unwrap();
            assert!(reason.contains("timed out"), "{reason}");
            assert!(reason.contains("slow"), "names the hook: {reason}");
        }
    }
    // `onFailure: "continue"` does not take it back, and `validate` says so.
    let mut lenient = slow.clone();
    lenient[0]["onFailure"] = json!("continue");
    env.project_hooks(hooks("PreModelSwitch", "", lenient));
    let out = env.dispatch("PreModelSwitch", switch_input("opus"));
    assert_eq!(out["decision"], "deny", "{out:#}");
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr
            .contains("a timeout still blocks `PreModelSwitch`"),
        "{}",
        run.stderr
    );
}

#[test]
fn post_model_switch_reads_context_and_cannot_block() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PostModelSwitch",
        "*",
        json!([
            {"type": "command", "command": "echo now on opus"},
            {"type": "command", "command": "echo no >&2; exit 2"},
            {"type": "command", "command": "echo '{\"decision\": \"block\", \"reason\": \"x\"}'"},
        ]),
    ));
    let out = env.dispatch("PostModelSwitch", switch_input("opus"));
    assert_eq!(out["decision"], "none", "{out:#}");
    assert_eq!(out["additionalContext"][0], "now on opus", "{out:#}");
}

fn skill_input(tool: &str, command: &str) -> Value {
    json!({"session_id": "s", "tool_name": tool, "tool_input": {"command": command},
           "tool_use_id": "skill-1", "command_name": "deploy", "invoked_by": "user"})
}

/// Every answer Claude Code reads on PreSkillShellCommand, and what it does.
#[test]
fn pre_skill_shell_command_only_refuses() {
    let env = TestEnv::new();
    let pre = |specific: Value| {
        let mut s = specific;
        s["hookEventName"] = json!("PreToolUse");
        json!({"hookSpecificOutput": s})
    };
    let req = |decision: Value| json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}});
    let own = |specific: Value| {
        let mut s = specific;
        s["hookEventName"] = json!("PreSkillShellCommand");
        json!({"hookSpecificOutput": s})
    };
    // (answer, blocked, reason contains, stops the agent)
    let cases: Vec<(Value, bool, &str, bool)> = vec![
        (
            own(json!({"permissionDecision": "allow"})),
            false,
            "",
            false,
        ),
        (
            pre(json!({"permissionDecision": "allow"})),
            false,
            "",
            false,
        ),
        (
            own(json!({"permissionDecision": "deny", "permissionDecisionReason": "no prod"})),
            true,
            "no prod",
            false,
        ),
        (
            own(json!({"permissionDecision": "ask"})),
            true,
            "can't wait",
            false,
        ),
        (
            pre(json!({"permissionDecision": "defer", "permissionDecisionReason": "later"})),
            true,
            "later",
            false,
        ),
        (
            own(json!({"updatedInput": {"command": "true"}})),
            true,
            "changed the command",
            false,
        ),
        (
            own(json!({"permissionDecision": "allow", "updatedInput": {"command": "true"}})),
            true,
            "changed the command",
            false,
        ),
        (
            req(json!({"behavior": "deny", "message": "refused"})),
            true,
            "refused",
            false,
        ),
        (
            req(json!({"behavior": "deny", "message": "stop", "interrupt": true})),
            true,
            "stop",
            true,
        ),
        (req(json!({"behavior": "allow"})), false, "", false),
        (
            req(json!({"behavior": "allow", "updatedInput": {"command": "x"}})),
            true,
            "changed the command",
            false,
        ),
        (
            req(
                json!({"behavior": "allow", "updatedPermissions": [{"type": "setMode", "mode": "acceptEdits", "destination": "session"}]}),
            ),
            true,
            "changed the command",
            false,
        ),
        (
            json!({"decision": "block", "reason": "blocked top"}),
            true,
            "blocked top",
            false,
        ),
        (
            json!({"blocked": true, "blockReason": "flat block"}),
            true,
            "flat block",
            false,
        ),
    ];
    for (answer, blocked, reason, stops) in cases {
        let hook = says(&env, "h", answer.clone());
        env.project_hooks(hooks("PreSkillShellCommand", "Bash", json!([hook])));
        let out = env.dispatch("PreSkillShellCommand", skill_input("Bash", "git push"));
        assert_eq!(out["decision"] == "deny", blocked, "{answer}: {out:#}");
        assert_ne!(out["decision"], "ask", "{answer}");
        assert_ne!(out["decision"], "allow", "allow adds nothing: {answer}");
        if blocked {
            let r = out["reason"].as_str().unwrap_or_default();
            assert!(r.contains(reason), "{answer}: {r}");
        }
        assert_eq!(out["continue"] == false, stops, "{answer}: {out:#}");
        assert!(
            out.get("updatedInput").is_none_or(Value::is_null),
            "never rewritten: {out:#}"
        );
    }
}

#[test]
fn pre_skill_shell_command_matches_tool_name_runs_if_rules_and_blocks_on_prompt_hooks() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PreSkillShellCommand": [
        {"matcher": "Bash", "hooks": [
            {"type": "command", "id": "rm", "if": "Bash(rm *)", "command": "echo 'no rm' >&2; exit 2"}]},
        {"matcher": "PowerShell", "hooks": [{"type": "prompt", "id": "judge", "prompt": "is it safe?"}]},
    ]}}));
    let out = env.dispatch("PreSkillShellCommand", skill_input("Bash", "rm -rf build"));
    assert_eq!(out["decision"], "deny", "{out:#}");
    assert_eq!(out["reason"], "no rm");
    let out = env.dispatch("PreSkillShellCommand", skill_input("Bash", "ls"));
    assert_eq!(
        out["decision"], "none",
        "the if rule does not match: {out:#}"
    );
    let out = env.dispatch("PreSkillShellCommand", skill_input("PowerShell", "dir"));
    assert_eq!(
        out["decision"], "deny",
        "a prompt hook counts as a block: {out:#}"
    );
    assert!(
        out["reason"]
            .as_str()
            .unwrap()
            .contains("prompt hooks don't run")
    );
    // Elsewhere a prompt hook is skipped, as before.
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "prompt", "prompt": "p"}]),
    ));
    let out = env.dispatch("PreToolUse", skill_input("Bash", "ls"));
    assert_eq!(out["decision"], "none", "{out:#}");
}

#[test]
fn pre_skill_shell_command_fails_open_unless_on_failure_block() {
    let env = TestEnv::new();
    let failing = |on_failure: Option<&str>| {
        let mut h = json!({"type": "command", "command": "exit 1"});
        if let Some(o) = on_failure {
            h["onFailure"] = json!(o);
        }
        hooks("PreSkillShellCommand", "*", json!([h]))
    };
    env.project_hooks(failing(None));
    let out = env.dispatch("PreSkillShellCommand", skill_input("Bash", "ls"));
    assert_eq!(out["decision"], "none", "{out:#}");
    env.project_hooks(failing(Some("block")));
    let out = env.dispatch("PreSkillShellCommand", skill_input("Bash", "ls"));
    assert_eq!(out["decision"], "deny", "{out:#}");
}

#[test]
fn elicitation_honours_decision_block() {
    let env = TestEnv::new();
    for event in ["Elicitation", "ElicitationResult"] {
        let hook = says(
            &env,
            "decline",
            json!({"decision": "block", "reason": "not this server"}),
        );
        env.project_hooks(hooks(event, "*", json!([hook])));
        let input = json!({"session_id": "s", "mcp_server_name": "srv", "message": "token?"});
        let out = env.dispatch(event, input.clone());
        assert_eq!(out["decision"], "block", "{event}: {out:#}");
        let run = env.run(
            &["dispatch", event, "--format", "claude"],
            &input.to_string(),
        );
        assert_eq!(run.code, 2, "{event}: declines like exit 2: {}", run.stderr);
        assert!(run.stderr.contains("not this server"));
    }
}

#[test]
fn a_block_beside_another_events_specific_output_holds_with_a_warning() {
    let env = TestEnv::new();
    let hook = says(
        &env,
        "copied",
        json!({"decision": "block", "reason": "tests fail",
               "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "x"}}),
    );
    env.project_hooks(hooks("Stop", "", json!([hook])));
    let out = env.dispatch(
        "Stop",
        json!({"session_id": "s", "stop_hook_active": false}),
    );
    assert_eq!(out["decision"], "block", "{out:#}");
    assert_eq!(out["reason"], "tests fail");
    assert!(
        out["additionalContext"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{out:#}"
    );
    let notices = out["notices"].to_string();
    assert!(
        notices.contains("Set hookEventName to Stop to use it"),
        "{notices}"
    );
    assert!(notices.contains("copied"), "names the hook: {notices}");
}

/// New input fields reach the hook byte for byte.
#[test]
fn new_input_fields_pass_through_untouched() {
    let env = TestEnv::new();
    let cases = [
        (
            "UserPromptSubmit",
            json!({"prompt": "hi", "source": "loop_wakeup", "session_title": "Fix CI"}),
        ),
        (
            "SessionStart",
            json!({"source": "resume", "seconds_since_last_response": 3600,
            "context_tokens": 81234, "prompt_cache_likely_expired": true, "estimated_cache_write_usd": 0.42}),
        ),
        (
            "PermissionRequest",
            json!({"tool_name": "Skill", "tool_input": {}, "tool_kind": "mcp_skill",
            "mcp_skill": {"server": "docs", "name": "search"}}),
        ),
        (
            "Stop",
            json!({"stop_hook_active": false, "background_tasks": [{"id": "m1", "type": "monitor", "command": "tail -f log"}]}),
        ),
        ("PreSkillShellCommand", skill_input("Bash", "git status")),
        ("PreModelSwitch", switch_input("opus")),
    ];
    for (event, mut input) in cases {
        input["session_id"] = json!("s");
        input["hook_event_name"] = json!(event);
        let seen = env.project.join(format!("{event}.json"));
        env.project_hooks(hooks(
            event,
            "",
            json!([{"type": "command", "command": format!("cat > '{}'", seen.display())}]),
        ));
        env.dispatch(event, input.clone());
        let got: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
        assert_eq!(got, input, "{event}");
    }
}

#[test]
fn managed_deny_with_continue_false_ends_the_turn() {
    let env = TestEnv::new();
    let hook = says(
        &env,
        "org-guard",
        json!({"continue": false, "stopReason": "policy: no force push",
               "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny"}}),
    );
    env.managed(hooks("PreToolUse", "Bash", json!([hook])));
    let input = crate::support::bash_input("git push --force");
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &input.to_string(),
    );
    let out: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(out["continue"], false, "{out:#}");
    assert_eq!(out["stopReason"], "policy: no force push");
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
}

#[test]
fn http_hooks_never_send_their_own_framing_headers() {
    let env = TestEnv::new();
    let server = TestServer::start(|_| (200, "{}".into(), std::time::Duration::ZERO));
    env.project_hooks(hooks(
        "Stop",
        "",
        json!([{"type": "http", "url": format!("{}/h", server.url),
                "headers": {"content-length": "3", "Transfer-Encoding": "chunked", "X-Kept": "yes"}}]),
    ));
    let input = json!({"session_id": "s", "stop_hook_active": false, "pad": "x".repeat(100)});
    let out = env.dispatch("Stop", input);
    assert_eq!(out["hooks"][0]["status"], "ok", "{out:#}");
    let request = &server.requests()[0];
    assert_eq!(request.header("X-Kept"), Some("yes"));
    assert_eq!(request.header("Transfer-Encoding"), None);
    assert_eq!(
        request.header("Content-Length").map(str::to_string),
        Some(request.body.len().to_string()),
        "the length of the body"
    );
    assert!(
        request.body.contains(&"x".repeat(100)),
        "the whole body arrived"
    );
    let run = env.run(&["validate"], "");
    for name in ["content-length", "Transfer-Encoding"] {
        assert!(
            run.stderr
                .contains(&format!("$.hooks.Stop[0].hooks[0].headers.{name}")),
            "{name}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_non_managed_url_allowlist_does_not_bind_managed_hooks() {
    let env = TestEnv::new();
    let server = TestServer::start(|_| (200, "{}".into(), std::time::Duration::ZERO));
    let http = |id: &str| json!({"type": "http", "id": id, "url": format!("{}/{id}", server.url)});
    env.managed(hooks("Stop", "", json!([http("org")])));
    env.user_hooks(json!({"allowedHttpHookUrls": ["https://only.example/*"],
        "hooks": {"Stop": [{"hooks": [http("mine")]}]}}));
    let out = env.dispatch("Stop", json!({"session_id": "s"}));
    let status = |id: &str| {
        out["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["id"] == id)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status("org"), "ok", "{out:#}");
    assert_eq!(
        status("mine"),
        "failed",
        "the user's own list binds the user's hook: {out:#}"
    );
    // Managed policy's own list binds managed hooks.
    env.managed(json!({"allowedHttpHookUrls": ["https://only.example/*"],
        "hooks": {"Stop": [{"hooks": [http("org")]}]}}));
    let out = env.dispatch("Stop", json!({"session_id": "s"}));
    assert_eq!(out["hooks"][0]["status"], "failed", "{out:#}");
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/org"], "contacted once, by the first run");
}

#[test]
fn an_unloadable_managed_guard_entry_disables_that_files_hooks_only() {
    let env = TestEnv::new();
    let marker = env.project.join("ran");
    let touch = |name: &str| json!({"type": "command", "id": name, "command": format!("echo {name} >> '{}'", marker.display())});
    let server = TestServer::start(|_| (200, "{}".into(), std::time::Duration::ZERO));
    env.managed(json!({
        "allowedHttpHookUrls": ["https://only.example/*"],
        "hooks": {
            "PreSkillShellCommand": [{"hooks": [{"type": "command", "command": "true", "if": "Bash("}]}],
            "Stop": [{"hooks": [touch("same-file")]}],
        }
    }));
    std::fs::create_dir_all(env.managed.join("managed.d")).unwrap();
    std::fs::write(
        env.managed.join("managed.d/other.json"),
        hooks(
            "Stop",
            "",
            json!([touch("other-file"),
            {"type": "http", "id": "other-http", "url": format!("{}/x", server.url)}]),
        )
        .to_string(),
    )
    .unwrap();
    let out = env.dispatch("Stop", json!({"session_id": "s"}));
    let ran = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(ran.trim(), "other-file", "{out:#}");
    let skipped = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "same-file")
        .unwrap();
    let why = skipped["message"].as_str().unwrap();
    assert!(
        why.contains("guard entry") && why.contains("PreSkillShellCommand"),
        "{why}"
    );
    // The document's settings are kept: its URL allowlist binds the other file's hook.
    let http = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "other-http")
        .unwrap();
    assert_eq!(http["status"], "failed", "{out:#}");
    assert!(
        http["message"]
            .as_str()
            .unwrap()
            .contains("allowedHttpHookUrls")
    );
    assert!(server.requests().is_empty());
    let hooks_run = env.run(&["hooks"], "");
    assert!(
        hooks_run.stdout.contains("cannot be loaded"),
        "{}",
        hooks_run.stdout
    );
}

/// A Claude Code `settings.json` keeps a hook entry with a field hookhost does not know,
/// naming the field; hookhost's own files stay strict.
#[test]
fn unknown_fields_of_a_claude_settings_file_are_kept_with_a_warning() {
    let env = TestEnv::new();
    let settings = env.write(
        "claude/settings.json",
        &json!({"model": "opus", "futureTopLevel": 1, "disableAllHook": false, "hooks": {"Stop": [{
            "matcher": "", "newGroupField": true, "hooks": [
            {"type": "command", "command": "echo '{\"decision\":\"block\",\"reason\":\"kept\"}'",
             "modelProvider": "x", "onFailur": "block"},
            {"type": "mcp_tool", "server": "s", "tool": "t", "onFailure": "sometimes"}
        ]}]}})
        .to_string(),
    );
    let file = settings.to_str().unwrap();
    let run = env.run(
        &["dispatch", "Stop", "--settings", file],
        r#"{"session_id":"s"}"#,
    );
    let out = run.json();
    assert_eq!(out["decision"], "block", "the hook still runs: {out:#}");
    let run = env.run(&["validate", "--settings", file], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for expected in [
        "$.hooks.Stop[0].hooks[0].modelProvider: unknown field `modelProvider` ignored",
        "$.hooks.Stop[0].hooks[0].onFailur: unknown field `onFailur` ignored; did you mean `onFailure`?",
        "$.hooks.Stop[0].newGroupField: unknown field `newGroupField`",
        "$.futureTopLevel: unknown field `futureTopLevel`",
        "$.disableAllHook: unknown field `disableAllHook` ignored; did you mean `disableAllHooks`?",
        "$.hooks.Stop[0].hooks[1].onFailure: `onFailure` \"sometimes\" is not a value hookhost knows; on an `mcp_tool` hook it reads as \"block\"",
    ] {
        assert!(run.stderr.contains(expected), "{expected}\n{}", run.stderr);
    }
    // The same entry in hookhost's own file is an error that names the field.
    env.project_hooks(hooks(
        "Stop",
        "",
        json!([{"type": "command", "command": "true", "modelProvider": "x"}]),
    ));
    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("unknown field `modelProvider`"),
        "{}",
        run.stderr
    );
}

/// A guard entry of a user or project file that cannot be loaded: Claude Code skips that
/// whole settings file (its permissions with it); hookhost's files hold only hooks, so
/// skipping the file would silently remove every other guard in it. hookhost disables
/// only the entry, keeps the file's other hooks running, and names the file, the entry
/// and the field in a notice (a `systemMessage` under `--format claude`). Generated:
/// every guard event × the user's, the project's and the local file × every way an
/// entry fails to load (its `if`, its matcher, a missing field, a field of the wrong
/// type).
#[test]
fn an_unloadable_user_or_project_guard_entry_disables_only_itself_and_is_named() {
    let guard_events = ["PreToolUse", "PermissionRequest", "PreSkillShellCommand"];
    let broken: [(&str, Value, Value, &str); 4] = [
        (
            "if",
            json!("Bash"),
            json!({"type": "command", "command": "true", "if": "Bash("}),
            "if",
        ),
        (
            "matcher",
            json!("(["),
            json!({"type": "command", "command": "true"}),
            "matcher",
        ),
        (
            "missing",
            json!("Bash"),
            json!({"type": "command"}),
            "command",
        ),
        (
            "type",
            json!("Bash"),
            json!({"type": "command", "command": 7}),
            "command",
        ),
    ];
    for event in guard_events {
        for file in ["user", "project", "local"] {
            for (kind, matcher, entry, field) in &broken {
                let env = TestEnv::new();
                // (PermissionRequest denies in JSON only.)
                let guard = if event == "PermissionRequest" {
                    "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PermissionRequest\", \"decision\": {\"behavior\": \"deny\", \"message\": \"the other guard\"}}}'"
                } else {
                    "echo 'the other guard' >&2; exit 2"
                };
                let config = json!({"hooks": {event: [
                    {"matcher": matcher, "hooks": [entry]},
                    {"matcher": "Bash", "hooks": [{"type": "command", "id": "guard",
                        "command": guard}]},
                ]}});
                let location = match file {
                    "user" => {
                        env.user_hooks(config);
                        "hooks.json"
                    }
                    "project" => {
                        env.project_hooks(config);
                        ".hookhost/hooks.json"
                    }
                    _ => {
                        env.local_hooks(config);
                        ".hookhost/hooks.local.json"
                    }
                };
                let mut input = json!({"session_id": "s", "hook_event_name": event,
                    "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}});
                if event == "PreSkillShellCommand" {
                    input["command_name"] = json!("skill");
                    input["invoked_by"] = json!("user");
                }
                let what = format!("{event} {file} {kind}");
                let out = env.dispatch(event, input);
                assert_eq!(
                    out["decision"], "deny",
                    "{what}: the other guard runs: {out:#}"
                );
                let notices = out["notices"].to_string();
                assert!(
                    notices.contains(location) && notices.contains(&format!("$.hooks.{event}[0]")),
                    "{what}: names the file and the entry: {notices}"
                );
                assert!(
                    notices.contains(field),
                    "{what}: names `{field}`: {notices}"
                );
            }
        }
    }
}
