//! The demo session with command hooks (the wasm variant is tested in `tests/it/demo.rs`).

use hookhost::demo::{DemoHooks, run_session};
use hookhost::outcome::Decision;

#[tokio::test]
async fn the_demo_session_decides_every_step() {
    let project = tempfile::tempdir().unwrap();
    let mut seen = 0;
    let steps = run_session(project.path(), DemoHooks::Commands, |_| seen += 1)
        .await
        .unwrap();
    assert_eq!(seen, steps.len());
    let decisions: Vec<Decision> = steps.iter().map(|s| s.outcome.decision).collect();
    use Decision::*;
    assert_eq!(
        decisions,
        [None, None, None, Deny, Deny, Allow, Deny, None, Block, None]
    );
    assert_eq!(
        steps[5].outcome.updated_input,
        Some(serde_json::json!({"command": "pnpm install"}))
    );
    let redacted = steps[7]
        .outcome
        .updated_tool_output
        .as_ref()
        .unwrap()
        .to_string();
    assert!(!redacted.contains("ghp_Abc123SECRET"), "{redacted}");
    assert!(
        steps
            .iter()
            .flat_map(|s| &s.outcome.hooks)
            .all(|h| h.kind == "command")
    );
}
