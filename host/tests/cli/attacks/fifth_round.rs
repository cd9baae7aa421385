//! Issue 24, fifth round: the reliability surfaces merged this round (the last good
//! store on disk, prompt hooks against model endpoints, transform chains, the flat
//! format, the subreaper, the Stop cap) attacked by a hostile *environment* rather than a
//! hostile plugin: a full or read-only data directory, a stored file replaced by a FIFO,
//! a directory or a symlink, writers racing, model servers that stall, trickle, send
//! bytes that are not UTF-8 or announce 2 GiB, chains whose middle hook times out, and
//! configs of 100,000 hooks or 100,000 levels of nesting. Each test is the attack; what
//! got through was fixed at its chokepoint (named on the test), and what still gets
//! through is `#[ignore]`d with why. No assertion is on time: a bound on a run only
//! turns a hang into a failure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::model_server::{ModelServer, Reply};
use crate::serve::Daemon;
use crate::support::{
    Run, TestEnv, bash_input, cap_memory, copy_env, deny_dangerous_bash, hooks, process_running,
    run_until, wait_until,
};

/// Far past any honest answer: only turns a hang into a failure.
const HANG: Duration = Duration::from_secs(120);

const KEY: &str = "sk-ant-fifth-round-0123456789";

/// The guards every environment attack runs: a wasm plugin (whose compile cache lives in
/// the data directory) and a command guard, both denying `rm -rf`.
fn guards(env: &TestEnv) -> Value {
    let deny = env.script(
        "deny.sh",
        r#"case "$(cat)" in
  *"rm -rf"*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no rm -rf"}}' ;;
  *) echo '{}' ;;
esac"#,
    );
    hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "wasm", "id": "wasm", "plugin": deny_dangerous_bash(), "onFailure": "block"},
            {"type": "command", "id": "cmd", "command": deny, "onFailure": "block"}
        ]),
    )
}

