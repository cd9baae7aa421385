//! The two wire formats (no streaming): the Anthropic Messages API (`POST
//! {base}/v1/messages`, `x-api-key`, `anthropic-version: 2023-06-01`; structured output
//! through one tool forced by `tool_choice`) and OpenAI-compatible chat completions
//! (`POST {base}/chat/completions`, `Authorization: Bearer`; structured output through
//! `response_format: json_schema`). With tools (agent hooks) the conversation goes on:
//! Anthropic `tools` with `tool_choice: any`, `tool_use` blocks answered by `tool_result`
//! blocks; OpenAI `tools` of type `function` with `tool_choice: required`, an assistant
//! message's `tool_calls` answered by `role: tool` messages. The bodies are built and read
//! by pure functions, unit-tested here; [`HttpModel`] sends them.

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::{
    ModelClient, ModelError, ModelReply, ModelRequest, RESPONSE_LIMIT, Secret, ToolCall, Turn,
};
use crate::handlers::FailureKind;

/// The `anthropic-version` header sent.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The name of the tool an Anthropic model is forced to call with its answer, and of the
/// OpenAI `json_schema`.
pub const ANSWER_TOOL: &str = "hook_verdict";

/// Which wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// The Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible chat completions.
    OpenAi,
}

impl Wire {
    /// The endpoint under `base` (`https://api.anthropic.com` →
    /// `https://api.anthropic.com/v1/messages`; `http://localhost:11434/v1` →
    /// `http://localhost:11434/v1/chat/completions`).
    pub fn endpoint(self, base: &str) -> String {
        let base = base.trim_end_matches('/');
        match self {
            Wire::Anthropic => format!("{base}/v1/messages"),
            Wire::OpenAi => format!("{base}/chat/completions"),
        }
    }

    /// The request body.
    pub fn body(self, request: &ModelRequest, model: &str) -> Value {
        match self {
            Wire::Anthropic => {
                let mut body = json!({
                    "model": model,
                    "max_tokens": request.max_tokens,
                    "system": request.system,
                    "messages": anthropic_messages(request),
                });
                if !request.tools.is_empty() {
                    body["tools"] = request
                        .tools
                        .iter()
                        .map(|t| {
                            json!({"name": t.name, "description": t.description,
                                   "input_schema": t.input_schema})
                        })
                        .collect();
                    body["tool_choice"] = json!({"type": "any"});
                } else if let Some(schema) = &request.schema {
                    body["tools"] = json!([{
                        "name": ANSWER_TOOL,
                        "description": "Report your verdict on the hook event.",
                        "input_schema": schema,
                    }]);
                    body["tool_choice"] = json!({"type": "tool", "name": ANSWER_TOOL});
                }
                body
            }
            Wire::OpenAi => {
                let mut body = json!({
                    "model": model,
                    "max_tokens": request.max_tokens,
                    "messages": openai_messages(request),
                });
                if !request.tools.is_empty() {
                    body["tools"] = request
                        .tools
                        .iter()
                        .map(|t| {
                            json!({"type": "function", "function": {
                                "name": t.name, "description": t.description,
                                "parameters": t.input_schema}})
                        })
                        .collect();
                    body["tool_choice"] = json!("required");
                } else if let Some(schema) = &request.schema {
                    body["response_format"] = json!({
                        "type": "json_schema",
                        "json_schema": {"name": ANSWER_TOOL, "strict": true, "schema": schema},
                    });
                }
                body
            }
        }
    }

