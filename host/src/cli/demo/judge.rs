//! The demo's stand-in judge: a loopback server that speaks the Anthropic Messages API
//! (`POST /v1/messages`) and answers prompt hooks with a **fixed rule, not a model**, so
//! that `hookhost demo` shows a prompt hook on a machine with no API key and no network.
//!
//! The wire format is the real one, as a prompt hook's request meets it: an `x-api-key`
//! other than the one the demo handed its hooks is a 401 `authentication_error`; none at
//! all is taken, as a local server takes it (hookhost sends a key only to an endpoint the
//! user's own files or managed policy name, and the demo's comes from `--settings`),
//! `anthropic-version` required (400), a JSON body of at most
//! 1 MiB (413 above) with `model`, `max_tokens` and `messages` (400 otherwise), any other
//! path a 404 `not_found_error`. Structured output is answered in the shape it was asked
//! for: a forced tool (`tool_choice: {"type": "tool", "name": …}`, what hookhost sends) with
//! a `tool_use` block of that tool, otherwise (`output_config.format`, or nothing) a text
//! block holding the JSON. The answer carries `id`, `model`, `stop_reason` and `usage`
//! (tokens counted as bytes / 4: a stand-in's count). No streaming.
//!
//! The rule ([`judge`]): an event whose prompt or tool input asks to delete, skip,
//! disable or remove tests is refused; everything else is allowed. Every reason says it
//! comes from a stand-in.
//!
//! Self-contained (std, tokio, hyper, serde_json): `host/benches/model_mcp.rs` runs the
//! same server as its loopback peer. hyper is the HTTP stack the host already builds
//! (wasmtime-wasi-http's); this file only routes and answers.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use wasmtime_wasi_http::io::TokioIo;

/// The variable the demo's prompt hooks take their key from (`modelProvider.apiKeyEnv`):
/// a key of the demo's own, never the user's `ANTHROPIC_API_KEY`.
pub const KEY_VAR: &str = "DEMO_JUDGE_API_KEY";

/// The largest request body read.
const BODY_LIMIT: usize = 1 << 20;

/// Server-side times kept at most (the bench's rounds).
const TIMES_KEPT: usize = 1 << 20;

/// What the server shares with its connections.
struct Shared {
    key: String,
    answered: AtomicU64,
    /// How long each answered request took inside the server, from its head to its
    /// answer (body read, judged, serialized).
    times: Mutex<Vec<Duration>>,
    /// The body of the last request answered 200.
    last_body: Mutex<Option<Bytes>>,
}

/// A running stand-in (it lives as long as the tokio runtime it was started on).
#[derive(Clone)]
pub struct StandIn {
    /// `http://127.0.0.1:PORT`, the `baseUrl` of the demo's `modelProvider`.
    pub url: String,
    shared: Arc<Shared>,
}

