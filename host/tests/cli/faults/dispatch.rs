//! Faults of the dispatch path: hostile values that reach file names, argv and the
//! environment; concurrent updates of one session's state; hooks that write gigabytes;
//! a full disk under the audit log; many hooks under a low fd limit; an environment
//! that is not UTF-8. None may crash, wedge or silently disarm a hook.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{Run, TestEnv, bash_input, hook_fields, hooks};

/// `program` with the environment of `env.command()` (isolated dirs, trust, no daemon).
fn command_like_hookhost(env: &TestEnv, program: &str) -> Command {
    let template = env.command();
    let mut cmd = Command::new(program);
    cmd.current_dir(&env.project);
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Session ids that once disarmed hooks: a NUL made every command hook fail to start,
/// a long id or one with `/` made the Stop cap's file name invalid.
fn hostile_session_ids() -> Vec<String> {
    vec![
        "nul\u{0}in\u{0}id".into(),
        "s".repeat(200),
        "x".repeat(5000),
        "a/b/../../c".into(),
        "../../../../etc/hookhost".into(),
        String::new(),
        "bidi\u{202e}txt.exe\u{1b}[2J".into(),
    ]
}

#[test]
fn hostile_session_ids_never_disarm_a_hook() {
    let env = TestEnv::new();
    let args_file = env.project.join("args");
    env.managed(json!({"hooks": {
        "PreToolUse": [{"hooks": [
            {"type": "command", "id": "exec", "command": "/bin/sh",
             "args": ["-c", format!("printf '%s' \"$1\" > '{}'", args_file.display()), "sh", "${CLAUDE_CODE_SESSION_ID}"]},
            {"type": "command", "id": "guard", "command": "echo 'no rm' >&2; exit 2"}
        ]}],
        "Stop": [{"hooks": [{"type": "command", "id": "again", "command": "echo 'keep going' >&2; exit 2"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "id": "exports",
            "command": "echo 'export FROM_HOOK=1' >> \"$CLAUDE_ENV_FILE\""}]}]
    }}));
    for id in hostile_session_ids() {
        let shown = format!("{:?}", &id[..id.len().min(40)]);
        let mut input = bash_input("rm -rf /");
        input["session_id"] = json!(id);
        let out = env.dispatch("PreToolUse", input);
        assert_eq!(out["decision"], "deny", "{shown}: {out}");
        assert_eq!(
            hook_fields(&out, "id", "status"),
            ["exec:ok", "guard:blocked"],
            "{shown}: {out}"
        );
        // Hooks get the id without its NULs, and at most its first 4096 bytes (a longer
        // one once made every command hook fail to start with E2BIG).
        let mut expected = id.replace('\0', "");
        expected.truncate(4096);
        assert_eq!(
            std::fs::read_to_string(&args_file).unwrap(),
            expected,
            "{shown}: the hook got the id without its NULs"
        );
        if id.len() > 4096 {
            assert!(out["notices"].to_string().contains("4096 bytes"), "{out}");
        }
        if id.contains('\0') {
            assert!(out["notices"].to_string().contains("NUL"), "{out}");
        }

        // The Stop cap holds for every id: the third block in a row is overridden.
        let stop = || {
            let run = env.run_with(
                env.command()
                    .args(["dispatch", "Stop"])
                    .env("HOOKHOST_STOP_BLOCK_CAP", "2"),
                &json!({"session_id": id, "stop_hook_active": true}).to_string(),
            );
            assert_eq!(run.code, 0, "{shown}: {}", run.stderr);
            run.json()
        };
        assert_eq!(stop()["decision"], "block", "{shown}");
        assert_eq!(stop()["decision"], "block", "{shown}");
        let third = stop();
        assert_eq!(
            third["decision"], "none",
            "{shown}: the cap did not hold: {third}"
        );

        // The session's env file: named by a digest, private.
        let out = env.dispatch(
            "SessionStart",
            json!({"session_id": id, "source": "startup"}),
        );
        assert_eq!(out["hooks"][0]["status"], "ok", "{shown}: {out}");
        let dir = env
            .data
            .join("sessions")
            .join(hookhost::session::session_key(&id));
        let file = dir.join("env");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "export FROM_HOOK=1\n",
            "{shown}"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&file)), (0o700, 0o600), "{shown}");
    }
    let names: Vec<String> = std::fs::read_dir(env.data.join("sessions"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| n.len() == 64),
        "session dirs are digests: {names:?}"
    );
}

