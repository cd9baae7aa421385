//! The founding article's flat config format (issue 25 item 9): `hooks.flat.json` beside
//! each `hooks.json`, `--settings` in that shape, millisecond timeouts, the article's
//! result fields, and `hookhost import`.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input};

/// The article's example: a guard that refuses writes under node_modules, in its words.
fn guard(env: &TestEnv) -> Value {
    let script = env.script(
        "block-node-modules.sh",
        r#"INPUT=$(cat)
case "$INPUT" in
  *node_modules*) echo '{"blocked": true, "blockReason": "Cannot write to node_modules"}' ;;
  *) echo '{"blocked": false}' ;;
esac"#,
    );
    json!({"hooks": [
        {"event": "PreToolUse", "matcher": "Write|Edit",
         "handler": {"type": "command", "command": script, "timeout": 10000}, "async": false},
        {"event": "PreToolUse", "matcher": "Bash",
         "handler": {"type": "command", "command": "echo '{\"modifiedParams\": {\"command\": \"ls -la\"}}'"}},
    ]})
}

fn write_input(path: &str) -> Value {
    json!({"session_id": "s", "tool_name": "Write", "tool_input": {"file_path": path, "content": "x"}})
}

#[test]
fn a_project_flat_file_is_read_with_the_articles_result_fields() {
    let env = TestEnv::new();
    env.write(".hookhost/hooks.flat.json", &guard(&env).to_string());
    let out = env.dispatch("PreToolUse", write_input("node_modules/x.js"));
    assert_eq!(out["decision"], "deny", "{out:#}");
    assert_eq!(out["reason"], "Cannot write to node_modules");
    assert_eq!(out["hooks"][0]["id"], "project:hooks[0]", "{out:#}");
    let out = env.dispatch("PreToolUse", write_input("src/x.js"));
    assert_eq!(out["decision"], "none", "{out:#}");
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["updatedInput"], json!({"command": "ls -la"}), "{out:#}");
}

#[test]
fn a_flat_file_is_project_config_and_needs_trust() {
    let env = TestEnv::new();
    env.write(".hookhost/hooks.flat.json", &guard(&env).to_string());
    let run = env.run_untrusted(
        &["dispatch", "PreToolUse"],
        &write_input("node_modules/x.js").to_string(),
    );
    assert_eq!(run.json()["decision"], "none", "{}", run.stdout);
    let run = env.run_untrusted(&["trust"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = env.run_untrusted(
        &["dispatch", "PreToolUse"],
        &write_input("node_modules/x.js").to_string(),
    );
    assert_eq!(run.json()["decision"], "deny", "{}", run.stderr);
    // A change to it withdraws the trust.
    let mut changed = guard(&env);
    changed["hooks"][0]["matcher"] = json!("Write|Edit|MultiEdit");
    env.write(".hookhost/hooks.flat.json", &changed.to_string());
    let run = env.run_untrusted(
        &["dispatch", "PreToolUse"],
        &write_input("node_modules/x.js").to_string(),
    );
    let out = run.json();
    assert_eq!(out["decision"], "none", "{out:#}");
    assert!(
        out["hooks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("`.hookhost/hooks.flat.json` was modified"),
        "{out:#}"
    );
}

#[test]
fn a_user_flat_file_and_a_settings_flat_file_load() {
    let env = TestEnv::new();
    std::fs::write(
        env.home.join("hooks.flat.json"),
        json!({"hooks": [{"event": "Stop", "handler": {"type": "command", "command": "echo '{\"blocked\": true}'"}}]}).to_string(),
    )
    .unwrap();
    let out = env.dispatch("Stop", json!({"session_id": "s"}));
    assert_eq!(out["decision"], "block", "{out:#}");
    assert_eq!(out["hooks"][0]["id"], "user:hooks[0]");
    let inline = json!({"hooks": [{"event": "Stop", "handler": {"type": "command", "command": "exec sleep 30", "timeout": 200}}]});
    let run = env.run(
        &["dispatch", "Stop", "--settings", &inline.to_string()],
        r#"{"session_id": "s"}"#,
    );
    let out = run.json();
    let slow = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "cli:hooks[0]")
        .unwrap();
    assert_eq!(slow["status"], "timeout", "200 ms, not 200 s: {out:#}");
}

#[test]
fn flat_errors_name_the_file_the_rule_and_the_field() {
    let env = TestEnv::new();
    env.write(
        ".hookhost/hooks.flat.json",
        &json!({"hooks": [
            {"event": "Stop", "handler": {"type": "command", "command": "true"}},
            {"event": "Stop", "handler": {"type": "command", "comand": "true"}},
        ]})
        .to_string(),
    );
    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("hooks.flat.json: $.hooks[1].handler.comand: unknown field `comand`"),
        "{}",
        run.stderr
    );
    env.write(
        ".hookhost/hooks.flat.json",
        &json!({"hooks": [{"event": "Stop", "handler": {"type": "command"}}]}).to_string(),
    );
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr
            .contains("$.hooks[0].handler: `command` is required")
            || run.stderr.contains("$.hooks[0].handler"),
        "{}",
        run.stderr
    );
}

/// `hookhost import` prints hookhost's shape, which loads as the same hooks.
#[test]
fn import_round_trips() {
    let env = TestEnv::new();
    let flat = guard(&env);
    let file = env.write("flat.json", &flat.to_string());
    let run = env.run(&["import", file.to_str().unwrap()], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let nested = run.json();
    assert_eq!(nested["hooks"]["PreToolUse"][0]["matcher"], "Write|Edit");
    assert_eq!(
        nested["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"],
        10.0
    );
    assert_eq!(
        nested["hooks"]["PreToolUse"][1]["hooks"][0]["timeout"], 10.0,
        "the article's default"
    );
    assert_eq!(nested["hooks"]["PreToolUse"][0]["hooks"][0]["async"], false);
    let listing = |settings: &str| {
        let run = env.run(&["hooks", "--json", "--settings", settings], "");
        assert_eq!(run.code, 0, "{}", run.stderr);
        let mut hooks = run.json();
        for hook in hooks.as_array_mut().unwrap() {
            let hook = hook.as_object_mut().unwrap();
            hook.remove("id");
            hook.remove("file");
        }
        hooks
    };
    let imported = env.write("imported.json", &run.stdout);
    assert_eq!(
        listing(file.to_str().unwrap()),
        listing(imported.to_str().unwrap())
    );
    // Both decide alike.
    for settings in [&file, &imported] {
        let run = env.run(
            &[
                "dispatch",
                "PreToolUse",
                "--settings",
                settings.to_str().unwrap(),
            ],
            &write_input("node_modules/a").to_string(),
        );
        assert_eq!(run.json()["decision"], "deny", "{}", settings.display());
    }
    // Not flat, or broken: the error names the file and the path.
    let nested_file = env.write("nested.json", r#"{"hooks": {}}"#);
    let run = env.run(&["import", nested_file.to_str().unwrap()], "");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("nested.json: $.hooks: not the flat format"),
        "{}",
        run.stderr
    );
    let bad = env.write("bad.json", r#"{"hooks": [{"event": "Stop"}]}"#);
    let run = env.run(&["import", bad.to_str().unwrap()], "");
    assert!(
        run.stderr
            .contains("bad.json: $.hooks[0]: missing field `handler`"),
        "{}",
        run.stderr
    );
}
