//! `--format claude`: Claude Code's output JSON, exit 2 with the reason on stderr when
//! blocked.

use serde_json::json;

use crate::support::{TestEnv, bash_input, hooks};

#[test]
fn deny_exits_2_with_the_reason_on_stderr() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo 'no rm' >&2; exit 2"}]),
    ));
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("rm -rf /").to_string(),
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, "no rm\n");
    assert_eq!(
        run.json(),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm"}})
    );
}

#[test]
fn allow_with_rewrite_exits_0() {
    let env = TestEnv::new();
    let out = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "ls -la"}, "additionalContext": "ctx"}});
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": format!("echo '{out}'")}]),
    ));
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json(), out);
}

#[test]
fn the_event_may_come_from_the_input() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": r#"echo '{"decision": "block", "reason": "tests first"}'"#}]}]}}));
    let run = env.run(
        &["dispatch", "--format", "claude"],
        &json!({"session_id": "s", "hook_event_name": "Stop"}).to_string(),
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, "tests first\n");
    assert_eq!(
        run.json(),
        json!({"decision": "block", "reason": "tests first"})
    );
}

#[test]
fn nothing_to_say_prints_nothing() {
    let env = TestEnv::new();
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "");
}

/// Issue 15.9: every host error exits 1 under `--format claude` with one line on stderr:
/// never 2 (which would block the agent) and never 101 (a panic is no protocol answer).
/// An input hookhost refuses to read is not such an error: it cannot guard, and blocks
/// (`second_round.rs`, `cli/dispatch.rs` `unreadable`), below.
#[test]
fn host_errors_exit_1_with_one_line() {
    let env = TestEnv::new();
    let cases: [(&[&str], &[u8]); 2] = [
        (&["dispatch", "--format", "claude", "NoSuchEvent"], b"{}"),
        (
            &["dispatch", "--format", "claude"],
            b"{\"session_id\": \"s\"}",
        ),
    ];
    for (args, stdin) in cases {
        let mut child = env
            .command()
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("hookhost: error: ") && !stderr.contains("hookhost: hookhost:"),
            "{stderr}"
        );
    }
    // Input that is not JSON: no hook can see it, so it is no answer: blocked (exit 2,
    // the reason on stderr), whether the event is named in what can be read or not.
    let unreadable: [&[u8]; 3] = [
        b"{not json",
        // Cut short (bytes that are not UTF-8 alone are repaired, not refused).
        b"{\"hook_event_name\": \"PreToolUse\", \"x\": \"\xff",
        b"{\"hook_event_name\": \"PermissionRequest\", \"tool_input\": {\"command\": \"rm -rf /",
    ];
    for stdin in unreadable {
        let run = crate::support::run_bytes(
            env.command().args(["dispatch", "--format", "claude"]),
            stdin,
        );
        let shown = String::from_utf8_lossy(stdin);
        if shown.contains("PermissionRequest") {
            // Claude Code denies a permission through JSON.
            let out: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
            let decision = &out["hookSpecificOutput"]["decision"];
            assert_eq!(decision["behavior"], "deny", "{shown}: {out}");
            assert!(decision["message"].to_string().contains("not valid JSON"));
            continue;
        }
        assert_eq!(run.code, 2, "{shown}: {}", run.stderr);
        assert!(
            run.stderr.contains("not valid JSON"),
            "{shown}: {}",
            run.stderr
        );
    }
}

/// A panic anywhere in a dispatch becomes exit 1 with one line, not Rust's exit 101 and
/// its multi-line report. A non-UTF-8 environment variable made the command runner
/// panic (its cause is fixed elsewhere; this test holds either way: the hook runs, or the
/// host fails without blocking).
#[test]
fn a_panic_is_a_host_error_not_a_crash() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo 'no rm' >&2; exit 2"}]),
    ));
    let mut cmd = env.command();
    cmd.args(["dispatch", "--format", "claude", "PreToolUse"])
        .env_remove("RUST_BACKTRACE")
        .env(
            std::ffi::OsStr::from_bytes(b"HOOKHOST_TEST_BAD"),
            std::ffi::OsStr::from_bytes(b"\xff\xfe"),
        );
    let run = env.run_with(&mut cmd, &bash_input("rm -rf /").to_string());
    match run.code {
        2 => assert_eq!(run.stderr, "no rm\n", "the hook ran and blocked"),
        1 => {
            assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
            assert!(
                run.stderr.starts_with("hookhost: error: internal error"),
                "{}",
                run.stderr
            );
            assert!(!run.stderr.contains("RUST_BACKTRACE"), "{}", run.stderr);
        }
        code => panic!("exit {code}: {}", run.stderr),
    }
}

/// The host's own notices read `hookhost: MESSAGE`, not `hookhost: hookhost: MESSAGE`.
#[test]
fn host_notices_are_not_prefixed_twice() {
    let env = TestEnv::new();
    env.write(".hookhost/hooks.json", "{broken");
    let run = env.run(
        &["dispatch", "PreToolUse", "--format", "claude"],
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.starts_with("hookhost: config error"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("hookhost: hookhost:"),
        "{}",
        run.stderr
    );
}