/// 32 Stops of one session at once, each blocking: with the cap at 8, exactly 3 are
/// overridden and the count ends at 5 (32 = 3 × 9 + 5), in-process and through the
/// dispatch daemon.
#[test]
fn concurrent_stops_of_one_session_lose_no_block() {
    for daemon in [false, true] {
        let env = TestEnv::new();
        env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "echo 'not done' >&2; exit 2"}
        ]}]}}));
        let input = json!({"session_id": "busy", "stop_hook_active": true}).to_string();
        let children: Vec<_> = (0..32)
            .map(|_| {
                let mut cmd = env.command();
                if daemon {
                    cmd.env("HOOKHOST_DISPATCH_DAEMON", "auto")
                        .env("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS", "5");
                }
                let mut child = cmd
                    .args(["dispatch", "Stop"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                use std::io::Write;
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
                child
            })
            .collect();
        let mut overridden = 0;
        for child in children {
            let output = child.wait_with_output().unwrap();
            assert!(output.status.success(), "{output:?}");
            let out: Value = serde_json::from_slice(&output.stdout).unwrap();
            match out["decision"].as_str().unwrap() {
                "block" => {}
                "none" => {
                    assert!(out["notices"].to_string().contains("overridden"), "{out}");
                    overridden += 1;
                }
                other => panic!("decision {other}: {out}"),
            }
        }
        assert_eq!(overridden, 3, "daemon: {daemon}: lost updates");
        // The count is at 5: three more blocks, then the cap overrides.
        let next: Vec<String> = (0..4)
            .map(|_| {
                let run = env.run_with(env.command().args(["dispatch", "Stop"]), &input);
                run.json()["decision"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(
            next,
            ["block", "block", "block", "none"],
            "daemon: {daemon}"
        );
        // Stop the dispatch daemons this test started.
        for socket in std::fs::read_dir(env.data.join("daemons"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "sock"))
        {
            let _ = std::fs::remove_file(socket.path());
        }
    }
}

/// A hook that writes a gigabyte and exits 1, and hooks that answer with megabyte
/// texts: the outcome carries each text at most at its cap, with a marker.
#[test]
fn gigabytes_from_hooks_make_a_small_outcome() {
    let env = TestEnv::new();
    let huge = "h".repeat(200_000); // four of them still fit the 1 MiB capture
    let answer = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": huge,
        "additionalContext": huge}, "systemMessage": huge, "continue": false, "stopReason": huge});
    let answer_file = env.write("answer.json", &answer.to_string());
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([
            {"type": "command", "id": "flood", "command": "head -c 1073741824 /dev/zero | tr '\\0' x >&2; exit 1"},
            {"type": "command", "id": "texts", "command": format!("cat '{}'", answer_file.display())}
        ]),
    ));
    let run = env.run(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.len() < 120_000,
        "the outcome is {} bytes",
        run.stdout.len()
    );
    let out = run.json();
    let texts = [
        &out["hooks"][0]["message"],
        &out["hooks"][0]["diagnostics"],
        &out["notices"][0]["message"],
        &out["hooks"][1]["message"],
        &out["reason"],
        &out["stopReason"],
        &out["systemMessages"][0],
        &out["additionalContext"][0],
    ];
    for (n, text) in texts.into_iter().enumerate() {
        let text = text
            .as_str()
            .unwrap_or_else(|| panic!("missing text {n} in {out}"));
        assert!(
            text.chars().count() <= 10_000,
            "{n}: {} characters",
            text.len()
        );
        assert!(
            text.ends_with("characters truncated]"),
            "{n}: no marker: …{}",
            &text[text.len().saturating_sub(60)..]
        );
    }
    // The audit line is bounded too.
    let line = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    assert!(
        line.len() < 40_000,
        "the audit line is {} bytes",
        line.len()
    );
}

