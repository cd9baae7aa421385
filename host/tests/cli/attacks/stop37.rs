//! Stop 37's red team: `hookhost.lock`, the OTLP headers rule, terminal escaping, audit
//! reading and OCI pulls attacked with members of their class nobody named. Each test is
//! the attack; what got through was fixed at its chokepoint (named on the test).

use serde_json::{Value, json};

use crate::oci::{no_docker_config, sha256, wasm_hook, wasm_manifest};
use crate::serve::Daemon;
use crate::support::{TestEnv, TestServer, bash_input, hooks, wait_until};

/// A loopback "registry" that answers every manifest with `status` and `manifest` after
/// `delay`, every blob with `blob`.
fn registry(status: u16, manifest: String, blob: String, delay_ms: u64) -> TestServer {
    TestServer::start(move |request| {
        if request.path.contains("/manifests/") {
            let delay = std::time::Duration::from_millis(delay_ms);
            (status, manifest.clone(), delay)
        } else if request.path.contains("/blobs/") {
            (200, blob.clone(), std::time::Duration::ZERO)
        } else {
            (404, "{}".to_string(), std::time::Duration::ZERO)
        }
    })
}

fn daemon(env: &TestEnv) -> Daemon {
    let docker = no_docker_config(env);
    Daemon::start_with(env, {
        let mut command = env.command();
        command.env("DOCKER_CONFIG", &docker);
        command
    })
}

/// Four events at once on one daemon; their outcomes.
fn four_at_once(daemon: &Daemon) -> Vec<Value> {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut client = daemon.client();
            std::thread::spawn(move || client.call("PreToolUse", bash_input("ls")))
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

fn manifest_pulls(server: &TestServer, pin: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with(&format!("/manifests/sha256:{pin}")))
        .count()
}

fn write_lock(env: &TestEnv, reference: &str, hex: &str) {
    let lock = json!({"version": 1, "plugins": [
        {"reference": reference, "digest": format!("sha256:{hex}")}]});
    std::fs::write(env.project.join("hookhost.lock"), lock.to_string()).unwrap();
}

/// `hookhost.lock` changed under a running daemon (`hookhost plugin lock` after a tag
/// moved, or an edit): the daemon did not watch the lock, so it kept running the old
/// binding, and, the lock being part of the workspace's trust fingerprint, kept the old
/// trust too, until some other file changed. Fixed at `config/sources.rs`
/// `SourceOptions::watched_paths`, the one list of files a host is rebuilt on.
#[test]
fn a_daemon_rebinds_when_hookhost_lock_changes() {
    let env = TestEnv::new();
    let server = registry(404, "{}".into(), String::new(), 0);
    let host = server.url.trim_start_matches("http://").to_string();
    env.managed(json!({"ceilings": {"ociTags": true}}));
    let tag = format!("oci://{host}/team/gate:v1");
    env.project_hooks(wasm_hook(&tag));
    let (first, second) = ("a".repeat(64), "b".repeat(64));
    write_lock(&env, &tag, &first);
    // Files younger than a stamp's granularity make the daemon rebuild at every poll
    // whatever it watches; let them settle, so that only a watched change rebuilds.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let daemon = daemon(&env);
    let out = daemon.client().call("PreToolUse", bash_input("ls"));
    assert_eq!(
        out["hooks"][0]["plugin"],
        format!("{tag}@sha256:{first}"),
        "{out}"
    );
    write_lock(&env, &tag, &second);
    wait_until("the daemon to bind the new lock", || {
        let out = daemon.client().call("PreToolUse", bash_input("ls"));
        out["hooks"][0]["plugin"] == format!("{tag}@sha256:{second}")
    });
}

/// A pull that fails, with events waiting for it: each waiter then pulled again in
/// turn (a registry that fails slowly held the last event for the sum of them all), and
/// an event arriving meanwhile started another pull beside them. Fixed at
/// `handlers/wasm/oci/mod.rs` `OciStore::pull_once`: the waiters share the pull's
/// outcome, a failure included.
#[test]
fn events_waiting_on_a_failed_pull_share_its_failure() {
    let env = TestEnv::new();
    let pin = "c".repeat(64);
    let server = registry(500, "{}".into(), String::new(), 700);
    let host = server.url.trim_start_matches("http://");
    env.project_hooks(wasm_hook(&format!(
        "oci://{host}/team/gate:v1@sha256:{pin}"
    )));
    let daemon = daemon(&env);
    for outcome in four_at_once(&daemon) {
        assert_eq!(outcome["hooks"][0]["status"], "failed", "{outcome}");
    }
    assert_eq!(manifest_pulls(&server, &pin), 1);
}