    /// The answer in a 2xx response body.
    ///
    /// # Errors
    ///
    /// What is missing or wrong (an [`FailureKind::InvalidOutput`]).
    pub fn reply(self, body: &Value) -> Result<ModelReply, ModelError> {
        let invalid = |why: &str| ModelError::new(FailureKind::InvalidOutput, why.to_string());
        let count = |v: &Value| v.as_u64().unwrap_or(0);
        match self {
            Wire::Anthropic => {
                let content = body["content"]
                    .as_array()
                    .ok_or_else(|| invalid("the answer has no `content` array"))?;
                let tool = content
                    .iter()
                    .find(|b| b["type"] == "tool_use" && b["name"].as_str() == Some(ANSWER_TOOL));
                let text = match tool {
                    Some(block) => block["input"].to_string(),
                    None => content
                        .iter()
                        .filter(|b| b["type"] == "text")
                        .filter_map(|b| b["text"].as_str())
                        .collect::<Vec<_>>()
                        .join(""),
                };
                let tool_calls = content
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| ToolCall {
                        id: b["id"].as_str().unwrap_or_default().to_string(),
                        name: b["name"].as_str().unwrap_or_default().to_string(),
                        input: b["input"].clone(),
                    })
                    .collect();
                Ok(ModelReply {
                    text,
                    input_tokens: count(&body["usage"]["input_tokens"]),
                    output_tokens: count(&body["usage"]["output_tokens"]),
                    tool_calls,
                    stop_reason: body["stop_reason"].as_str().map(str::to_string),
                })
            }
            Wire::OpenAi => {
                let message = &body["choices"][0]["message"];
                if let Some(refusal) = message["refusal"].as_str() {
                    return Err(invalid(&format!(
                        "the model refused to answer: {}",
                        short(refusal)
                    )));
                }
                let tool_calls: Vec<ToolCall> = message["tool_calls"]
                    .as_array()
                    .map(|calls| calls.iter().map(openai_call).collect())
                    .unwrap_or_default();
                let text = match message["content"].as_str() {
                    Some(text) => text,
                    None if !tool_calls.is_empty() => "",
                    None => {
                        return Err(invalid("the answer has no `choices[0].message.content`"));
                    }
                };
                Ok(ModelReply {
                    text: text.to_string(),
                    input_tokens: count(&body["usage"]["prompt_tokens"]),
                    output_tokens: count(&body["usage"]["completion_tokens"]),
                    tool_calls,
                    stop_reason: body["choices"][0]["finish_reason"]
                        .as_str()
                        .map(str::to_string),
                })
            }
        }
    }
}

/// The Anthropic `messages`: the prompt, then the turns (`tool_use` and `tool_result`
/// content blocks).
fn anthropic_messages(request: &ModelRequest) -> Value {
    let mut messages = vec![json!({"role": "user", "content": request.prompt})];
    for turn in &request.turns {
        messages.push(match turn {
            Turn::Assistant { text, calls } => {
                let mut content: Vec<Value> = Vec::new();
                if !text.is_empty() || calls.is_empty() {
                    let text = if text.is_empty() { "(no answer)" } else { text };
                    content.push(json!({"type": "text", "text": text}));
                }
                content.extend(calls.iter().map(
                    |c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}),
                ));
                json!({"role": "assistant", "content": content})
            }
            Turn::ToolResults { results } => {
                let content: Vec<Value> = results
                    .iter()
                    .map(|r| {
                        json!({"type": "tool_result", "tool_use_id": r.id,
                               "content": r.content, "is_error": r.is_error})
                    })
                    .collect();
                json!({"role": "user", "content": content})
            }
            Turn::User { text } => json!({"role": "user", "content": text}),
        });
    }
    Value::Array(messages)
}

/// The OpenAI `messages`: system, prompt, then the turns (`tool_calls` and `role: tool`).
fn openai_messages(request: &ModelRequest) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": request.system}),
        json!({"role": "user", "content": request.prompt}),
    ];
    for turn in &request.turns {
        match turn {
            Turn::Assistant { text, calls } => {
                let mut message = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function", "function": {
                                "name": c.name, "arguments": c.input.to_string()}})
                        })
                        .collect();
                }
                messages.push(message);
            }
            Turn::ToolResults { results } => messages.extend(
                results
                    .iter()
                    .map(|r| json!({"role": "tool", "tool_call_id": r.id, "content": r.content})),
            ),
            Turn::User { text } => messages.push(json!({"role": "user", "content": text})),
        }
    }
    Value::Array(messages)
}

