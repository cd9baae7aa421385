//! A second, independent pass over the dispatcher, the command runner, the session
//! store, the audit log and the CLI, with inputs their own tests did not use. Each test
//! is the attack that once got through (a hook disarmed, a repository's program run, a
//! secret logged in clear, a forged job run, a planted project taken), kept so that it
//! cannot get through again.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hook_fields, hooks};

/// A deny hook on every Bash command that mentions `rm -rf`, from managed policy.
fn guard_rm(env: &TestEnv) {
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard",
                "command": "grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; }; exit 0"}]),
    ));
}

/// The drop-in's answer to raw stdin bytes.
fn claude_answer(env: &TestEnv, stdin: &[u8]) -> crate::support::Run {
    claude_answer_with(env.command(), stdin)
}

/// The drop-in's answer to raw stdin bytes, run by `cmd`.
fn claude_answer_with(mut cmd: std::process::Command, stdin: &[u8]) -> crate::support::Run {
    crate::support::run_bytes(cmd.args(["dispatch", "--format", "claude"]), stdin)
}

/// Inputs that JSON.stringify (Claude Code is JavaScript) writes, or that a truncation in
/// the middle of a surrogate pair produces, but that a strict parser refuses: a lone
/// surrogate escape, raw bytes that are not UTF-8, a value nested deeper than the
/// parser's recursion limit. Each once made the drop-in exit 1 — a non-blocking error,
/// so the tool ran and no hook saw it. Every one must still reach the hooks.
#[test]
fn inputs_a_strict_parser_refuses_still_reach_the_hooks() {
    let env = TestEnv::new();
    guard_rm(&env);
    for (what, stdin) in strict_parser_refusals() {
        // Sanity: the case is one that a strict parser refuses.
        assert!(
            serde_json::from_slice::<Value>(&stdin).is_err(),
            "{what}: not a hostile case"
        );
        let run = claude_answer(&env, &stdin);
        assert_blocked(what, &run);
    }
    // What the hooks saw: U+FFFD for what cannot be text, a marker for what is too deep,
    // and the outcome says so.
    let seen = env.project.join("seen");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "tee", "command": format!("cat > '{}'", seen.display())}]),
    ));
    let stdin = format!(
        r#"{{"session_id":"s1","tool_name":"Bash","tool_input":{{"command":"a\udc80b","x":{}{}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    let run = env.run(&["dispatch", "PreToolUse"], &stdin);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    let input: Value = serde_json::from_slice(&std::fs::read(&seen).unwrap()).unwrap();
    assert_eq!(input["tool_input"]["command"], "a\u{fffd}b");
    let mut depth = 0;
    let mut value = &input["tool_input"]["x"];
    while let Some(inner) = value.get(0) {
        depth += 1;
        value = inner;
    }
    assert!(
        value.as_str().is_some_and(|s| s.contains("nested deeper")),
        "the deep part is a marker after {depth} levels: {value}"
    );
    let notices = out["notices"].to_string();
    assert!(notices.contains("U+FFFD"), "{notices}");
    assert!(notices.contains("nested deeper"), "{notices}");
}