/// `hookhost ARGS` run in a private mount namespace where the data directory is a fresh
/// tmpfs that `setup` (shell, `$D` the data dir) prepares first.
fn in_data_mount(env: &TestEnv, setup: &str, args: &[&str], stdin: &str) -> Run {
    let hookhost = env!("CARGO_BIN_EXE_hookhost");
    let script = format!(
        "set -e; D=\"$1\"; shift; mount -t tmpfs -o size=256k,mode=0700 tmpfs \"$D\"; {setup}; exec \"$@\""
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c", &script, "sh"])
        .arg(&env.data)
        .arg(hookhost)
        .args(args)
        .current_dir(&env.project);
    copy_env(&env.command(), &mut cmd);
    run_until(&mut cmd, stdin, HANG).expect("hookhost hung")
}

fn denied(run: &Run) -> bool {
    run.code == 0 && run.json()["decision"] == "deny"
}

/// ENOSPC: a data directory with no byte left (audit log, compile cache, session store,
/// last good store all fail to write). The guards still deny `rm -rf /`. Held.
#[test]
fn a_full_data_dir_does_not_let_a_dangerous_command_through() {
    let env = TestEnv::new();
    env.project_hooks(guards(&env));
    let fill = "dd if=/dev/zero of=\"$D/fill\" bs=4k 2>/dev/null || true";
    let run = in_data_mount(
        &env,
        fill,
        &["dispatch", "PreToolUse"],
        &bash_input("rm -rf /").to_string(),
    );
    assert!(denied(&run), "{}\n{}", run.stdout, run.stderr);
    // And Claude Code's format blocks (exit 2 or a deny), never a bare exit 1.
    let run = in_data_mount(
        &env,
        fill,
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("rm -rf /").to_string(),
    );
    assert!(
        run.code == 2 || run.stdout.contains("\"deny\""),
        "code {}: {}\n{}",
        run.code,
        run.stdout,
        run.stderr
    );
}

/// A read-only data directory (EROFS on every write). Held.
#[test]
fn a_read_only_data_dir_does_not_let_a_dangerous_command_through() {
    let env = TestEnv::new();
    env.project_hooks(guards(&env));
    let run = in_data_mount(
        &env,
        "mount -o remount,ro \"$D\"",
        &["dispatch", "PreToolUse"],
        &bash_input("rm -rf /").to_string(),
    );
    assert!(denied(&run), "{}\n{}", run.stdout, run.stderr);
}

/// The files of the last good store in `env`.
fn stored_files(env: &TestEnv) -> Vec<PathBuf> {
    std::fs::read_dir(env.data.join("last-good"))
        .map(|dir| dir.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// A project whose guard denies `rm -rf`, stored as last good, then broken on disk.
fn stored_then_broken(env: &TestEnv) {
    env.project_hooks(guards(env));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["decision"], "none", "{out}");
    assert!(!stored_files(env).is_empty(), "nothing stored");
    env.write(".hookhost/hooks.json", "{\"hooks\": {");
}

/// The stored last good version replaced by a FIFO (no writer: an open without
/// `O_NONBLOCK` waits for ever), a directory, a symlink to a whole copy of itself, a
/// truncated copy, and a whole copy owned by another uid: a one-shot dispatch answers,
/// and uses none of them (the file's hooks are skipped with the notice naming the file,
/// as with no stored version — the README's rule for a broken project file). Held.
#[test]
fn a_stored_last_good_replaced_under_the_host_is_refused_and_never_hangs() {
    for kind in ["fifo", "dir", "symlink", "truncated", "other-uid"] {
        let env = TestEnv::new();
        stored_then_broken(&env);
        for (i, file) in stored_files(&env).into_iter().enumerate() {
            let text = std::fs::read(&file).unwrap();
            std::fs::remove_file(&file).unwrap();
            match kind {
                "fifo" => {
                    let c = std::ffi::CString::new(file.as_os_str().as_encoded_bytes()).unwrap();
                    // SAFETY: a valid C string.
                    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
                }
                "dir" => std::fs::create_dir(&file).unwrap(),
                "symlink" => {
                    let aside = env.data.join(format!("aside-{i}"));
                    std::fs::write(&aside, &text).unwrap();
                    std::os::unix::fs::symlink(&aside, &file).unwrap();
                }
                "truncated" => std::fs::write(&file, &text[..text.len() - 3]).unwrap(),
                _ => {
                    std::fs::write(&file, &text).unwrap();
                    std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
                }
            }
        }
        let mut cmd = env.command();
        let run = run_until(
            cmd.args(["dispatch", "PreToolUse"]),
            &bash_input("rm -rf /").to_string(),
            HANG,
        )
        .unwrap_or_else(|| panic!("{kind}: hookhost hung on the stored file"));
        assert_eq!(run.code, 0, "{kind}: {}", run.stderr);
        let out = run.json();
        let notices = out["notices"].to_string();
        assert!(
            notices.contains("config error, hooks skipped") && notices.contains("hooks.json"),
            "{kind}: the replacement was used: {out}"
        );
    }
}

/// Sixteen one-shot dispatches storing the same file's last good version at once (two
/// versions, alternating): the store holds one whole version afterwards, and a dispatch
/// after the file broke enforces it. Held (`write_atomically`: a unique temporary file
/// per writer, renamed).
#[test]
fn writers_racing_on_the_last_good_store_leave_one_whole_version() {
    let env = TestEnv::new();
    env.project_hooks(guards(&env));
    std::thread::scope(|scope| {
        for i in 0..16 {
            let env = &env;
            scope.spawn(move || {
                let mut cmd = env.command();
                // Two versions of the same file, one differing in a field only.
                let out = env.run_with(
                    cmd.args(["dispatch", "PreToolUse"])
                        .env("FIFTH_ROUND_WRITER", i.to_string()),
                    &bash_input("ls").to_string(),
                );
                assert_eq!(out.code, 0, "{}", out.stderr);
            });
        }
    });
    env.write(".hookhost/hooks.json", "not json");
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(out["decision"], "deny", "{out}");
    let leftovers: Vec<_> = std::fs::read_dir(env.data.join("last-good"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

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

/// A flat file of 100,000 hooks (under the 16 MiB file cap): a dispatch answers under a
/// 4 GiB address-space cap, and the guard among them still denies. Held.
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

/// The session directories of `env`'s store (found by their 64-hex-digit names).
fn session_dirs(env: &TestEnv) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![env.data.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = entry.file_name().to_string_lossy().to_string();
            if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                found.push(path);
            } else if name != "cache" {
                dirs.push(path);
            }
        }
    }
    found
}

const BLOCK: &str = r#"echo '{"decision": "block", "reason": "not done"}'"#;

/// The collector meets a session holding 100,000 queued results and a store holding
/// 100,000 other entries: `SessionEnd` answers, the session's state goes, and the sweep
/// reads no more than its bound. Held (`session/disk/collect.rs`).
#[test]
fn the_collector_meets_a_hundred_thousand_entries() {
    let env = TestEnv::new();
    env.project_hooks(
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": BLOCK}]}]}}),
    );
    let out = env.dispatch("Stop", json!({"session_id": "big"}));
    assert_eq!(out["decision"], "block", "{out}");
    let dirs = session_dirs(&env);
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let session = &dirs[0];
    let queue = session.join("async");
    std::fs::create_dir_all(&queue).unwrap();
    for i in 0..100_000 {
        std::fs::File::create(queue.join(format!("{i:020}.json"))).unwrap();
    }
    let store = session.parent().unwrap();
    for i in 0..100_000 {
        std::fs::File::create(store.join(format!("junk-{i}"))).unwrap();
    }
    let mut cmd = env.command();
    let run = run_until(
        cmd.args(["dispatch", "SessionEnd"]),
        &json!({"session_id": "big", "reason": "clear"}).to_string(),
        Duration::from_secs(600),
    )
    .expect("the collector hung");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!queue.exists(), "the session's queue was kept");
    // A new Stop in the same session starts from 0 again: its count went.
    let out = env.dispatch("Stop", json!({"session_id": "big"}));
    assert_eq!(out["decision"], "block", "{out}");
}

/// `SessionEnd` (collecting the session's directory) racing Stop blocks dispatched into
/// the same session by other processes: every dispatch answers, and no count is written
/// into a removed directory: once the racing ends, the cap counts from what the store
/// holds (a block after the cap's worth of blocks in a row is let go). Held (the
/// collector takes both locks without waiting; a lock on a removed file is taken again).
#[test]
fn the_collector_racing_dispatches_into_the_same_session_loses_no_count() {
    let env = TestEnv::new();
    env.project_hooks(
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": BLOCK}]}]}}),
    );
    let stop = |env: &TestEnv| {
        let mut cmd = env.command();
        cmd.args(["dispatch", "Stop"])
            .env("HOOKHOST_STOP_BLOCK_CAP", "1000");
        env.run_with(&mut cmd, &json!({"session_id": "race"}).to_string())
    };
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10 {
                    let run = stop(&env);
                    assert_eq!(run.code, 0, "{}", run.stderr);
                    assert_eq!(run.json()["decision"], "block", "{}", run.stdout);
                }
            });
        }
        scope.spawn(|| {
            for _ in 0..10 {
                let run = env.run(
                    &["dispatch", "SessionEnd"],
                    &json!({"session_id": "race", "reason": "clear"}).to_string(),
                );
                assert_eq!(run.code, 0, "{}", run.stderr);
            }
        });
    });
    // After the race: three blocks in a row under a cap of 3 from a fresh end.
    let end = env.run(
        &["dispatch", "SessionEnd"],
        &json!({"session_id": "race", "reason": "clear"}).to_string(),
    );
    assert_eq!(end.code, 0, "{}", end.stderr);
    let capped = |env: &TestEnv| {
        let mut cmd = env.command();
        cmd.args(["dispatch", "Stop"])
            .env("HOOKHOST_STOP_BLOCK_CAP", "3");
        env.run_with(&mut cmd, &json!({"session_id": "race"}).to_string())
            .json()["decision"]
            .clone()
    };
    let decisions: Vec<Value> = (0..4).map(|_| capped(&env)).collect();
    assert_eq!(
        decisions,
        [
            json!("block"),
            json!("block"),
            json!("block"),
            json!("none")
        ]
    );
}

