//! Issue 24, fifth round, the handlers' side: prompt hooks against hostile model
//! endpoints, a model that never lets Stop go, transform chains whose middle hook times
//! out or that hold 1,000 hooks, flat files of 100,000 hooks or 100,000 levels of
//! nesting, and hooks that fork or hold their output through `killGrace`. Each test is
//! the attack and says whether it held. No assertion is on time: a bound on a run only
//! turns a hang into a failure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::fifth_round::{HANG, KEY};
use crate::model_server::{ModelServer, Reply};
use crate::support::{
    TestEnv, bash_input, cap_memory, hooks, process_running, run_until, wait_until,
};

/// A raw model endpoint: every connection is read up to its body, then `answer` gets the
/// stream. The base URL.
fn raw_model(answer: fn(&mut TcpStream)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(50).flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length.min(1 << 20)];
                let _ = reader.read_exact(&mut body);
                answer(&mut reader.into_inner());
            });
        }
    });
    url
}

fn stall(stream: &mut TcpStream) {
    let mut sink = [0u8; 64];
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
}

fn trickle(stream: &mut TcpStream) {
    let body = json!({"content": [{"type": "text", "text": "{\"ok\": true}"}]}).to_string();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    for byte in head.bytes().chain(body.bytes()) {
        if stream.write_all(&[byte]).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn not_utf8(stream: &mut TcpStream) {
    let mut body = br#"{"content":[{"type":"text","text":"{\"ok\": true, \"reason\": \""#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe, 0xc0, 0x80]);
    body.extend_from_slice(br#"\"}"}],"stop_reason":"end_turn"}"#);
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&body);
}

fn two_gib(stream: &mut TcpStream) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2147483648\r\n\r\n{\"content\": \"";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let chunk = vec![b'a'; 1 << 16];
    for _ in 0..(1 << 15) {
        if stream.write_all(&chunk).is_err() {
            return;
        }
    }
}

/// A prompt guard (`onFailure: block`, a 3 s timeout) against model endpoints that
/// accept and never answer, answer one byte a second, answer bytes that are not UTF-8,
/// or announce 2 GiB and stream it: each is a named failure that blocks, the host's
/// memory stays under a 4 GiB address-space cap, and nothing is held past the body
/// limit. Held (`handlers/model/wire.rs`: the body bounded chunk by chunk, the hook's
/// deadline over the whole request).
#[test]
fn hostile_model_endpoints_are_named_failures_that_block() {
    for (name, answer) in [
        ("stall", stall as fn(&mut TcpStream)),
        ("trickle", trickle),
        ("not-utf8", not_utf8),
        ("2GiB", two_gib),
    ] {
        let env = TestEnv::new();
        let url = raw_model(answer);
        env.project_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([{"type": "prompt", "id": "judge", "prompt": "safe? $ARGUMENTS",
                    "timeout": 3, "onFailure": "block"}]),
        ));
        let mut cmd = env.command();
        cap_memory(
            cmd.args(["dispatch", "PreToolUse"])
                .env_remove("OPENAI_API_KEY")
                .env_remove("OPENAI_BASE_URL")
                .env("ANTHROPIC_API_KEY", KEY)
                .env("ANTHROPIC_BASE_URL", &url),
        );
        let run = run_until(&mut cmd, &bash_input("rm -rf /").to_string(), HANG)
            .unwrap_or_else(|| panic!("{name}: hookhost hung"));
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let out = run.json();
        assert_eq!(out["decision"], "deny", "{name}: {out}");
        let report = &out["hooks"][0];
        assert!(report["failure"].is_string(), "{name}: unnamed: {report}");
        assert!(
            run.stdout.len() < 64 << 10,
            "{name}: {} bytes",
            run.stdout.len()
        );
    }
}

