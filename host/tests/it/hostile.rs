//! Hostile plugins: each misbehaviour ends with the expected status and a message that
//! names the plugin and the limit, and the host then serves the next event normally.

use std::path::Path;

use hookhost::outcome::{Decision, HookStatus, Outcome};
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::support::*;

/// Runs the hostile plugin once in `mode` on PreToolUse.
async fn hostile(project: &Path, mode: &str, arg: &str, extra: Value) -> Outcome {
    let mut hook = json!({"id": format!("hostile-{mode}"), "config": {"mode": mode, "arg": arg}});
    if let (Some(h), Some(e)) = (hook.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
    let config = settings("PreToolUse", "*", vec![wasm_hook(plugins::HOSTILE, hook)]);
    dispatch(project, &config, "PreToolUse", bash("ls")).await
}

/// The host still serves an ordinary event after a hostile one.
async fn still_serves(project: &Path) {
    let outcome = hostile(project, "echo", "", json!({})).await;
    assert_eq!(only_report(&outcome).status, HookStatus::Ok, "{outcome:#?}");
    assert_eq!(
        outcome.additional_context,
        ["event=PreToolUse session=s1 tool=Some(\"Bash\")"]
    );
}

/// The single report is a failure with this status and a message naming the plugin and
/// containing every `expected` part.
fn assert_failed(outcome: &Outcome, status: HookStatus, expected: &[&str]) {
    let report = only_report(outcome);
    assert_eq!(report.status, status, "{report:#?}");
    let message = report.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("hostile.wasm"),
        "message does not name the plugin: {message}"
    );
    for part in expected {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    assert_eq!(outcome.decision, Decision::None, "fail-open by default");
    assert_eq!(
        outcome.notices.len(),
        1,
        "a failure is a notice: {outcome:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_runs_out_of_fuel() {
    let project = tempfile::tempdir().unwrap();
    let outcome = hostile(
        project.path(),
        "loop",
        "",
        json!({"limits": {"fuel": 20_000_000}}),
    )
    .await;
    assert_failed(
        &outcome,
        HookStatus::Failed,
        &["fuel exhausted after 20000000 units"],
    );
    assert_eq!(only_report(&outcome).fuel, Some(20_000_000));
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_with_ample_fuel_hits_the_wall_clock_deadline() {
    let project = tempfile::tempdir().unwrap();
    let limits = json!({"limits": {"fuel": 1_000_000_000_000u64, "timeout": 0.3}});
    let outcome = hostile(project.path(), "loop", "", limits).await;
    assert_failed(&outcome, HookStatus::Timeout, &["timed out after 300 ms"]);
    still_serves(project.path()).await;
}

/// A spinning plugin gives its thread back at every epoch tick: on a one-thread runtime,
/// an event that arrives while it spins is answered before the spinner times out.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_plugin_does_not_hold_up_its_thread() {
    let project = tempfile::tempdir().unwrap();
    let finished = std::sync::Mutex::new(Vec::new());
    let spin = async {
        let limits = json!({"limits": {"fuel": 1_000_000_000_000u64, "timeout": 2}});
        let outcome = hostile(project.path(), "loop", "", limits).await;
        finished.lock().unwrap().push("spin");
        outcome
    };
    let echo = async {
        // A timer on the same thread: it fires only if the spinner yields.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let outcome = hostile(project.path(), "echo", "", json!({})).await;
        finished.lock().unwrap().push("echo");
        outcome
    };
    let (spun, echoed) = tokio::join!(spin, echo);
    assert_failed(&spun, HookStatus::Timeout, &["timed out after 2"]);
    assert_eq!(only_report(&echoed).status, HookStatus::Ok, "{echoed:#?}");
    assert_eq!(*finished.lock().unwrap(), ["echo", "spin"]);
}

/// A spinning wasm hook does not hold up its siblings either: a command hook listed
/// after it in the same event starts while it spins, not after its timeout.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_plugin_does_not_hold_up_its_siblings() {
    let project = tempfile::tempdir().unwrap();
    let stamp = project.path().join("sibling-started");
    let config = settings(
        "PreToolUse",
        "*",
        vec![
            wasm_hook(
                plugins::HOSTILE,
                json!({"id": "spin", "config": {"mode": "loop"},
                       "limits": {"fuel": 1_000_000_000_000u64, "timeout": 3}}),
            ),
            json!({"type": "command", "command": format!("touch '{}'", stamp.display())}),
        ],
    );
    let started = std::time::Instant::now();
    let dispatching = dispatch(project.path(), &config, "PreToolUse", bash("ls"));
    tokio::pin!(dispatching);
    let sibling_started = async {
        while !stamp.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        started.elapsed()
    };
    let seen = tokio::select! {
        biased;
        after = sibling_started => Some(after),
        _ = &mut dispatching => None,
    };
    assert!(
        seen.is_some_and(|after| after < std::time::Duration::from_millis(1500)),
        "the command hook did not start while the 3 s spinner ran (started after: {seen:?})"
    );
    let outcome = dispatching.await;
    let statuses: Vec<_> = outcome.hooks.iter().map(|h| h.status).collect();
    assert_eq!(
        statuses,
        [HookStatus::Timeout, HookStatus::Ok],
        "{outcome:#?}"
    );
}

/// A dispatch can be dropped mid-call (a daemon client that disconnects): with a
/// ten-minute timeout the spinning call is still running when it is dropped, its fiber is
/// disposed without a hang or a panic, and the thread serves the next event. (While wasm
/// blocked its thread, such a drop could only happen once the call returned.)
#[tokio::test(flavor = "current_thread")]
async fn a_dropped_dispatch_ends_its_spinning_plugin() {
    let project = tempfile::tempdir().unwrap();
    let limits = json!({"limits": {"fuel": 1_000_000_000_000u64, "timeout": 600}});
    let spinning = hostile(project.path(), "loop", "", limits);
    let cut = tokio::time::timeout(std::time::Duration::from_millis(300), spinning).await;
    assert!(cut.is_err(), "the spinning call ended by itself: {cut:#?}");
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_plugins_hit_the_deadline_too() {
    let project = tempfile::tempdir().unwrap();
    let outcome = hostile(project.path(), "sleep", "30", json!({"timeout": 0.3})).await;
    assert_failed(&outcome, HookStatus::Timeout, &["timed out after 300 ms"]);
    let report = only_report(&outcome);
    assert!(
        report.duration_ms.unwrap() < 5_000.0,
        "the sleep was not cut short: {report:#?}"
    );
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bomb_hits_the_memory_cap() {
    let project = tempfile::tempdir().unwrap();
    let outcome = hostile(
        project.path(),
        "memory-bomb",
        "",
        json!({"limits": {"memoryMb": 16}}),
    )
    .await;
    assert_failed(
        &outcome,
        HookStatus::Failed,
        &["memory limit of 16777216 bytes (16 MiB)"],
    );
    let peak = only_report(&outcome).memory_bytes.unwrap();
    assert!(peak <= 16 << 20 && peak > 8 << 20, "peak {peak}");
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_is_stopped() {
    let project = tempfile::tempdir().unwrap();
    let outcome = hostile(project.path(), "recursion", "", json!({})).await;
    let report = only_report(&outcome);
    assert_eq!(report.status, HookStatus::Failed, "{report:#?}");
    let message = report.message.as_deref().unwrap();
    assert!(
        message.contains("hostile.wasm")
            && (message.contains("stack") || message.contains("out of bounds")),
        "{message}"
    );
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_stdout_hits_the_output_cap() {
    let project = tempfile::tempdir().unwrap();
    let outcome = hostile(project.path(), "stdout-flood", "", json!({})).await;
    assert_failed(
        &outcome,
        HookStatus::Failed,
        &["stdout exceeded its cap of 1048576 bytes"],
    );
    let diagnostics = only_report(&outcome).diagnostics.clone().unwrap();
    assert!(
        diagnostics.len() < 20_000,
        "diagnostics are capped: {} bytes",
        diagnostics.len()
    );
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_and_traps_are_failures_with_the_guest_message() {
    let project = tempfile::tempdir().unwrap();
    let outcome = hostile(project.path(), "panic", "", json!({})).await;
    assert_failed(
        &outcome,
        HookStatus::Failed,
        &["panicked", "hostile plugin panicked on purpose"],
    );
    let outcome = hostile(project.path(), "trap", "", json!({})).await;
    assert_failed(&outcome, HookStatus::Failed, &["trapped", "unreachable"]);
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_block_turns_a_limit_into_a_deny() {
    let project = tempfile::tempdir().unwrap();
    let extra = json!({"onFailure": "block", "limits": {"fuel": 1_000_000}});
    let outcome = hostile(project.path(), "loop", "", extra).await;
    assert_eq!(outcome.decision, Decision::Deny);
    let reason = outcome.reason.as_deref().unwrap();
    assert!(
        reason.contains("fuel exhausted after 1000000 units") && reason.contains("hostile-loop"),
        "{reason}"
    );
}

/// Settings with the hostile plugin in `mode` as a UserPromptSubmit hook with one
/// instance per session, under `limits`.
fn session_hook(mode: &str, limits: Value) -> Value {
    settings(
        "UserPromptSubmit",
        "",
        vec![wasm_hook(
            plugins::HOSTILE,
            json!({"id": "stateful", "instance": "session", "config": {"mode": mode}, "limits": limits}),
        )],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapped_session_instance_is_never_used_again() {
    let project = tempfile::tempdir().unwrap();
    let hook = |mode: &str| session_hook(mode, json!({"fuel": 5_000_000}));
    let prompt = json!({"session_id": "trap-session", "prompt": "x"});
    for expected in ["count=1", "count=2"] {
        let outcome = dispatch(
            project.path(),
            &hook("count"),
            "UserPromptSubmit",
            prompt.clone(),
        )
        .await;
        assert_eq!(outcome.additional_context, [expected]);
    }
    let outcome = dispatch(
        project.path(),
        &hook("loop"),
        "UserPromptSubmit",
        prompt.clone(),
    )
    .await;
    assert!(
        only_report(&outcome)
            .message
            .as_deref()
            .unwrap()
            .contains("fuel exhausted")
    );
    let outcome = dispatch(project.path(), &hook("count"), "UserPromptSubmit", prompt).await;
    assert_eq!(
        outcome.additional_context,
        ["count=1"],
        "a fresh instance after the trap"
    );
}

/// A session instance whose call was dropped midway (its client disconnected) is not
/// used again: the next event of the session gets a fresh instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_instance_cut_off_mid_call_is_never_used_again() {
    let project = tempfile::tempdir().unwrap();
    let limits = json!({"fuel": 1_000_000_000_000u64, "timeout": 600});
    let hook = |mode: &str| session_hook(mode, limits.clone());
    let prompt = json!({"session_id": "cut-session", "prompt": "x"});
    let (counting, spinning) = (hook("count"), hook("loop"));
    let count = || {
        dispatch(
            project.path(),
            &counting,
            "UserPromptSubmit",
            prompt.clone(),
        )
    };
    assert_eq!(count().await.additional_context, ["count=1"]);
    let spin = dispatch(
        project.path(),
        &spinning,
        "UserPromptSubmit",
        prompt.clone(),
    );
    let cut = tokio::time::timeout(std::time::Duration::from_millis(300), spin).await;
    assert!(cut.is_err(), "the spinning call ended by itself: {cut:#?}");
    assert_eq!(
        count().await.additional_context,
        ["count=1"],
        "a fresh instance after the cut-off call"
    );
}

/// A workspace with a granted directory `inside/` (mounted at `/sandbox`), a secret next
/// to it, and symlinks in it that point out.
fn sandbox_fixture() -> (tempfile::TempDir, Value) {
    let root = tempfile::tempdir().unwrap();
    let inside = root.path().join("inside");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(inside.join("ok.txt"), "visible").unwrap();
    std::fs::write(root.path().join("secret.txt"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink("../secret.txt", inside.join("rel-link")).unwrap();
    std::os::unix::fs::symlink(root.path().join("secret.txt"), inside.join("abs-link")).unwrap();
    let grant = json!({"capabilities": {"dirs": [{"path": inside.to_str().unwrap(), "guest": "/sandbox", "mode": "ro"}]}});
    (root, grant)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_out_of_a_preopen_are_denied() {
    let (root, grant) = sandbox_fixture();
    let project = root.path();
    let ok = hostile(project, "read", "/sandbox/ok.txt", grant.clone()).await;
    assert_eq!(
        ok.additional_context,
        ["read ok: visible"],
        "the grant works: {ok:#?}"
    );
    let secret = root.path().join("secret.txt");
    for path in [
        "/sandbox/../secret.txt",
        "../secret.txt",
        "/sandbox/rel-link",
        "/sandbox/abs-link",
        secret.to_str().unwrap(),
        "/etc/passwd",
    ] {
        let outcome = hostile(project, "read", path, grant.clone()).await;
        let context = outcome.additional_context.join("");
        assert!(context.starts_with("read denied:"), "{path}: {context}");
        assert!(!context.contains("TOP-SECRET"), "{path} leaked the secret");
    }
    still_serves(project).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_a_read_only_preopen_are_denied() {
    let (root, grant) = sandbox_fixture();
    for path in ["/sandbox/ok.txt", "/sandbox/new.txt"] {
        let outcome = hostile(root.path(), "write", path, grant.clone()).await;
        let context = outcome.additional_context.join("");
        assert!(context.starts_with("write denied:"), "{path}: {context}");
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("inside/ok.txt")).unwrap(),
        "visible"
    );
    assert!(!root.path().join("inside/new.txt").exists());

    // The same write under a read-write grant goes through: the denial above is the grant's doing.
    let rw = json!({"capabilities": {"dirs": [{"path": root.path().join("inside").to_str().unwrap(), "guest": "/sandbox", "mode": "rw"}]}});
    let outcome = hostile(root.path(), "write", "/sandbox/new.txt", rw).await;
    assert_eq!(outcome.additional_context, ["write ok"]);
    assert_eq!(
        std::fs::read_to_string(root.path().join("inside/new.txt")).unwrap(),
        "pwned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_a_host_not_granted_and_raw_tcp_are_denied() {
    let project = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let grant = json!({"capabilities": {"http": ["api.example.com"]}});
    let outcome = hostile(
        project.path(),
        "http",
        &format!("http://127.0.0.1:{port}/x"),
        grant.clone(),
    )
    .await;
    let context = outcome.additional_context.join("");
    assert!(
        context.starts_with("http denied:") && context.contains("HttpRequestDenied"),
        "{context}"
    );
    let diagnostics = only_report(&outcome)
        .diagnostics
        .clone()
        .unwrap_or_default();
    assert!(
        diagnostics.contains(&format!("request to http://127.0.0.1:{port} denied")),
        "{diagnostics}"
    );

    let outcome = hostile(project.path(), "tcp", &format!("127.0.0.1:{port}"), grant).await;
    let context = outcome.additional_context.join("");
    assert!(context.starts_with("tcp denied:"), "{context}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "no connection may reach the listener"
    );
    still_serves(project.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_vars_not_granted_are_absent() {
    let project = tempfile::tempdir().unwrap();
    // Both are set by cargo for the test process; the plugin declares both; only one is granted.
    let granted = std::env::var("CARGO_PKG_NAME").unwrap();
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    let outcome = hostile(
        project.path(),
        "env",
        "",
        json!({"capabilities": {"env": ["CARGO_PKG_NAME"]}}),
    )
    .await;
    assert_eq!(
        outcome.additional_context,
        [format!(
            "granted=Some({granted:?}) secret=None all=[\"CARGO_PKG_NAME\"]"
        )]
    );
    let outcome = hostile(project.path(), "env", "", json!({})).await;
    assert_eq!(
        outcome.additional_context,
        ["granted=None secret=None all=[]"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_host_that_never_answers_cannot_outlive_the_timeout() {
    let project = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accept and hold connections without ever answering.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let extra =
        json!({"timeout": 0.5, "capabilities": {"http": [format!("http://127.0.0.1:{port}")]}});
    let started = std::time::Instant::now();
    let outcome = hostile(
        project.path(),
        "http",
        &format!("http://127.0.0.1:{port}/slow"),
        extra,
    )
    .await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{outcome:#?}"
    );
    assert_failed(&outcome, HookStatus::Timeout, &["timed out after 500 ms"]);
    still_serves(project.path()).await;
}
