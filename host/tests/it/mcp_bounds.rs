//! Every byte hookhost holds from an MCP server is bounded (`handlers/mcp/intake.rs`):
//! hostile servers written for it ([`crate::mcp_peers`]), over streamable HTTP and stdio.
//! Each test would hang until the hook's generous timeout (and fail on its kind) if the
//! bound did not hold.

use std::path::Path;
use std::time::{Duration, Instant};

use hookhost::HostBuilder;
use hookhost::handlers::FailureKind;
use hookhost::outcome::{Decision, HookStatus, Outcome};
use serde_json::{Value, json};

use crate::mcp_peers::{HostileHttp, write_stdio_server};

async fn call(project: &Path, server: Value, tool: &str, event: &str, timeout: u64) -> Outcome {
    let settings = json!({"mcpServers": {"s": server}, "hooks": {event: [{"matcher": "*", "hooks": [
        {"type": "mcp_tool", "server": "s", "tool": tool, "input": {}, "timeout": timeout}]}]}});
    let host = HostBuilder::new(project)
        .settings(settings.to_string())
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    let input = match event {
        "PreToolUse" => json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Bash",
                               "tool_input": {"command": "ls"}}),
        _ => json!({"session_id": "s1", "cwd": "/tmp", "prompt": "p"}),
    };
    host.dispatch(event, input).await.expect("dispatch")
}

fn assert_limit(outcome: &Outcome, words: &str) {
    let report = &outcome.hooks[0];
    assert_eq!(report.status, HookStatus::Failed, "{outcome:#?}");
    assert_eq!(report.failure, Some(FailureKind::Limit), "{outcome:#?}");
    assert!(
        report.message.as_deref().unwrap_or("").contains(words),
        "{words}: {outcome:#?}"
    );
}

/// Waits (at most 20 s) until the server saw `n` hostile answers closed by the client.
fn wait_closed(server: &HostileHttp, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.closed_by_client() < n {
        assert!(
            Instant::now() < deadline,
            "the client kept the connection open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_servers_endless_bodies_and_huge_events_are_cut_at_the_bounds() {
    let server = HostileHttp::start();
    let dir = tempfile::tempdir().unwrap();
    let http = json!({"type": "http", "url": server.url});
    let cases = [
        ("endless-json", "over 16 MiB"),
        ("huge-event", "over 16 MiB"),
        ("endless-events", "more than 32 MiB while the call ran"),
    ];
    for (n, (tool, words)) in cases.into_iter().enumerate() {
        let outcome = call(dir.path(), http.clone(), tool, "UserPromptSubmit", 600).await;
        assert_limit(&outcome, words);
        assert!(outcome.additional_context.is_empty(), "{outcome:#?}");
        // The connection is dropped, not read on.
        wait_closed(&server, n + 1);
    }
    // On PreToolUse an oversized answer refuses the call (Claude Code 2.1.321).
    let outcome = call(dir.path(), http, "huge-event", "PreToolUse", 600).await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert!(
        outcome
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("more than 16 MiB"),
        "{outcome:#?}"
    );
}

/// Red team, stop 35: a burst of tiny SSE events that carry no message (`data: x`,
/// `id: 1`, each a few bytes, far inside the bounds) made rmcp's reader call itself once
/// per event skipped, and the stack overflowed: the process died (SIGSEGV) instead of the
/// hook failing, so the action went ahead. Fixed at `handlers/mcp/http.rs`
/// `BoundedHttp::events`, which every SSE body passes: only events rmcp hands on reach
/// it. The burst then ends at the bound on bytes per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_skipped_sse_events_ends_at_the_bounds_not_in_a_crash() {
    let server = HostileHttp::start();
    let dir = tempfile::tempdir().unwrap();
    let http = json!({"type": "http", "url": server.url});
    let outcome = call(dir.path(), http, "skipped-events", "UserPromptSubmit", 600).await;
    assert_limit(&outcome, "more than 32 MiB while the call ran");
    wait_closed(&server, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_drip_ends_at_the_timeout_and_its_connection_is_dropped() {
    let server = HostileHttp::start();
    let dir = tempfile::tempdir().unwrap();
    let http = json!({"type": "http", "url": server.url});
    let outcome = call(dir.path(), http, "drip", "UserPromptSubmit", 2).await;
    let report = &outcome.hooks[0];
    assert_eq!(report.status, HookStatus::Timeout, "{outcome:#?}");
    // Nothing more is read from it: the connection is closed.
    wait_closed(&server, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_endless_line_and_endless_chatter_are_cut_at_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_stdio_server(dir.path());
    let stdio = |mode: &str| json!({"command": "python3", "args": [script, mode]});
    let outcome = call(dir.path(), stdio("huge-line"), "t", "UserPromptSubmit", 600).await;
    assert_limit(&outcome, "over 16 MiB");
    let outcome = call(dir.path(), stdio("chatter"), "t", "UserPromptSubmit", 600).await;
    assert_limit(&outcome, "more than 32 MiB while the call ran");
    let outcome = call(dir.path(), stdio("huge-line"), "t", "PreToolUse", 600).await;
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    // A server that answers is still read whole, on a fresh connection.
    let outcome = call(dir.path(), stdio("pid"), "t", "UserPromptSubmit", 600).await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Ok, "{outcome:#?}");
    assert!(
        outcome.additional_context[0].starts_with("pid "),
        "{outcome:#?}"
    );
}

/// A warm server that dies during a call, after the call reached it (the tool may have
/// run), is not called again on a restarted server within that call: a tool runs at most
/// once per call (`handlers/mcp/clients.rs`, `Intake::sent`). Before, the call was
/// repeated on a new server, and the tool ran twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_during_a_call_is_not_called_again_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_stdio_server(dir.path());
    let ran = dir.path().join("ran.txt");
    let server = json!({"command": "python3",
                        "args": [script, "dies-second", ran.to_str().unwrap()]});
    let lines = || {
        std::fs::read_to_string(&ran)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let outcome = call(dir.path(), server.clone(), "t", "UserPromptSubmit", 60).await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Ok, "{outcome:#?}");
    assert_eq!(lines(), 1);
    // The same (warm) server gets the next call, runs it, and dies before answering.
    let outcome = call(dir.path(), server.clone(), "t", "UserPromptSubmit", 60).await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Failed, "{outcome:#?}");
    assert!(
        outcome.hooks[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains("not repeated, as the tool may have run"),
        "{outcome:#?}"
    );
    assert_eq!(lines(), 2, "the tool ran again on a restarted server");
    // The next call starts the server afresh.
    let outcome = call(dir.path(), server, "t", "UserPromptSubmit", 60).await;
    assert_eq!(outcome.hooks[0].status, HookStatus::Ok, "{outcome:#?}");
    assert_eq!(lines(), 3);
}
