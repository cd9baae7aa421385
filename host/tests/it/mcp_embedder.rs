//! The embedder's MCP servers through the library (`HostBuilder::mcp_provider`): called
//! for names the settings' `mcpServers` do not define, with the filled `input`; a name
//! the settings define is theirs; managed `ceilings.mcpServers` and `handlerTypes` hold
//! them as every other server; a timeout, an error and `isError` are failures.

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use hookhost::HostBuilder;
use hookhost::handlers::FailureKind;
use hookhost::handlers::mcp::{McpCall, McpProvider, McpToolResult};
use hookhost::outcome::{Decision, HookStatus, Outcome};
use serde_json::{Value, json};

use crate::mcp_peers::write_stdio_server;

/// The embedder's servers `agent-fs` and `dup`: `deny` answers a deny naming the path it
/// was given, `slow` never answers, `broken` fails, `oops` is a tool error.
#[derive(Default)]
struct Embedder {
    calls: Mutex<Vec<McpCall>>,
}

impl McpProvider for Embedder {
    fn has_server(&self, name: &str) -> bool {
        name == "agent-fs" || name == "dup"
    }

    fn call_tool<'a>(&'a self, call: &'a McpCall) -> BoxFuture<'a, Result<McpToolResult, String>> {
        self.calls.lock().unwrap().push(call.clone());
        Box::pin(async move {
            match call.tool.as_str() {
                "deny" => {
                    let path = call.arguments["path"].as_str().unwrap_or("");
                    Ok(McpToolResult::text(
                        json!({"decision": "block", "reason": format!("{} is guarded", path)})
                            .to_string(),
                    ))
                }
                "slow" => std::future::pending().await,
                "broken" => Err("the agent's connection is down".into()),
                _ => Ok(McpToolResult {
                    is_error: true,
                    ..McpToolResult::text("no such tool")
                }),
            }
        })
    }
}

fn settings(server: &str, tool: &str, extra: Value) -> Value {
    let mut s = json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "mcp_tool", "server": server, "tool": tool, "timeout": 2,
         "input": {"path": "${tool_input.file_path}"}}]}]}});
    if let Value::Object(extra) = extra {
        s.as_object_mut().unwrap().extend(extra);
    }
    s
}

async fn dispatch(project: &Path, settings: Value, embedder: Arc<Embedder>) -> Outcome {
    let host = HostBuilder::new(project)
        .managed_dir(project.join("managed"))
        .settings(settings.to_string())
        .mcp_provider(embedder)
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    let input = json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Read",
                       "tool_input": {"file_path": "/repo/.env"}});
    host.dispatch("PreToolUse", input).await.expect("dispatch")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedders_servers_answer_what_the_settings_do_not_define() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("managed")).unwrap();
    let embedder = Arc::new(Embedder::default());
    let outcome = dispatch(
        dir.path(),
        settings("agent-fs", "deny", json!({})),
        embedder.clone(),
    )
    .await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert_eq!(outcome.reason.as_deref(), Some("/repo/.env is guarded"));
    let calls = embedder.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].server, "agent-fs");
    assert_eq!(
        calls[0].arguments,
        *json!({"path": "/repo/.env"}).as_object().unwrap()
    );

    // A name the settings define is the settings' server: the embedder is not asked.
    let script = write_stdio_server(dir.path());
    let servers = json!({"mcpServers": {"dup": {"command": "python3", "args": [script, "pid"]}}});
    let outcome = dispatch(
        dir.path(),
        settings("dup", "deny", servers),
        embedder.clone(),
    )
    .await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Ok, "{outcome:#?}");
    assert_eq!(outcome.decision, Decision::None, "{outcome:#?}");
    assert_eq!(
        embedder.calls.lock().unwrap().len(),
        1,
        "the embedder was asked"
    );

    // A name nobody has.
    let outcome = dispatch(
        dir.path(),
        settings("nobody", "deny", json!({})),
        embedder.clone(),
    )
    .await;
    assert!(
        outcome.hooks[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains("no such server"),
        "{outcome:#?}"
    );

    // Failures under `onFailure`: the hook's timeout, the embedder's error, `isError`.
    for (tool, kind, words) in [
        ("slow", FailureKind::Timeout, "no answer within"),
        (
            "broken",
            FailureKind::CannotStart,
            "the agent's connection is down",
        ),
        ("oops", FailureKind::PluginError, "isError: no such tool"),
    ] {
        let outcome = dispatch(
            dir.path(),
            settings("agent-fs", tool, json!({})),
            embedder.clone(),
        )
        .await;
        let report = &outcome.hooks[0];
        assert_eq!(report.failure, Some(kind), "{tool}: {outcome:#?}");
        assert!(
            report.message.as_deref().unwrap_or("").contains(words),
            "{tool}: {outcome:#?}"
        );
        assert_eq!(
            outcome.decision,
            Decision::None,
            "{tool}: fails open by default"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_ceilings_hold_the_embedders_servers_too() {
    let dir = tempfile::tempdir().unwrap();
    let managed = dir.path().join("managed");
    std::fs::create_dir_all(&managed).unwrap();
    let embedder = Arc::new(Embedder::default());
    let policy = |ceilings: Value| {
        std::fs::write(
            managed.join("managed.json"),
            json!({"ceilings": ceilings}).to_string(),
        )
        .unwrap();
    };
    // `mcpServers` without the name: refused, never called.
    policy(json!({"mcpServers": ["time"]}));
    let outcome = dispatch(
        dir.path(),
        settings("agent-fs", "deny", json!({})),
        embedder.clone(),
    )
    .await;
    let report = &outcome.hooks[0];
    assert_eq!(report.failure, Some(FailureKind::Refused), "{outcome:#?}");
    assert!(
        report
            .message
            .as_deref()
            .unwrap_or("")
            .contains("ceilings.mcpServers"),
        "{outcome:#?}"
    );
    assert!(embedder.calls.lock().unwrap().is_empty());
    // Listed by name: called.
    policy(json!({"mcpServers": ["agent-fs"]}));
    let outcome = dispatch(
        dir.path(),
        settings("agent-fs", "deny", json!({})),
        embedder.clone(),
    )
    .await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert_eq!(embedder.calls.lock().unwrap().len(), 1);
    // `handlerTypes` without `mcp_tool` for the source: skipped, never called.
    policy(json!({"handlerTypes": {"cli": ["command"]}}));
    let outcome = dispatch(
        dir.path(),
        settings("agent-fs", "deny", json!({})),
        embedder.clone(),
    )
    .await;
    assert_eq!(outcome.decision, Decision::None, "{outcome:#?}");
    assert_eq!(embedder.calls.lock().unwrap().len(), 1, "{outcome:#?}");
}
