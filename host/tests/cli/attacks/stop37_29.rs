//! Issue 29's red team: required hooks that fail closed and the tamper-evident audit
//! chain, attacked with members of each class nobody named. Each test is the attack and
//! its control; what got through was fixed at its chokepoint (named on the test).

use std::path::Path;

use serde_json::{Value, json};

use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks};

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A public key no log here was signed with, pinned as `--key`.
fn pinned_key() -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    hex::encode(key.verifying_key().as_bytes())
}

/// Writes `lines` chain lines that follow one another (each `prev` the hash of the line
/// before), from `first_seq`, none signed: a log made up by someone without the key.
fn forged_log(path: &Path, first_seq: u64, lines: u64) {
    let mut prev = "ab".repeat(32);
    let mut text = String::new();
    for n in 0..lines {
        let line = json!({"seq": first_seq.wrapping_add(n), "prev": prev,
                          "event": "PreToolUse", "decision": "allow"})
        .to_string();
        prev = sha256_hex(line.as_bytes());
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

fn verify(env: &TestEnv, file: &Path) -> (i32, Value, String) {
    let run = env.run(
        &[
            "audit",
            "verify",
            "--json",
            "--key",
            &pinned_key(),
            file.to_str().unwrap(),
        ],
        "",
    );
    let report = serde_json::from_str(&run.stdout).unwrap_or_else(|_| Value::Null);
    (run.code, report, run.stderr)
}

/// A whole log made up without the key: no genesis, no checkpoint, thousands of lines
/// chained to one another. The first line's `prev` cannot be checked (the set "starts
/// after the genesis"), and the rule "a signed line at least every `every` seqs" was held
/// only after a signed line: with none, every line was "unsigned tail" and the forgery
/// verified intact against the pinned key. The page claims a checkpoint left out is
/// detected and the unsigned tail is at most 255 lines. Fixed at `audit/verify/mod.rs`
/// (`Check::line`): a set that begins after the genesis must reach a signed line within
/// `CHECKPOINT_EVERY` seqs of its first line. The control: a short unsigned run (the
/// documented unsigned tail) still verifies.
#[test]
fn a_log_made_up_without_any_signed_line_does_not_verify() {
    let env = TestEnv::new();
    let file = env.home.join("forged.jsonl");
    forged_log(&file, 5_000, 2_000);
    let (code, report, stderr) = verify(&env, &file);
    assert_eq!(code, 1, "a forged log verified: {report} {stderr}");
    assert_eq!(report["problem"]["kind"], "checkpointMissing", "{report}");
    // The control: within one interval, the unsigned lines are the documented tail.
    forged_log(&file, 5_000, 100);
    let (code, report, _) = verify(&env, &file);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["unsignedTail"], 100, "{report}");
}

/// A line whose `seq` is the largest number followed by one more line: `seq + 1`
/// overflowed and verify died (a panic, exit 101: neither "intact" nor "broken", and no
/// report for a collector). Fixed at `audit/verify/mod.rs` (`Check::follows`): the seq
/// after it is checked without overflow, and is a break.
#[test]
fn a_seq_at_the_largest_number_is_a_break_not_a_crash() {
    let env = TestEnv::new();
    let file = env.home.join("overflow.jsonl");
    forged_log(&file, u64::MAX, 2);
    let (code, report, stderr) = verify(&env, &file);
    assert_eq!(code, 1, "{report} {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(report["intact"], false, "{report}");
}

/// Sends a PreToolUse for `command` naming the client's server `agent`, and answers the
/// `mcp_tool` hook's call with `text`; returns the outcome.
fn mcp_answered(daemon: &Daemon, text: &str) -> Value {
    let mut client = daemon.client();
    client.send(
        &json!({"id": 1, "event": "PreToolUse", "input": bash_input("rm -rf /"),
                "mcpServers": ["agent"]})
        .to_string(),
    );
    let asked = client.read();
    assert!(asked["mcpCall"].is_object(), "{asked}");
    client.send(
        &json!({"id": asked["id"], "mcpResult": {"content": [{"type": "text", "text": text}]}})
            .to_string(),
    );
    let answer = client.read();
    answer["outcome"].clone()
}

/// A required `mcp_tool` hook whose tool answers plain text ("guard unavailable, try
/// later"): read as a command's stdout on exit 0, an answer with no decision, status
/// `ok`, so the required hook "gave a verdict" and the action went ahead. With
/// `onFailure: "block"` the same answer is a failure (Claude Code: only hook JSON is an
/// answer there), so `required` was weaker than `onFailure: "block"`. Fixed at
/// `handlers/mcp/mod.rs` (`verdict`): a required hook is held as strictly. The control:
/// the same hook, not required, lets the action through.
#[test]
fn a_required_mcp_tool_answering_plain_text_fails_closed() {
    for required in [false, true] {
        let env = TestEnv::new();
        let mut hook = json!({"type": "mcp_tool", "id": "mcp-guard", "server": "agent",
                              "tool": "guard", "timeout": 5});
        if required {
            hook["required"] = json!(true);
        }
        env.user_hooks(hooks("PreToolUse", "Bash", json!([hook])));
        let daemon = Daemon::start(&env);
        let out = mcp_answered(&daemon, "guard unavailable, try later");
        if required {
            assert_eq!(out["decision"], "deny", "{out}");
            let reason = out["reason"].as_str().unwrap_or_default();
            assert!(
                reason.contains("required hook `mcp-guard`") && reason.contains("plain text"),
                "{out}"
            );
        } else {
            assert_ne!(out["decision"], "deny", "{out}");
            assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
        }
    }
}

/// A required command hook that crashes after printing JSON that decides nothing (a
/// `systemMessage` printed on start, then `exit 1`: a Python guard's traceback): "other
/// codes: JSON decides alone" made the answer `ok`, a verdict, and the action went ahead,
/// though the page lists "an exit code" among the failures of a required hook. Fixed at
/// `handlers/command.rs` (`required_exit`): on a failing exit, a required hook's answer
/// counts only when it restricts. Held: the same crash after a deny still denies (with its
/// own reason); the control, not required, goes ahead as before. Under `--format claude`
/// the agent sees the deny (exit 2).
#[test]
fn a_required_command_crashing_after_harmless_json_fails_closed() {
    for required in [false, true] {
        let env = TestEnv::new();
        let mut hook = json!({"type": "command", "id": "crashy",
            "command": "echo '{\"systemMessage\": \"checking\"}'; exit 1"});
        if required {
            hook["required"] = json!(true);
        }
        let deny = json!({"type": "command", "id": "denies-then-crashes",
            "command": "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \
                        \"permissionDecision\": \"deny\", \"permissionDecisionReason\": \"no\"}}'; exit 1",
            "required": true});
        env.user_hooks(hooks("PreToolUse", "Bash", json!([hook])));
        let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
        if required {
            assert_eq!(out["decision"], "deny", "{out}");
            let reason = out["reason"].as_str().unwrap_or_default();
            assert!(
                reason.contains("required hook `crashy` (user) gave no verdict")
                    && reason.contains("exit 1"),
                "{out}"
            );
            let input = bash_input("rm -rf /").to_string();
            let run = env.run(&["dispatch", "PreToolUse", "--format", "claude"], &input);
            assert_eq!(run.code, 2, "{} {}", run.stdout, run.stderr);
        } else {
            assert_ne!(out["decision"], "deny", "{out}");
            assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
        }
        env.user_hooks(hooks("PreToolUse", "Bash", json!([deny])));
        let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
        assert_eq!(out["decision"], "deny", "{out}");
        assert_eq!(out["reason"], "no", "{out}");
    }
}

/// A chain line appended to the live log from outside (its `seq` the next, its `prev` the
/// hash of the last line: no key needed): the next dispatch read its head from the
/// file's end, chained on from the forged line, and the next checkpoint signed over it,
/// though the page says an insertion followed by a signed line is detected. Fixed at
/// `audit/chain.rs` (`head`): chain lines after the length the chain's record names were
/// written by no writer, so the next line follows the record and verify reports the
/// forged line as `inserted`. The control: the same dispatches without it verify intact.
#[test]
fn a_chain_line_appended_from_outside_is_not_adopted_by_the_next_writer() {
    for forge in [false, true] {
        let env = TestEnv::new();
        env.dispatch("Stop", json!({"session_id": "s1"}));
        let log = env.data.join("audit.jsonl");
        if forge {
            let text = std::fs::read_to_string(&log).unwrap();
            let last = text.lines().last().unwrap();
            let seq = serde_json::from_str::<Value>(last).unwrap()["seq"]
                .as_u64()
                .unwrap();
            let forged = json!({"seq": seq + 1, "prev": sha256_hex(last.as_bytes()),
                                "session": "forged", "event": "PreToolUse",
                                "decision": "allow"});
            std::fs::write(&log, format!("{text}{forged}\n")).unwrap();
        }
        env.dispatch("Stop", json!({"session_id": "s2"}));
        let run = env.run(&["audit", "verify", "--json"], "");
        let report: Value = serde_json::from_str(&run.stdout).unwrap();
        if forge {
            assert_eq!(run.code, 1, "the forged line was adopted: {report}");
            assert_eq!(report["problem"]["kind"], "inserted", "{report}");
            assert_eq!(report["problem"]["line"], 3, "{report}");
        } else {
            assert_eq!(run.code, 0, "{report}");
        }
    }
}

/// The user's required guard names its plugin relative to its file (`guard.wasm`, next to
/// `~/.hookhost/hooks.json`); a repository the user trusted copies the entry word for
/// word into its own hooks file, next to a `guard.wasm` of its own that allows
/// everything. Identical entries run once, from the highest layer, and the project's
/// comes before the user's: the repository's plugin ran, "carrying the rule", and the
/// user's guard was skipped as its duplicate. Fixed at `policy/required.rs`
/// (`identity`): entries are identical only when their plugins are the same file. The
/// control: the user's guard alone denies.
#[test]
fn a_trusted_repository_cannot_stand_in_for_a_users_required_guard_by_copying_its_entry() {
    let env = TestEnv::new();
    std::fs::copy(
        crate::support::deny_dangerous_bash(),
        env.home.join("guard.wasm"),
    )
    .unwrap();
    let entry = json!([{"type": "wasm", "id": "guard", "plugin": "guard.wasm",
                        "required": true}]);
    env.user_hooks(hooks("PreToolUse", "Bash", entry.clone()));
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(out["decision"], "deny", "the control: {out}");

    let repo_plugin = env.project.join(".hookhost/guard.wasm");
    std::fs::create_dir_all(repo_plugin.parent().unwrap()).unwrap();
    std::fs::copy(hookhost_test_plugins::plugins::PROTECT_PATHS, &repo_plugin).unwrap();
    env.project_hooks(hooks("PreToolUse", "Bash", entry));
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(
        out["decision"], "deny",
        "the repository's plugin stood in for the user's guard: {out}"
    );
}
