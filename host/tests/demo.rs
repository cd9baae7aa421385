//! The demo: the session with command hooks (the wasm variant is tested in
//! `host/tests/it/demo.rs`), and `hookhost demo` end to end.

use std::path::Path;
use std::process::Stdio;

use serde_json::json;

#[path = "common/demo.rs"]
mod demo_run;
#[path = "common/skip.rs"]
mod skip;

use demo_run::{PLUGINS, demo_command, project_hooks, run_demo, time_server};

/// `hookhost demo` on a machine that cannot build the plugins: the session with command
/// hooks only.
fn without_wasm(root: &Path) -> std::process::Command {
    let mut cmd = demo_command(root);
    cmd.env_remove("HOOKHOST_DEMO_PLUGINS")
        .env("RUSTC", root.join("no-rustc-here"));
    cmd
}

#[test]
fn the_demo_session_decides_every_step() {
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("demo");
    let run = run_demo(without_wasm(root.path()), &kept);
    let steps = &run.steps;
    let decisions: Vec<Option<&str>> = steps.iter().map(|s| s.decision()).collect();
    assert_eq!(
        decisions,
        [
            Some("none"),  // session starts, untrusted
            None,          // hookhost trust
            Some("none"),  // session starts again
            Some("none"),  // prompt
            Some("none"),  // cargo build
            Some("deny"),  // rm -rf /
            Some("deny"),  // curl | sh
            Some("allow"), // npm → pnpm
            Some("deny"),  // .env
            Some("none"),  // redaction
            None,          // fuel (needs wasm)
            None,          // grant (needs wasm)
            None,          // allowlist (needs wasm)
            Some("block"), // the stand-in judge refuses deleting the tests
            None,          // MCP (no time server here)
            None,          // MCP isError (no time server here)
            Some("block"), // Stop gate
            Some("none"),  // Stop after the tests
        ],
        "{}",
        run.stdout
    );
    // Before the trust step the repository's hooks are skipped, and the agent says so.
    let first = &steps[0];
    assert!(
        first.hooks().iter().all(|h| h["status"] == "skipped"),
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
    let rewritten = steps[7].outcome();
    assert_eq!(
        rewritten["updatedInput"],
        serde_json::json!({"command": "pnpm install"})
    );
    let redacted = &steps[9].outcome()["updatedToolOutput"];
    assert!(!redacted.is_null(), "{redacted}");
    assert!(
        !redacted.to_string().contains("ghp_Abc123SECRET"),
        "{redacted}"
    );
    assert!(
        steps
            .iter()
            .flat_map(|s| s.hooks())
            .all(|h| h["type"] == "command" || h["id"] == "judge-prompt")
    );
    // The prompt hook: the stand-in allows the first prompt and refuses deleting the
    // tests, which blocks the prompt and ends the turn (§1.10: UserPromptSubmit).
    let judged = steps[3].hook("judge-prompt");
    assert_eq!(
        (&judged["type"], &judged["status"]),
        (&json!("prompt"), &json!("ok")),
        "{judged}"
    );
    assert!(judged["tokens"].as_u64().unwrap() > 0, "{judged}");
    let refused = steps[13].outcome();
    assert_eq!(refused["decision"], "block", "{refused:#}");
    assert_eq!(refused["continue"], false, "{refused:#}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .starts_with("stand-in judge (a fixed rule, not a model): "),
        "{refused:#}"
    );
    assert!(
        run.stdout
            .contains("It is a stand-in, not a model; no API key and no network are used."),
        "{}",
        run.stdout
    );
    for skipped in &steps[14..16] {
        assert!(
            skipped
                .caption
                .contains("skipped: `HOOKHOST_DEMO_TIME_SERVER` names ")
                && skipped.caption.ends_with("which is not an executable file"),
            "{}",
            skipped.caption
        );
    }
    // Its own trust store and audit log, in its directory.
    let trust_store = hookhost::trust::TrustStore::in_data_dir(&kept.join("data"))
        .path()
        .to_path_buf();
    assert!(trust_store.starts_with(root.path()) && trust_store.is_file());
    let audit = std::fs::read_to_string(kept.join("data/audit.jsonl")).unwrap();
    let dispatches = audit.lines().filter(|l| !l.contains("\"kind\":"));
    assert_eq!(dispatches.count(), 12, "{audit}");
    assert!(audit.contains("\"tokens\""), "{audit}");
}

/// A second run over the same directory keeps the user's edits and judges trust again:
/// an edited hook file is "changed since you trusted it", and the demo trusts it anew.
#[test]
fn a_kept_demo_keeps_edits_and_sees_them_change_trust() {
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("demo");
    run_demo(without_wasm(root.path()), &kept);
    // Trusted now: the next run starts with the hooks running.
    let steps = run_demo(without_wasm(root.path()), &kept).steps;
    assert!(
        steps[0].caption.contains("trusted from an earlier run"),
        "{}",
        steps[0].caption
    );
    assert!(steps[0].agent_sees.is_empty(), "{:?}", steps[0].agent_sees);
    // The user edits the repository's hooks: kept by the next run, and no longer trusted.
    let hooks = project_hooks(&kept);
    let edited = std::fs::read_to_string(&hooks)
        .unwrap()
        .replace("protect-env", "protect-dotenv");
    std::fs::write(&hooks, &edited).unwrap();
    let steps = run_demo(without_wasm(root.path()), &kept).steps;
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), edited);
    assert!(
        steps[0].agent_sees.iter().any(
            |l| l.contains("changed since you trusted it: `.hookhost/hooks.json` was modified")
        ),
        "{:?}",
        steps[0].agent_sees
    );
    assert!(steps[1].caption.starts_with("$ hookhost trust"));
}

