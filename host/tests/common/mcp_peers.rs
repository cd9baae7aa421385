//! MCP servers written here for what the real ones (installed by `.ci/run`) never do,
//! shared by the suites (`#[path = "../common/mcp_peers.rs"] mod mcp_peers;`):
//!
//! - [`STDIO_SERVER`], a stdio server in Python: it answers `initialize` and `tools/list`
//!   like any server, and `tools/call` as its first argument says: `pid` (the text
//!   `pid <its process id>`), `huge-line` (an answer line that never ends), `chatter`
//!   (small notifications, without end, and never the answer), `dies-second` (appends a
//!   line to the file named by its second argument at every call; answers the first,
//!   exits without answering the second).
//! - [`HostileHttp`], a streamable-HTTP server on loopback that answers `initialize`
//!   and the `initialized` notification as the protocol asks, and a tool call by the
//!   tool's name: `endless-json` (a JSON body without end), `huge-event` (one SSE event
//!   without end), `endless-events` (small SSE comments without end), `skipped-events`
//!   (tiny SSE events that carry no JSON-RPC message, without end), `drip` (one byte of
//!   an SSE event every 100 ms). It records whether the client closed its last
//!   connection.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

/// A stdio MCP server (Python 3, standard library only); run as `python3 FILE MODE`.
pub const STDIO_SERVER: &str = r#"import json, os, sys
mode = sys.argv[1]
out = sys.stdout
def send(m):
    out.write(json.dumps(m) + "\n")
    out.flush()
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {
            "protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "peer", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [
            {"name": "t", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and mode == "pid":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {
            "content": [{"type": "text", "text": "pid %d" % os.getpid()}]}})
    elif method == "tools/call" and mode == "huge-line":
        out.write('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "' % json.dumps(m["id"]))
        while True:
            out.write("x" * 65536)
    elif method == "tools/call" and mode == "chatter":
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "x" * 60000}}) + "\n"
        while True:
            out.write(note)
    elif method == "tools/call" and mode == "dies-second":
        with open(sys.argv[2], "a") as ran:
            ran.write("ran %d\n" % os.getpid())
        calls = globals().get("calls", 0) + 1
        globals()["calls"] = calls
        if calls > 1:
            os._exit(0)
        send({"jsonrpc": "2.0", "id": m["id"], "result": {
            "content": [{"type": "text", "text": "pid %d" % os.getpid()}]}})
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
"#;

/// Writes [`STDIO_SERVER`] into `dir`; returns its path.
pub fn write_stdio_server(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("mcp_peer.py");
    std::fs::write(&path, STDIO_SERVER).unwrap();
    path
}

/// A hostile streamable-HTTP MCP server on loopback (module docs).
pub struct HostileHttp {
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    closed: Arc<AtomicUsize>,
}

impl HostileHttp {
    pub fn start() -> HostileHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let closed = Arc::new(AtomicUsize::new(0));
        let seen = closed.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || serve(stream, &seen));
            }
        });
        HostileHttp { url, closed }
    }

    /// How many hostile answers ended because the client closed the connection.
    pub fn closed_by_client(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

/// One request: its JSON-RPC body, or `None` at the end of the connection.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Value> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok().or(Some(Value::Null))
}

fn serve(stream: TcpStream, closed: &AtomicUsize) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let json_answer = |result: Value| {
            let body = json!({"jsonrpc": "2.0", "id": request["id"], "result": result}).to_string();
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let answer = match request["method"].as_str() {
            Some("initialize") => json_answer(json!({
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}})),
            Some("tools/call") => {
                let tool = request["params"]["name"].as_str().unwrap_or("").to_string();
                if hostile(&mut writer, &tool, &request["id"]) {
                    closed.fetch_add(1, Ordering::SeqCst);
                }
                return;
            }
            Some(_) if request.get("id").is_some() => json_answer(json!({})),
            // A notification (`initialized`): accepted.
            _ => "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".to_string(),
        };
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// Answers a tool call without end; returns whether it ended because the client closed
/// the connection (a write failed).
fn hostile(writer: &mut TcpStream, tool: &str, id: &Value) -> bool {
    let head = |kind: &str| {
        format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nConnection: close\r\n\r\n")
    };
    let (head, first, chunk, pause): (String, String, Vec<u8>, Option<Duration>) = match tool {
        "endless-json" => (
            head("application/json"),
            format!(r#"{{"jsonrpc": "2.0", "id": {id}, "result": {{"content": ["#),
            br#"{"type": "text", "text": "xxxxxxxxxxxxxxxxxxxxxxxx"},"#.repeat(1000),
            None,
        ),
        "huge-event" => (
            head("text/event-stream"),
            "data: ".into(),
            vec![b'x'; 64 << 10],
            None,
        ),
        "endless-events" => {
            let mut comment = b": ".to_vec();
            comment.extend(vec![b'x'; 1 << 10]);
            comment.extend(b"\n\n");
            (
                head("text/event-stream"),
                String::new(),
                comment.repeat(32),
                None,
            )
        }
        "skipped-events" => (
            head("text/event-stream"),
            String::new(),
            b"data: x\n\nid: 1\n\n".repeat(50_000),
            None,
        ),
        "drip" => (
            head("text/event-stream"),
            "data: ".into(),
            b"x".to_vec(),
            Some(Duration::from_millis(100)),
        ),
        _ => return false,
    };
    if writer.write_all(head.as_bytes()).is_err() || writer.write_all(first.as_bytes()).is_err() {
        return true;
    }
    loop {
        if writer
            .write_all(&chunk)
            .and_then(|()| writer.flush())
            .is_err()
        {
            return true;
        }
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
    }
}