/// An async hook (`kill_what`: shell words naming pids, `$R` its runner, `$PPID` its
/// keeper) that SIGKILLs its own hosts, having started `sleep MARK` in a session of its
/// own: it ran once, and nothing it started outlives the kill.
fn async_hook_killing_its_host(kill_what: &str, mark: u32) {
    let env = TestEnv::new();
    let hook = format!(
        "echo ran >> runs.txt; setsid sh -c 'exec sleep {mark}' </dev/null >/dev/null 2>&1 & \
         R=$(cut -d' ' -f4 /proc/$PPID/stat); echo \"runner $R\" >> runs.txt; kill -9 {kill_what}; \
         echo outlived >> runs.txt; exec sleep 1{mark}"
    );
    env.project_hooks(
        json!({"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "id": "host-killer", "async": true, "command": hook}
        ]}]}}),
    );
    let input = json!({"session_id": "killer", "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_response": {"stdout": ""}});
    let runs = env.project.join("runs.txt");
    let text = || std::fs::read_to_string(&runs).unwrap_or_default();
    for n in 1..=2 {
        let out = env.dispatch("PostToolUse", input.clone());
        assert_eq!(out["hooks"][0]["status"], "async", "{out}");
        wait_until("the async hook to kill its host", || {
            text().matches("runner").count() == n
        });
        wait_until("what the hook started to be ended", || {
            !process_running(&format!("sleep {mark}"))
                && !process_running(&format!("sleep 1{mark}"))
        });
    }
    assert_eq!(
        text().matches("ran").count(),
        2,
        "a job ran twice: {}",
        text()
    );
}

