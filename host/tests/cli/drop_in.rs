//! hookhost as the single command hook of a Claude Code `settings.json`: an emulated
//! Claude Code reads the settings, runs the configured command with recorded inputs on
//! stdin, and gets exactly the stdout, stderr and exit code it expects.

use std::process::Command;

use serde_json::{Value, json};

use crate::support::TestEnv;

/// The drop-in: one command hook for every event, fanning out to `.hookhost/hooks.json`.
fn claude_settings(hookhost: &str) -> Value {
    let hook = json!([{"matcher": "*", "hooks": [{"type": "command", "command": format!("{hookhost} dispatch --format claude"), "timeout": 30}]}]);
    let events = [
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
    ];
    json!({"hooks": events.iter().map(|e| (e.to_string(), hook.clone())).collect::<serde_json::Map<_, _>>()})
}

/// What Claude Code does with a command hook: `sh -c` in the project, input on stdin.
fn run_like_claude_code(env: &TestEnv, command: &str, input: &Value) -> (i32, String, String) {
    let mut sh = Command::new("sh");
    sh.args(["-c", command])
        .current_dir(&env.project)
        .env("CLAUDE_PROJECT_DIR", &env.project)
        .env("HOOKHOST_HOME", &env.home)
        .env("HOOKHOST_MANAGED_DIR", &env.managed)
        .env("HOOKHOST_DATA_DIR", &env.data);
    let run = env.run_with(&mut sh, &input.to_string());
    (run.code, run.stdout, run.stderr)
}

#[test]
fn recorded_claude_code_inputs_get_the_outputs_claude_code_expects() {
    let env = TestEnv::new();
    let project = env.project.display().to_string();
    env.write(
        ".hookhost/hooks.json",
        include_str!("../fixtures/claude/hooks.json"),
    );
    env.write(
        ".claude/settings.json",
        &claude_settings(env!("CARGO_BIN_EXE_hookhost")).to_string(),
    );
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(env.project.join(".claude/settings.json")).unwrap(),
    )
    .unwrap();
    // The user trusts the repository's hooks once, as they would before using them.
    let trusted = env.run(&["trust", &project], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    let cases: Vec<Value> = serde_json::from_str(
        &include_str!("../fixtures/claude/cases.json").replace("$PROJECT", &project),
    )
    .unwrap();
    assert_eq!(cases.len(), 9);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let event = case["input"]["hook_event_name"].as_str().unwrap();
        let command = settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        let (code, stdout, stderr) = run_like_claude_code(&env, command, &case["input"]);
        assert_eq!(
            code,
            case["exit"].as_i64().unwrap() as i32,
            "{name}: exit code; stderr {stderr}"
        );
        assert_eq!(stderr, case["stderr"].as_str().unwrap(), "{name}: stderr");
        match &case["stdout"] {
            Value::String(s) => assert_eq!(stdout, *s, "{name}: stdout"),
            expected => {
                assert!(
                    stdout.ends_with('\n') && stdout.lines().count() == 1,
                    "{name}: one JSON line, got {stdout:?}"
                );
                let got: Value = serde_json::from_str(&stdout)
                    .unwrap_or_else(|e| panic!("{name}: {e}: {stdout}"));
                assert_eq!(&got, expected, "{name}: stdout");
            }
        }
    }
    // After the tests passed, Stop goes through.
    std::fs::write(env.project.join(".tests-passed"), "").unwrap();
    let stop = json!({"session_id": "abc123", "hook_event_name": "Stop", "stop_hook_active": true, "cwd": project});
    let command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert_eq!(
        run_like_claude_code(&env, command, &stop),
        (0, String::new(), String::new())
    );
}
