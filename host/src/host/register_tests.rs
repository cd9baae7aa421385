//! Tests of the runtime registry: admission by the same policy as config hooks, session
//! scope, bounds, and registration while events are dispatched from other threads.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::*;
use crate::HostBuilder;
use crate::dispatch::registry::{MAX_REGISTERED_PER_SESSION, Snapshot};

fn project() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let project = root.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    (root, project)
}

/// A host whose managed policy is `managed` (none when `None`).
fn host(root: &Path, project: &Path, managed: Option<Value>) -> Host {
    let mut builder = HostBuilder::new(project);
    if let Some(managed) = managed {
        let dir = root.join("managed");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("managed.json"), managed.to_string()).unwrap();
        builder = builder.managed_dir(dir);
    }
    builder.build()
}

fn bash(session: &str) -> Value {
    json!({"session_id": session, "tool_name": "Bash", "tool_input": {"command": "ls"}})
}

fn ran(host: &Host, event: &str, input: Value) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(host.dispatch(event, input)).unwrap();
    outcome
        .hooks
        .iter()
        .map(|h| format!("{}:{:?}", h.id, h.status).to_lowercase())
        .collect()
}

fn command(text: &str) -> Value {
    json!({"type": "command", "command": text})
}

#[test]
fn a_registered_hook_runs_under_its_matcher_until_unregistered() {
    let (root, project) = project();
    let host = host(root.path(), &project, None);
    let id = host
        .register(Registration::new("PreToolUse", command("true")).matcher("Bash"))
        .unwrap();
    assert_eq!(ran(&host, "PreToolUse", bash("s1")), [format!("{id}:ok")]);
    let read = json!({"session_id": "s1", "tool_name": "Read", "tool_input": {}});
    assert!(
        ran(&host, "PreToolUse", read).is_empty(),
        "the matcher holds"
    );
    // A clone of the host (what a daemon hands each request) shares the registry.
    assert!(host.clone().unregister(id));
    assert!(!host.unregister(id));
    assert!(ran(&host, "PreToolUse", bash("s1")).is_empty());
}

#[test]
fn a_session_scoped_hook_runs_for_its_session_and_ends_with_it() {
    let (root, project) = project();
    let host = host(root.path(), &project, None);
    let id = host
        .register(Registration::new("PreToolUse", command("true")).session("s1"))
        .unwrap();
    assert_eq!(ran(&host, "PreToolUse", bash("s1")).len(), 1);
    assert!(ran(&host, "PreToolUse", bash("s2")).is_empty());
    ran(
        &host,
        "SessionEnd",
        json!({"session_id": "s1", "reason": "exit"}),
    );
    assert!(
        host.registered().is_empty(),
        "unregistered when its session ended"
    );
    assert!(!host.unregister(id));
}

/// Every way managed policy refuses a user hook refuses a registered one, by the same
/// resolution (each message names the rule).
#[test]
fn a_registered_hook_denied_by_managed_policy_is_refused() {
    let (root, project) = project();
    for (managed, says) in [
        (
            json!({"allowManagedHooksOnly": true}),
            "allowManagedHooksOnly",
        ),
        (
            json!({"ceilings": {"handlerTypes": {"user": ["wasm"]}}}),
            "ceilings.handlerTypes.user",
        ),
        (json!({"disableAllHooks": true}), "disableAllHooks"),
        (
            json!({"ceilings": {"timeout": 5}}),
            "hook refused by managed policy",
        ),
        // Broken managed policy fails closed for registered hooks too.
        (
            json!({"ceilings": {"maxTimeoutSeconds": 5}}),
            "managed policy is broken",
        ),
    ] {
        let host = host(root.path(), &project, Some(managed.clone()));
        let hook = json!({"type": "command", "command": "true", "timeout": 60});
        let refused = host
            .register(Registration::new("PreToolUse", hook))
            .unwrap_err();
        let text = refused.to_string();
        assert!(text.contains(says), "{managed}: {text}");
        assert!(
            text.contains("registered hook"),
            "names the registration: {text}"
        );
        assert!(host.registered().is_empty());
    }
}

