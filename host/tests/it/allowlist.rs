//! The managed plugin allowlist against real plugins: by digest, by signature, and the
//! attacks (unknown key, tampered signature, plugin altered after signing, plugin
//! replaced between check and compile, plugin replaced after the workspace was trusted).
//! A refused plugin is refused before it is compiled, with its digest in the message, and
//! the other hooks still run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookhost::handlers::wasm::{WasmRuntime, sha256_hex};
use hookhost::outcome::{Decision, HookStatus, Outcome};
use hookhost::policy::allowlist::{SigningKey, parse_signing_key, sign_digest, signature_path};
use hookhost::{HostBuilder, WorkspaceTrust};
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::support::{bash, settings, wasm_hook};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A signing key from a fixed seed, and its public key in hex.
fn key(seed: u8) -> (SigningKey, String) {
    let key = parse_signing_key(hex(&[seed; 32]).as_bytes()).unwrap();
    let public = hex(key.verifying_key().as_bytes());
    (key, public)
}

/// A copy of a built plugin in `dir`, so that tests can sign, alter and replace it.
fn copy_plugin(from: &str, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(from, &path).unwrap();
    path
}

/// A fresh sandbox with its own compile cache, so that "not compiled" is observable.
fn fresh_runtime(cache: &Path) -> Arc<WasmRuntime> {
    Arc::new(WasmRuntime::new(Some(cache.to_path_buf())))
}

fn cache_entries(cache: &Path) -> Vec<String> {
    std::fs::read_dir(cache)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cwasm"))
                .collect()
        })
        .unwrap_or_default()
}

/// Dispatches `rm -rf /` through a host with managed policy `managed` and the given
/// wasm hooks (plus a command hook that must keep working).
async fn dispatch(
    project: &Path,
    runtime: Arc<WasmRuntime>,
    managed: Value,
    hooks: Vec<Value>,
) -> Outcome {
    let managed_dir = project.join("managed");
    std::fs::create_dir_all(&managed_dir).unwrap();
    std::fs::write(managed_dir.join("managed.json"), managed.to_string()).unwrap();
    let mut all = vec![json!({"type": "command", "id": "cmd", "command": "true"})];
    all.extend(hooks);
    let host = HostBuilder::new(project)
        .managed_dir(&managed_dir)
        .settings(settings("PreToolUse", "Bash", all).to_string())
        .wasm_runner(runtime)
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    host.dispatch("PreToolUse", bash("rm -rf /")).await.unwrap()
}

fn report<'a>(outcome: &'a Outcome, id: &str) -> &'a hookhost::outcome::HookReport {
    outcome
        .hooks
        .iter()
        .find(|h| h.id == id)
        .unwrap_or_else(|| panic!("no hook {id}: {outcome:#?}"))
}

