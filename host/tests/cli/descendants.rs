//! Issue 24.11: a command hook's descendants do not outlive it. A child that leaves the
//! hook's process group (`setsid`), a double fork, a child that redirected its output
//! and went to the background: each is gone once the hook is answered, in the one-shot
//! CLI and in the dispatch daemon, and only the descendants of the hook that ended.

use std::process::Stdio;

use serde_json::json;

use crate::dispatch_daemon::{sockets, with_daemon};
use crate::support::{TestEnv, bash_input, hooks, process_running, wait_until};

/// A hook that leaves three descendants behind, each by another way, marked `{mark}1`
/// to `{mark}3` (`sleep` arguments), and answers at once.
fn leaver(mark: u32) -> String {
    format!(
        "setsid sh -c 'sleep {mark}1' >/dev/null 2>&1 & \
         (sh -c 'setsid sleep {mark}2 >/dev/null 2>&1 &' &); \
         sleep {mark}3 >/dev/null 2>&1 & echo '{{}}'"
    )
}

fn gone(mark: u32) -> bool {
    (1..=3).all(|i| !process_running(&format!("sleep {mark}{i}")))
}

#[test]
fn a_hooks_descendants_end_with_it_in_the_one_shot_cli() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": leaver(42420)}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    wait_until("the hook's descendants to be gone", || gone(42420));
}

#[test]
fn in_the_daemon_each_hook_takes_its_own_descendants_only() {
    let env = TestEnv::new();
    let gate = env.project.join("gate");
    // Two hooks at once: one answers at once, the other waits for the test's gate while
    // its own `setsid` child runs.
    let waiter = format!(
        "setsid sleep 424311 >/dev/null 2>&1 & while [ ! -e '{}' ]; do sleep 0.05; done; echo '{{}}'",
        gate.display()
    );
    let quick_done = env.project.join("quick-done");
    let quick = format!("{}; touch '{}'", leaver(42430), quick_done.display());
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "command", "command": quick},
            {"type": "command", "command": waiter}
        ]),
    ));
    std::fs::write(&gate, "").unwrap();
    let first = env.run_with(
        with_daemon(&env, 120).args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
    );
    assert_eq!(first.code, 0, "{}", first.stderr);
    wait_until("the dispatch daemon to listen", || {
        sockets(&env).first().is_some_and(|socket| {
            std::fs::read_to_string(socket.with_extension("log"))
                .is_ok_and(|log| log.contains(": serving until"))
        })
    });
    wait_until("the first call's descendants to be gone", || {
        gone(42430) && !process_running("sleep 424311")
    });
    std::fs::remove_file(&gate).unwrap();
    std::fs::remove_file(&quick_done).unwrap();

    let mut caller = with_daemon(&env, 120)
        .args(["dispatch", "PreToolUse"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = bash_input("ls").to_string();
    std::io::Write::write_all(&mut caller.stdin.take().unwrap(), input.as_bytes()).unwrap();
    // The quick hook is answered: its descendants go; the waiting hook's child stays.
    wait_until("the waiting hook's child to run", || {
        process_running("sleep 424311")
    });
    wait_until("the quick hook to end", || quick_done.exists());
    wait_until("the quick hook's descendants to be gone", || gone(42430));
    assert!(
        process_running("sleep 424311"),
        "the running hook's own child was ended with another hook"
    );
    std::fs::write(&gate, "").unwrap();
    let out = caller.wait_with_output().unwrap();
    assert!(out.status.success());
    wait_until("the waiting hook's child to be gone", || {
        !process_running("sleep 424311")
    });
}

#[test]
fn in_serve_too_and_a_killed_host_takes_its_hooks_descendants_with_it() {
    let env = TestEnv::new();
    let gate = env.project.join("gate");
    let waiter = format!(
        "setsid sleep 424411 >/dev/null 2>&1 & while [ ! -e '{}' ]; do sleep 0.05; done; echo '{{}}'",
        gate.display()
    );
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "command", "command": leaver(42440)},
            {"type": "command", "command": waiter}
        ]),
    ));
    std::fs::write(&gate, "").unwrap();
    let mut serve = crate::serve::Daemon::start(&env);
    let mut client = serve.client();
    let out = client.call("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
    wait_until("the answered hooks' descendants to be gone", || {
        gone(42440) && !process_running("sleep 424411")
    });

    // A hook still running when its host is killed: its keeper ends it and its own.
    std::fs::remove_file(&gate).unwrap();
    client.request(json!(2), "PreToolUse", bash_input("ls"));
    wait_until("the waiting hook's child to run", || {
        process_running("sleep 424411")
    });
    serve.child.kill().unwrap();
    serve.child.wait().unwrap();
    wait_until("the killed host's hook and its child to be gone", || {
        !process_running("sleep 424411")
    });
}