/// The same artifact spelled two ways (with its tag and without, both pinning one
/// digest) in concurrent events: one pull each. Fixed at `OciStore::pull_once`'s key
/// (`pull_key`): the registry, the repository and the digest.
#[test]
fn two_spellings_of_one_pinned_artifact_are_one_pull() {
    let env = TestEnv::new();
    let layer = b"pretend component".to_vec();
    let manifest = wasm_manifest(&layer, "application/vnd.wasm.config.v0+json");
    let pin = sha256(manifest.as_bytes());
    let server = registry(200, manifest, String::from_utf8(layer).unwrap(), 700);
    let host = server.url.trim_start_matches("http://");
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "wasm", "id": "tagged", "plugin": format!("oci://{host}/team/gate:v1@sha256:{pin}")},
            {"type": "wasm", "id": "bare", "plugin": format!("oci://{host}/team/gate@sha256:{pin}")},
        ]),
    ));
    let daemon = daemon(&env);
    for outcome in four_at_once(&daemon) {
        assert_eq!(
            outcome["hooks"].as_array().map(Vec::len),
            Some(2),
            "{outcome}"
        );
    }
    assert_eq!(manifest_pulls(&server, &pin), 1);
}

/// The user's own guard, pinned by digest in the user's `hooks.json`, in a trusted
/// workspace whose `hookhost.lock` pins the same name at another digest: the lock is the
/// repository's word, and must neither choose the digest of the user's hook nor take
/// the guard away.
#[test]
fn a_projects_lock_does_not_bind_the_users_own_hooks() {
    let env = TestEnv::new();
    let Some(registry) =
        crate::oci::Registry::start("a_projects_lock_does_not_bind_the_users_own_hooks", false)
    else {
        return;
    };
    let docker = no_docker_config(&env);
    let tag = registry.reference("team/gate:v1");
    let guard = crate::oci::push(
        &env,
        &docker,
        crate::support::deny_dangerous_bash().to_str().unwrap(),
        &tag,
    );
    env.user_hooks(wasm_hook(&guard));
    write_lock(&env, &tag, &"a".repeat(64));
    let out = crate::oci::dispatch(&env, &docker, "rm -rf /");
    assert_eq!(
        out["decision"], "deny",
        "the user's guard did not run: {out}"
    );
    assert_eq!(out["hooks"][0]["plugin"], guard.as_str(), "{out}");
    // Nor does it move a tag the user's hook runs at (managed policy allows tags).
    env.managed(json!({"ceilings": {"ociTags": true}}));
    env.user_hooks(wasm_hook(&tag));
    let out = crate::oci::dispatch(&env, &docker, "rm -rf /");
    assert_eq!(
        out["decision"], "deny",
        "the user's guard did not run: {out}"
    );
    // `plugin lock` writes no reference of the user's into the repository's lock, and
    // `validate` does not ask for one there.
    let locked = crate::oci::run(&env, &docker, &["plugin", "lock"]);
    assert_eq!(locked.code, 0, "{}", locked.stderr);
    let written = std::fs::read_to_string(env.project.join("hookhost.lock")).unwrap();
    assert!(!written.contains("team/gate"), "{written}");
    let valid = crate::oci::run(&env, &docker, &["validate"]);
    assert_eq!(valid.code, 0, "{}{}", valid.stdout, valid.stderr);
}