/// The audit log on a file system that fills up: failed lines are notices of their
/// outcome, and the log never holds half a line that the next line is glued to.
#[test]
fn the_audit_log_survives_a_full_disk() {
    if !is_root() {
        eprintln!(
            "SKIPPED: the_audit_log_survives_a_full_disk: needs root for a private tmpfs mount"
        );
        return;
    }
    let env = TestEnv::new();
    let fs = env.home.join("small-fs");
    let out = env.home.join("outcomes");
    std::fs::create_dir_all(&fs).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "command": "true"}]),
    ));
    let mut input = bash_input("ls");
    for n in 0..3 {
        input["tool_input"][format!("pad{n}")] = json!("p".repeat(1900));
    }
    env.write("input.json", &input.to_string());
    // In a private mount namespace: a 64 KiB tmpfs, 40 KiB of it taken by a filler;
    // 12 dispatches (about 6 KiB of log each) fill it, then the filler goes and 4 more
    // dispatches have room again.
    let script = r#"
        set -e
        mount -t tmpfs -o size=64k tmpfs "$FS"
        head -c 40960 /dev/zero > "$FS/filler"
        for i in $(seq 1 12); do "$BIN" dispatch PreToolUse < input.json > "$OUT/$i.json"; done
        rm "$FS/filler"
        for i in $(seq 13 16); do "$BIN" dispatch PreToolUse < input.json > "$OUT/$i.json"; done
        cp "$FS/audit.jsonl" "$OUT/audit.jsonl"
    "#;
    let status = command_like_hookhost(&env, "unshare")
        .args(["-m", "sh", "-c", script])
        .env("FS", &fs)
        .env("OUT", &out)
        .env("BIN", env!("CARGO_BIN_EXE_hookhost"))
        .env("HOOKHOST_AUDIT_LOG", fs.join("audit.jsonl"))
        .status()
        .unwrap();
    assert!(status.success());
    let mut failed = Vec::new();
    for i in 1..=16 {
        let outcome: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("{i}.json"))).unwrap())
                .unwrap();
        assert_eq!(outcome["hooks"][0]["status"], "ok");
        if outcome["notices"]
            .to_string()
            .contains("cannot write the audit log")
        {
            failed.push(i);
        }
    }
    assert!(!failed.is_empty(), "the disk never filled");
    assert!(
        failed.iter().all(|&i| i <= 12),
        "room again, yet failed: {failed:?}"
    );
    let log = std::fs::read_to_string(out.join("audit.jsonl")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    for line in &lines {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("a torn line ({e}): {}…", &line[..line.len().min(80)]));
    }
    assert!(log.ends_with('\n'));
    let entries = lines.iter().filter(|l| !l.contains("\"kind\":")).count();
    assert_eq!(entries, 16 - failed.len(), "one line per recorded dispatch");
}

/// Many command hooks on one event under a low fd limit: every one runs (the dispatcher
/// bounds how many run at once by the limit).
#[test]
fn many_hooks_under_a_low_fd_limit_all_run() {
    let env = TestEnv::new();
    let count = 2000;
    let handlers: Vec<Value> = (0..count)
        .map(|n| json!({"type": "command", "command": format!(": {n}")}))
        .collect();
    env.project_hooks(hooks("PreToolUse", "*", Value::Array(handlers)));
    let mut cmd = command_like_hookhost(&env, "sh");
    cmd.args([
        "-c",
        "ulimit -n 256 && exec \"$0\" dispatch PreToolUse",
        env!("CARGO_BIN_EXE_hookhost"),
    ]);
    let run: Run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    let statuses = hook_fields(&out, "type", "status");
    assert_eq!(statuses.len(), count);
    let failed: Vec<&Value> = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["status"] != "ok")
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {count} hooks did not run, e.g. {}",
        failed.len(),
        failed[0]
    );
}

