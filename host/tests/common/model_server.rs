//! A loopback model server speaking both wire formats of `prompt` hooks, shared by the
//! suites: the Anthropic Messages API (`POST /v1/messages`: `x-api-key` required (401
//! otherwise), `anthropic-version` required (400 otherwise), `model`, `max_tokens` and
//! `messages` required (400 otherwise); a forced tool is answered with a `tool_use` block
//! of that tool) and OpenAI chat completions (`POST …/chat/completions`: `model` and
//! `messages` required; the answer in `choices[0].message.content`). No streaming. It
//! records every request it was sent, and answers from a script the test writes.
//!
//! Tool use (agent hooks): a scripted [`Reply::Tool`] is a `tool_use` content block
//! (Anthropic, `stop_reason: tool_use`) or an assistant message's `tool_calls` with JSON
//! `arguments` (OpenAI, `finish_reason: tool_calls`); a [`Reply::Verdict`] to a request
//! that offers the `hook_verdict` tool is a call of it. As the real APIs, a request is
//! refused (400) when a tool is offered without a name or schema, or when a
//! `tool_result` block (Anthropic) or a `role: tool` message (OpenAI) answers no call of
//! the assistant message just before it.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// Input tokens the server reports for every request (unless started with
/// [`ModelServer::billing`]).
pub const INPUT_TOKENS: u64 = 11;
/// Output tokens the server reports for every answer.
pub const OUTPUT_TOKENS: u64 = 5;

/// What the server answers to the next request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A verdict object, in the wire format's structured-output shape.
    Verdict(Value),
    /// Free text as the model's message (not a verdict).
    Text(String),
    /// An HTTP error status with the provider's error body carrying `message`.
    Error(u16, String),
    /// Never answer (the connection is held until the client gives up).
    Stall,
    /// A call of the tool named, with this input.
    Tool(&'static str, Value),
}

/// The name of the verdict tool agent hooks are offered.
pub const VERDICT_TOOL: &str = "hook_verdict";

/// One request the server was sent.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request path.
    pub path: String,
    /// The headers, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` when it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The tool results sent back in this request, in order, as `(content, is_error)`
    /// (OpenAI has no error flag: `false`).
    pub fn tool_results(&self) -> Vec<(String, bool)> {
        let messages = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut results = Vec::new();
        for message in &messages {
            if message["role"] == "tool" {
                let text = message["content"].as_str().unwrap_or_default().to_string();
                results.push((text, false));
            }
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    let text = block["content"].as_str().unwrap_or_default().to_string();
                    results.push((text, block["is_error"] == true));
                }
            }
        }
        results
    }

    /// The names of the tools offered (either wire format).
    pub fn tools(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
            .map(str::to_string)
            .collect()
    }

    /// The user message's text (either wire format).
    pub fn prompt(&self) -> String {
        let messages = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The server: its base URL (`http://127.0.0.1:PORT`), what it was sent, its script.
pub struct ModelServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
}

impl ModelServer {
    /// Starts a server that answers `replies` in order, then `{"ok": true}` for ever.
    pub fn start(replies: Vec<Reply>) -> ModelServer {
        ModelServer::start_on(std::net::Ipv4Addr::LOCALHOST, replies)
    }

    /// [`ModelServer::start`], reporting `input_tokens` for every request instead of
    /// [`INPUT_TOKENS`]: for tests of token budgets, which refuse a request whose text,
    /// estimated at four bytes a token, does not fit, and then count what the provider
    /// reports.
    pub fn billing(input_tokens: u64, replies: Vec<Reply>) -> ModelServer {
        ModelServer::start_with(std::net::Ipv4Addr::LOCALHOST, input_tokens, replies)
    }

    /// [`ModelServer::start`] on the address `ip` (a non-loopback one of this machine's,
    /// for tests of what loopback changes).
    pub fn start_on(ip: std::net::Ipv4Addr, replies: Vec<Reply>) -> ModelServer {
        ModelServer::start_with(ip, INPUT_TOKENS, replies)
    }

    fn start_with(ip: std::net::Ipv4Addr, input_tokens: u64, replies: Vec<Reply>) -> ModelServer {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(replies)));
        let (seen, next) = (requests.clone(), script.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(200).flatten() {
                let (seen, next) = (seen.clone(), next.clone());
                std::thread::spawn(move || serve(stream, &seen, &next, input_tokens));
            }
        });
        ModelServer {
            url,
            requests,
            script,
        }
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    seen: &Mutex<Vec<Recorded>>,
    script: &Mutex<VecDeque<Reply>>,
    input_tokens: u64,
) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.trim_end().split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().unwrap_or(0);
            }
            headers.push((name, value.trim().to_string()));
        }
    }
    let mut body = vec![0u8; length.min(1 << 24)];
    reader.read_exact(&mut body).ok();
    let recorded = Recorded {
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let reply = script.lock().unwrap().pop_front().unwrap_or(Reply::Verdict(
        json!({"ok": true, "reason": "", "impossible": false}),
    ));
    let (status, answer) = answer(&recorded, reply, input_tokens);
    seen.lock().unwrap().push(recorded);
    let mut stream = reader.into_inner();
    let Some(answer) = answer else {
        // Stall: hold the connection until the client closes it.
        let mut sink = [0u8; 1024];
        while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
        return;
    };
    let text = answer.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.flush();
}