/// Held: a repository whose workspace is not trusted cannot make `validate`, `hooks` or
/// `dispatch` contact the registry its lock and hooks name; once trusted, a lock changed
/// (or swapped for a FIFO) is a changed workspace.
#[test]
fn an_untrusted_lock_contacts_nothing_and_a_changed_lock_untrusts() {
    let env = TestEnv::new();
    let server = registry(404, "{}".into(), String::new(), 0);
    let host = server.url.trim_start_matches("http://").to_string();
    env.managed(json!({"ceilings": {"ociTags": true}}));
    let tag = format!("oci://{host}/team/gate:v1");
    env.project_hooks(wasm_hook(&tag));
    write_lock(&env, &tag, &"a".repeat(64));
    for args in [&["validate"][..], &["hooks"], &["dispatch", "PreToolUse"]] {
        env.run_untrusted(args, &bash_input("ls").to_string());
    }
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    let trusted = env.run_untrusted(&["trust"], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    assert_eq!(env.run_untrusted(&["trust", "--status"], "").code, 0);
    write_lock(&env, &tag, &"b".repeat(64));
    let status = env.run_untrusted(&["trust", "--status"], "");
    assert_ne!(status.code, 0, "{}", status.stdout);
    assert!(status.stdout.contains("hookhost.lock"), "{}", status.stdout);
    std::fs::remove_file(env.project.join("hookhost.lock")).unwrap();
    nix_mkfifo(&env.project.join("hookhost.lock"));
    let status = env.run_untrusted(&["trust", "--status"], "");
    assert_ne!(status.code, 0, "{}", status.stdout);
}

fn nix_mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A log with what a corrupt or edited log holds: a duration of `1e308` (309 digits once
/// shown: the line view printed it whole; bounded as the summary's since stop 37,
/// `cli/audit/mod.rs` `line`), `1e400`, `-0`, the largest integers, raw NUL bytes,
/// invalid UTF-8, CRLF, a time that is an escape sequence. Every view answers, escaped
/// and bounded.
#[test]
fn the_audit_views_bound_and_escape_what_a_corrupt_log_holds() {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let env = TestEnv::new();
    let path = env.data.join("audit.jsonl");
    let entry = |time: &str, hook: Value| {
        json!({"time": time, "session": "s", "event": "PreToolUse", "decision": "deny",
            "hooks": [hook]})
        .to_string()
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    let huge = json!({"id": "g", "source": "user", "type": "wasm", "status": "ok",
        "durationMs": 1e308, "fuel": u64::MAX, "memoryBytes": 0});
    writeln!(file, "{}", entry("2026-12-01T10:00:00.000Z", huge)).unwrap();
    let text = entry(
        "2026-12-01T10:00:01.000Z",
        json!({"id": "n", "durationMs": -0.0}),
    );
    file.write_all(format!("{text}\r\n").as_bytes()).unwrap();
    file.write_all(b"{\"time\": \"a\0b\"}\n").unwrap();
    file.write_all(b"{\"time\": \"\xff\xfe\x9b2J\"}\n").unwrap();
    file.write_all(b"{\"hooks\": [{\"id\": \"x\", \"durationMs\": 1e400}]}\n")
        .unwrap();
    writeln!(
        file,
        "{}",
        entry(
            "\u{1b}[2J2026-12-01T10:00:02.000Z",
            json!({"id": "t\u{9b}1m"})
        )
    )
    .unwrap();
    drop(file);
    for args in [
        &["audit"][..],
        &["audit", "--tail", "10"],
        &["audit", "--summary"],
    ] {
        let run = env.run(args, "");
        let shown = format!("{}{}", run.stdout, run.stderr);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{9b}') && !shown.contains('\0'),
            "{args:?}: {shown:?}"
        );
        assert!(!shown.contains(&"0".repeat(25)), "{args:?}: {shown}");
        assert!(
            shown.contains("fuel") || args.len() == 2,
            "{args:?}: {shown}"
        );
    }
}

/// `plugin lock` in a workspace that is not trusted read none of its hooks (they are
/// not read until it is trusted) and wrote the lock anew with no plugins, wiping the
/// pins the repository ships. Fixed at `cli/oci.rs` `lock`: it refuses, naming trust,
/// and leaves the lock as it is (and asks no registry).
#[test]
fn plugin_lock_in_an_untrusted_workspace_leaves_the_lock_alone() {
    let env = TestEnv::new();
    let server = registry(404, "{}".into(), String::new(), 0);
    let host = server.url.trim_start_matches("http://").to_string();
    let tag = format!("oci://{host}/team/gate:v1");
    env.project_hooks(wasm_hook(&tag));
    write_lock(&env, &tag, &"a".repeat(64));
    let before = std::fs::read_to_string(env.project.join("hookhost.lock")).unwrap();
    let run = env.run_untrusted(&["plugin", "lock"], "");
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("not trusted"), "{}", run.stderr);
    let after = std::fs::read_to_string(env.project.join("hookhost.lock")).unwrap();
    assert_eq!(after, before);
    assert!(server.requests().is_empty());
}
