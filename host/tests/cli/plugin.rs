//! `hookhost plugin inspect` and `hookhost plugin test` on a real plugin (built from
//! `plugins/` for wasm32-wasip2, like the demo does).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::{TestEnv, bash_input};

fn deny_dangerous_bash() -> &'static Path {
    static PLUGIN: OnceLock<PathBuf> = OnceLock::new();
    PLUGIN.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins");
        hookhost::demo::build_plugins(&workspace, &["deny-dangerous-bash"])
            .expect("build the example plugin")
            .join("deny_dangerous_bash.wasm")
    })
}

#[test]
fn inspect_shows_what_the_plugin_declares_and_its_digest() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    let run = env.run(&["plugin", "inspect", "--json", plugin], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let info = run.json();
    assert_eq!(info["name"], "deny-dangerous-bash");
    assert_eq!(info["witVersion"], "0.1.0", "{info}");
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

/// Where the instance pool's address space (about 4 TiB of reservations) cannot be had,
/// as under `ulimit -v`, the daemon (which uses the pool) allocates per instance and
/// plugins still run.
#[test]
fn plugins_run_without_the_instance_pool_under_an_address_space_limit() {
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    let settings = serde_json::json!({"hooks": {"PreToolUse": [
        {"hooks": [{"type": "wasm", "plugin": plugin}]}
    ]}});
    let mut cmd = env.command();
    cmd.args(["serve", "--stdio", "--settings", &settings.to_string()]);
    // 64 GiB: room for one instance's 4 GiB reservation, not for a pool of them.
    let limit = 64 << 30;
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &rlimit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let request =
        serde_json::json!({"id": 1, "event": "PreToolUse", "input": bash_input("rm -rf /")});
    let run = env.run_with(&mut cmd, &format!("{request}\n"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer: Value = serde_json::from_str(run.stdout.trim()).expect("one answer line");
    assert_eq!(answer["outcome"]["decision"], "deny", "{answer}");
    if wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
        assert!(
            run.stderr.contains("allocating per instance"),
            "the pool was tried first: {}",
            run.stderr
        );
    }
}