/// One entry of an OpenAI `tool_calls` array; `arguments` is a JSON string.
fn openai_call(call: &Value) -> ToolCall {
    let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
    ToolCall {
        id: call["id"].as_str().unwrap_or_default().to_string(),
        name: call["function"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        input: serde_json::from_str(arguments)
            .unwrap_or_else(|_| Value::String(arguments.to_string())),
    }
}

/// The first 200 characters of a text from outside, for a message.
fn short(text: &str) -> String {
    let mut cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

/// A provider's HTTP API: one of the wire formats at one endpoint, with the key from the
/// environment (if any).
pub struct HttpModel {
    /// The wire format.
    pub wire: Wire,
    /// The endpoint, checked by [`super::resolve`].
    pub url: url::Url,
    /// The key (`None`: send none; local OpenAI-compatible servers need none).
    pub key: Option<Secret>,
    /// Why the key is not sent here ([`super::resolve`]), said when the server refuses
    /// the request for want of it.
    pub withheld: Option<String>,
    /// The HTTP hooks' client.
    pub client: reqwest::Client,
}

impl ModelClient for HttpModel {
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(self.send(request))
    }
}

impl HttpModel {
    async fn send(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let where_ = self.url.origin().ascii_serialization();
        let model = request
            .model
            .as_deref()
            .ok_or_else(|| ModelError::new(FailureKind::CannotStart, "no model is configured"))?;
        let body = self.wire.body(request, model);
        let mut builder = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        let secret_header = |name: &str, value: String| {
            let mut value = reqwest::header::HeaderValue::from_str(&value).ok()?;
            value.set_sensitive(true);
            Some((name.to_string(), value))
        };
        let auth = match (&self.wire, &self.key) {
            (Wire::Anthropic, key) => {
                builder = builder.header("anthropic-version", ANTHROPIC_VERSION);
                key.as_ref()
                    .map(|k| secret_header("x-api-key", k.expose().to_string()))
            }
            (Wire::OpenAi, key) => key
                .as_ref()
                .map(|k| secret_header("authorization", format!("Bearer {}", k.expose()))),
        };
        match auth {
            Some(Some((name, value))) => builder = builder.header(name, value),
            Some(None) => {
                return Err(ModelError::new(
                    FailureKind::CannotStart,
                    "the API key is not a valid header value (not sent)",
                ));
            }
            None => {}
        }
        let mut response = builder.send().await.map_err(|e| {
            // No socket for the request (out of descriptors, memory): could not start.
            if let Some(io) = crate::handlers::out_of_resources(&e) {
                return ModelError::new(
                    FailureKind::CannotStart,
                    format!("cannot start POST {where_}: {io}"),
                );
            }
            ModelError::new(
                FailureKind::Http,
                format!("{where_}: {}", crate::handlers::http::without_url(e)),
            )
        })?;
        let status = response.status();
        // Bounded before it is held: one byte past the limit is enough to refuse.
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > RESPONSE_LIMIT {
                        return Err(ModelError::new(
                            FailureKind::InvalidOutput,
                            format!("{where_} answered more than {RESPONSE_LIMIT} bytes; ignored"),
                        ));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(ModelError::new(
                        FailureKind::Http,
                        format!("{where_}: {}", crate::handlers::http::without_url(e)),
                    ));
                }
            }
        }
        let body: Option<Value> = serde_json::from_slice(&bytes).ok();
        if !status.is_success() {
            // The provider's words, short, and without the key should it quote it.
            let scrub = |text: &str| match &self.key {
                Some(key) if !key.expose().is_empty() => text.replace(key.expose(), "[redacted]"),
                _ => text.to_string(),
            };
            let detail = body
                .as_ref()
                .and_then(|b| b["error"]["message"].as_str().map(|m| short(&scrub(m))))
                .unwrap_or_default();
            let mut message = format!("{where_} answered HTTP {status} {detail}")
                .trim_end()
                .to_string();
            if let Some(why) = self.withheld.as_ref().filter(|_| {
                matches!(
                    status,
                    reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN
                )
            }) {
                message.push_str(&format!("; {why}"));
            }
            return Err(ModelError::new(FailureKind::Http, message));
        }
        let body = body.ok_or_else(|| {
            ModelError::new(
                FailureKind::InvalidOutput,
                format!("{where_} answered a body that is not JSON"),
            )
        })?;
        self.wire.reply(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ModelRequest {
        ModelRequest {
            model: Some("m".into()),
            system: "sys".into(),
            prompt: "judge this".into(),
            schema: Some(json!({"type": "object"})),
            max_tokens: 100,
            tools: Vec::new(),
            turns: Vec::new(),
        }
    }

    #[test]
    fn anthropic_forces_the_answer_tool_and_reads_its_input() {
        let body = Wire::Anthropic.body(&request(), "claude-haiku-4-5");
        assert_eq!(body["model"], "claude-haiku-4-5");
        assert_eq!(body["tool_choice"]["name"], ANSWER_TOOL);
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(body["messages"][0]["content"], "judge this");
        let reply = Wire::Anthropic
            .reply(&json!({
                "content": [{"type": "tool_use", "name": ANSWER_TOOL, "input": {"ok": true}}],
                "usage": {"input_tokens": 7, "output_tokens": 3}
            }))
            .unwrap();
        assert_eq!(reply.text, r#"{"ok":true}"#);
        assert_eq!((reply.input_tokens, reply.output_tokens), (7, 3));
        let text = Wire::Anthropic
            .reply(&json!({"content": [{"type": "text", "text": "{\"ok\":false}"}]}))
            .unwrap();
        assert_eq!(text.text, r#"{"ok":false}"#);
        assert!(Wire::Anthropic.reply(&json!({})).is_err());
    }

    #[test]
    fn openai_asks_for_a_json_schema_and_reads_the_content() {
        let body = Wire::OpenAi.body(&request(), "llama3");
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert_eq!(body["messages"][1]["content"], "judge this");
        let reply = Wire::OpenAi
            .reply(&json!({
                "choices": [{"message": {"role": "assistant", "content": "{\"ok\":true}"}}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2}
            }))
            .unwrap();
        assert_eq!(
            (reply.text.as_str(), reply.input_tokens),
            ("{\"ok\":true}", 5)
        );
        assert!(Wire::OpenAi.reply(&json!({"choices": []})).is_err());
        assert_eq!(
            Wire::OpenAi.endpoint("http://localhost:11434/v1/"),
            "http://localhost:11434/v1/chat/completions"
        );
    }
    /// A conversation with tools in both formats: the tools offered, a call and its result
    /// sent back, and the calls read from each reply.
    #[test]
    fn tool_turns_in_both_formats() {
        use super::super::{ToolDef, ToolResult};
        let mut request = request();
        request.schema = None;
        request.tools = vec![ToolDef {
            name: "Read".into(),
            description: "read".into(),
            input_schema: json!({"type": "object"}),
        }];
        let call = ToolCall {
            id: "c1".into(),
            name: "Read".into(),
            input: json!({"file_path": "a"}),
        };
        request.turns = vec![
            Turn::Assistant {
                text: String::new(),
                calls: vec![call.clone()],
            },
            Turn::ToolResults {
                results: vec![ToolResult {
                    id: "c1".into(),
                    content: "refused: no".into(),
                    is_error: true,
                }],
            },
        ];
        let body = Wire::Anthropic.body(&request, "m");
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(body["messages"][1]["content"][0]["id"], "c1");
        let result = &body["messages"][2]["content"][0];
        assert_eq!(
            (result["type"].as_str(), result["tool_use_id"].as_str()),
            (Some("tool_result"), Some("c1"))
        );
        assert_eq!(result["is_error"], true);
        let body = Wire::OpenAi.body(&request, "m");
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["tools"][0]["function"]["name"], "Read");
        assert!(body.get("response_format").is_none());
        let calls = &body["messages"][2]["tool_calls"];
        assert_eq!(calls[0]["function"]["arguments"], r#"{"file_path":"a"}"#);
        assert_eq!(body["messages"][3]["role"], "tool");
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");

        let reply = Wire::Anthropic
            .reply(
                &json!({"content": [{"type": "tool_use", "id": "c1", "name": "Read",
                                        "input": {"file_path": "a"}}]}),
            )
            .unwrap();
        assert_eq!(reply.tool_calls, vec![call.clone()]);
        let reply = Wire::OpenAi
            .reply(
                &json!({"choices": [{"message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "c1", "type": "function", "function":
                    {"name": "Read", "arguments": "{\"file_path\": \"a\"}"}}]}}]}),
            )
            .unwrap();
        assert_eq!(reply.tool_calls, vec![call]);
    }
}
