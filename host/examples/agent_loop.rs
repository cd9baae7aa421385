//! An agent loop that embeds hookhost: every tool call goes through PreToolUse and
//! PostToolUse, and the agent may only stop when the Stop hooks agree.
//!
//! Run with `cargo run -p hookhost --example agent_loop`.

use std::time::Duration;

use hookhost::outcome::Decision;
use hookhost::policy::FunctionHook;
use hookhost::{HostBuilder, Registration};
use serde_json::{Value, json};

/// Configured hooks, as a project's `.hookhost/hooks.json` would hold them.
const SETTINGS: &str = r#"{
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [
      {"type": "command", "id": "no-rm-root", "command": "grep -q 'rm -rf /' && { echo 'not the root' >&2; exit 2; }; exit 0"}
    ]}],
    "Stop": [{"hooks": [
      {"type": "command", "id": "tests-first", "command": "test -f tests-passed || echo '{\"decision\": \"block\", \"reason\": \"run the tests first\"}'"}
    ]}]
  }
}"#;

/// A pretend tool: what the agent would run.
fn run_tool(project: &std::path::Path, input: &Value) -> Value {
    let command = input["command"].as_str().unwrap_or("");
    if command.starts_with("cargo test") {
        std::fs::write(project.join("tests-passed"), "").expect("write marker");
    }
    json!({"stdout": format!("ran `{command}`"), "stderr": "", "interrupted": false})
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let project = tempfile::tempdir()?;
    // ANCHOR: builder
    let host = HostBuilder::new(project.path())
        .settings(SETTINGS)
        // An in-process hook: rewrite `npm` to `pnpm`, with no process spawned.
        .function_hook(
            FunctionHook::new("PreToolUse", "pnpm-only", |input: Value| async move {
                let command = input["tool_input"]["command"].as_str().unwrap_or("").to_string();
                Ok(match command.strip_prefix("npm ") {
                    Some(rest) => json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                        "permissionDecision": "allow", "updatedInput": {"command": format!("pnpm {rest}")}}}),
                    None => Value::Null,
                })
            })
            .matcher("Bash")
            .timeout(Duration::from_secs(1)),
        )
        .build();
    // ANCHOR_END: builder

    // ANCHOR: register
    // A hook registered while the host runs, for one session (dropped at its SessionEnd);
    // policy admits it as it admits a user's hook, or refuses it naming the field.
    let context = r#"{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "seen by a hook registered for this session"}}"#;
    let registered = host.register(
        Registration::new(
            "PostToolUse",
            json!({"type": "command", "command": format!("echo '{context}'")}),
        )
        .matcher("Bash")
        .session("example"),
    )?;
    // ANCHOR_END: register

    let session = json!({"session_id": "example", "cwd": project.path()});
    let with = |extra: Value| {
        let mut input = session.clone();
        input
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        input
    };
    let plan = ["npm install", "rm -rf /", "cargo test"];
    let mut step = 0;
    loop {
        if let Some(command) = plan.get(step) {
            step += 1;
            let mut tool_input = json!({"command": command});
            let pre = host
                .dispatch(
                    "PreToolUse",
                    with(json!({"tool_name": "Bash", "tool_input": tool_input})),
                )
                .await?;
            if pre.decision.is_blocking() {
                println!("✗ {command}: {}", pre.reason.unwrap_or_default());
                continue;
            }
            if let Some(rewritten) = pre.updated_input {
                println!(
                    "↻ {command} → {} (by {})",
                    rewritten["command"],
                    pre.updated_input_by.unwrap_or_default()
                );
                tool_input = rewritten;
            }
            let response = run_tool(project.path(), &tool_input);
            println!("✓ {}", response["stdout"].as_str().unwrap_or(""));
            let post = host
                .dispatch("PostToolUse", with(json!({"tool_name": "Bash", "tool_input": tool_input, "tool_response": response})))
                .await?;
            for context in post.additional_context {
                println!("  context: {context}");
            }
            continue;
        }
        let stop = host
            .dispatch("Stop", with(json!({"stop_hook_active": step > plan.len()})))
            .await?;
        if stop.decision == Decision::Block {
            println!("… not done yet: {}", stop.reason.unwrap_or_default());
            step += 1; // a real agent would plan more work here
            if step > plan.len() + 3 {
                break;
            }
            continue;
        }
        println!("■ the agent stops");
        break;
    }
    host.unregister(registered);
    Ok(())
}
