//! The model of the client that dispatched an event: a prompt hook whose provider is
//! `embedder` asks it over the connection, `{"id": "model-N", "model": {…}}`, and the
//! client answers `{"id": "model-N", "modelResult": {"text": …, "inputTokens": …,
//! "outputTokens": …}}` (or `{"error": …}`). The hook's timeout bounds the wait; a
//! request whose hook gave up is forgotten, and its late answer is refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::handlers::FailureKind;
use crate::handlers::model::{ModelClient, ModelError, ModelReply, ModelRequest, RESPONSE_LIMIT};

/// Sends one line to the client; `false` when it is gone.
type Send = Box<dyn Fn(String) -> bool + std::marker::Send + Sync>;

/// One connection's model: its requests in flight, by id.
pub struct ClientModel {
    send: Send,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next: AtomicU64,
}

impl ClientModel {
    /// A model that writes its requests with `send`.
    pub fn new(send: impl Fn(String) -> bool + std::marker::Send + Sync + 'static) -> ClientModel {
        ClientModel {
            send: Box::new(send),
            pending: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }

    /// Hands a `modelResult` line to the request it answers.
    ///
    /// # Errors
    ///
    /// No model request with that id is waiting (never sent, answered, or given up).
    pub fn deliver(&self, id: &Value, result: Value) -> Result<(), String> {
        let key = id.as_str().unwrap_or_default();
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        match waiting {
            Some(tx) => {
                let _ = tx.send(result);
                Ok(())
            }
            None => Err(format!(
                "bad request: no model request {id} is waiting for a `modelResult`"
            )),
        }
    }

    fn forget(&self, id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

/// Forgets a request when its hook stops waiting (answered, timed out, cancelled).
struct Forget<'a>(&'a ClientModel, String);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(&self.1);
    }
}

impl ModelClient for ClientModel {
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            let id = format!("model-{}", self.next.fetch_add(1, Ordering::Relaxed));
            let (tx, rx) = oneshot::channel();
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.clone(), tx);
            let _forget = Forget(self, id.clone());
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
            let line = json!({"id": id, "model": model});
            let gone = || ModelError::new(FailureKind::CannotStart, "the client is gone");
            if !(self.send)(line.to_string()) {
                return Err(gone());
            }
            let result = rx.await.map_err(|_| gone())?;
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