impl StandIn {
    /// Starts a server on a free loopback port that accepts `key` only.
    ///
    /// # Errors
    ///
    /// The port cannot be bound.
    pub async fn start(key: String) -> std::io::Result<StandIn> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            key,
            answered: AtomicU64::new(0),
            times: Mutex::new(Vec::new()),
            last_body: Mutex::new(None),
        });
        let serving = shared.clone();
        tokio::spawn(async move {
            loop {
                let stream = match listener.accept().await {
                    Ok((stream, _)) => stream,
                    // Out of descriptors: wait instead of spinning.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let shared = serving.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(shared.serve(request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(StandIn { url, shared })
    }

    /// Requests answered so far (errors included).
    pub fn answered(&self) -> u64 {
        self.shared.answered.load(Ordering::Relaxed)
    }

    /// The body of the last request the stand-in judged (answered 200).
    #[allow(dead_code)] // host/benches/model_mcp.rs sends it again with a bare client
    pub fn last_body(&self) -> Option<Bytes> {
        self.shared
            .last_body
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The server-side time of every request answered so far, in order.
    #[allow(dead_code)] // host/benches/model_mcp.rs subtracts it
    pub fn times(&self) -> Vec<Duration> {
        self.shared
            .times
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The event input a prompt hook's text carries (`$ARGUMENTS`, or appended): the first
/// JSON object in it with a `hook_event_name`.
pub fn event_input(text: &str) -> Option<Value> {
    text.match_indices('{').take(256).find_map(|(i, _)| {
        let value = serde_json::Deserializer::from_str(&text[i..])
            .into_iter::<Value>()
            .next()?
            .ok()?;
        value.get("hook_event_name").is_some().then_some(value)
    })
}

/// The stand-in's verdict on an event input: `(ok, reason)`. It reads the prompt
/// (UserPromptSubmit) or the tool input, never the hook's own instructions: a request
/// that asks to delete, skip, disable or remove tests is refused, everything else
/// allowed.
pub fn judge(input: Option<&Value>) -> (bool, String) {
    let text = match input {
        Some(input) => match input.get("prompt").and_then(Value::as_str) {
            Some(prompt) => prompt.to_lowercase(),
            None => input
                .get("tool_input")
                .map(|t| t.to_string().to_lowercase())
                .unwrap_or_default(),
        },
        None => String::new(),
    };
    let weakens = ["delete", "skip", "disable", "remove"]
        .iter()
        .any(|verb| text.contains(verb));
    if weakens && text.contains("test") {
        (
            false,
            "stand-in judge (a fixed rule, not a model): the request asks to weaken the \
             tests; fix the code instead"
                .into(),
        )
    } else {
        (
            true,
            "stand-in judge (a fixed rule, not a model): nothing here weakens the tests".into(),
        )
    }
}

fn error(status: StatusCode, kind: &str, message: &str) -> (StatusCode, Value) {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, body)
}

/// Stand-in token count: bytes / 4, rounded up.
fn tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// The text of the request's last user message (a string, or its text blocks).
fn user_text(body: &Value) -> String {
    let Some(last) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

impl Shared {
    async fn serve(&self, request: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let (status, body) = self.answer(request).await;
        let n = self.answered.fetch_add(1, Ordering::Relaxed) + 1;
        let text = body.to_string();
        let response = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .header("request-id", format!("req_standin_{n}"))
            .body(Full::new(Bytes::from(text)))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())));
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        if times.len() < TIMES_KEPT {
            times.push(started.elapsed());
        }
        response
    }

    async fn answer(&self, request: Request<hyper::body::Incoming>) -> (StatusCode, Value) {
        if request.uri().path() != "/v1/messages" {
            return error(StatusCode::NOT_FOUND, "not_found_error", "Not found");
        }
        if request.method() != hyper::Method::POST {
            return error(
                StatusCode::METHOD_NOT_ALLOWED,
                "invalid_request_error",
                "only POST is allowed",
            );
        }
        let headers = request.headers();
        match headers.get("x-api-key").map(|k| k.as_bytes()) {
            None => {}
            Some(key) if key != self.key.as_bytes() => {
                return error(
                    StatusCode::UNAUTHORIZED,
                    "authentication_error",
                    "invalid x-api-key",
                );
            }
            Some(_) => {}
        }
        if headers.get("anthropic-version").is_none() {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "anthropic-version: header is required",
            );
        }
        let bytes = match Limited::new(request.into_body(), BODY_LIMIT)
            .collect()
            .await
        {
            Ok(collected) => collected.to_bytes(),
            Err(_) => {
                return error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request_too_large",
                    "the request body is over 1 MiB",
                );
            }
        };
        let Ok(body) = serde_json::from_slice::<Value>(&bytes) else {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the body is not JSON",
            );
        };
        let messages_ok = body["messages"].as_array().is_some_and(|m| !m.is_empty());
        if !body["model"].is_string()
            || body["max_tokens"].as_u64().is_none_or(|n| n == 0)
            || !messages_ok
        {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "model, max_tokens and messages are required",
            );
        }
        *self.last_body.lock().unwrap_or_else(|e| e.into_inner()) = Some(bytes.clone());
        let (ok, reason) = judge(event_input(&user_text(&body)).as_ref());
        let verdict = json!({"ok": ok, "reason": reason, "impossible": false});
        let forced = match body["tool_choice"]["type"].as_str() {
            Some("tool") => body["tool_choice"]["name"].as_str(),
            // A tool-using hook that must call a tool: the verdict tool, if offered.
            Some("any") => body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str())
                .find(|name| *name == "hook_verdict"),
            _ => None,
        };
        let n = self.answered.load(Ordering::Relaxed) + 1;
        let (content, stop) = match forced {
            Some(tool) => (
                json!([{"type": "tool_use", "id": format!("toolu_standin_{n}"), "name": tool,
                        "input": verdict}]),
                "tool_use",
            ),
            None => (
                json!([{"type": "text", "text": verdict.to_string()}]),
                "end_turn",
            ),
        };
        let answer_text = content.to_string();
        (
            StatusCode::OK,
            json!({
                "id": format!("msg_standin_{n}"), "type": "message", "role": "assistant",
                "model": body["model"], "content": content, "stop_reason": stop,
                "stop_sequence": null,
                "usage": {"input_tokens": tokens(&String::from_utf8_lossy(&bytes)),
                          "output_tokens": tokens(&answer_text)}
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_reads_the_event_not_the_instructions() {
        let asked = |prompt: &str| {
            let input = json!({"hook_event_name": "UserPromptSubmit", "prompt": prompt});
            format!("Refuse requests to delete or skip tests. {input}")
        };
        let verdict = |text: &str| judge(event_input(text).as_ref());
        assert!(!verdict(&asked("please delete the failing tests so CI passes")).0);
        assert!(!verdict(&asked("Skip the flaky TEST in ci")).0);
        assert!(verdict(&asked("tidy up the build")).0);
        assert!(verdict(&asked("delete the build directory")).0);
        // The hook's own words ("delete or skip tests") are not the event.
        assert!(verdict("Refuse requests to delete or skip tests.").0);
        let tool =
            json!({"hook_event_name": "PreToolUse", "tool_input": {"command": "rm -r tests"}});
        assert!(verdict(&format!("judge {{not json}} {tool}")).0);
        let tool =
            json!({"hook_event_name": "PreToolUse", "tool_input": {"command": "remove tests/"}});
        assert!(!verdict(&tool.to_string()).0);
        assert!(
            verdict("x")
                .1
                .starts_with("stand-in judge (a fixed rule, not a model)")
        );
    }
}
