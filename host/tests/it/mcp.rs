//! `mcp_tool` hooks against real MCP servers nobody here wrote, installed by `.ci/run`
//! under `<target>/mcp-servers` (`HOOKHOST_MCP_SERVERS_DIR` to point elsewhere):
//! `@modelcontextprotocol/server-everything` and `server-filesystem` (npm) and
//! `mcp-server-time` (PyPI, in a venv). A test whose server is missing says SKIPPED.

use std::path::{Path, PathBuf};

use hookhost::HostBuilder;
use hookhost::outcome::{Decision, HookStatus, Outcome};
use serde_json::{Value, json};

use crate::skip::skipped;

fn servers_dir() -> PathBuf {
    std::env::var_os("HOOKHOST_MCP_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("../mcp-servers"))
}

/// The program of an installed server, or SKIPPED.
fn server(test: &str, relative: &str) -> Option<String> {
    let path = servers_dir().join(relative);
    if path.exists() {
        Some(path.to_string_lossy().into_owned())
    } else {
        skipped(
            test,
            &format!("MCP server {} is not installed", path.display()),
        );
        None
    }
}

fn everything(test: &str) -> Option<String> {
    server(test, "everything/node_modules/.bin/mcp-server-everything")
}

async fn dispatch(project: &Path, settings: Value, event: &str, input: Value) -> Outcome {
    let host = HostBuilder::new(project)
        .settings(settings.to_string())
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    host.dispatch(event, input).await.expect("dispatch")
}

fn with_hook(event: &str, servers: Value, hook: Value) -> Value {
    json!({"mcpServers": servers, "hooks": {event: [{"matcher": "*", "hooks": [hook]}]}})
}

fn prompt(text: &str) -> Value {
    json!({"session_id": "s1", "cwd": "/tmp", "prompt": text})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_read_by_a_real_server_denies_with_the_path_substituted() {
    let Some(fs) = server(
        "mcp_file_deny",
        "filesystem/node_modules/.bin/mcp-server-filesystem",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().canonicalize().unwrap();
    let guard = project.join("guard.json");
    std::fs::write(
        &guard,
        r#"{"decision":"block","reason":"the guard file says no"}"#,
    )
    .unwrap();
    let settings = with_hook(
        "PreToolUse",
        json!({"fs": {"command": fs, "args": [project]}}),
        json!({"type": "mcp_tool", "server": "fs", "tool": "read_text_file",
               "input": {"path": "${tool_input.file_path}"}}),
    );
    let input = json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Read",
                       "tool_input": {"file_path": guard}});
    let outcome = dispatch(&project, settings.clone(), "PreToolUse", input).await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert!(
        outcome
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("the guard file says no"),
        "{outcome:#?}"
    );
    assert_eq!(outcome.hooks[0].kind, "mcp_tool");
    // Another file (the substitution really chose the file): no decision.
    let other = project.join("other.txt");
    std::fs::write(&other, "").unwrap();
    let input = json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Read",
                       "tool_input": {"file_path": other}});
    let outcome = dispatch(&project, settings, "PreToolUse", input).await;
    assert_eq!(outcome.decision, Decision::None, "{outcome:#?}");
    assert_eq!(outcome.hooks[0].status, HookStatus::Ok, "{outcome:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_shows_the_substituted_input_as_plain_stdout() {
    let Some(ev) = everything("mcp_echo") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let settings = with_hook(
        "UserPromptSubmit",
        json!({"ev": {"command": ev, "args": ["stdio"]}}),
        json!({"type": "mcp_tool", "server": "ev", "tool": "echo",
               "input": {"message": "prompt=${prompt} session=${session_id} none=[${no.such}]"}}),
    );
    let outcome = dispatch(dir.path(), settings, "UserPromptSubmit", prompt("hello")).await;
    assert_eq!(
        outcome.additional_context,
        vec!["Echo: prompt=hello session=s1 none=[]".to_string()],
        "{outcome:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_error_and_a_dead_server_are_non_blocking_unless_on_failure_blocks() {
    let Some(ev) = everything("mcp_failures") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // An unknown tool: server-everything answers `isError: true`.
        (
            json!({"command": ev, "args": ["stdio"]}),
            "no-such-tool",
            "isError",
        ),
        // A program that does not exist.
        (
            json!({"command": "/nonexistent/mcp-server"}),
            "echo",
            "cannot start",
        ),
        // A server that dies before it answers.
        (
            json!({"command": "sh", "args": ["-c", "exit 3"]}),
            "echo",
            "cannot start",
        ),
    ];
    for (server, tool, message) in cases {
        for on_failure in ["continue", "block"] {
            let settings = with_hook(
                "PreToolUse",
                json!({ "s": server }),
                json!({"type": "mcp_tool", "server": "s", "tool": tool,
                       "input": {"message": "x"}, "onFailure": on_failure}),
            );
            let input = json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Bash",
                               "tool_input": {"command": "ls"}});
            let outcome = dispatch(dir.path(), settings, "PreToolUse", input).await;
            let report = &outcome.hooks[0];
            assert_eq!(report.status, HookStatus::Failed, "{outcome:#?}");
            assert!(
                report.message.as_deref().unwrap_or("").contains(message),
                "{message}: {outcome:#?}"
            );
            let blocked = outcome.decision != Decision::None;
            assert_eq!(
                blocked,
                on_failure == "block",
                "{server} {tool}: {outcome:#?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_server_answers_and_its_answer_is_read_like_stdout() {
    let Some(time) = server("mcp_time", "time-venv/bin/mcp-server-time") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let hook = |on_failure: &str| {
        with_hook(
            "UserPromptSubmit",
            json!({"time": {"command": time, "args": ["--local-timezone", "UTC"]}}),
            json!({"type": "mcp_tool", "server": "time", "tool": "get_current_time",
                   "input": {"timezone": "UTC"}, "onFailure": on_failure}),
        )
    };
    let outcome = dispatch(
        dir.path(),
        hook("continue"),
        "UserPromptSubmit",
        prompt("p"),
    )
    .await;
    let report = &outcome.hooks[0];
    assert_eq!(report.status, HookStatus::Ok, "{outcome:#?}");
    assert_eq!(outcome.decision, Decision::None, "{outcome:#?}");
    // Its answer holds no hook output field: with `onFailure: "block"` that is a failure.
    let outcome = dispatch(dir.path(), hook("block"), "UserPromptSubmit", prompt("p")).await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Failed, "{outcome:#?}");
    assert_eq!(outcome.decision, Decision::Block, "{outcome:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_server_echoes_and_the_url_allowlist_applies() {
    let Some(ev) = everything("mcp_http") else {
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = std::process::Command::new(&ev)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    // Wait for the server to listen (not a timed assertion: it either listens or dies).
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the server exited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _kill = Kill(child);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let mut settings = with_hook(
        "UserPromptSubmit",
        json!({"web": {"type": "http", "url": url}}),
        json!({"type": "mcp_tool", "server": "web", "tool": "echo",
               "input": {"message": "over http: ${prompt}"}}),
    );
    let outcome = dispatch(
        dir.path(),
        settings.clone(),
        "UserPromptSubmit",
        prompt("hi"),
    )
    .await;
    assert_eq!(
        outcome.additional_context,
        vec!["Echo: over http: hi".to_string()],
        "{outcome:#?}"
    );
    settings["allowedHttpHookUrls"] = json!(["https://elsewhere.example/*"]);
    let outcome = dispatch(dir.path(), settings, "UserPromptSubmit", prompt("hi")).await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Failed, "{outcome:#?}");
    assert!(
        outcome.hooks[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains("allowedHttpHookUrls")
    );
    assert!(outcome.additional_context.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projects_mcp_json_counts_only_in_a_trusted_workspace() {
    let Some(ev) = everything("mcp_project_json") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mcp_json = json!({"mcpServers": {"ev": {"command": ev, "args": ["stdio"]}}});
    std::fs::write(dir.path().join(".mcp.json"), mcp_json.to_string()).unwrap();
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "mcp_tool", "server": "ev", "tool": "echo", "input": {"message": "from project"}}]}]}});
    for trust in [
        hookhost::WorkspaceTrust::Untrusted,
        hookhost::WorkspaceTrust::Explicit,
    ] {
        let trusted = matches!(trust, hookhost::WorkspaceTrust::Explicit);
        let host = HostBuilder::new(dir.path())
            .settings(settings.to_string())
            .workspace_trust(trust)
            .build();
        let outcome = host
            .dispatch("UserPromptSubmit", prompt("p"))
            .await
            .unwrap();
        if trusted {
            assert_eq!(
                outcome.additional_context,
                vec!["Echo: from project".to_string()],
                "{outcome:#?}"
            );
        } else {
            assert!(outcome.additional_context.is_empty(), "{outcome:#?}");
            assert_eq!(outcome.hooks[0].status, HookStatus::Failed, "{outcome:#?}");
            assert!(
                outcome.hooks[0]
                    .message
                    .as_deref()
                    .unwrap_or("")
                    .contains("no such server")
            );
        }
    }
}
