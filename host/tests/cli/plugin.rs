//! `hookhost plugin inspect` and `hookhost plugin test` on a real plugin (built from
//! `plugins/` for wasm32-wasip2, like the demo does).

use serde_json::Value;

use crate::support::{TestEnv, bash_input, deny_dangerous_bash};

#[test]
fn inspect_shows_what_the_plugin_declares_and_its_digest() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    let run = env.run(&["plugin", "inspect", "--json", plugin], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let info = run.json();
    assert_eq!(info["name"], "deny-dangerous-bash");
    assert_eq!(info["witVersion"], "0.2.0", "{info}");
    assert_eq!(
        info["capabilities"]["model"], false,
        "it never asks the model: {info}"
    );
    let digest = hookhost::handlers::wasm::sha256_hex(&std::fs::read(plugin).unwrap());
    assert_eq!(info["sha256"], digest);
    assert!(
        info["events"]
            .as_array()
            .unwrap()
            .contains(&Value::from("PreToolUse")),
        "{info}"
    );
    // The first run of this environment compiled it; a second one loads the cache.
    assert_ne!(info["cache"], "hit", "{info}");
    let again = env.run(&["plugin", "inspect", "--json", plugin], "").json();
    assert_eq!(again["cache"], "hit", "{again}");
}

#[test]
fn test_runs_one_event_and_reports_limits() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    let test = |extra: &[&str], command: &str| {
        let mut args = vec!["plugin", "test", plugin, "--event", "PreToolUse"];
        args.extend_from_slice(extra);
        env.run(&args, &bash_input(command).to_string())
    };

    let run = test(&[], "rm -rf /");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json();
    assert_eq!(report["status"], "ok");
    assert_eq!(
        report["response"]["hookSpecificOutput"]["permissionDecision"], "deny",
        "{report}"
    );
    assert!(report["fuel"].as_u64().is_some_and(|f| f > 0), "{report}");

    let run = test(&[], "cargo test");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.json()["response"]["hookSpecificOutput"]["permissionDecision"].is_null(),
        "no opinion on an ordinary command"
    );

    // Too little fuel: exit 1, and the report names the limit.
    let run = test(&["--fuel", "1000"], "rm -rf /");
    assert_eq!(run.code, 1);
    let report = run.json();
    assert_eq!(report["status"], "failed", "{report}");
    assert!(
        report["message"].as_str().unwrap().contains("fuel"),
        "{report}"
    );
}

/// `--format claude`: the response as the plain JSON a Claude Code command hook prints,
/// on stdout; the report beside it on stderr.
#[test]
fn test_prints_claude_code_hook_json_beside_the_report() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    let args = [
        "plugin",
        "test",
        plugin,
        "--event",
        "PreToolUse",
        "--format",
        "claude",
    ];
    let run = env.run(&args, &bash_input("rm -rf /").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout.lines().count(),
        1,
        "one line of JSON: {}",
        run.stdout
    );
    let hook_json = run.json();
    assert_eq!(
        hook_json["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
    assert_eq!(
        hook_json["hookSpecificOutput"]["hookEventName"],
        "PreToolUse"
    );
    let report: Value = serde_json::from_str(&run.stderr).unwrap();
    assert_eq!(report["status"], "ok");
    assert_eq!(report["response"], hook_json);
    // No opinion: nothing on stdout, as a command hook with nothing to say.
    let run = env.run(&args, &bash_input("ls").to_string());
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
}

/// `plugin new --lang rust` from anywhere: the scaffold carries its own copy of the
/// guest SDK (an installed `hookhost` has no source tree to point at).
#[test]
fn a_rust_scaffold_outside_the_repository_vendors_the_sdk() {
    let env = TestEnv::new();
    let outside = tempfile::tempdir().unwrap();
    let mut cmd = env.command();
    cmd.current_dir(outside.path())
        .args(["plugin", "new", "--lang", "rust", "no-force-push"]);
    let run = env.run_with(&mut cmd, "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let dir = outside.path().join("no-force-push");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(r#"hookhost-guest = { path = "hookhost-guest" }"#),
        "{manifest}"
    );
    assert!(!manifest.contains(env!("CARGO_MANIFEST_DIR")), "{manifest}");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (vendored, original) in [
        ("hookhost-guest/src/lib.rs", "guest-sdk/src/lib.rs"),
        ("hookhost-guest/wit/hook.wit", "wit/hook.wit"),
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join(vendored)).unwrap(),
            std::fs::read_to_string(repo.join(original)).unwrap(),
            "{vendored}"
        );
    }
    assert!(
        run.stdout.contains("hookhost-guest/Cargo.toml"),
        "{}",
        run.stdout
    );
}
