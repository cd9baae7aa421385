//! Loading plugins and keeping their instances: what scopes a session instance (hook,
//! session, project, grants), and compiling that is bounded (off the dispatch path,
//! under the hook's timeout) and remembered (a component that does not compile is not
//! compiled again).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use hookhost::handlers::wasm::WasmRuntime;
use hookhost::outcome::{HookReport, HookStatus, Outcome};
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::support::{bash, dispatch_on, runtime, settings, wasm_hook};

fn report<'a>(outcome: &'a Outcome, id: &str) -> &'a HookReport {
    outcome
        .hooks
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no report of `{id}`: {outcome:#?}"))
}

/// A counter hook (the hostile plugin in `count` mode, kept per session) with `extra`.
fn counter(extra: Value) -> Value {
    let mut hook = json!({"id": "counter", "instance": "session", "config": {"mode": "count"}});
    if let (Some(h), Some(e)) = (hook.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
    settings(
        "UserPromptSubmit",
        "",
        vec![wasm_hook(plugins::HOSTILE, hook)],
    )
}

async fn count(project: &Path, config: &Value, session: &str) -> String {
    let input = json!({"session_id": session, "prompt": "hi"});
    let outcome = dispatch_on(&runtime(), project, config, "UserPromptSubmit", input).await;
    outcome.additional_context.join("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_instance_never_serves_another_project() {
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = counter(json!({}));
    let session = "load-two-projects";
    assert_eq!(count(one.path(), &config, session).await, "count=1");
    assert_eq!(count(one.path(), &config, session).await, "count=2");
    // Same hook id, same session, another project: its own instance.
    assert_eq!(count(two.path(), &config, session).await, "count=1");
    // And the first project's instance is still its own.
    assert_eq!(count(one.path(), &config, session).await, "count=3");
    assert_eq!(count(two.path(), &config, session).await, "count=2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrowed_grant_or_limit_drops_the_kept_instance() {
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join("data")).unwrap();
    let dir = |mode: &str| json!({"capabilities": {"dirs": [{"path": "${workspace}/data", "mode": mode}]}});
    let wide = counter(dir("rw"));
    let narrow = counter(dir("ro"));
    let session = "load-narrowed";
    assert_eq!(count(project.path(), &wide, session).await, "count=1");
    assert_eq!(count(project.path(), &wide, session).await, "count=2");
    // A new host (a reload) with a read-only grant: a fresh instance, not the one that
    // holds the directory open read-write.
    assert_eq!(count(project.path(), &narrow, session).await, "count=1");
    assert_eq!(count(project.path(), &narrow, session).await, "count=2");
    // The wide instance was dropped, not set aside: granting read-write again starts over.
    assert_eq!(count(project.path(), &wide, session).await, "count=1");

    // Env, hosts and limits scope it the same way.
    for other in [
        json!({"capabilities": {"dirs": [{"path": "${workspace}/data", "mode": "rw"}], "env": ["CARGO_PKG_NAME"]}}),
        json!({"capabilities": {"dirs": [{"path": "${workspace}/data", "mode": "rw"}], "http": ["api.example.com"]}}),
        json!({"capabilities": {"dirs": [{"path": "${workspace}/data", "mode": "rw"}]}, "limits": {"memoryMb": 96}}),
        json!({"capabilities": {"dirs": [{"path": "${workspace}/data", "mode": "rw"}]}, "limits": {"fuel": 999_999_999u64}}),
    ] {
        let config = counter(other.clone());
        assert_eq!(
            count(project.path(), &config, session).await,
            "count=1",
            "{other}"
        );
        assert_eq!(
            count(project.path(), &config, session).await,
            "count=2",
            "{other}"
        );
    }
}

/// A copy of `plugin` in `dir` named `name`, with a custom section that makes its
/// digest (and so its compile) its own.
fn unique_copy(plugin: &str, dir: &Path, name: &str) -> PathBuf {
    let mut bytes = std::fs::read(plugin).unwrap();
    let section_name = b"hookhost-test";
    let mut content = vec![u8::try_from(section_name.len()).unwrap()];
    content.extend_from_slice(section_name);
    content.extend_from_slice(
        format!("{:?} {}", std::time::SystemTime::now(), dir.display()).as_bytes(),
    );
    bytes.push(0);
    let mut size = content.len();
    loop {
        let byte = u8::try_from(size & 0x7f).unwrap();
        size >>= 7;
        if size == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.extend_from_slice(&content);
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Compiles as the runtime reports them, holding the compile of `held` until released.
#[derive(Default)]
struct Gate {
    state: Mutex<(Vec<String>, bool)>,
    changed: Condvar,
}

impl Gate {
    fn observer(self: &Arc<Self>, held: &'static str) -> impl Fn(&str) + Send + Sync + 'static {
        let gate = self.clone();
        move |name: &str| {
            let mut state = gate.state.lock().unwrap();
            state.0.push(name.to_string());
            gate.changed.notify_all();
            if name == held {
                // Bounded, so that a host that waits for this compile fails the test
                // instead of hanging it.
                let _ = gate
                    .changed
                    .wait_timeout_while(state, Duration::from_secs(120), |s| !s.1)
                    .unwrap();
            }
        }
    }

    fn compiles_of(&self, name: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .0
            .iter()
            .filter(|n| *n == name)
            .count()
    }

    fn wait_for_compile_of(&self, name: &str) {
        let state = self.state.lock().unwrap();
        let _ = self
            .changed
            .wait_timeout_while(state, Duration::from_secs(120), |s| {
                !s.0.iter().any(|n| n == name)
            })
            .unwrap();
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.changed.notify_all();
    }
}

// One thread, as the one-shot `hookhost dispatch` runs: a compile that held it would
// hold every hook of the event.
#[tokio::test]
async fn a_slow_compile_times_out_alone_while_the_other_hooks_answer() {
    let project = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let slow = unique_copy(plugins::HOSTILE, project.path(), "slow.wasm");
    let gate = Arc::new(Gate::default());
    let runtime = Arc::new(
        WasmRuntime::new(Some(cache.path().to_path_buf())).on_compile(gate.observer("slow.wasm")),
    );
    let fast = wasm_hook(plugins::DENY_DANGEROUS_BASH, json!({"id": "fast"}));
    let slow_hook = |timeout: f64| {
        wasm_hook(
            slow.to_str().unwrap(),
            json!({"id": "slow", "timeout": timeout, "config": {"mode": "count"}}),
        )
    };
    // The other plugin is loaded once before.
    let warm = settings("PreToolUse", "Bash", vec![fast.clone()]);
    let outcome = dispatch_on(
        &runtime,
        project.path(),
        &warm,
        "PreToolUse",
        bash("rm -rf /"),
    )
    .await;
    assert_eq!(report(&outcome, "fast").status, HookStatus::Blocked);

    // The slow plugin's compile cannot finish until the gate opens, which is after the
    // event has its outcome: the other hook answered, the slow one timed out, named.
    let both = settings("PreToolUse", "Bash", vec![slow_hook(0.2), fast.clone()]);
    let outcome = dispatch_on(
        &runtime,
        project.path(),
        &both,
        "PreToolUse",
        bash("rm -rf /"),
    )
    .await;
    assert_eq!(
        report(&outcome, "fast").status,
        HookStatus::Blocked,
        "{outcome:#?}"
    );
    let timed_out = report(&outcome, "slow");
    assert_eq!(timed_out.status, HookStatus::Timeout, "{outcome:#?}");
    let message = timed_out.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("hook `slow`")
            && message.contains(&slow.display().to_string())
            && message.contains("not compiled within"),
        "{message}"
    );

    // The compile goes on once released, and the next event has it: compiled once.
    gate.wait_for_compile_of("slow.wasm");
    gate.release();
    let again = settings("PreToolUse", "Bash", vec![slow_hook(600.0)]);
    let outcome = dispatch_on(&runtime, project.path(), &again, "PreToolUse", bash("ls")).await;
    let done = report(&outcome, "slow");
    assert_eq!(done.status, HookStatus::Ok, "{outcome:#?}");
    assert_eq!(gate.compiles_of("slow.wasm"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_that_does_not_compile_is_remembered_until_it_changes() {
    let project = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let bad = project.path().join("bad.wasm");
    // A component preamble, then a core module section that is not a module.
    let write_bad = |garbage: &[u8]| {
        let mut bytes = b"\0asm\x0d\0\x01\0\x01".to_vec();
        bytes.push(u8::try_from(garbage.len()).unwrap());
        bytes.extend_from_slice(garbage);
        std::fs::write(&bad, bytes).unwrap();
    };
    write_bad(b"not a module at all");
    let config = settings(
        "PreToolUse",
        "Bash",
        vec![wasm_hook(bad.to_str().unwrap(), json!({"id": "bad"}))],
    );
    let counted = || {
        let seen = Arc::new(Mutex::new(0usize));
        let counter = seen.clone();
        let runtime = WasmRuntime::new(Some(cache.path().to_path_buf()))
            .on_compile(move |_: &str| *counter.lock().unwrap() += 1);
        (Arc::new(runtime), seen)
    };
    let failure = |outcome: &Outcome| {
        let r = report(outcome, "bad");
        assert_eq!(r.status, HookStatus::Failed, "{outcome:#?}");
        let message = r.message.clone().unwrap_or_default();
        assert!(
            message.contains("bad.wasm") && message.contains("does not compile"),
            "{message}"
        );
        message
    };

    let (runtime, compiles) = counted();
    let first =
        failure(&dispatch_on(&runtime, project.path(), &config, "PreToolUse", bash("ls")).await);
    assert!(!first.contains("remembered"), "{first}");
    for _ in 0..3 {
        let again = failure(
            &dispatch_on(&runtime, project.path(), &config, "PreToolUse", bash("ls")).await,
        );
        assert!(again.contains("remembered"), "{again}");
    }
    assert_eq!(
        *compiles.lock().unwrap(),
        1,
        "compiled once, then remembered"
    );

    // Another process with the same compile cache (a one-shot dispatch) remembers too.
    let (runtime, compiles) = counted();
    let next =
        failure(&dispatch_on(&runtime, project.path(), &config, "PreToolUse", bash("ls")).await);
    assert!(next.contains("remembered"), "{next}");
    assert_eq!(*compiles.lock().unwrap(), 0);

    // A changed file is another digest: compiled again.
    write_bad(b"still not a module");
    let changed =
        failure(&dispatch_on(&runtime, project.path(), &config, "PreToolUse", bash("ls")).await);
    assert!(!changed.contains("remembered"), "{changed}");
    assert_eq!(*compiles.lock().unwrap(), 1);
}
