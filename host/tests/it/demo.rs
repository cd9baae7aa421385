//! The demo session through the real example plugins, and the build of those plugins
//! from the sources the binary carries (what a `cargo install`ed `hookhost demo` does),
//! both through `hookhost demo` as a user runs it.

use std::path::{Path, PathBuf};

use hookhost_test_plugins::plugins;

#[path = "../common/demo.rs"]
mod demo_run;

use demo_run::{PLUGINS, demo_command, run_demo};

fn built() -> &'static Path {
    Path::new(plugins::DENY_DANGEROUS_BASH).parent().unwrap()
}

/// The plugins' compile lines on the demo's stderr (`  NAME.wasm: N ms[ (from the
/// cache)]`), as (file, from the cache).
fn compiled(stderr: &str) -> Vec<(String, bool)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_once(".wasm: "))
        .map(|(name, rest)| (format!("{name}.wasm"), rest.ends_with("(from the cache)")))
        .collect()
}

#[test]
fn the_demo_session_runs_the_example_plugins() {
    let root = tempfile::tempdir().unwrap();
    let kept = root.path().join("demo");
    let mut cmd = demo_command(root.path());
    cmd.env("HOOKHOST_DEMO_PLUGINS", built());
    let run = run_demo(cmd, &kept);
    // Every plugin is compiled before the session; a second run finds them all cached.
    let files: Vec<String> = PLUGINS
        .iter()
        .map(|p| format!("{}.wasm", p.replace('-', "_")))
        .collect();
    let first: Vec<String> = compiled(&run.stderr).into_iter().map(|(f, _)| f).collect();
    assert_eq!(first, files, "{}", run.stderr);

    let steps = &run.steps;
    let decisions: Vec<Option<&str>> = steps.iter().map(|s| s.decision()).collect();
    assert_eq!(
        decisions,
        [
            Some("none"),
            None,
            Some("none"),
            Some("none"),
            Some("none"),
            Some("deny"),
            Some("deny"),
            Some("allow"),
            Some("deny"),
            Some("none"),
            Some("none"),  // fuel: the hook fails, the host goes on (fail open)
            Some("none"),  // grant: the read is refused inside the sandbox
            Some("deny"),  // allowlist: refused before compiling; a guard not admitted fails closed
            Some("block"), // the stand-in judge refuses deleting the tests
            None,          // MCP (no time server here)
            None,          // MCP isError (no time server here)
            Some("block"),
            Some("none"),
        ],
        "{}",
        run.stdout
    );
    let wasm: Vec<&str> = steps
        .iter()
        .flat_map(|s| s.hooks())
        .filter(|h| h["type"] == "wasm" && h["status"] != "skipped")
        .map(|h| h["id"].as_str().unwrap())
        .collect();
    for plugin in [
        "deny-dangerous-bash",
        "protect-paths",
        "redact-secrets",
        "test-gate",
        "hostile-loop",
        "hostile-read",
        "unvetted",
    ] {
        assert!(wasm.contains(&plugin), "{plugin} did not run: {wasm:?}");
    }
    let fuel = steps[10].hook("hostile-loop");
    assert_eq!(fuel["status"], "failed");
    assert_eq!(fuel["fuel"], 20_000_000);
    assert!(
        steps[10]
            .agent_sees
            .iter()
            .any(|l| l.contains("hostile-loop") && l.contains("fuel exhausted")),
        "{:?}",
        steps[10].agent_sees
    );
    let read = steps[11].outcome();
    assert_eq!(steps[11].hook("hostile-read")["status"], "ok");
    assert!(
        read["additionalContext"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c.as_str().unwrap().starts_with("read denied: ")),
        "{read:#}"
    );
    assert!(!run.stdout.contains("a stand-in for your real key"));
    let refused = steps[12].hook("unvetted");
    assert_eq!(refused["status"], "failed");
    assert!(
        steps[12]
            .agent_sees
            .iter()
            .any(|l| l.contains("refused before compiling")),
        "{:?}",
        steps[12].agent_sees
    );
    // The reviewed plugins are allowlisted by digest and run.
    assert_eq!(steps[5].hook("deny-dangerous-bash")["status"], "blocked");
    let output = steps[9].outcome()["updatedToolOutput"].to_string();
    assert!(
        output.contains("[REDACTED]") && !output.contains("ghp_Abc123SECRET"),
        "{output}"
    );
    assert!(
        steps[16].outcome()["reason"]
            .as_str()
            .unwrap()
            .contains("test-gate")
    );

    let again = run_demo(
        {
            let mut cmd = demo_command(root.path());
            cmd.env("HOOKHOST_DEMO_PLUGINS", built());
            cmd
        },
        &kept,
    );
    let second = compiled(&again.stderr);
    assert_eq!(second.len(), PLUGINS.len(), "{}", again.stderr);
    for (file, cached) in second {
        assert!(cached, "{file} compiled again: {}", again.stderr);
    }
}

/// The demo's plugins build from the sources embedded in the binary, with the vendored
/// guest SDK, outside the repository: what `hookhost demo` does without a source tree.
/// The build directory persists under the target dir, so only the first run is slow.
#[test]
fn the_demo_plugins_build_from_the_embedded_sources() {
    // `hookhost demo` builds in `$HOOKHOST_CACHE_DIR/demo-build`.
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let build = cache.join("demo-build");
    let root = tempfile::tempdir().unwrap();
    let mut cmd = demo_command(root.path());
    cmd.env_remove("HOOKHOST_DEMO_PLUGINS")
        .env("HOOKHOST_CACHE_DIR", &cache);
    let run = run_demo(cmd, &root.path().join("demo"));
    let built: Vec<&str> = run
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("  building "))
        .filter_map(|l| l.split_once(" …"))
        .map(|(plugin, took)| {
            assert!(
                took.ends_with(" s"),
                "{plugin} did not build: {}",
                run.stderr
            );
            plugin
        })
        .collect();
    assert_eq!(built, PLUGINS, "{}", run.stderr);
    // The sources it built are the embedded copy, not the repository's plugins/.
    assert!(
        build.join("src/Cargo.toml").is_file()
            && build.join("src/hookhost-guest/wit/hook.wit").is_file(),
        "{}",
        run.stderr
    );
    assert!(!build.join("src").starts_with(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(run.steps[5].decision(), Some("deny"), "{}", run.stdout);
    assert_eq!(
        run.steps[5].hook("deny-dangerous-bash")["type"],
        "wasm",
        "{}",
        run.stdout
    );
}