/// An environment that is not UTF-8 (names and values) neither crashes the dispatch nor
/// disarms its hooks, and reaches command hooks byte for byte unless it is scrubbed.
#[test]
fn an_environment_that_is_not_utf8_reaches_hooks_unchanged() {
    let env = TestEnv::new();
    let dump = env.project.join("env-dump");
    env.managed(hooks(
        "PreToolUse",
        "*",
        json!([
            {"type": "command", "id": "guard", "command": "echo 'denied by policy' >&2; exit 2"},
            // The environment the hook's process was started with (a shell may drop
            // names it cannot hold from its own `env`).
            {"type": "command", "id": "dump", "command": format!("cat /proc/$$/environ > '{}'", dump.display())}
        ]),
    ));
    let command = || {
        let mut cmd = env.command();
        cmd.env("ODD_VALUE", OsStr::from_bytes(b"caf\xe9\xff"))
            .env(OsStr::from_bytes(b"ODD\xffNAME"), "plain")
            .env(OsStr::from_bytes(b"X\xffSECRET"), "hidden")
            .env("EMPTY_VALUE", "");
        cmd
    };
    for format in ["outcome", "claude"] {
        let mut input = bash_input("rm -rf /");
        input["hook_event_name"] = json!("PreToolUse");
        let run = env.run_with(
            command().args(["dispatch", "PreToolUse", "--format", format]),
            &input.to_string(),
        );
        match format {
            "outcome" => {
                assert_eq!(run.code, 0, "{}", run.stderr);
                assert_eq!(run.json()["decision"], "deny", "{}", run.stdout);
            }
            _ => assert_eq!(run.code, 2, "blocked: {} {}", run.stdout, run.stderr),
        }
        let mut seen = b"\0".to_vec();
        seen.extend(std::fs::read(&dump).unwrap());
        let has = |needle: &[u8]| seen.windows(needle.len()).any(|w| w == needle);
        assert!(has(b"\0ODD_VALUE=caf\xe9\xff\0"), "the value was changed");
        assert!(has(b"\0ODD\xffNAME=plain\0"), "the name was changed");
        assert!(has(b"\0EMPTY_VALUE=\0"));
        assert!(!has(b"hidden"), "a credential reached the hook");
        std::fs::remove_file(&dump).unwrap();
    }
}

/// A project directory whose name is not UTF-8: hooks get it byte for byte (environment
/// and `${CLAUDE_PROJECT_DIR}`), and the async runner works in that same directory.
#[test]
fn a_project_path_that_is_not_utf8_reaches_hooks_and_the_runner_unchanged() {
    let env = TestEnv::new();
    let project = env.project.join(OsStr::from_bytes(b"odd-\xff\xfe-name"));
    std::fs::create_dir_all(project.join(".hookhost")).unwrap();
    let config = json!({"hooks": {"PreToolUse": [{"hooks": [
        {"type": "command", "id": "args", "command": "/bin/sh",
         "args": ["-c", "printf '%s' \"$1\" > arg; printf '%s' \"$CLAUDE_PROJECT_DIR\" > env",
                  "sh", "${CLAUDE_PROJECT_DIR}"]},
        {"type": "command", "id": "bg", "async": true, "command": "touch async-ran"}
    ]}]}});
    std::fs::write(project.join(".hookhost/hooks.json"), config.to_string()).unwrap();
    let run = env.run_with(
        env.command()
            .args(["dispatch", "PreToolUse", "--project"])
            .arg(&project),
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(
        hook_fields(&out, "id", "status"),
        ["args:ok", "bg:async"],
        "{out}"
    );
    let bytes = project.as_os_str().as_bytes();
    assert_eq!(std::fs::read(project.join("arg")).unwrap(), bytes);
    assert_eq!(std::fs::read(project.join("env")).unwrap(), bytes);
    crate::support::wait_until("the async hook in the odd project", || {
        project.join("async-ran").exists()
    });
}

/// An HTTP hook's server that sends far more than the 1 MiB cap and then stalls with the
/// connection open: the answer is refused as too long as soon as the cap is passed, not
/// read on until the hook's (long) timeout. A valid decision hidden at the start of the
/// over-long body decides nothing.
#[test]
fn an_http_answer_over_the_cap_is_refused_without_waiting_for_its_end() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let mut request = [0u8; 4096];
        let _ = stream.read(&mut request);
        let mut body = br#"{"decision": "block", "reason": "x"}"#.to_vec();
        body.resize(3 << 20, b' ');
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n");
        let _ = stream.write_all(&body);
        // Stall: keep the connection open, long past the hook's timeout.
        std::thread::sleep(std::time::Duration::from_secs(300));
    });
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "http", "id": "big", "url": url, "timeout": 120}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(hook_fields(&out, "id", "status"), ["big:failed"], "{out}");
    assert_eq!(out["decision"], "none", "{out}");
    let notices = out["notices"].to_string();
    assert!(notices.contains("more than 1048576 bytes"), "{notices}");
}
