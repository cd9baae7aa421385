//! The audit log: one JSON line per dispatch, failed hooks included, secrets redacted,
//! concurrent processes never tearing or losing lines; `hookhost audit`.

use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hooks};

/// The log's entries (every line whole JSON), without the chain's own lines (genesis,
/// checkpoints: `kind`).
fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("torn line ({e}): {l}"))
        })
        .filter(|entry| entry.get("kind").is_none())
        .collect()
}

#[test]
fn every_dispatch_appends_one_redacted_line() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "command", "id": "ok", "command": "true"},
            {"type": "command", "id": "broken", "command": "exit 7"},
            {"type": "command", "id": "deny", "command": "echo 'no deploys' >&2; exit 2"}
        ]),
    ));
    let mut input = bash_input(
        "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz012345 ./deploy.sh --password hunter2",
    );
    input["tool_input"]["api_key"] = json!("sk-live-abcdef");
    env.dispatch("PreToolUse", input);
    let mut other = bash_input("ls");
    other["session_id"] = json!("s2");
    env.dispatch("PreToolUse", other);
    env.dispatch("Stop", json!({"session_id": "s2"}));

    let entries = lines(&env.data.join("audit.jsonl"));
    assert_eq!(entries.len(), 3);
    let first = &entries[0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "seq",
            "prev",
            "time",
            "host",
            "user",
            "hookhostVersion",
            "session",
            "event",
            "project",
            "toolName",
            "toolInput",
            "decision",
            "reason",
            "continue",
            "hooks",
            "receipt"
        ],
        "the line's fields, in order (an async run's line adds `async` and has no receipt)"
    );
    assert_eq!(first["hookhostVersion"], env!("CARGO_PKG_VERSION"));
    assert!(!first["user"].as_str().unwrap().is_empty());
    assert!(
        first.get("managedPolicy").is_none(),
        "no managed policy here"
    );
    assert_eq!(first["project"], env.project.display().to_string());
    assert_eq!(first["continue"], true);
    assert_eq!(first["hooks"][1]["exitCode"], 7);
    assert!(first["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(first["session"], "s1");
    assert_eq!(first["event"], "PreToolUse");
    assert_eq!(first["toolName"], "Bash");
    assert_eq!(first["decision"], "deny");
    assert!(first["reason"].as_str().unwrap().contains("no deploys"));
    let text = first.to_string();
    for secret in ["ghp_abcdef", "hunter2", "sk-live-abcdef"] {
        assert!(!text.contains(secret), "{secret} in the audit log: {text}");
    }
    assert_eq!(first["toolInput"]["api_key"], "[REDACTED]");
    assert!(
        first["toolInput"]["command"]
            .as_str()
            .unwrap()
            .contains("./deploy.sh")
    );
    let hooks: Vec<(String, String, String, String)> = first["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert!(h["durationMs"].is_number(), "{h}");
            assert!(h.get("fuel").is_some() && h.get("memoryBytes").is_some());
            let s = |k: &str| h[k].as_str().unwrap().to_string();
            (s("id"), s("source"), s("type"), s("status"))
        })
        .collect();
    let want =
        |id: &str, status: &str| (id.into(), "project".into(), "command".into(), status.into());
    assert_eq!(
        hooks,
        [
            want("ok", "ok"),
            want("broken", "failed"),
            want("deny", "blocked")
        ]
    );
    assert_eq!(entries[2]["event"], "Stop");
    assert_eq!(entries[2]["hooks"], json!([]));

    // `hookhost audit`
    let run = env.run(&["audit", "--json", "--session", "s2"], "");
    let got: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, entries[1..]);
    let run = env.run(&["audit", "--json", "--tail", "1"], "");
    assert_eq!(run.stdout.lines().count(), 1);
    assert!(run.stdout.contains("\"Stop\""));
    let run = env.run(&["audit", "--tail", "3"], "");
    let table: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(table.len(), 3);
    assert!(
        table[0].contains("s1 PreToolUse Bash deny")
            && table[0].contains("broken(project:command)=failed"),
        "{}",
        table[0]
    );
}

