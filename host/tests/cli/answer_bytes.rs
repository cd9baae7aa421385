//! Caps in bytes as well as characters: a hook's output reaches an answer cut so that the
//! answer stays small once escaped (JSON or a terminal), for every byte a hook can print
//! and invalid UTF-8, through command, HTTP, wasm and prompt hooks, in hookhost's JSON and in
//! `--format claude` (stdout and stderr).

use serde_json::{Value, json};

use crate::support::{TestEnv, TestServer, bash_input, hooks};
use hookhost::handlers::output::OUTPUT_TEXT_BYTES;

/// The documented bound (docs/book/src/merge-rules.md, "Caps"): each hook adds at most
/// `ANSWER_TEXTS_PER_HOOK` texts of at most `OUTPUT_TEXT_BYTES` shown bytes to an answer,
/// plus a few KiB of fields and notes.
const ANSWER_TEXTS_PER_HOOK: usize = 4;
const ANSWER_OVERHEAD: usize = 8 << 10;

fn bound(hooks: usize) -> usize {
    hooks * ANSWER_TEXTS_PER_HOOK * OUTPUT_TEXT_BYTES + ANSWER_OVERHEAD
}

/// Every byte value, then invalid and hostile UTF-8 sequences.
fn floods() -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<(String, Vec<u8>)> = (0..=255u8)
        .map(|b| (format!("byte {b:#04x}"), vec![b]))
        .collect();
    for (name, unit) in [
        ("a lone lead byte", &b"\xc3"[..]),
        ("a surrogate", b"\xed\xa0\x80"),
        ("an overlong NUL", b"\xc0\x80"),
        ("a bidi override", b"\xe2\x80\xae"),
        ("C1 CSI", b"\xc2\x9b"),
        ("NUL and a quote", b"\0\""),
    ] {
        all.push((name.to_string(), unit.to_vec()));
    }
    all.into_iter()
        .map(|(name, unit)| {
            let flood: Vec<u8> = unit.iter().copied().cycle().take(64 << 10).collect();
            (name, flood)
        })
        .collect()
}

/// Dispatches PreToolUse in both formats; asserts each answer (hookhost's JSON, and
/// Claude's stdout and stderr together) is within the bound for `hooks` hooks.
fn assert_bounded(env: &TestEnv, what: &str, hooks: usize) {
    let input = bash_input("ls").to_string();
    let limit = bound(hooks);
    let run = env.run(&["dispatch", "PreToolUse"], &input);
    assert!(
        run.stdout.len() + run.stderr.len() <= limit,
        "{what}: hookhost's answer is {} bytes (bound {limit})",
        run.stdout.len() + run.stderr.len()
    );
    if std::env::var_os("ANSWER_BYTES_SHOW").is_some() {
        eprintln!("{what}: {} bytes", run.stdout.len() + run.stderr.len());
    }
    let out: Value = run.json();
    assert!(
        out["hooks"].as_array().is_some_and(|h| h.len() == hooks),
        "{what}: {out}"
    );
    let claude = env.run(&["dispatch", "PreToolUse", "--format", "claude"], &input);
    if std::env::var_os("ANSWER_BYTES_SHOW").is_some() {
        eprintln!(
            "{what}: claude {} bytes",
            claude.stdout.len() + claude.stderr.len()
        );
    }
    assert!(
        claude.stdout.len() + claude.stderr.len() <= limit,
        "{what}: Claude's answer is {} + {} bytes (bound {limit})",
        claude.stdout.len(),
        claude.stderr.len()
    );
}

#[test]
fn command_hooks_printing_any_byte_keep_the_answer_small() {
    let env = TestEnv::new();
    let flood = env.project.join("flood.bin");
    let hook = |code: u8| {
        json!({"type": "command", "id": format!("exit-{code}"),
               "command": format!("cat '{}'; cat '{}' >&2; exit {code}", flood.display(), flood.display())})
    };
    env.project_hooks(hooks("PreToolUse", "*", json!([hook(0), hook(1), hook(2)])));
    for (what, bytes) in floods() {
        std::fs::write(&flood, &bytes).unwrap();
        assert_bounded(&env, &what, 3);
    }
}

#[test]
fn http_hooks_answering_any_character_keep_the_answer_small() {
    let env = TestEnv::new();
    let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let served = text.clone();
    let server = TestServer::start(move |_| {
        let x = served.lock().unwrap().clone();
        let body = json!({
            "decision": "block", "reason": x, "systemMessage": x, "stopReason": x,
            "hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": x,
                "additionalContext": x}
        });
        (200, body.to_string(), std::time::Duration::ZERO)
    });
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "http", "id": "flood", "url": server.url}]),
    ));
    for c in (0..=0xffu32).chain([0x202e, 0xfeff, 0xfffd]) {
        let c = char::from_u32(c).unwrap();
        // Within the 1 MiB body however each character escapes.
        *text.lock().unwrap() = c.to_string().repeat(25_000);
        assert_bounded(&env, &format!("{c:?}"), 1);
    }
}

#[test]
fn wasm_hooks_returning_any_character_keep_the_answer_small() {
    let env = TestEnv::new();
    let dir = env.project.join("data");
    std::fs::create_dir_all(&dir).unwrap();
    let flood = dir.join("flood.txt");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{
            "type": "wasm", "id": "flood",
            "plugin": hookhost_test_plugins::plugins::HOSTILE,
            "capabilities": {"dirs": [{"path": dir, "mode": "ro"}]},
            "config": {"mode": "read", "arg": flood}
        }]),
    ));
    for c in (0..=0xffu32).chain([0x202e, 0xfeff, 0xfffd]) {
        let c = char::from_u32(c).unwrap();
        std::fs::write(&flood, c.to_string().repeat(200_000)).unwrap();
        assert_bounded(&env, &format!("{c:?}"), 1);
    }
}

#[test]
fn prompt_hooks_whose_model_answers_any_character_keep_the_answer_small() {
    use crate::model_server::{ModelServer, Reply};
    let env = TestEnv::new();
    // The characters that grow when escaped (controls, quote, backslash, DEL, C1, bidi,
    // BOM, replacement): two answers each, within the server's 200 connections.
    let chars: Vec<char> = (0..=0x20u32)
        .chain([0x22, 0x5c, 0x7f])
        .chain(0x80..=0x9f)
        .chain([0x202e, 0xfeff, 0xfffd])
        .map(|c| char::from_u32(c).unwrap())
        .collect();
    let replies = chars
        .iter()
        .flat_map(|c| {
            let x = c.to_string().repeat(20_000);
            let verdict = json!({"ok": false, "reason": x, "impossible": false});
            [Reply::Verdict(verdict.clone()), Reply::Verdict(verdict)]
        })
        .collect();
    let server = ModelServer::start(replies);
    let mut config = hooks(
        "PreToolUse",
        "*",
        json!([{"type": "prompt", "id": "flood", "prompt": "safe?", "provider": "openai", "model": "m"}]),
    );
    config["modelProvider"] = json!({"kind": "openai", "baseUrl": format!("{}/v1", server.url)});
    env.project_hooks(config);
    for c in chars {
        assert_bounded(&env, &format!("{c:?}"), 1);
    }
    assert!(server.requests().len() >= 2, "the model was not asked");
}
