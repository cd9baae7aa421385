//! The demo: the session with command hooks (the wasm variant is tested in
//! `tests/it/demo.rs`), and `hookhost demo` end to end.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use hookhost::demo::{DemoDirs, PLUGINS, prepare, run_session};
use hookhost::handlers::wasm::WasmRuntime;
use hookhost::outcome::Decision;

#[tokio::test]
async fn the_demo_session_decides_every_step() {
    let root = tempfile::tempdir().unwrap();
    let mut dirs = DemoDirs::new(root.path());
    prepare(&mut dirs, None).unwrap();
    let mut seen = 0;
    let steps = run_session(&dirs, Arc::new(WasmRuntime::new(None)), |_| seen += 1)
        .await
        .unwrap();
    assert_eq!(seen, steps.len());
    let decisions: Vec<Option<Decision>> = steps
        .iter()
        .map(|s| s.outcome.as_ref().map(|o| o.decision))
        .collect();
    assert_eq!(
        decisions,
        [
            Some(Decision::None),  // session starts, untrusted
            None,                  // hookhost trust
            Some(Decision::None),  // session starts again
            Some(Decision::None),  // prompt
            Some(Decision::None),  // cargo build
            Some(Decision::Deny),  // rm -rf /
            Some(Decision::Deny),  // curl | sh
            Some(Decision::Allow), // npm → pnpm
            Some(Decision::Deny),  // .env
            Some(Decision::None),  // redaction
            None,                  // fuel (needs wasm)
            None,                  // grant (needs wasm)
            None,                  // allowlist (needs wasm)
            Some(Decision::Block), // Stop gate
            Some(Decision::None),  // Stop after the tests
        ]
    );
    // Before the trust step the repository's hooks are skipped, and the agent says so.
    let first = &steps[0];
    assert!(
        first
            .outcome
            .as_ref()
            .unwrap()
            .hooks
            .iter()
            .all(|h| h.status == hookhost::outcome::HookStatus::Skipped),
        "{first:#?}"
    );
    assert!(
        first.agent_sees.iter().any(|l| l.contains(
            "project hooks are not running: this workspace is not trusted — run `hookhost trust` in"
        )),
        "{:?}",
        first.agent_sees
    );
    assert!(
        steps[1].caption.starts_with("$ hookhost trust "),
        "{}",
        steps[1].caption
    );
    for sandboxed in &steps[10..13] {
        assert!(
            sandboxed
                .caption
                .ends_with("skipped: needs the wasm plugins"),
            "{}",
            sandboxed.caption
        );
    }
    let rewritten = steps[7].outcome.as_ref().unwrap();
    assert_eq!(
        rewritten.updated_input,
        Some(serde_json::json!({"command": "pnpm install"}))
    );
    let redacted = steps[9]
        .outcome
        .as_ref()
        .unwrap()
        .updated_tool_output
        .as_ref()
        .unwrap()
        .to_string();
    assert!(!redacted.contains("ghp_Abc123SECRET"), "{redacted}");
    assert!(
        steps
            .iter()
            .filter_map(|s| s.outcome.as_ref())
            .flat_map(|o| &o.hooks)
            .all(|h| h.kind == "command")
    );
    // Its own trust store and audit log, in its directory.
    assert!(dirs.trust_store().starts_with(root.path()) && dirs.trust_store().is_file());
    let audit = std::fs::read_to_string(dirs.audit_log()).unwrap();
    assert_eq!(audit.lines().count(), 11, "{audit}");
}

