//! The demo session through the real example plugins.

use std::path::Path;

use hookhost::demo::{DemoHooks, run_session};
use hookhost::outcome::Decision;
use hookhost_tests::plugins;

#[tokio::test]
async fn the_demo_session_runs_the_example_plugins() {
    let project = tempfile::tempdir().unwrap();
    let dir = Path::new(plugins::DENY_DANGEROUS_BASH).parent().unwrap();
    let steps = run_session(project.path(), DemoHooks::Plugins(dir), |_| {})
        .await
        .unwrap();
    let decisions: Vec<Decision> = steps.iter().map(|s| s.outcome.decision).collect();
    use Decision::*;
    assert_eq!(
        decisions,
        [None, None, None, Deny, Deny, Allow, Deny, None, Block, None]
    );
    let wasm: Vec<&str> = steps
        .iter()
        .flat_map(|s| &s.outcome.hooks)
        .filter(|h| h.kind == "wasm")
        .map(|h| h.id.as_str())
        .collect();
    for plugin in [
        "deny-dangerous-bash",
        "protect-paths",
        "redact-secrets",
        "test-gate",
    ] {
        assert!(wasm.contains(&plugin), "{plugin} did not run: {wasm:?}");
    }
    for hook in steps
        .iter()
        .flat_map(|s| &s.outcome.hooks)
        .filter(|h| h.kind == "wasm")
    {
        assert!(
            hook.fuel.unwrap() > 0 && hook.memory_bytes.unwrap() > 0,
            "{hook:?}"
        );
    }
    assert!(
        steps[3]
            .outcome
            .reason
            .as_deref()
            .unwrap()
            .contains("rm -rf /")
    );
    let output = steps[7]
        .outcome
        .updated_tool_output
        .as_ref()
        .unwrap()
        .to_string();
    assert!(
        output.contains("[REDACTED]") && !output.contains("ghp_Abc123SECRET"),
        "{output}"
    );
    assert!(
        steps[8]
            .outcome
            .reason
            .as_deref()
            .unwrap()
            .contains("test-gate")
    );
}