/// Why a conversation with tools is malformed, as the real APIs refuse it: a tool
/// without a name or schema, or a tool result that answers no call of the assistant
/// message just before it.
fn malformed_tools(body: &Value) -> Option<String> {
    for tool in body["tools"].as_array().into_iter().flatten() {
        let (name, schema) = match tool["type"].as_str() {
            Some("function") => (&tool["function"]["name"], &tool["function"]["parameters"]),
            _ => (&tool["name"], &tool["input_schema"]),
        };
        if !name.is_string() || !schema.is_object() {
            return Some(format!("tools: a tool needs a name and a schema: {tool}"));
        }
    }
    let mut calls: Vec<String> = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        if message["role"] == "assistant" {
            calls.clear();
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                calls.push(call["id"].as_str().unwrap_or_default().to_string());
                if call["function"]["arguments"].as_str().is_none() {
                    return Some("tool_calls: arguments must be a JSON string".into());
                }
            }
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_use" {
                    calls.push(block["id"].as_str().unwrap_or_default().to_string());
                }
            }
            continue;
        }
        let mut answered = Vec::new();
        if message["role"] == "tool" {
            answered.push(message["tool_call_id"].as_str().unwrap_or_default());
        }
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                answered.push(block["tool_use_id"].as_str().unwrap_or_default());
            }
        }
        for id in answered {
            if !calls.iter().any(|c| c == id) {
                return Some(format!("a tool result answers `{id}`, which is no call"));
            }
        }
    }
    None
}

fn anthropic_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The status and body for `request` (`None`: stall).
fn answer(request: &Recorded, reply: Reply, input_tokens: u64) -> (u16, Option<Value>) {
    let body = &request.body;
    let model = body["model"].clone();
    let calls = body["messages"].as_array().map_or(0, Vec::len);
    let offers_verdict = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["name"] == VERDICT_TOOL || t["function"]["name"] == VERDICT_TOOL);
    if let Some(why) = malformed_tools(body) {
        let e =
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": why}});
        return (400, Some(e));
    }
    if request.path == "/v1/messages" {
        if request.header("x-api-key").is_none() {
            let e = anthropic_error("authentication_error", "x-api-key header is required");
            return (401, Some(e));
        }
        if request.header("anthropic-version").is_none() {
            let e = anthropic_error(
                "invalid_request_error",
                "anthropic-version: header is required",
            );
            return (400, Some(e));
        }
        if !model.is_string() || !body["max_tokens"].is_u64() || !body["messages"].is_array() {
            let e = anthropic_error(
                "invalid_request_error",
                "model, max_tokens and messages are required",
            );
            return (400, Some(e));
        }
        let content = match reply {
            Reply::Stall => return (0, None),
            Reply::Error(status, message) => {
                return (status, Some(anthropic_error("api_error", &message)));
            }
            Reply::Text(text) => json!([{"type": "text", "text": text}]),
            Reply::Tool(name, input) => json!([
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": format!("toolu_{calls}"), "name": name, "input": input}
            ]),
            Reply::Verdict(verdict) => match body["tool_choice"]["name"].as_str() {
                Some(tool) => json!([{
                    "type": "tool_use", "id": "toolu_01", "name": tool, "input": verdict
                }]),
                None if offers_verdict => json!([{
                    "type": "tool_use", "id": format!("toolu_{calls}"), "name": VERDICT_TOOL,
                    "input": verdict
                }]),
                None => json!([{"type": "text", "text": verdict.to_string()}]),
            },
        };
        let uses_tool = content
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_use"));
        let stop = if uses_tool { "tool_use" } else { "end_turn" };
        return (
            200,
            Some(json!({
                "id": "msg_01", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": OUTPUT_TOKENS}
            })),
        );
    }
    if request.path.ends_with("/chat/completions") {
        if !model.is_string() || !body["messages"].is_array() {
            let e = json!({"error": {"message": "model and messages are required",
                                     "type": "invalid_request_error"}});
            return (400, Some(e));
        }
        let call = |name: &str, input: &Value| {
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{calls}"), "type": "function",
                "function": {"name": name, "arguments": input.to_string()}}]})
        };
        let message = match reply {
            Reply::Stall => return (0, None),
            Reply::Error(status, message) => {
                let e = json!({"error": {"message": message, "type": "server_error"}});
                return (status, Some(e));
            }
            Reply::Text(text) => json!({"role": "assistant", "content": text}),
            Reply::Tool(name, input) => call(name, &input),
            Reply::Verdict(verdict) if offers_verdict => call(VERDICT_TOOL, &verdict),
            Reply::Verdict(verdict) => json!({"role": "assistant", "content": verdict.to_string()}),
        };
        let finish = if message["tool_calls"].is_array() {
            "tool_calls"
        } else {
            "stop"
        };
        return (
            200,
            Some(json!({
                "id": "chatcmpl-01", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {"prompt_tokens": input_tokens, "completion_tokens": OUTPUT_TOKENS,
                          "total_tokens": input_tokens + OUTPUT_TOKENS}
            })),
        );
    }
    (404, Some(json!({"error": {"message": "not found"}})))
}
