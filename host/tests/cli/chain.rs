//! Transform chains (`"chain": true`): each hook gets the input as the hooks before it
//! rewrote it, a block stops the chain, and the outcome's `rewrites` (and the audit log)
//! say who changed what, as JSON Patches. Also `updatedPrompt` and `skip`/`skipResult`
//! through the CLI, and what `hookhost validate` says about a chain.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestEnv, TestServer, bash_input};

/// A command hook that prints `hookSpecificOutput` (`specific`) for `event`.
fn says(id: &str, event: &str, specific: Value) -> Value {
    let mut specific = specific;
    specific["hookEventName"] = json!(event);
    let out = json!({ "hookSpecificOutput": specific }).to_string();
    json!({"type": "command", "id": id, "command": format!("echo '{out}'")})
}

/// A command hook that keeps its stdin in `<id>.seen` and appends `suffix` to the
/// `command` it was given (the input is compact JSON, the command has no quotes).
fn appends(id: &str, suffix: &str) -> Value {
    let command = format!(
        "input=$(cat); printf '%s' \"$input\" > {id}.seen; \
         cmd=$(printf '%s' \"$input\" | sed -n 's/.*\"command\":\"\\([^\"]*\\)\".*/\\1/p'); \
         printf '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PreToolUse\",\"updatedInput\":{{\"command\":\"%s{suffix}\"}}}}}}' \"$cmd\""
    );
    json!({"type": "command", "id": id, "command": command})
}

/// A group of `handlers` on `event` with the group options `options`.
fn group(event: &str, options: Value, handlers: Value) -> Value {
    let mut group = options;
    group["hooks"] = handlers;
    json!({"hooks": {event: [group]}})
}