#[test]
fn the_log_goes_where_hookhost_audit_log_says() {
    let env = TestEnv::new();
    let log = env.home.join("elsewhere/audit.log");
    let run = env.run_with(
        env.command()
            .args(["dispatch", "Stop"])
            .env("HOOKHOST_AUDIT_LOG", &log),
        "{}",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(lines(&log).len(), 1);
    assert!(!env.data.join("audit.jsonl").exists());
    let run = env.run_with(
        env.command()
            .args(["audit", "--json"])
            .env("HOOKHOST_AUDIT_LOG", &log),
        "",
    );
    assert_eq!(run.stdout.lines().count(), 1);
}

#[test]
fn an_unwritable_log_is_a_notice_not_a_failure() {
    let env = TestEnv::new();
    let run = env.run_with(
        env.command()
            .args(["dispatch", "Stop"])
            .env("HOOKHOST_AUDIT_LOG", &env.home), // a directory
        "{}",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert!(
        out["notices"]
            .to_string()
            .contains("cannot open the audit log"),
        "{out}"
    );
}

#[test]
fn concurrent_dispatches_never_tear_or_lose_lines() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "command": "true"}]),
    ));
    let processes = 16;
    // Inputs much larger than PIPE_BUF, so that a line takes several writes.
    let children: Vec<_> = (0..processes)
        .map(|n| {
            let mut input = bash_input(&format!("echo {n} {}", "z".repeat(100_000)));
            input["session_id"] = json!(format!("session-{n}"));
            input["tool_input"]["padding"] = json!("p".repeat(1500));
            let mut child = env
                .command()
                .args(["dispatch", "PreToolUse"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                use std::io::Write;
                stdin.write_all(input.to_string().as_bytes()).unwrap();
            });
            child
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let entries = lines(&env.data.join("audit.jsonl"));
    assert_eq!(entries.len(), processes);
    let mut sessions: Vec<String> = entries
        .iter()
        .map(|e| e["session"].as_str().unwrap().to_string())
        .collect();
    sessions.sort();
    sessions.dedup();
    assert_eq!(sessions.len(), processes);
}

/// Dispatches Stop with the audit log at `log`; returns the outcome.
fn dispatch_logging_to(env: &TestEnv, log: &std::path::Path) -> Value {
    let run = env.run_with(
        env.command()
            .args(["dispatch", "Stop"])
            .env("HOOKHOST_AUDIT_LOG", log),
        "{}",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

fn audit_notice(out: &Value) -> String {
    out["notices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["message"].as_str())
        .find(|m| m.starts_with("audit:"))
        .unwrap_or_else(|| panic!("no audit notice: {out}"))
        .to_string()
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn an_audit_log_that_is_a_symlink_is_refused_not_followed() {
    let env = TestEnv::new();
    let dir = env.home.join("logs");
    std::fs::create_dir_all(&dir).unwrap();
    let target = env.home.join("victim");
    std::fs::write(&target, "").unwrap();
    let log = dir.join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &log).unwrap();
    let notice = audit_notice(&dispatch_logging_to(&env, &log));
    assert!(
        notice.contains("refusing the audit log") && notice.contains("symlink"),
        "{notice}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "", "followed");
}

#[test]
fn an_audit_log_others_can_write_or_replace_is_refused() {
    let env = TestEnv::new();
    // A log file others may write.
    let dir = env.home.join("logs");
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("audit.jsonl");
    std::fs::write(&log, "").unwrap();
    set_mode(&log, 0o666);
    let notice = audit_notice(&dispatch_logging_to(&env, &log));
    assert!(
        notice.contains("writable by other users (mode 666)"),
        "{notice}"
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");

    // A directory others may write, where they could replace the log.
    let shared = env.home.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    set_mode(&shared, 0o777);
    let log = shared.join("audit.jsonl");
    let notice = audit_notice(&dispatch_logging_to(&env, &log));
    assert!(
        notice.contains("its directory is writable by other users"),
        "{notice}"
    );
    assert!(!log.exists());

    // With the sticky bit (as /tmp), others cannot replace a file of ours: accepted.
    set_mode(&shared, 0o1777);
    let out = dispatch_logging_to(&env, &log);
    assert!(!out["notices"].to_string().contains("audit"), "{out}");
    assert_eq!(lines(&log).len(), 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// Another local user prepares the log's path in a shared (sticky) directory before we
/// write to it: their file, or their symlink to a file of ours, is refused.
#[test]
fn another_users_audit_log_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: another_users_audit_log_is_refused: needs root to act as a second uid");
        return;
    }
    let env = TestEnv::new();
    let shared = env.home.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    // The second user must reach the shared directory.
    set_mode(env.home.parent().unwrap(), 0o755);
    set_mode(&env.home, 0o755);
    set_mode(&shared, 0o1777);
    let as_nobody = |script: &str| {
        let status = std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sh",
                "-c",
                script,
            ])
            .current_dir(&shared)
            .status()
            .unwrap();
        assert!(status.success(), "{script}");
    };
    // Their own file, even one only they can write.
    as_nobody("umask 022; : > theirs.jsonl");
    let notice = audit_notice(&dispatch_logging_to(&env, &shared.join("theirs.jsonl")));
    assert!(notice.contains("belongs to uid 65534"), "{notice}");

    // Their symlink to a file of ours.
    let ours = env.home.join("ours");
    std::fs::write(&ours, "").unwrap();
    as_nobody(&format!("ln -s '{}' link.jsonl", ours.display()));
    let notice = audit_notice(&dispatch_logging_to(&env, &shared.join("link.jsonl")));
    assert!(notice.contains("symlink"), "{notice}");
    assert_eq!(std::fs::read_to_string(&ours).unwrap(), "");
}

/// `hookhost audit` reads the log dispatch writes, by the same rules: a
/// `HOOKHOST_AUDIT_LOG` that dispatch refuses (it points into the repository, which could
/// plant a forged log there) is refused here too, and a managed `auditLog` is read.
#[test]
fn the_audit_command_reads_the_log_dispatch_writes() {
    let env = TestEnv::new();
    let forged = env.write(
        ".hookhost/audit.jsonl",
        &format!(
            "{}\n",
            json!({"session": "forged", "event": "PreToolUse", "decision": "allow", "hooks": []})
        ),
    );
    let mut input = bash_input("ls");
    input["session_id"] = json!("real");
    let with_forged = |args: &[&str], stdin: &str| {
        let mut cmd = env.command();
        cmd.env("HOOKHOST_AUDIT_LOG", &forged).args(args);
        env.run_with(&mut cmd, stdin)
    };
    let run = with_forged(&["dispatch", "PreToolUse"], &input.to_string());
    assert!(
        run.stdout.contains("HOOKHOST_AUDIT_LOG `"),
        "{}",
        run.stdout
    );
    let run = with_forged(&["audit", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sessions: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["session"].clone())
        .collect();
    assert_eq!(sessions, [json!("real")], "{}", run.stdout);

    let env = TestEnv::new();
    let managed_log = env.data.join("managed-audit").join("log.jsonl");
    env.managed(json!({"auditLog": managed_log}));
    env.dispatch("PreToolUse", input);
    assert_eq!(lines(&managed_log).len(), 1);
    let run = env.run(&["audit", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("\"real\""),
        "the managed log is read: {}",
        run.stdout
    );
}

/// Half a line left by a process killed mid-write, while `serve` holds the log open and
/// for a one-shot dispatch: each next line starts on a line of its own, and every line but
/// the torn ones parses.
#[test]
fn a_torn_line_is_never_glued_to_by_a_daemon_or_a_one_shot() {
    use std::io::Write;
    let env = TestEnv::new();
    let log = env.data.join("audit.jsonl");
    let daemon = crate::serve::Daemon::start(&env);
    let mut client = daemon.client();
    client.call("Stop", json!({"session_id": "before"})); // the daemon opens the log
    let torn = ["{\"session\":\"killed mid-wr", "{\"half"];
    let tear = |text: &str| {
        let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    };
    tear(torn[0]);
    client.call("Stop", json!({"session_id": "daemon"}));
    tear(torn[1]);
    env.dispatch("Stop", json!({"session_id": "one-shot"}));
    let text = std::fs::read_to_string(&log).unwrap();
    let mut sessions = Vec::new();
    let mut chain_lines = 0;
    for line in text.lines() {
        if torn.contains(&line) {
            continue;
        }
        let entry: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a line glued to a torn one ({e}): {line}"));
        if entry.get("kind").is_some() {
            chain_lines += 1; // the chain's genesis or a checkpoint
            continue;
        }
        sessions.push(entry["session"].as_str().unwrap().to_string());
    }
    assert_eq!(sessions, ["before", "daemon", "one-shot"], "{text}");
    assert_eq!(text.lines().count(), 5 + chain_lines, "{text}");
}

/// The log of a running `serve` swapped between dispatches for a symlink, a FIFO, a
/// directory and another file: each dispatch has its line or an `audit:` notice, and
/// nothing is written through the symlink.
#[test]
fn a_log_swapped_under_a_running_daemon_never_loses_a_line_silently() {
    let env = TestEnv::new();
    let log = env.data.join("audit.jsonl");
    let daemon = crate::serve::Daemon::start(&env);
    let mut client = daemon.client();
    let victim = env.home.join("victim");
    std::fs::write(&victim, "").unwrap();
    let swap = |make: &dyn Fn(&std::path::Path)| {
        let staged = env.data.join("staged");
        make(&staged);
        std::fs::rename(&staged, &log).unwrap_or_else(|_| {
            // A directory cannot replace a file by rename: remove the log first.
            std::fs::remove_file(&log).unwrap();
            std::fs::rename(&staged, &log).unwrap();
        });
    };
    let fifo = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    };
    let symlink = |p: &std::path::Path| std::os::unix::fs::symlink(&victim, p).unwrap();
    let directory = |p: &std::path::Path| std::fs::create_dir(p).unwrap();
    type Make<'a> = &'a dyn Fn(&std::path::Path);
    let cases: [(&str, Make); 3] = [
        ("symlink", &symlink),
        ("fifo", &fifo),
        ("directory", &directory),
    ];
    for (n, (what, make)) in cases.iter().enumerate() {
        // A regular log first, with this dispatch's line in it.
        let _ = std::fs::remove_dir(&log);
        let _ = std::fs::remove_file(&log);
        let session = format!("regular-{n}");
        let out = client.call("Stop", json!({"session_id": session}));
        assert!(!out.to_string().contains("audit:"), "{out}");
        assert!(std::fs::read_to_string(&log).unwrap().contains(&session));
        swap(*make);
        let out = client.call("Stop", json!({"session_id": format!("after-{what}")}));
        let notice = audit_notice(&out);
        assert!(notice.contains("audit log"), "{what}: {notice}");
    }
    // Another (regular, private) file swapped in gets the next line.
    let _ = std::fs::remove_dir(&log);
    swap(&|p: &std::path::Path| {
        std::fs::write(p, "").unwrap();
        set_mode(p, 0o600);
    });
    let out = client.call("Stop", json!({"session_id": "after-file"}));
    assert!(!out.to_string().contains("audit:"), "{out}");
    let entries = lines(&log);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["session"], "after-file");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "", "followed");
}

/// A SIEM collecting many machines' logs tells them apart: each line names the host, the
/// user, the hookhost version and the digest of the managed policy in force, which
/// changes with the policy's bytes.
#[test]
fn lines_name_the_machine_and_the_managed_policy() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "true"}]),
    ));
    env.managed(json!({"stopBlockCap": 3}));
    env.dispatch("PreToolUse", bash_input("ls"));
    env.dispatch("PreToolUse", bash_input("ls"));
    env.managed(json!({"stopBlockCap": 4}));
    env.dispatch("PreToolUse", bash_input("ls"));
    let entries = lines(&env.data.join("audit.jsonl"));
    let digest = |i: usize| entries[i]["managedPolicy"].as_str().unwrap().to_string();
    assert!(digest(0).starts_with("sha256:") && digest(0).len() == 7 + 64);
    assert_eq!(digest(0), digest(1), "the same policy, the same digest");
    assert_ne!(digest(1), digest(2), "a changed policy, another digest");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(entries[0]["host"], host.trim());
}