/// A second run over the same directory keeps the user's edits and judges trust again:
/// an edited hook file is "changed since you trusted it", and the demo trusts it anew.
#[tokio::test]
async fn a_kept_demo_keeps_edits_and_sees_them_change_trust() {
    let root = tempfile::tempdir().unwrap();
    let mut dirs = DemoDirs::new(root.path());
    prepare(&mut dirs, None).unwrap();
    let runtime = Arc::new(WasmRuntime::new(None));
    run_session(&dirs, runtime.clone(), |_| {}).await.unwrap();
    // Trusted now: the next run starts with the hooks running.
    let mut again = DemoDirs::new(root.path());
    prepare(&mut again, None).unwrap();
    let steps = run_session(&again, runtime.clone(), |_| {}).await.unwrap();
    assert!(
        steps[0].caption.contains("trusted from an earlier run"),
        "{}",
        steps[0].caption
    );
    assert!(steps[0].agent_sees.is_empty(), "{:?}", steps[0].agent_sees);
    // The user edits the repository's hooks: kept by `prepare`, and no longer trusted.
    let hooks = again.project_hooks();
    let edited = std::fs::read_to_string(&hooks)
        .unwrap()
        .replace("protect-env", "protect-dotenv");
    std::fs::write(&hooks, &edited).unwrap();
    let mut third = DemoDirs::new(root.path());
    prepare(&mut third, None).unwrap();
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), edited);
    let steps = run_session(&third, runtime, |_| {}).await.unwrap();
    assert!(
        steps[0].agent_sees.iter().any(
            |l| l.contains("changed since you trusted it: `.hookhost/hooks.json` was modified")
        ),
        "{:?}",
        steps[0].agent_sees
    );
    assert!(steps[1].caption.starts_with("$ hookhost trust"));
}

/// The example plugins, built for wasm32-wasip2 from `plugins/` (as the tests of the CLI
/// build them).
fn built_plugins() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
    hookhost::demo::build_plugins(&workspace, PLUGINS).expect("build the example plugins")
}

fn demo_command(root: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost"));
    // Nothing of the real user's: a home, data, cache and managed dir of the test's own,
    // which the demo must not write to either.
    cmd.env("HOME", root.join("user-home"))
        .env("HOOKHOST_HOME", root.join("user-config"))
        .env("HOOKHOST_DATA_DIR", root.join("user-data"))
        .env("HOOKHOST_MANAGED_DIR", root.join("user-managed"))
        .env("HOOKHOST_CACHE_DIR", root.join("user-cache"))
        .stdin(Stdio::null());
    cmd
}

#[test]
fn hookhost_demo_runs_the_sandbox_steps_and_keeps_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("demo");
    let out = demo_command(root.path())
        .args(["demo", "--keep"])
        .arg(&kept)
        .env("HOOKHOST_DEMO_PLUGINS", built_plugins())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The plugins are compiled before the session, with progress.
    for plugin in PLUGINS {
        assert!(
            stderr.contains(&format!("  {}.wasm: ", plugin.replace('-', "_"))),
            "{stderr}"
        );
    }
    for expected in [
        "project hooks are not running: this workspace is not trusted — run `hookhost trust` in",
        "$ hookhost trust ",
        "fuel exhausted after 20000000 units",
        "read denied: ",
        "refused before compiling: sha256",
        "is not in managed `pluginAllowlist`",
        "Edit them and run it again: hookhost demo --keep",
    ] {
        assert!(stdout.contains(expected), "`{expected}` missing:\n{stdout}");
    }
    // The secret outside the grant is never shown.
    assert!(!stdout.contains("a stand-in for your real key"), "{stdout}");
    // Kept, and nothing written where the real user's files would be.
    assert!(kept.join("project/.hookhost/hooks.json").is_file());
    assert!(kept.join("managed/managed.json").is_file());
    assert!(kept.join("data/audit.jsonl").is_file());
    for untouched in ["user-config", "user-data", "user-managed"] {
        assert!(
            !root.path().join(untouched).exists(),
            "{untouched} was written"
        );
    }
}

#[test]
fn hookhost_demo_without_the_wasm_target_runs_what_it_can_and_says_why() {
    let root = tempfile::tempdir().unwrap();
    let out = demo_command(root.path())
        .args(["demo", "--keep"])
        .arg(root.path().join("demo"))
        .env_remove("HOOKHOST_DEMO_PLUGINS")
        .env("RUSTC", root.path().join("no-rustc-here"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "running with command hooks only, without the sandbox steps: cannot run rustc"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("skipped: needs the wasm plugins"),
        "{stdout}"
    );
    assert!(
        stdout.contains("refusing to delete the filesystem root"),
        "{stdout}"
    );
}

/// `hookhost demo | head` ends quietly: no "Broken pipe" panic, exit 141 (SIGPIPE's
/// conventional status), not 101.
#[test]
fn a_closed_stdout_ends_the_demo_quietly() {
    let root = tempfile::tempdir().unwrap();
    let mut child = demo_command(root.path())
        .args(["demo", "--keep"])
        .arg(root.path().join("demo"))
        .env("RUSTC", root.path().join("no-rustc-here"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // like `| head` that has read enough
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
}
