//! Second pass over the bounds of the dispatch path: sums of texts that are each under
//! their cap, inputs of 100,000 entries, secrets where only values were masked, hooks
//! that never exit while others wait for a slot. Each test once found something
//! unbounded, unmasked or waiting past its deadline.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hooks};

/// 150 hooks that each answer with texts just under the cap and 150 that each fail with
/// a long stderr: every text was within its cap, the outcome was 7 MB and the audit line
/// half a megabyte. Both are bounded as a whole, and say what they left out.
#[test]
fn many_hooks_each_under_the_cap_make_a_bounded_outcome() {
    let env = TestEnv::new();
    let text = "t".repeat(9_000);
    let answer = json!({"hookSpecificOutput": {"hookEventName": "PostToolUse",
        "additionalContext": text}, "systemMessage": text});
    let answer_file = env.write("answer.json", &answer.to_string());
    let mut handlers = Vec::new();
    for n in 0..150 {
        handlers.push(json!({"type": "command", "id": format!("says-{n}"),
            "command": format!("cat '{}'", answer_file.display())}));
        handlers.push(json!({"type": "command", "id": format!("fails-{n}"),
            "command": "head -c 9000 /dev/zero | tr '\\0' e >&2; exit 1"}));
    }
    env.project_hooks(hooks("PostToolUse", "*", Value::Array(handlers)));
    let mut input = bash_input("ls");
    input["hook_event_name"] = json!("PostToolUse");
    for format in ["outcome", "claude"] {
        let run = env.run(
            &["dispatch", "PostToolUse", "--format", format],
            &input.to_string(),
        );
        assert_eq!(run.code, 0, "{}", &run.stderr[..run.stderr.len().min(500)]);
        assert!(
            run.stdout.len() < 1_000_000,
            "{format}: the outcome is {} bytes",
            run.stdout.len()
        );
        assert!(
            run.stderr.len() < 200_000,
            "{format}: stderr is {} bytes",
            run.stderr.len()
        );
        if format == "claude" {
            continue;
        }
        let out = run.json();
        assert_eq!(
            out["hooks"].as_array().unwrap().len(),
            300,
            "every hook is listed"
        );
        for list in ["additionalContext", "systemMessages"] {
            let entries: Vec<&str> = out[list]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let characters: usize = entries.iter().map(|e| e.chars().count()).sum();
            assert!(characters <= 100_000, "{list}: {characters} characters");
            let last = entries.last().unwrap();
            assert!(
                last.contains("more entries") && last.contains("left out"),
                "{list}: no note on what was left out: {last}"
            );
            assert!(entries.len() > 5, "{list} keeps what fits");
        }
        let notices = out["notices"].as_array().unwrap();
        let last = notices.last().unwrap()["message"].as_str().unwrap();
        assert!(last.contains("left out"), "{last}");
    }
    let line = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    let longest = line.lines().map(str::len).max().unwrap();
    assert!(longest < 160_000, "an audit line is {longest} bytes");
}

/// The audit log masked the values of credential keys but wrote the keys themselves,
/// the tool name and the session id raw and whole: a secret in a key reached the log in
/// clear, and a tool input of 100,000 entries (or a session id of a megabyte) made a
/// line of megabytes.
#[test]
fn the_audit_line_masks_keys_and_is_bounded_for_any_input() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "command": "true"}]),
    ));
    let secrets = [
        "supersecretvalue1",
        "abcdefghijklmnopqrstuv",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "hunter2hunter2",
    ];
    let mut entries = serde_json::Map::new();
    entries.insert(format!("API_TOKEN={}", secrets[0]), json!(1));
    entries.insert(format!("Authorization: Bearer {}", secrets[1]), json!("x"));
    entries.insert(secrets[2].to_string(), json!(null));
    entries.insert("k".repeat(1 << 20), json!("a key of a megabyte"));
    for n in 0..100_000 {
        entries.insert(format!("e{n}"), json!(n));
    }
    let input = json!({
        "session_id": "s".repeat(1 << 20),
        "tool_name": {"password": secrets[3], "name": "t".repeat(1 << 20)},
        "tool_input": entries,
    });
    let run = env.run(&["dispatch", "PreToolUse"], &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let log = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    assert!(log.len() < 200_000, "the audit line is {} bytes", log.len());
    for secret in secrets {
        assert!(!log.contains(secret), "{secret} is in the log");
    }
    // The dispatch's line, after the chain's genesis.
    let line: Value = serde_json::from_str(log.trim().lines().last().unwrap()).unwrap();
    let logged = line["toolInput"].as_object().unwrap();
    assert!(
        logged.keys().any(|k| k.contains("API_TOKEN=[REDACTED]")),
        "the masked key is kept: {:?}",
        logged.keys().take(3).collect::<Vec<_>>()
    );
    let note = logged["…"].as_str().unwrap();
    assert!(note.contains("more entries not logged"), "{note}");
    assert!(line["session"].as_str().unwrap().len() <= 4096);
}

/// Hooks that never exit hold every slot for their whole timeout; a hook waiting for a
/// slot once waited past its own timeout and then ran (its deadline only started with
/// its process). Its timeout bounds the wait too: it times out, saying why.
#[test]
fn a_hook_waiting_for_a_slot_keeps_its_own_deadline() {
    let env = TestEnv::new();
    // `ulimit -n 128`: (128 − 64) / 8 = 8 slots, all taken by sleepers.
    let mut handlers: Vec<Value> = (0..8)
        .map(|n| json!({"type": "command", "id": format!("sleeper-{n}"), "command": "sleep 600", "timeout": 4}))
        .collect();
    let ran = env.project.join("quick-ran");
    handlers.push(json!({"type": "command", "id": "quick", "timeout": 1,
        "command": format!(": > '{}'", ran.display())}));
    env.project_hooks(hooks("PreToolUse", "*", Value::Array(handlers)));
    let mut cmd = std::process::Command::new("sh");
    let template = env.command();
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd.current_dir(&env.project).args([
        "-c",
        "ulimit -n 128 && exec \"$0\" dispatch PreToolUse",
        env!("CARGO_BIN_EXE_hookhost"),
    ]);
    let run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    let quick = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == "quick")
        .unwrap();
    assert_eq!(quick["status"], "timeout", "{quick}");
    assert!(
        quick["message"].as_str().unwrap().contains("slot"),
        "{quick}"
    );
    assert!(!ran.exists(), "the hook ran after its deadline");
}