#[test]
fn a_broken_registration_names_its_field() {
    let (root, project) = project();
    let host = host(root.path(), &project, None);
    let bad_matcher = Registration::new("PreToolUse", command("true")).matcher("(");
    let text = host.register(bad_matcher).unwrap_err().to_string();
    assert!(text.contains("$.hooks.PreToolUse[0].matcher"), "{text}");
    let no_command = Registration::new("PreToolUse", json!({"type": "command"}));
    let text = host.register(no_command).unwrap_err().to_string();
    assert!(text.contains("command"), "{text}");
    let text = host
        .register(Registration::new("NoSuchEvent", command("true")))
        .unwrap_err()
        .to_string();
    assert!(text.contains("unknown event"), "{text}");
}

#[test]
fn an_async_registration_needs_the_in_process_launcher() {
    let (_root, project) = project();
    let hook = json!({"type": "command", "command": "true", "async": true});
    let detached = HostBuilder::new(&project)
        .async_launcher(crate::AsyncLauncher::Detached {
            program: "/bin/true".into(),
            args: Vec::new(),
        })
        .build();
    let text = detached
        .register(Registration::new("PostToolUse", hook.clone()))
        .unwrap_err()
        .to_string();
    assert!(text.contains("in process"), "{text}");
    let in_process = HostBuilder::new(&project).build();
    in_process
        .register(Registration::new("PostToolUse", hook))
        .unwrap();
}

#[test]
fn registrations_are_bounded_per_session() {
    let (root, project) = project();
    let host = host(root.path(), &project, None);
    let one = || Registration::new("Stop", command("true")).session("s1");
    for _ in 0..MAX_REGISTERED_PER_SESSION {
        host.register(one()).unwrap();
    }
    let text = host.register(one()).unwrap_err().to_string();
    assert!(text.contains("the most it keeps"), "{text}");
    // Another session has its own room.
    host.register(one().session("s2")).unwrap();
}

/// Registration while other threads dispatch: the writer keeps the registered set a
/// contiguous run of ids (it registers `k`, then unregisters `k - WINDOW`), so a dispatch
/// that saw one consistent snapshot runs a contiguous run of at most `WINDOW + 1` hooks;
/// one that read the registry twice, or saw a half-published map, would not. No thread
/// waits for another: the test ends (no deadlock) once the writer is through.
#[test]
fn dispatches_see_one_consistent_set_while_hooks_are_registered() {
    const WINDOW: u64 = 3;
    const STEPS: u64 = 40;
    let (root, project) = project();
    let host = host(root.path(), &project, None);
    let done = Arc::new(AtomicBool::new(false));
    let dispatched = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (host, done, dispatched) = (host.clone(), done.clone(), dispatched.clone());
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !done.load(Ordering::Acquire) {
                    let ids: Vec<u64> = ran(&host, "PreToolUse", bash("s1"))
                        .iter()
                        .map(|h| {
                            let n = h.trim_start_matches("registered:");
                            n[..n.find(':').unwrap()].parse().unwrap()
                        })
                        .collect();
                    dispatched.fetch_add(1, Ordering::Release);
                    seen.push(ids);
                }
                seen
            })
        })
        .collect();
    let mut ids = Vec::new();
    for k in 1..=STEPS {
        ids.push(
            host.register(Registration::new("PreToolUse", command("true")))
                .unwrap(),
        );
        assert_eq!(ids.last().unwrap().0, k);
        if k > WINDOW {
            assert!(host.unregister(ids[(k - WINDOW - 1) as usize]));
        }
        // Let at least one dispatch start after each step (progress, not time).
        let before = dispatched.load(Ordering::Acquire);
        while dispatched.load(Ordering::Acquire) == before {
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::Release);
    let mut checked = 0;
    for reader in readers {
        for run in reader.join().unwrap() {
            assert!(run.len() as u64 <= WINDOW + 1, "{run:?}");
            assert!(
                run.windows(2).all(|w| w[1] == w[0] + 1),
                "not one snapshot: {run:?}"
            );
            checked += 1;
        }
    }
    assert!(checked as u64 >= STEPS);
    let left: Vec<u64> = Snapshot::clone(&host.registered())
        .entries()
        .map(|r| r.id.0)
        .collect();
    assert_eq!(left, [STEPS - 2, STEPS - 1, STEPS]);
}

