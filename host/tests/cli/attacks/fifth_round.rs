//! Issue 24, fifth round: the reliability surfaces merged this round (the last good
//! store on disk, prompt hooks against model endpoints, transform chains, the flat
//! format, the subreaper, the Stop cap) attacked by a hostile *environment* rather than a
//! hostile plugin: a full or read-only data directory, a stored file replaced by a FIFO,
//! a directory or a symlink, writers racing, a clock stepped back, the session collector
//! against 100,000 entries and racing dispatches, hooks that kill their own hosts or
//! leave stopped orphans, registrations during a reload storm (the handlers' side is in
//! `fifth_round_handlers.rs`). Each test is the attack; what
//! got through was fixed at its chokepoint (named on the test), and what still gets
//! through is `#[ignore]`d with why. No assertion is on time: a bound on a run only
//! turns a hang into a failure.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::serve::Daemon;
use crate::support::{
    Run, TestEnv, bash_input, copy_env, deny_dangerous_bash, hooks, process_running, run_until,
    wait_until,
};

/// Far past any honest answer: only turns a hang into a failure.
pub(super) const HANG: Duration = Duration::from_secs(120);

pub(super) const KEY: &str = "sk-ant-fifth-round-0123456789";

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
/// as with no stored version — the book's rule for a broken project file). Held.
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
                let text = if n.is_multiple_of(2) {
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
    let text = std::fs::read_to_string(entry).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(header).unwrap();
    let ahead = header["since"].as_u64().unwrap() + 365 * 24 * 3600;
    header["since"] = json!(ahead);
    std::fs::write(entry, format!("{header}\n{body}")).unwrap();
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