/// A `PATH` with no absolute entry at all (`.:bin`, empty) once reached hooks as
/// `PATH=` — which a shell searches as the current directory, the repository, so a
/// hook's `ls` ran the repository's `./ls`. `PATH` unset made `bash` hooks search its
/// built-in default, which ends with `.`. The hook's `PATH` must always be absolute.
#[test]
fn a_path_without_absolute_entries_never_searches_the_repository() {
    let env = TestEnv::new();
    let marker = env.project.join("pwned");
    for program in ["ls", "bin/ls", "hookhost-missing-tool"] {
        let file = env.write(
            program,
            // A shell builtin: the planted program may run with no usable PATH.
            &format!("#!/bin/sh\n: > '{}'\n", marker.display()),
        );
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path_file = env.project.join("hook-path");
    env.user_hooks(hooks(
        "PreToolUse",
        "*",
        json!([
            {"type": "command", "id": "sh", "command": format!("printf '%s' \"$PATH\" > '{}'; ls > /dev/null", path_file.display())},
            {"type": "command", "id": "bash", "shell": "bash", "command": "ls > /dev/null; hookhost-missing-tool; true"}
        ]),
    ));
    for hostile in [Some(".:bin"), Some(""), Some("::"), None] {
        let mut cmd = env.command();
        cmd.args(["dispatch", "PreToolUse"]);
        match hostile {
            Some(path) => cmd.env("PATH", path),
            None => cmd.env_remove("PATH"),
        };
        let run = env.run_with(&mut cmd, &bash_input("x").to_string());
        assert_eq!(run.code, 0, "{hostile:?}: {}", run.stderr);
        let out = run.json();
        assert!(
            !marker.exists(),
            "{hostile:?}: the repository's program ran: {out}"
        );
        let path = std::fs::read_to_string(&path_file).unwrap();
        assert!(
            !path.is_empty() && path.split(':').all(|entry| entry.starts_with('/')),
            "{hostile:?}: the hook got PATH={path:?}"
        );
        assert_eq!(
            hook_fields(&out, "id", "status"),
            ["sh:ok", "bash:ok"],
            "{hostile:?}: {out}"
        );
    }
}

/// A session id over the kernel's limit for one argument or variable (128 KiB) once made
/// every command hook fail to start (`E2BIG`): a non-blocking error, so a deny hook let
/// everything through. The id reaches hooks cut, with a notice.
#[test]
fn a_huge_session_id_never_disarms_command_hooks() {
    let env = TestEnv::new();
    guard_rm(&env);
    let args_file = env.project.join("arg");
    env.user_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "exec", "command": "/bin/sh",
                "args": ["-c", format!("printf '%s' \"$1\" > '{}'", args_file.display()), "sh", "${CLAUDE_CODE_SESSION_ID}"]}]),
    ));
    for id in ["s".repeat(200_000), "é".repeat(70_000)] {
        let mut input = bash_input("rm -rf /");
        input["session_id"] = json!(id);
        let out = env.dispatch("PreToolUse", input);
        assert_eq!(out["decision"], "deny", "{out}");
        assert_eq!(
            hook_fields(&out, "id", "status"),
            ["guard:blocked", "exec:ok"],
            "{out}"
        );
        let got = std::fs::read_to_string(&args_file).unwrap();
        assert!(
            !got.is_empty() && got.len() <= 4096 && id.starts_with(&got),
            "the hook got {} bytes of the id",
            got.len()
        );
        assert!(
            out["notices"].to_string().contains("session_id"),
            "{}",
            out["notices"]
        );
    }
}