/// An async hook that SIGKILLs the `run-async` runner that started it: its keeper (and
/// so the hook) dies with the runner, and the keeper ends its session-escaped child.
/// Held (`handlers/descendants.rs`: `PR_SET_PDEATHSIG` on the keeper and the hook).
#[test]
fn an_async_hook_that_kills_its_runner_does_not_outlive_it() {
    async_hook_killing_its_host("$R", 4242603);
}

/// The same hook killing its runner *and* its keeper at once: the `setsid` child it
/// started is re-parented above both, to init, and runs on.
#[test]
#[ignore = "open: a hook that SIGKILLs its keeper and its hookhost together leaves its orphans to init \
            (the documented limit of handlers/descendants.rs; only a cgroup per hook would hold them)"]
fn an_async_hook_that_kills_its_runner_and_keeper_leaves_no_orphan() {
    async_hook_killing_its_host("$R $PPID", 4242604);
}

/// Registrations over `serve`'s socket while the project's file is rewritten, valid and
/// broken in turn, as fast as a writer can: every registration made during the storm
/// denies at once and after the storm settles (a reload, good or refused, never drops
/// the runtime registry). Held (`dispatch/registry.rs`, kept apart from the config).
#[test]
fn registrations_during_a_reload_storm_are_kept() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Read",
        json!([{"type": "command", "command": "echo '{}'"}]),
    ));
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "none"
    );
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut ids = Vec::new();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let text = if n % 2 == 0 {
                    hooks(
                        "PreToolUse",
                        "Read",
                        json!([{"type": "command", "command": format!("echo '{{}}' # {n}")}]),
                    )
                    .to_string()
                } else {
                    "{\"hooks\": {".to_string()
                };
                env.write(".hookhost/hooks.json", &text);
            }
        });
        for i in 0..20 {
            let deny = json!({"type": "command",
                "command": format!("echo 'registered {i} says no' >&2; exit 2")});
            client.send(
                &json!({"id": i, "register": {"event": "PreToolUse", "matcher": "Bash", "hook": deny}})
                    .to_string(),
            );
            let answer = client.read();
            ids.push(
                answer["registered"]["hookId"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{answer}")),
            );
            let out = client.call("PreToolUse", bash_input("rm -rf /"));
            assert_eq!(
                out["decision"], "deny",
                "registration {i} during the storm: {out}"
            );
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    env.project_hooks(hooks(
        "PreToolUse",
        "Read",
        json!([{"type": "command", "command": "echo '{}'"}]),
    ));
    // The settled file is read (its hook reported), and every registration still runs.
    wait_until("the settled file to be in force", || {
        let out = client.call(
            "PreToolUse",
            json!({"tool_name": "Read", "tool_input": {"file_path": "x"}}),
        );
        out["notices"].as_array().is_some_and(Vec::is_empty)
            && out["hooks"].as_array().is_some_and(|h| h.len() == 1)
    });
    let out = client.call("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(out["decision"], "deny", "{out}");
    let ran: Vec<&str> = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["id"].as_str())
        .collect();
    for id in ids {
        assert!(
            ran.contains(&format!("registered:{id}").as_str()),
            "registration {id} lost: {ran:?}"
        );
    }
}

/// A guard of version `v`: denies `rm -rf` with the reason `guard v{v}`.
fn versioned_guard(v: u32) -> Value {
    hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": format!("echo 'guard v{v}' >&2; exit 2")}]),
    )
}