fn assert_refused(outcome: &Outcome, id: &str, digest: &str, words: &str) {
    let r = report(outcome, id);
    assert_eq!(r.status, HookStatus::Failed, "{outcome:#?}");
    let message = r.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("refused before compiling")
            && message.contains(digest)
            && message.contains(words),
        "{message}"
    );
    assert_eq!(report(outcome, "cmd").status, HookStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allowlisted_digests_run_and_others_are_never_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let allowed = copy_plugin(plugins::DENY_DANGEROUS_BASH, dir.path(), "allowed.wasm");
    let other = copy_plugin(plugins::TEST_GATE, dir.path(), "other.wasm");
    let allowed_digest = sha256_hex(&std::fs::read(&allowed).unwrap());
    let other_digest = sha256_hex(&std::fs::read(&other).unwrap());
    let runtime = fresh_runtime(&cache);
    let managed = json!({
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": [{"sha256": allowed_digest, "name": "deny-dangerous-bash"}]
    });
    let hooks = vec![
        wasm_hook(allowed.to_str().unwrap(), json!({"id": "allowed"})),
        wasm_hook(other.to_str().unwrap(), json!({"id": "other"})),
    ];
    let outcome = dispatch(dir.path(), runtime.clone(), managed.clone(), hooks.clone()).await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert_eq!(report(&outcome, "allowed").status, HookStatus::Blocked);
    assert_refused(&outcome, "other", &other_digest, "no signing keys");
    let compiled = cache_entries(&cache);
    assert!(
        compiled.iter().any(|n| n.starts_with(&allowed_digest))
            && !compiled.iter().any(|n| n.starts_with(&other_digest)),
        "{compiled:?}"
    );

    // Without `requireAllowlistedPlugins` the list admits, it does not restrict.
    let outcome = dispatch(
        dir.path(),
        runtime,
        json!({"pluginAllowlist": managed["pluginAllowlist"]}),
        hooks,
    )
    .await;
    assert_eq!(report(&outcome, "other").status, HookStatus::Ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_admit_plugins_and_forged_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let runtime = fresh_runtime(&cache);
    let (trusted_key, trusted_public) = key(1);
    let (unknown_key, _) = key(2);
    let managed = json!({
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": [{"publicKey": trusted_public, "name": "security team"}]
    });
    let sign = |path: &Path, key: &SigningKey| {
        let digest = sha256_hex(&std::fs::read(path).unwrap());
        std::fs::write(signature_path(path), sign_digest(key, &digest).unwrap()).unwrap();
        digest
    };

    let good = copy_plugin(plugins::DENY_DANGEROUS_BASH, dir.path(), "good.wasm");
    sign(&good, &trusted_key);
    let by_unknown = copy_plugin(plugins::TEST_GATE, dir.path(), "unknown.wasm");
    let unknown_digest = sign(&by_unknown, &unknown_key);
    let tampered = copy_plugin(plugins::REDACT_SECRETS, dir.path(), "tampered.wasm");
    let tampered_digest = sign(&tampered, &trusted_key);
    let mut sig = std::fs::read_to_string(signature_path(&tampered)).unwrap();
    let flipped = if sig.starts_with('0') { "1" } else { "0" };
    sig.replace_range(0..1, flipped);
    std::fs::write(signature_path(&tampered), sig).unwrap();
    let altered = copy_plugin(plugins::PROTECT_PATHS, dir.path(), "altered.wasm");
    sign(&altered, &trusted_key);
    let mut bytes = std::fs::read(&altered).unwrap();
    bytes.extend_from_slice(b"\0appended after signing");
    std::fs::write(&altered, &bytes).unwrap();
    let altered_digest = sha256_hex(&bytes);
    let unsigned = copy_plugin(plugins::HOSTILE, dir.path(), "unsigned.wasm");
    let unsigned_digest = sha256_hex(&std::fs::read(&unsigned).unwrap());

    let hooks = [
        ("good", &good),
        ("unknown", &by_unknown),
        ("tampered", &tampered),
        ("altered", &altered),
        ("unsigned", &unsigned),
    ]
    .into_iter()
    .map(|(id, p)| wasm_hook(p.to_str().unwrap(), json!({"id": id})))
    .collect();
    let outcome = dispatch(dir.path(), runtime, managed, hooks).await;
    assert_eq!(report(&outcome, "good").status, HookStatus::Blocked);
    assert_eq!(outcome.decision, Decision::Deny);
    assert_refused(
        &outcome,
        "unknown",
        &unknown_digest,
        "does not verify under any allowlisted key",
    );
    assert_refused(&outcome, "tampered", &tampered_digest, "does not verify");
    assert_refused(&outcome, "altered", &altered_digest, "does not verify");
    assert_refused(&outcome, "unsigned", &unsigned_digest, "has no signature");
    let compiled = cache_entries(&cache);
    assert_eq!(
        compiled.len(),
        1,
        "only the admitted plugin compiles: {compiled:?}"
    );
}

/// The plugin "file" is a FIFO whose writer serves the allowlisted bytes on the first
/// open and other bytes on every later open. A host that checked one read and compiled
/// another would run the other bytes; hookhost refuses a plugin path that is not a
/// regular file before it opens it for reading, so neither payload is ever asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_replaced_between_check_and_compile_cannot_slip_through() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let fifo = dir.path().join("swap.wasm");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let good = std::fs::read(plugins::DENY_DANGEROUS_BASH).unwrap();
    let evil = std::fs::read(plugins::TEST_GATE).unwrap();
    let good_digest = sha256_hex(&good);
    let writer = {
        let (fifo, good, evil) = (fifo.canonicalize().unwrap(), good.clone(), evil.clone());
        std::thread::spawn(move || {
            // Each open-for-write blocks until a reader opens the FIFO.
            std::fs::write(&fifo, &good).unwrap();
            // Serve the second payload only to a second open: wait until the first reader
            // (in this process) has closed the FIFO, so that it saw the end of the first.
            while open_in_this_process(&fifo) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::fs::write(&fifo, &evil).unwrap();
        })
    };
    let managed = json!({
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": [{"sha256": good_digest}]
    });
    let hooks = vec![wasm_hook(fifo.to_str().unwrap(), json!({"id": "swap"}))];
    let outcome = dispatch(dir.path(), fresh_runtime(&cache), managed, hooks).await;
    // A plugin path that is not a regular file is refused before it is read (issue 14.4),
    // naming the path: neither payload is read, let alone compiled or run.
    let swap = report(&outcome, "swap");
    assert_eq!(swap.status, HookStatus::Failed, "{outcome:#?}");
    assert_ne!(outcome.decision, Decision::Allow, "{outcome:#?}");
    assert!(format!("{swap:?}").contains("swap.wasm"), "{swap:?}");
    // Both payloads are still waiting for a reader: the host never opened the file.
    assert_eq!(std::fs::read(&fifo).unwrap(), good);
    assert_eq!(std::fs::read(&fifo).unwrap(), evil);
    writer.join().unwrap();
}

/// Whether a file descriptor of this process refers to `path`.
fn open_in_this_process(path: &Path) -> bool {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

/// A plugin replaced after the workspace was judged trusted (between the host's build and
/// the dispatch): the trust fingerprint pins the plugin's digest, so the new bytes are
/// refused at load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_replaced_after_trust_is_refused_at_load() {
    let project = tempfile::tempdir().unwrap();
    let hookhost_dir = project.path().join(".hookhost");
    std::fs::create_dir_all(&hookhost_dir).unwrap();
    let plugin = copy_plugin(plugins::DENY_DANGEROUS_BASH, &hookhost_dir, "gate.wasm");
    let trusted_digest = sha256_hex(&std::fs::read(&plugin).unwrap());
    std::fs::write(
        hookhost_dir.join("hooks.json"),
        settings(
            "PreToolUse",
            "Bash",
            vec![wasm_hook("gate.wasm", json!({"id": "gate"}))],
        )
        .to_string(),
    )
    .unwrap();
    let host = HostBuilder::new(project.path())
        .workspace_trust(WorkspaceTrust::Explicit)
        .wasm_runner(fresh_runtime(&project.path().join("cache")))
        .build();
    std::fs::copy(plugins::TEST_GATE, &plugin).unwrap();
    let outcome = host.dispatch("PreToolUse", bash("rm -rf /")).await.unwrap();
    let r = report(&outcome, "gate");
    assert_eq!(r.status, HookStatus::Failed, "{outcome:#?}");
    let message = r.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("refused") && message.contains(&trusted_digest),
        "{message}"
    );
}
