//! Attacks on the wasm sandbox that need the daemon: hostile plugins (built from the
//! WIT without the SDK) that try to wedge `hookhost serve` by blocking inside host
//! calls. Every other client must still be answered, and every hostile call must end at
//! its own timeout.

use std::time::Duration;

use serde_json::json;

use super::grants::hostile_raw;
use crate::serve::Daemon;
use crate::support::TestEnv;

#[path = "../../common/stalling.rs"]
pub(crate) mod stalling;
use stalling::stalling_server;

/// Four events whose plugin opens a FIFO in its read-only `${workspace}` grant, and four
/// whose plugin reads a stalled HTTP body from a granted server, sent at once to
/// `hookhost serve` (two worker threads): another client's benign event is answered
/// meanwhile, the FIFO opens are refused at once, and the stalled reads end at their
/// 2 s timeout.
#[test]
fn blocking_host_calls_cannot_wedge_the_daemon() {
    let env = TestEnv::new();
    let fifo = env.project.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let port = stalling_server();
    let plugin = hostile_raw();
    env.project_hooks(json!({"hooks": {
        "PreToolUse": [
            {"matcher": "Read", "hooks": [{"type": "wasm", "id": "fifo", "plugin": plugin, "timeout": 2,
                "capabilities": {"dirs": [{"path": "${workspace}", "mode": "ro"}]},
                "config": {"attack": "open", "arg": fifo}}]},
            {"matcher": "WebFetch", "hooks": [{"type": "wasm", "id": "stall", "plugin": plugin, "timeout": 2,
                "capabilities": {"http": [format!("http://127.0.0.1:{port}")]},
                "config": {"attack": "http-read", "arg": format!("http://127.0.0.1:{port}/x")}}]}
        ],
        "Stop": [{"hooks": [{"type": "wasm", "id": "benign", "plugin": plugin, "config": {"attack": "echo"}}]}]
    }}));
    let serve = Daemon::start(&env);
    let mut hostile = serve.client();
    let tool = |name: &str| json!({"session_id": "h", "tool_name": name, "tool_input": {}});
    for id in 1..=4 {
        hostile.request(json!(id), "PreToolUse", tool("Read"));
    }
    for id in 5..=8 {
        hostile.request(json!(id), "PreToolUse", tool("WebFetch"));
    }
    // Another client, after the hostile events are in.
    std::thread::sleep(Duration::from_millis(200));
    let mut benign = serve.client();
    benign.request(json!(1), "Stop", json!({"session_id": "b"}));
    let answered = benign.read();
    assert_eq!(
        answered["outcome"]["hooks"][0]["status"], "ok",
        "{answered}"
    );

    let mut seen = Vec::new();
    for _ in 1..=8 {
        let answer = hostile.read();
        seen.push((answer["id"].as_u64().unwrap(), answer["outcome"].clone()));
    }
    seen.sort_by_key(|(id, _)| *id);
    for (id, outcome) in &seen {
        let hook = &outcome["hooks"][0];
        if *id <= 4 {
            assert_eq!(hook["status"], "ok", "{hook}");
            assert!(
                outcome["additionalContext"][0]
                    .as_str()
                    .is_some_and(|c| c.starts_with("open denied")),
                "{outcome}"
            );
        } else {
            // The read ends at the deadline: by the outer bound of the call or by the
            // between-bytes timeout, which is now the time left.
            assert!(
                hook["status"] == "timeout"
                    || hook["durationMs"].as_f64().is_some_and(|ms| ms < 5_000.0),
                "{hook}"
            );
        }
    }
    drop(serve);
}
