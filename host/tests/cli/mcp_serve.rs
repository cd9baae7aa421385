//! `mcp_tool` hooks through `hookhost serve`: the dispatching client's own servers
//! (`mcpServers` in the request, `mcpCall` asked of the client, `mcpResult` answered),
//! and warm stdio servers restarted when they die between events.

use serde_json::{Value, json};

use crate::serve::{Client, Daemon};
use crate::support::{TestEnv, bash_input, hooks, wait_until};

/// Sends a PreToolUse for `command` naming `servers` as the client's.
fn request(client: &mut Client, id: u64, command: &str, servers: &[&str]) {
    client.send(
        &json!({"id": id, "event": "PreToolUse", "input": bash_input(command),
                "mcpServers": servers})
        .to_string(),
    );
}

#[test]
fn over_serve_the_dispatching_client_answers_mcp_tool_hooks_of_its_servers() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "mcp_tool", "server": "agent", "tool": "guard", "timeout": 2,
                "input": {"command": "${tool_input.command}"}}]),
    ));
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();

    // A request naming no servers is never asked: no such server, at once.
    request(&mut client, 0, "ls", &[]);
    let answer = client.read();
    assert_eq!(answer["id"], 0, "{answer}");
    let message = answer["outcome"]["hooks"][0]["message"].as_str().unwrap();
    assert!(message.contains("no such server"), "{answer}");

    // Named: the client is asked, with the filled input.
    request(&mut client, 1, "rm -rf /", &["agent"]);
    let asked = client.read();
    let id = asked["id"].clone();
    assert!(id.as_str().unwrap().starts_with("mcp-"), "{asked}");
    assert_eq!(
        asked["mcpCall"],
        json!({"server": "agent", "tool": "guard", "arguments": {"command": "rm -rf /"}})
    );
    // A `modelResult` does not answer it.
    client.send(&json!({"id": id, "modelResult": {"text": "{}"}}).to_string());
    let refused = client.read();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no model request"),
        "{refused}"
    );
    let deny = json!({"decision": "block", "reason": "the agent's guard says no"});
    client.send(
        &json!({"id": id, "mcpResult": {"content": [{"type": "text", "text": deny.to_string()}]}})
            .to_string(),
    );
    let answer = client.read();
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["outcome"]["decision"], "deny", "{answer}");
    assert_eq!(answer["outcome"]["reason"], "the agent's guard says no");

    // The client's error is the hook's failure.
    request(&mut client, 2, "ls", &["agent"]);
    let asked = client.read();
    client.send(&json!({"id": asked["id"], "mcpResult": {"error": "not connected"}}).to_string());
    let answer = client.read();
    assert_eq!(answer["id"], 2, "{answer}");
    let hook = &answer["outcome"]["hooks"][0];
    assert_eq!(hook["status"], "failed", "{answer}");
    assert!(
        hook["message"].as_str().unwrap().contains("not connected"),
        "{answer}"
    );

    // No answer: the hook times out (fail open); the late answer is refused.
    request(&mut client, 3, "ls", &["agent"]);
    let asked = client.read();
    let answer = client.read();
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(
        answer["outcome"]["hooks"][0]["status"], "timeout",
        "{answer}"
    );
    assert_eq!(answer["outcome"]["decision"], "none");
    client.send(&json!({"id": asked["id"], "mcpResult": {"content": []}}).to_string());
    let refused = client.read();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no MCP request"),
        "{refused}"
    );
}

/// An async `mcp_tool` hook runs after the client has its answer, in a task of its own:
/// it still asks the client's servers while the connection is open (before, the
/// caller's servers were task-local to the dispatch, and the async hook found "no such
/// server"), and its result joins the session's next outcome.
#[test]
fn over_serve_an_async_mcp_tool_hook_asks_the_dispatching_clients_servers() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "mcp_tool", "server": "agent", "tool": "audit", "async": true,
                "timeout": 20, "input": {"command": "${tool_input.command}"}}]),
    ));
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    request(&mut client, 1, "make", &["agent"]);
    // The answer (the hook started) and the call of the client's server, in either order.
    let (first, second) = (client.read(), client.read());
    let (answer, asked) = if first.get("mcpCall").is_some() {
        (second, first)
    } else {
        (first, second)
    };
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(answer["outcome"]["hooks"][0]["status"], "async", "{answer}");
    assert_eq!(
        asked["mcpCall"],
        json!({"server": "agent", "tool": "audit", "arguments": {"command": "make"}}),
        "{asked}"
    );
    let context = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                "additionalContext": "audited by the agent"}});
    client.send(
        &json!({"id": asked["id"], "mcpResult": {"content": [{"type": "text", "text": context.to_string()}]}})
            .to_string(),
    );
    // The result joins a later outcome of the session.
    let mut joined = Value::Null;
    wait_until("the async result", || {
        let outcome = client.call(
            "PostToolUse",
            json!({"session_id": "s1", "tool_name": "Bash"}),
        );
        joined = outcome["additionalContext"].clone();
        joined != json!([])
    });
    assert_eq!(joined, json!(["audited by the agent"]));
}

/// The process id a `pid` server reports through an `mcp_tool` hook's plain text.
fn server_pid(client: &mut Client) -> i32 {
    let outcome = client.call(
        "UserPromptSubmit",
        json!({"session_id": "s1", "prompt": "p"}),
    );
    assert_eq!(outcome["hooks"][0]["status"], "ok", "{outcome}");
    let text: &Value = &outcome["additionalContext"][0];
    text.as_str()
        .and_then(|t| t.strip_prefix("pid "))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{outcome}"))
}

#[test]
fn over_serve_a_warm_server_killed_between_events_is_started_afresh() {
    let env = TestEnv::new();
    let script = crate::mcp_peers::write_stdio_server(&env.home);
    env.project_hooks(json!({
        "mcpServers": {"p": {"command": "python3", "args": [script, "pid"]}},
        "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "mcp_tool", "server": "p", "tool": "t"}]}]}
    }));
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    let first = server_pid(&mut client);
    assert_eq!(server_pid(&mut client), first, "the server is kept warm");
    // SAFETY: kill has no memory-safety preconditions; the pid is the server's.
    unsafe {
        libc::kill(first, libc::SIGKILL);
    }
    // The daemon reaps it: then the pid is gone.
    // SAFETY: as above; signal 0 only checks.
    wait_until("the server to die", || unsafe { libc::kill(first, 0) } != 0);
    let fresh = server_pid(&mut client);
    assert_ne!(fresh, first, "a fresh server");
    assert_eq!(server_pid(&mut client), fresh, "and it is kept warm");
}