/// A model that answers `{"ok": false}` to every Stop, for ever: the Stop cap holds for
/// a prompt hook as for a command hook (3 blocks, then the loop is let go with a notice).
/// Held (the cap counts blocks in the outcome, whatever handler gave them).
#[test]
fn a_model_that_never_lets_stop_through_is_braked() {
    let env = TestEnv::new();
    let refusals = (0..10)
        .map(|_| Reply::Verdict(json!({"ok": false, "reason": "not done", "impossible": false})))
        .collect();
    let server = ModelServer::start(refusals);
    env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [
        {"type": "prompt", "id": "judge", "prompt": "done? $ARGUMENTS"}
    ]}]}}));
    env.vouch_for_model_server(&server.url);
    let stop = || {
        let mut cmd = env.command();
        cmd.args(["dispatch", "Stop"])
            .env("HOOKHOST_STOP_BLOCK_CAP", "3")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env("ANTHROPIC_API_KEY", KEY)
            .env("ANTHROPIC_BASE_URL", &server.url);
        env.run_with(
            &mut cmd,
            &json!({"session_id": "brake", "stop_hook_active": true}).to_string(),
        )
        .json()
    };
    let decisions: Vec<Value> = (0..8).map(|_| stop()["decision"].clone()).collect();
    assert_eq!(
        decisions[..4],
        [
            json!("block"),
            json!("block"),
            json!("block"),
            json!("none")
        ],
        "requests: {}",
        server.requests().len()
    );
    // Let go once, a new loop may start; none is longer than the cap.
    let longest = decisions
        .split(|d| d != "block")
        .map(<[Value]>::len)
        .max()
        .unwrap_or(0);
    assert!(longest <= 3, "{decisions:?}");
}

/// A command hook of a chain that appends `suffix` to the Bash command it was given.
fn appends(id: &str, suffix: &str) -> Value {
    let command = format!(
        "input=$(cat); cmd=$(printf '%s' \"$input\" | sed -n 's/.*\"command\":\"\\([^\"]*\\)\".*/\\1/p'); \
         printf '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PreToolUse\",\"updatedInput\":{{\"command\":\"%s{suffix}\"}}}}}}' \"$cmd\""
    );
    json!({"type": "command", "id": id, "command": command})
}

fn chain(handlers: Value) -> Value {
    json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "chain": true, "hooks": handlers}]}})
}