fn seen(env: &TestEnv, id: &str) -> Value {
    let text = std::fs::read_to_string(env.project.join(format!("{id}.seen"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn patches(out: &Value) -> Vec<(String, String, Value)> {
    out["rewrites"]
        .as_array()
        .unwrap_or_else(|| panic!("no rewrites: {out}"))
        .iter()
        .map(|r| {
            (
                r["hook"].as_str().unwrap().to_string(),
                r["field"].as_str().unwrap().to_string(),
                r["patch"].clone(),
            )
        })
        .collect()
}

fn replace(path: &str, value: &str) -> Value {
    json!([{"op": "replace", "path": path, "value": value}])
}

#[test]
fn each_hook_of_a_chain_gets_the_input_as_rewritten_before_it() {
    let env = TestEnv::new();
    let handlers = json!([
        says(
            "first",
            "PreToolUse",
            json!({"updatedInput": {"command": "b"}})
        ),
        appends("second", " && echo done")
    ]);
    env.project_hooks(group(
        "PreToolUse",
        json!({"chain": true}),
        handlers.clone(),
    ));
    let out = env.dispatch("PreToolUse", bash_input("a"));
    assert_eq!(seen(&env, "second")["tool_input"]["command"], "b", "{out}");
    assert_eq!(out["updatedInput"]["command"], "b && echo done", "{out}");
    assert_eq!(out["updatedInputBy"], "second");
    assert_eq!(
        patches(&out),
        [
            (
                "first".into(),
                "updatedInput".into(),
                replace("/tool_input/command", "b")
            ),
            (
                "second".into(),
                "updatedInput".into(),
                replace("/tool_input/command", "b && echo done")
            ),
        ]
    );
    // The same hooks as a `sequential` group: each gets the original input, and the
    // first rewrite in config order wins, alone.
    env.project_hooks(group("PreToolUse", json!({"sequential": true}), handlers));
    let out = env.dispatch("PreToolUse", bash_input("a"));
    assert_eq!(seen(&env, "second")["tool_input"]["command"], "a");
    assert_eq!(out["updatedInput"]["command"], "b");
    assert_eq!(patches(&out).len(), 1, "{out}");
}

#[test]
fn a_block_stops_the_chain() {
    let env = TestEnv::new();
    env.project_hooks(group(
        "PreToolUse",
        json!({"chain": true}),
        json!([
            appends("first", " --checked"),
            {"type": "command", "id": "second", "command": "echo no >&2; exit 2"},
            {"type": "command", "id": "third", "command": "touch third.ran"}
        ]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("a"));
    assert_eq!(out["decision"], "deny", "{out}");
    let statuses: Vec<&str> = (out["hooks"].as_array().unwrap().iter())
        .map(|h| h["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["ok", "blocked", "skipped"]);
    assert!(!env.project.join("third.ran").exists());
    assert_eq!(
        patches(&out),
        [(
            "first".into(),
            "updatedInput".into(),
            replace("/tool_input/command", "a --checked")
        )]
    );
}

#[test]
fn post_tool_use_chains_the_tool_output() {
    let env = TestEnv::new();
    let mask = says(
        "mask",
        "PostToolUse",
        json!({"updatedToolOutput": {"stdout": "token=[masked]"}}),
    );
    let record = json!({"type": "command", "id": "record", "command": "cat > record.seen"});
    env.project_hooks(group(
        "PostToolUse",
        json!({"chain": true}),
        json!([mask, record]),
    ));
    let mut input = bash_input("env");
    input["hook_event_name"] = json!("PostToolUse");
    input["tool_response"] = json!({"stdout": "token=hunter2", "stderr": ""});
    let out = env.dispatch("PostToolUse", input);
    let seen = seen(&env, "record");
    assert_eq!(seen["tool_response"], json!({"stdout": "token=[masked]"}));
    assert!(!seen.to_string().contains("hunter2"), "{seen}");
    assert_eq!(out["updatedToolOutput"]["stdout"], "token=[masked]");
    let rewrites = patches(&out);
    assert_eq!(rewrites.len(), 1);
    assert_eq!(rewrites[0].1, "updatedToolOutput");
    let mut ops = rewrites[0].2.as_array().unwrap().clone();
    ops.sort_by_key(|op| op["path"].to_string());
    assert_eq!(
        ops,
        [
            json!({"op": "remove", "path": "/tool_response/stderr"}),
            json!({"op": "replace", "path": "/tool_response/stdout", "value": "token=[masked]"})
        ]
    );
}

#[test]
fn wasm_http_and_command_hooks_chain_alike() {
    let env = TestEnv::new();
    // Appends " h" to the command it was posted.
    let server = TestServer::start(|req| {
        let body: Value = serde_json::from_str(&req.body).unwrap_or_default();
        let command = body["tool_input"]["command"].as_str().unwrap_or("?");
        let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "updatedInput": {"command": format!("{command} h")}}});
        (200, out.to_string(), Duration::ZERO)
    });
    env.project_hooks(group(
        "PreToolUse",
        json!({"matcher": "Bash", "chain": true}),
        json!([
            {"type": "wasm", "id": "wasm", "plugin": hookhost_test_plugins::plugins::HOSTILE,
             "config": {"mode": "append", "arg": " w"}},
            {"type": "http", "id": "http", "url": format!("{}/append", server.url)},
            appends("command", " c")
        ]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("a"));
    assert_eq!(out["updatedInput"]["command"], "a w h c", "{out}");
    let posted: Value = serde_json::from_str(&server.requests()[0].body).unwrap();
    assert_eq!(posted["tool_input"]["command"], "a w");
    assert_eq!(seen(&env, "command")["tool_input"]["command"], "a w h");
    let hooks: Vec<String> = patches(&out).into_iter().map(|(h, _, _)| h).collect();
    assert_eq!(hooks, ["wasm", "http", "command"]);
}

/// `if` is tested against the input as rewritten: a rewrite cannot slip a command past a
/// guard later in the chain.
#[test]
fn if_sees_the_rewritten_input_in_a_chain() {
    let env = TestEnv::new();
    let handlers = |chain: bool| {
        group(
            "PreToolUse",
            json!({"chain": chain, "sequential": true}),
            json!([
                says("rewrite", "PreToolUse", json!({"updatedInput": {"command": "rm -rf x"}})),
                {"type": "command", "id": "guard", "if": "Bash(rm *)", "command": "echo no rm >&2; exit 2"}
            ]),
        )
    };
    env.project_hooks(handlers(true));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "deny", "{out}");
    assert_eq!(out["hooks"][1]["id"], "guard");
    // Outside a chain the guard judges the original `ls` (and does not run).
    env.project_hooks(handlers(false));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert_eq!(out["hooks"].as_array().unwrap().len(), 1);
}

#[test]
fn updated_prompt_chains_and_claude_format_says_it_was_not_applied() {
    let env = TestEnv::new();
    let redact = says(
        "redact",
        "UserPromptSubmit",
        json!({"updatedPrompt": "my key is [REDACTED]"}),
    );
    let record = json!({"type": "command", "id": "record", "command": "cat > record.seen"});
    env.project_hooks(group(
        "UserPromptSubmit",
        json!({"chain": true}),
        json!([redact, record]),
    ));
    let input = json!({"session_id": "s1", "prompt": "my key is sk-secret"});
    let out = env.dispatch("UserPromptSubmit", input.clone());
    assert_eq!(seen(&env, "record")["prompt"], "my key is [REDACTED]");
    assert_eq!(out["updatedPrompt"], "my key is [REDACTED]", "{out}");
    assert_eq!(
        patches(&out),
        [(
            "redact".into(),
            "updatedPrompt".into(),
            replace("/prompt", "my key is [REDACTED]")
        )]
    );
    let run = env.run(
        &["dispatch", "UserPromptSubmit", "--format", "claude"],
        &input.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let claude = run.json();
    let message = claude["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("`redact`") && message.contains("`updatedPrompt`"),
        "{claude}"
    );
    assert!(!run.stdout.contains("\"updatedPrompt\""), "{}", run.stdout);
    assert!(!run.stdout.contains("\"rewrites\""), "{}", run.stdout);
}

#[test]
fn skip_answers_a_tool_call_for_embedders() {
    let env = TestEnv::new();
    env.project_hooks(group(
        "PreToolUse",
        json!({}),
        json!([says(
            "cache",
            "PreToolUse",
            json!({"skip": true, "skipResult": {"stdout": "cached"}})
        )]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("make"));
    assert_eq!(out["skip"], true, "{out}");
    assert_eq!(out["skipResult"], json!({"stdout": "cached"}));
    assert_eq!(
        patches(&out),
        [(
            "cache".into(),
            "skipResult".into(),
            json!([{"op": "add", "path": "/tool_response", "value": {"stdout": "cached"}}])
        )]
    );
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("make").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let message = run.json()["systemMessage"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        message.contains("`cache`") && message.contains("`skip`"),
        "{message}"
    );
}

#[test]
fn the_audit_log_records_the_rewrites_redacted() {
    let env = TestEnv::new();
    let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    env.project_hooks(group(
        "PreToolUse",
        json!({"chain": true}),
        json!([
            says(
                "first",
                "PreToolUse",
                json!({"updatedInput": {"command": format!("git push https://{token}@github.com")}})
            ),
            says(
                "second",
                "PreToolUse",
                json!({"updatedInput": {"command": "git push", "env": {"GH_TOKEN": "plainvalue"}}})
            )
        ]),
    ));
    env.dispatch("PreToolUse", bash_input("git push"));
    let entries = env.audit_entries();
    let line = entries.last().unwrap();
    let rewrites = line["rewrites"].as_array().unwrap();
    let hooks: Vec<&str> = rewrites
        .iter()
        .map(|r| r["hook"].as_str().unwrap())
        .collect();
    assert_eq!(hooks, ["first", "second"], "{line}");
    let text = line["rewrites"].to_string();
    assert!(!text.contains(token), "{text}");
    assert!(!text.contains("plainvalue"), "{text}");
    assert!(text.contains("/tool_input/env"), "{text}");
}

#[test]
fn validate_warns_about_what_a_chain_cannot_do() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {
        "PreToolUse": [{"chain": true, "sequential": false, "hooks": [
            {"type": "command", "command": "true"},
            {"type": "command", "command": "true", "async": true}
        ]}],
        "Stop": [{"chain": true, "hooks": [{"type": "command", "command": "true"}]}]
    }}));
    let run = env.run(&["validate"], "");
    let file = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    for expected in [
        format!(
            "{file}: $.hooks.PreToolUse[0].chain: `chain` runs the group's hooks one after another"
        ),
        format!("{file}: $.hooks.PreToolUse[0].chain: hooks[1] is async"),
        format!("{file}: $.hooks.Stop[0].chain: no output of `Stop` rewrites its input"),
    ] {
        assert!(run.stderr.contains(&expected), "{expected}\n{}", run.stderr);
    }
}
