//! The demo session through the real example plugins, and the build of those plugins
//! from the sources the binary carries (what a `cargo install`ed `hookhost demo` does).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hookhost::demo::{DemoDirs, PLUGINS, build_embedded_plugins, precompile, prepare, run_session};
use hookhost::handlers::wasm::WasmRuntime;
use hookhost::outcome::{Decision, HookStatus};
use hookhost_tests::plugins;

fn built() -> &'static Path {
    Path::new(plugins::DENY_DANGEROUS_BASH).parent().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_session_runs_the_example_plugins() {
    let root = tempfile::tempdir().unwrap();
    let mut dirs = DemoDirs::new(root.path());
    prepare(&mut dirs, Some(built())).unwrap();
    let runtime = Arc::new(WasmRuntime::new(Some(dirs.cache.clone())));
    // Every plugin is compiled before the session; a second pass finds them all cached.
    let mut compiled = Vec::new();
    precompile(&dirs, &runtime, |file, _, _| {
        compiled.push(file.to_string())
    })
    .unwrap();
    assert_eq!(compiled.len(), PLUGINS.len());
    let fresh = WasmRuntime::new(Some(dirs.cache.clone()));
    precompile(&dirs, &fresh, |file, _, cached| {
        assert!(cached, "{file} compiled again")
    })
    .unwrap();

    let steps = run_session(&dirs, runtime, |_| {}).await.unwrap();
    let decisions: Vec<Option<Decision>> = steps
        .iter()
        .map(|s| s.outcome.as_ref().map(|o| o.decision))
        .collect();
    assert_eq!(
        decisions,
        [
            Some(Decision::None),
            None,
            Some(Decision::None),
            Some(Decision::None),
            Some(Decision::None),
            Some(Decision::Deny),
            Some(Decision::Deny),
            Some(Decision::Allow),
            Some(Decision::Deny),
            Some(Decision::None),
            Some(Decision::None), // fuel: the hook fails, the host goes on (fail open)
            Some(Decision::None), // grant: the read is refused inside the sandbox
            Some(Decision::None), // allowlist: refused before compiling
            Some(Decision::Block),
            Some(Decision::None),
        ]
    );
    let wasm: Vec<&str> = steps
        .iter()
        .filter_map(|s| s.outcome.as_ref())
        .flat_map(|o| &o.hooks)
        .filter(|h| h.kind == "wasm" && h.status != HookStatus::Skipped)
        .map(|h| h.id.as_str())
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
    let hook = |step: usize, id: &str| {
        steps[step]
            .outcome
            .as_ref()
            .unwrap()
            .hooks
            .iter()
            .find(|h| h.id == id)
            .unwrap_or_else(|| panic!("no {id} in step {step}"))
            .clone()
    };
    let fuel = hook(10, "hostile-loop");
    assert_eq!(fuel.status, HookStatus::Failed);
    assert_eq!(fuel.fuel, Some(20_000_000));
    assert!(
        steps[10]
            .agent_sees
            .iter()
            .any(|l| l.contains("hostile-loop") && l.contains("fuel exhausted")),
        "{:?}",
        steps[10].agent_sees
    );
    let read = steps[11].outcome.as_ref().unwrap();
    assert_eq!(hook(11, "hostile-read").status, HookStatus::Ok);
    assert!(
        read.additional_context
            .iter()
            .all(|c| c.starts_with("read denied: ")),
        "{read:#?}"
    );
    assert!(!format!("{read:?}").contains("a stand-in for your real key"));
    let refused = hook(12, "unvetted");
    assert_eq!(refused.status, HookStatus::Failed);
    assert!(
        steps[12]
            .agent_sees
            .iter()
            .any(|l| l.contains("refused before compiling")),
        "{:?}",
        steps[12].agent_sees
    );
    // The reviewed plugins are allowlisted by digest and run.
    assert_eq!(hook(5, "deny-dangerous-bash").status, HookStatus::Blocked);
    let output = steps[9]
        .outcome
        .as_ref()
        .unwrap()
        .updated_tool_output
        .as_ref()
        .unwrap()
        .to_string();
    assert!(
        output.contains("[REDACTED]") && !output.contains("ghp_Abc123SECRET"),
        "{output}"
    );
    assert!(
        steps[13]
            .outcome
            .as_ref()
            .unwrap()
            .reason
            .as_deref()
            .unwrap()
            .contains("test-gate")
    );
}

/// The demo's plugins build from the sources embedded in the binary, with the vendored
/// guest SDK, outside the repository: what `hookhost demo` does without a source tree.
/// The build directory persists under the target dir, so only the first run is slow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_plugins_build_from_the_embedded_sources() {
    let build = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("demo-build");
    let mut built = Vec::new();
    let out = build_embedded_plugins(&build, |plugin, done| {
        if done.is_some() {
            built.push(plugin.to_string())
        }
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(built, PLUGINS);
    assert!(!build.join("src").starts_with(env!("CARGO_MANIFEST_DIR")));
    let root = tempfile::tempdir().unwrap();
    let mut dirs = DemoDirs::new(root.path());
    prepare(&mut dirs, Some(&out)).unwrap();
    let runtime = Arc::new(WasmRuntime::new(Some(crate::support::cache_dir())));
    let steps = run_session(&dirs, runtime, |_| {}).await.unwrap();
    assert_eq!(steps[5].outcome.as_ref().unwrap().decision, Decision::Deny);
}