/// A chain whose second hook times out. With `onFailure: block` the event is denied, in
/// both formats (the rewrite of hook one travels with the deny, as with any block in a
/// chain, and applies to nothing). With the default `continue` the rewrites of the hooks
/// that answered apply (dropping them would undo a sanitizer that did answer), and the
/// failure is named in the outcome and, in Claude Code's format, on stderr. Held.
#[test]
fn a_chain_whose_middle_hook_times_out_applies_no_half_chain_silently() {
    for on_failure in ["block", "continue"] {
        let env = TestEnv::new();
        env.project_hooks(chain(json!([
            appends("one", " --one"),
            {"type": "command", "id": "two", "command": "sleep 60", "timeout": 1,
             "killGrace": 0, "onFailure": on_failure},
            appends("three", " --three"),
        ])));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        let two = out["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["id"] == "two")
            .cloned()
            .unwrap_or_else(|| panic!("{on_failure}: no report of hook two: {out}"));
        assert_eq!(two["failure"], "timeout", "{on_failure}: {out}");
        let claude = env.run(
            &["dispatch", "PreToolUse", "--format", "claude"],
            &bash_input("ls").to_string(),
        );
        if on_failure == "block" {
            assert_eq!(out["decision"], "deny", "{out}");
            assert!(
                claude.code == 2 || claude.stdout.contains("\"deny\""),
                "{}: {}",
                claude.code,
                claude.stdout
            );
        } else {
            assert_eq!(out["updatedInput"]["command"], "ls --one --three", "{out}");
            assert!(claude.stderr.contains("two"), "silent: {}", claude.stderr);
        }
    }
}

/// A chain of 1,000 hooks (each appending a character): answered, the whole chain
/// applied, and the host bounded in memory. Held.
#[test]
fn a_chain_of_a_thousand_hooks_is_answered() {
    let env = TestEnv::new();
    let handlers: Vec<Value> = (0..1000).map(|i| appends(&format!("h{i}"), "x")).collect();
    env.project_hooks(chain(Value::Array(handlers)));
    let mut cmd = env.command();
    let run = run_until(
        cap_memory(cmd.args(["dispatch", "PreToolUse"])),
        &bash_input("ls ").to_string(),
        Duration::from_secs(600),
    )
    .expect("hookhost hung");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    let command = out["updatedInput"]["command"].as_str().unwrap_or_default();
    assert!(
        command.starts_with("ls ") && command.ends_with('x'),
        "{}",
        &out.to_string()[..out.to_string().len().min(2000)]
    );
}

/// A flat file of 100,000 hooks (10 MB, under the 16 MiB file cap): a dispatch answers
/// under a 4 GiB address-space cap, and the guard among them still denies. It answered,
/// but in 144 s (debug build; 250 MB peak): the flat parser counted each rule's index
/// among its event's groups over every group before it, quadratic in the rules. Fixed
/// at `config/flat.rs` `parse` (a count per event): 3.9 s, as the nested format's 4.7 s
/// for 100,000 groups. Measured, not asserted (no timed assertions).
#[test]
fn a_flat_file_of_a_hundred_thousand_hooks_is_bounded() {
    let env = TestEnv::new();
    let mut rules: Vec<Value> = (0..100_000)
        .map(|i| {
            json!({"event": "PreToolUse", "matcher": format!("Tool{i}"),
                   "handler": {"type": "command", "command": "echo '{}'"}})
        })
        .collect();
    rules.push(json!({"event": "PreToolUse", "matcher": "Bash",
        "handler": {"type": "command", "command": "echo '{\"blocked\": true, \"blockReason\": \"no\"}'"}}));
    env.write(
        ".hookhost/hooks.flat.json",
        &json!({"hooks": rules}).to_string(),
    );
    let mut cmd = env.command();
    let run = run_until(
        cap_memory(cmd.args(["dispatch", "PreToolUse"])),
        &bash_input("rm -rf /").to_string(),
        Duration::from_secs(600),
    )
    .expect("hookhost hung");
    let out: Value = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
    assert_eq!(out["decision"], "deny", "code {}: {}", run.code, run.stderr);
}

/// A flat file of 100,000 nested arrays (and a hooks file likewise): refused with the
/// file named, no stack overflow, and the dispatch does not let `rm -rf /` through on a
/// config it could not read. Held (serde_json's recursion limit).
#[test]
fn deeply_nested_json_in_a_flat_file_is_refused_by_name() {
    for file in [".hookhost/hooks.flat.json", ".hookhost/hooks.json"] {
        let env = TestEnv::new();
        let nested = format!(
            "{{\"hooks\": {}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        env.write(file, &nested);
        let mut cmd = env.command();
        let run = run_until(
            cmd.args(["dispatch", "PreToolUse"]),
            &bash_input("rm -rf /").to_string(),
            HANG,
        )
        .expect("hookhost hung");
        assert!(run.code >= 0, "{file}: killed by a signal: {}", run.stderr);
        let name = Path::new(file)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(
            run.stdout.contains(&name) || run.stderr.contains(&name),
            "{file} not named: {}\n{}",
            run.stdout,
            run.stderr
        );
        let out: Value = serde_json::from_str(&run.stdout).unwrap_or(Value::Null);
        assert_ne!(out["decision"], "allow", "{file}: {}", run.stdout);
    }
}

/// A hook that ignores SIGTERM and forks a new child every 10 ms while the host's
/// `killGrace` runs, then answers nothing: it is ended (it and every child) when the
/// grace is over, and the dispatch answers. Held (`handlers/descendants.rs`).
#[test]
fn a_hook_that_forks_through_kill_grace_is_ended_with_every_child() {
    let env = TestEnv::new();
    let hook = "trap '' TERM; while :; do (trap '' TERM; exec sleep 4242601) & sleep 0.01; done";
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "forker", "command": hook, "timeout": 1,
                "killGrace": 1, "onFailure": "block"}]),
    ));
    let mut cmd = env.command();
    let run = run_until(
        cmd.args(["dispatch", "PreToolUse"]),
        &bash_input("rm -rf /").to_string(),
        HANG,
    )
    .expect("hookhost hung on the forker");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["decision"], "deny", "{}", run.stdout);
    wait_until("every child of the forker to be gone", || {
        !process_running("sleep 4242601")
    });
}

/// A hook that exits at once, leaving a grandchild that holds its stdout open past the
/// timeout and `killGrace` (ignoring SIGTERM): the dispatch answers, the grandchild is
/// ended. Held.
#[test]
fn a_grandchild_holding_stdout_past_kill_grace_is_ended() {
    let env = TestEnv::new();
    let hook = "(trap '' TERM; exec sleep 4242602) & echo '{}'";
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "holder", "command": hook, "timeout": 1,
                "killGrace": 1}]),
    ));
    let mut cmd = env.command();
    let run = run_until(
        cmd.args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
        HANG,
    )
    .expect("hookhost hung on the holder");
    assert_eq!(run.code, 0, "{}", run.stderr);
    wait_until("the grandchild to be gone", || {
        !process_running("sleep 4242602")
    });
}