/// The class, generated: for every pairing of a managed policy and a handler entry, a
/// registration is admitted exactly when the same entry in the user's `hooks.json` would
/// run (built, not refused, not skipped). One resolution judges both, so no managed rule
/// can bind one and not the other.
#[test]
fn a_registration_is_admitted_exactly_when_the_same_user_hook_would_run() {
    let managed = [
        None,
        Some(json!({"allowManagedHooksOnly": true})),
        Some(json!({"disableAllHooks": true})),
        Some(json!({"ceilings": {"handlerTypes": {"user": ["http"]}}})),
        Some(json!({"ceilings": {"timeout": 5}})),
        Some(json!({"ceilings": {"http": ["https://allowed.example/*"]}})),
        Some(json!({"ceilings": {"http": ["allowed.example"]}})),
        Some(json!({"ceilings": {"dirs": []}})),
        Some(json!({"ceilings": {"nonsense": 1}})),
    ];
    let entries = [
        json!({"type": "command", "command": "true"}),
        json!({"type": "command", "command": "true", "timeout": 60}),
        json!({"type": "command"}),
        json!({"type": "http", "url": "https://allowed.example/hook"}),
        json!({"type": "http", "url": "https://other.example/hook"}),
        json!({"type": "command", "command": "true", "enabled": false}),
        json!({"type": "command", "command": "true", "if": "Bash(git *)"}),
        json!({"type": "wasm", "plugin": "/nowhere/p.wasm",
               "capabilities": {"dirs": [{"path": "/tmp", "mode": "ro"}]}}),
    ];
    let (mut compared, mut admitted) = (0, 0);
    for (m, policy) in managed.iter().enumerate() {
        for entry in &entries {
            let (root, project) = project();
            let user = root.path().join("user");
            std::fs::create_dir_all(&user).unwrap();
            let config = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [entry]}]}});
            std::fs::write(user.join("hooks.json"), config.to_string()).unwrap();
            let mut builder = HostBuilder::new(&project).user_dir(&user);
            if let Some(policy) = policy {
                let dir = root.path().join("managed");
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("managed.json"), policy.to_string()).unwrap();
                builder = builder.managed_dir(dir);
            }
            let configured = builder.build();
            // Errors of the user file (the hook's own): errors of managed policy's are
            // the same for both.
            let user_file = user.join("hooks.json").display().to_string();
            let runs_from_file = !configured
                .policy()
                .errors
                .iter()
                .any(|e| e.location == user_file)
                && configured.policy().hooks.len() == 1
                && configured.policy().hooks[0].skip.is_none();
            // The same host, its user file aside: the registration alone.
            std::fs::remove_file(user.join("hooks.json")).unwrap();
            let registered = configured
                .clone()
                .rebuild(|_| {
                    let mut b = HostBuilder::new(&project).user_dir(&user);
                    if policy.is_some() {
                        b = b.managed_dir(root.path().join("managed"));
                    }
                    b.build()
                })
                .register(Registration::new("PreToolUse", entry.clone()).matcher("Bash"));
            assert_eq!(
                registered.is_ok(),
                runs_from_file,
                "managed #{m} {policy:?}, entry {entry}: registration {registered:?}, \
                 file errors {:?}",
                configured.policy().errors
            );
            compared += 1;
            admitted += usize::from(runs_from_file);
        }
    }
    assert_eq!(compared, managed.len() * entries.len());
    // Both answers occur: the comparison is not vacuous.
    assert!(
        admitted > 0 && admitted < compared,
        "{admitted} of {compared}"
    );
}
