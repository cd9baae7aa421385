//! The model of the client that dispatched an event: a prompt hook whose provider is
//! `embedder` asks it over the connection ([`super::client_calls`]), `{"id": "model-N",
//! "model": {…}}`, and the client answers `{"id": "model-N", "modelResult": {"text": …,
//! "inputTokens": …, "outputTokens": …}}` (or `{"error": …}`).

use futures_util::future::BoxFuture;
use serde_json::json;

use super::client_calls::{ClientCalls, Kind};
use crate::handlers::FailureKind;
use crate::handlers::model::{ModelClient, ModelError, ModelReply, ModelRequest, RESPONSE_LIMIT};

impl ModelClient for ClientCalls {
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            let mut model = json!({
                "model": request.model,
                "system": request.system,
                "prompt": request.prompt,
                "schema": request.schema,
                "maxTokens": request.max_tokens,
            });
            // Agent hooks: the tools and the conversation so far; the client answers
            // `toolCalls` (`[{id, name, input}]`) beside `text`. A plugin's conversation
            // (`model.complete` with several messages) sends its turns without tools.
            if !request.tools.is_empty() {
                model["tools"] = json!(request.tools);
            }
            if !request.tools.is_empty() || !request.turns.is_empty() {
                model["turns"] = json!(request.turns);
            }
            let result = self
                .ask(Kind::Model, model)
                .await
                .ok_or_else(|| ModelError::new(FailureKind::CannotStart, "the client is gone"))?;
            if let Some(error) = result.get("error") {
                let text = error
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_string);
                let text: String = text.chars().take(200).collect();
                return Err(ModelError::new(
                    FailureKind::Http,
                    format!("the client's model failed: {text}"),
                ));
            }
            let text = result["text"].as_str().ok_or_else(|| {
                ModelError::new(
                    FailureKind::InvalidOutput,
                    "the client's `modelResult` has no `text`",
                )
            })?;
            if text.len() > RESPONSE_LIMIT {
                return Err(ModelError::new(
                    FailureKind::InvalidOutput,
                    format!("the client's answer is over {RESPONSE_LIMIT} bytes; ignored"),
                ));
            }
            Ok(ModelReply {
                text: text.to_string(),
                input_tokens: result["inputTokens"].as_u64().unwrap_or(0),
                output_tokens: result["outputTokens"].as_u64().unwrap_or(0),
                tool_calls: serde_json::from_value(result["toolCalls"].clone()).unwrap_or_default(),
                stop_reason: result["stopReason"]
                    .as_str()
                    .map(|s| s.chars().take(40).collect()),
            })
        })
    }
}