/// Inputs a strict JSON parser refuses, each with a `rm -rf` command for the guard.
fn strict_parser_refusals() -> Vec<(&'static str, Vec<u8>)> {
    let prefix = r#"{"session_id":"s1","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf / "#;
    let deep = format!(
        "{prefix}\",\"x\":{}1{}}}}}",
        "[".repeat(3000),
        "]".repeat(3000)
    );
    vec![
        (
            "a lone low surrogate",
            format!(r#"{prefix}\udc80"}}}}"#).into_bytes(),
        ),
        (
            "a lone high surrogate",
            format!(r#"{prefix}\ud83d"}}}}"#).into_bytes(),
        ),
        (
            "a high surrogate then a letter",
            format!(r#"{prefix}\ud83dx"}}}}"#).into_bytes(),
        ),
        (
            "a reversed pair",
            format!(r#"{prefix}\ude00\ud83d"}}}}"#).into_bytes(),
        ),
        (
            "a surrogate in a key",
            format!(r#"{prefix}","k\udfff":1}}}}"#).into_bytes(),
        ),
        (
            "raw invalid UTF-8",
            [prefix.as_bytes(), b"\xff\xfe\xc0\x80\"}}"].concat(),
        ),
        ("nesting 3000 levels deep", deep.into_bytes()),
    ]
}

/// The guard blocked: exit 2, its reason on stderr, a deny in the answer.
fn assert_blocked(what: &str, run: &crate::support::Run) {
    assert_eq!(
        run.code, 2,
        "{what}: the guard did not block: {} {}",
        run.stdout, run.stderr
    );
    assert!(run.stderr.contains("no rm -rf"), "{what}: {}", run.stderr);
    let answer: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecision"], "deny",
        "{what}"
    );
}

/// The same inputs through the dispatch daemon (on by default): the client forwards the
/// bytes as they came and the daemon repairs them as the one-shot process does, so no
/// hostile input is refused on one path and read on the other.
#[test]
fn the_dispatch_daemon_reads_what_the_one_shot_process_reads() {
    let env = TestEnv::new();
    guard_rm(&env);
    for (what, stdin) in strict_parser_refusals() {
        let run = claude_answer_with(crate::dispatch_daemon::with_daemon(&env, 20), &stdin);
        assert_blocked(what, &run);
    }
    // A session id of a megabyte through the daemon: the guard still runs and blocks.
    let stdin = format!(
        r#"{{"session_id":"{}","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{{"command":"rm -rf /"}}}}"#,
        "s".repeat(1 << 20)
    );
    let run = claude_answer_with(
        crate::dispatch_daemon::with_daemon(&env, 20),
        stdin.as_bytes(),
    );
    assert_blocked("a session id of 1 MiB", &run);
    assert!(
        !crate::dispatch_daemon::sockets(&env).is_empty(),
        "no daemon answered"
    );
}

/// Peak resident memory, in KiB, of `hookhost dispatch PreToolUse` reading `stdin` (a
/// file), run by `cmd`'s environment under `/usr/bin/time`; and its exit code.
fn peak_memory_kib(cmd: std::process::Command, stdin: &std::path::Path) -> (u64, i32) {
    let mut timed = std::process::Command::new("/usr/bin/time");
    for (name, value) in cmd.get_envs() {
        match value {
            Some(value) => timed.env(name, value),
            None => timed.env_remove(name),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    let out = timed
        .args(["-f", "%M"])
        .arg(cmd.get_program())
        .args(["dispatch", "PreToolUse"])
        .stdin(std::fs::File::open(stdin).unwrap())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib = stderr.lines().last().unwrap().trim().parse().unwrap();
    (kib, out.status.code().unwrap_or(-1))
}

/// An input of 300 MiB (a huge tool output): the one-shot process reads at most one byte
/// more than the 64 MiB it accepts and fails with exit 1; so does the dispatch daemon's
/// client (it once read all of stdin before it looked at the size, so an agent's input of
/// gigabytes was held whole by every `hookhost dispatch` process).
#[test]
fn the_dispatch_daemons_client_holds_at_most_the_input_cap() {
    if !std::path::Path::new("/usr/bin/time").exists() {
        eprintln!(
            "SKIPPED: the_dispatch_daemons_client_holds_at_most_the_input_cap: no /usr/bin/time"
        );
        return;
    }
    let env = TestEnv::new();
    guard_rm(&env);
    // Sparse: 300 MiB of NULs that take no disk.
    let big = env.project.join("big-input");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let (kib, code) = peak_memory_kib(env.command(), &big);
    assert_eq!(code, 1, "one-shot: a host error");
    assert!(kib < 200 << 10, "one-shot: {kib} KiB");
    // A daemon that listens, then the same input through its client.
    crate::support::wait_until("the dispatch daemon listens", || {
        let _ = env.run_with(
            crate::dispatch_daemon::with_daemon(&env, 30).args(["dispatch", "PreToolUse"]),
            &bash_input("ls").to_string(),
        );
        !crate::dispatch_daemon::sockets(&env).is_empty()
    });
    let (kib, code) = peak_memory_kib(crate::dispatch_daemon::with_daemon(&env, 30), &big);
    assert_eq!(code, 1, "through the daemon: a host error");
    assert!(kib < 200 << 10, "the daemon's client held {kib} KiB");
}