/// The example plugins, built for wasm32-wasip2 from `plugins/` by the test-plugins
/// artifacts crate.
fn built_plugins() -> &'static Path {
    Path::new(hookhost_test_plugins::plugins::DENY_DANGEROUS_BASH)
        .parent()
        .unwrap()
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

/// The prompt step runs against the demo's own stand-in with a key of its own, whatever
/// the user's environment says: a real key and endpoint set by the user are neither
/// used nor shown (the stand-in accepts only the demo's key, so the step would fail
/// with the user's).
#[test]
fn the_prompt_step_uses_the_stand_in_never_the_users_key_or_endpoint() {
    const REAL_KEY: &str = "sk-ant-api03-the-users-real-key-NEVER-SENT";
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("demo");
    let mut cmd = without_wasm(root.path());
    cmd.env("ANTHROPIC_API_KEY", REAL_KEY)
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("DEMO_JUDGE_API_KEY", "a-key-set-before-the-demo");
    let run = run_demo(cmd, &kept);
    let refused = &run.steps[13];
    assert_eq!(refused.decision(), Some("block"), "{}", run.stdout);
    assert_eq!(refused.hook("judge-prompt")["status"], "blocked");
    assert!(
        run.stdout
            .contains("The stand-in judge answered 2 model requests."),
        "{}",
        run.stdout
    );
    let audit = std::fs::read_to_string(kept.join("data/audit.jsonl")).unwrap();
    for text in [&run.stdout, &run.stderr, &audit] {
        assert!(!text.contains(REAL_KEY), "{text}");
        assert!(!text.contains("DEMO_JUDGE_API_KEY="), "{text}");
    }
}

/// With `mcp-server-time` installed (`.ci/run` puts it under the target dir), the MCP
/// steps run against it: the `${tool_input.timezone}` call answers, and a timezone it
/// refuses is its `isError`, a non-blocking error (the call proceeds, the agent is told).
#[test]
fn hookhost_demo_calls_the_time_server_when_it_is_installed() {
    let test = "demo::hookhost_demo_calls_the_time_server_when_it_is_installed";
    let Some(server) = time_server() else {
        skip::skipped(
            test,
            "mcp-server-time is not installed (.ci/run installs it)",
        );
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let mut cmd = without_wasm(root.path());
    cmd.env("HOOKHOST_DEMO_TIME_SERVER", &server);
    let run = run_demo(cmd, &root.path().join("demo"));
    assert!(
        run.stdout.contains(&format!(
            "hookhost demo: mcp_tool hooks call {} (over stdio)",
            server.display()
        )),
        "{}",
        run.stdout
    );
    let answered = &run.steps[14];
    assert_eq!(answered.decision(), Some("none"), "{}", run.stdout);
    let hook = answered.hook("time-check");
    assert_eq!(
        (&hook["type"], &hook["status"]),
        (&json!("mcp_tool"), &json!("ok")),
        "{hook}"
    );
    let refused = &run.steps[15];
    assert_eq!(refused.decision(), Some("none"), "{}", run.stdout);
    let hook = refused.hook("time-check");
    assert_eq!(hook["status"], "failed", "{hook}");
    assert!(
        hook["message"]
            .as_str()
            .unwrap()
            .contains("answered with isError"),
        "{hook}"
    );
    assert!(
        refused
            .agent_sees
            .iter()
            .any(|l| l.contains("time-check") && l.contains("isError")),
        "{:?}",
        refused.agent_sees
    );
}