/// A clock stepped back: version 1 of the project's file was stored while the clock was a
/// year ahead (its header's `since` in the future; simulated by writing that header), a
/// `serve` started then holds it; the clock is set right, the user writes version 2, a
/// one-shot dispatch (the daemon not asked meanwhile) stores it, and the file breaks.
/// Every host must then enforce version 2, the last good version written; `serve`
/// compared the two versions' wall-clock `since` and kept version 1. Fixed at
/// `host/stored_good.rs` `gather`: a version in memory dated after now is no witness of
/// order (the store's version wins). A clock stepped back by less than the time between
/// two versions still orders them by the clock.
#[test]
fn a_clock_stepped_back_does_not_make_serve_keep_an_older_version() {
    let env = TestEnv::new();
    env.project_hooks(versioned_guard(1));
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert!(out["reason"].to_string().contains("guard v1"), "{out}");
    // Written while the clock was a year ahead.
    let [entry] = &stored_files(&env)[..] else {
        panic!("{:?}", stored_files(&env))
    };
    let text = std::fs::read_to_string(&entry).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(header).unwrap();
    let ahead = header["since"].as_u64().unwrap() + 365 * 24 * 3600;
    header["since"] = json!(ahead);
    std::fs::write(&entry, format!("{header}\n{body}")).unwrap();
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    let out = client.call("PreToolUse", bash_input("rm -rf /"));
    assert!(out["reason"].to_string().contains("guard v1"), "{out}");
    // The clock set right: version 2, stored by a one-shot dispatch.
    env.project_hooks(versioned_guard(2));
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert!(out["reason"].to_string().contains("guard v2"), "{out}");
    env.write(".hookhost/hooks.json", "{\"hooks\": {");
    let one_shot = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert!(
        one_shot["reason"].to_string().contains("guard v2"),
        "{one_shot}"
    );
    let mut served = Value::Null;
    wait_until("serve to see the broken file", || {
        served = client.call("PreToolUse", bash_input("rm -rf /"));
        served["notices"].to_string().contains("hooks.json")
    });
    assert!(
        served["reason"].to_string().contains("guard v2"),
        "serve keeps another version than the one-shot: {served}"
    );
}

/// A hook that leaves behind an orphan in a session of its own that stops itself
/// (`SIGSTOP`: a stopped process acts on no `SIGTERM` until continued), and one that
/// ignores `SIGTERM`: both are ended with the dispatch in the one-shot CLI. Held (the
/// keeper and `end_adopted` end with `SIGKILL`, which a stopped process takes).
#[test]
fn a_stopped_orphan_is_ended_with_the_hook() {
    let env = TestEnv::new();
    let hook = "setsid sh -c 'touch s1; kill -STOP $$; exec sleep 4242605' >/dev/null 2>&1 & \
                setsid sh -c 'trap \"\" TERM; touch s2; kill -STOP $$; sleep 4242606' >/dev/null 2>&1 & \
                while [ ! -e s1 ] || [ ! -e s2 ]; do sleep 0.05; done; echo '{}'";
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "stopper", "command": hook, "killGrace": 1}]),
    ));
    let mut cmd = env.command();
    let run = run_until(
        cmd.args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
        HANG,
    )
    .expect("hookhost hung on a stopped orphan");
    assert_eq!(run.code, 0, "{}", run.stderr);
    wait_until("the stopped orphans to be gone", || {
        !process_running("sleep 4242605") && !process_running("sleep 4242606")
    });
}
