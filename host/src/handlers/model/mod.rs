//! The model provider layer: one question to a model, one answer, for every handler that
//! consults one (`prompt` hooks today).
//!
//! - [`ModelClient`] is what answers: the Anthropic Messages API and any OpenAI-compatible
//!   chat-completions endpoint ([`wire`], through the HTTP hooks' reqwest client: no
//!   proxy, no redirects, the system's and managed policy's roots), or the embedder's own
//!   model ([`crate::HostBuilder::model_client`]).
//! - [`resolve`] is **the one place every model request passes** before anything is sent:
//!   it picks the provider (the hook's `provider`, else `modelProvider`, else the
//!   embedder's model, else Anthropic), reads the key from the environment only
//!   ([`crate::config::env`]), and holds the endpoint to `allowedHttpHookUrls` and managed
//!   `ceilings.models` (providers, hosts, token budget).
//! - [`Resolved::complete`] meters tokens against the budget and bounds what it reads.
//!
//! The key is never logged: it lives in a [`Secret`] whose `Debug` prints nothing, and
//! goes into a header marked sensitive.

mod endpoint;
mod turns;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::BoxFuture;
use serde_json::Value;

pub use endpoint::{DEFAULT_ANTHROPIC_MODEL, Wanted, model_alias, resolve};
pub use turns::{ToolCall, ToolDef, ToolResult, Turn};

use super::FailureKind;
use crate::config::schema::ModelProviderKind;

tokio::task_local! {
    /// The model of the client that dispatched the event being handled (`hookhost
    /// serve`'s connections), for hooks whose provider is `embedder`.
    static CALLER_MODEL: Arc<dyn ModelClient>;
}

/// Runs `future` (a dispatch) with `client` as the caller's model.
pub async fn with_caller_model<F: std::future::Future>(
    client: Arc<dyn ModelClient>,
    future: F,
) -> F::Output {
    CALLER_MODEL.scope(client, future).await
}

/// The caller's model, inside [`with_caller_model`].
pub fn caller_model() -> Option<Arc<dyn ModelClient>> {
    CALLER_MODEL.try_with(Arc::clone).ok()
}

/// Bytes of a model's HTTP answer read at most: the rest is not waited for.
pub const RESPONSE_LIMIT: usize = 1 << 20;

/// Output tokens asked for one answer (lowered to what the budget has left).
pub const DEFAULT_MAX_TOKENS: u64 = 1024;

/// Bytes of a request's text counted as one input token before it is sent
/// ([`ModelRequest::estimated_input_tokens`]): both providers document about four
/// characters of English per token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// One question to a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model (`None`: the provider's default; only the embedder's model has one
    /// without configuration).
    pub model: Option<String>,
    /// The system prompt.
    pub system: String,
    /// The user message.
    pub prompt: String,
    /// A JSON Schema the answer must fit, asked for as structured output where the wire
    /// format has it (Anthropic: a forced tool; OpenAI: `response_format`).
    pub schema: Option<Value>,
    /// The most output tokens to spend.
    pub max_tokens: u64,
    /// Tools the model may call (agent hooks; empty: a single answer). With tools the
    /// model must call one each turn.
    pub tools: Vec<ToolDef>,
    /// The conversation after `prompt`: the model's calls and the tools' results.
    pub turns: Vec<Turn>,
}

impl ModelRequest {
    /// The input tokens this request is expected to cost before a provider counts them:
    /// its [`ModelRequest::text_bytes`] over [`BYTES_PER_TOKEN`], rounded up. The budget
    /// refuses a request whose estimate does not fit ([`Resolved::complete`]); what is
    /// spent is still the provider's own count.
    pub fn estimated_input_tokens(&self) -> u64 {
        self.text_bytes().div_ceil(BYTES_PER_TOKEN)
    }

    /// Every byte of text the request sends: system prompt, prompt, turns, tools and
    /// schema (JSON values as they are serialised), without the wire format's framing.
    pub fn text_bytes(&self) -> u64 {
        let json = |value: &Value| {
            let mut counter = ByteCount(0);
            // Writing into a counter cannot fail; a value that fails to serialise sends
            // nothing either.
            let _ = serde_json::to_writer(&mut counter, value);
            counter.0
        };
        let mut bytes = self.system.len() + self.prompt.len();
        bytes += self.schema.as_ref().map_or(0, json);
        for tool in &self.tools {
            bytes += tool.name.len() + tool.description.len() + json(&tool.input_schema);
        }
        for turn in &self.turns {
            bytes += match turn {
                Turn::Assistant { text, calls } => {
                    let calls: usize = calls
                        .iter()
                        .map(|call| call.id.len() + call.name.len() + json(&call.input))
                        .sum();
                    text.len() + calls
                }
                Turn::ToolResults { results } => results
                    .iter()
                    .map(|result| result.id.len() + result.content.len())
                    .sum(),
                Turn::User { text } => text.len(),
            };
        }
        bytes as u64
    }
}

/// Counts the bytes written to it (the length of a JSON value without keeping it).
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A model's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelReply {
    /// The answer as text: the forced tool's input as JSON, or the message's text.
    pub text: String,
    /// Input tokens the provider counted.
    pub input_tokens: u64,
    /// Output tokens the provider counted.
    pub output_tokens: u64,
    /// The tools the model called (only when the request offered tools).
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped, as the provider said it (`end_turn`, `max_tokens`, `stop`,
    /// `length`, `refusal`, `content_filter`, …), when it said.
    pub stop_reason: Option<String>,
}

/// Why a model gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    /// The class of failure, as a hook's ([`FailureKind::Http`], `Refused`, `Timeout`,
    /// `InvalidOutput`, `CannotStart`).
    pub kind: FailureKind,
    /// A message naming the provider and endpoint, never the key.
    pub message: String,
}

impl ModelError {
    /// An error of `kind`.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> ModelError {
        ModelError {
            kind,
            message: message.into(),
        }
    }
}

/// Something that answers model requests: a provider's API, or an embedder's own model.
pub trait ModelClient: Send + Sync {
    /// Answers one request. Timeouts are the caller's (the hook's deadline).
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>>;
}

impl std::fmt::Debug for dyn ModelClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelClient(..)")
    }
}

/// An API key: never printed, never logged.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key.
    pub fn new(key: String) -> Secret {
        Secret(key)
    }

    /// The key, for the one header that carries it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// A provider chosen and checked for one hook run: what answers, with which model, and
/// under which token budget.
pub struct Resolved {
    /// Which provider.
    pub kind: ModelProviderKind,
    /// The model asked for (`None`: the embedder's default).
    pub model: Option<String>,
    /// Where requests go (`None` for the embedder's model), for messages.
    pub endpoint: Option<String>,
    /// Why the API key is not sent to [`Resolved::endpoint`] (`None`: it is, or there is
    /// none to send): the endpoint is neither the provider's own nor one the user's
    /// files or managed policy named ([`resolve`]).
    pub key_withheld: Option<String>,
    client: Arc<dyn ModelClient>,
    budget: Option<u64>,
    /// Where the budget comes from, for the message when it is spent.
    budget_from: &'static str,
    used: AtomicU64,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .field("key_withheld", &self.key_withheld)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl Resolved {
    /// A provider for `client` (resolution goes through [`resolve`]; this is its end).
    pub(crate) fn new(
        kind: ModelProviderKind,
        model: Option<String>,
        endpoint: Option<String>,
        client: Arc<dyn ModelClient>,
        budget: Option<u64>,
    ) -> Resolved {
        Resolved {
            kind,
            model,
            endpoint,
            key_withheld: None,
            client,
            budget,
            budget_from: "managed `ceilings.models.tokensPerEvent`",
            used: AtomicU64::new(0),
        }
    }

    /// The same, saying why the key is not sent (set by [`resolve`] only).
    pub(crate) fn with_key_withheld(mut self, why: Option<String>) -> Resolved {
        self.key_withheld = why;
        self
    }

    /// The same provider under a budget of at most `tokens` (input + output) for the run,
    /// set by `from` (named when it is spent): the lower of it and the ceiling's.
    pub fn within(mut self, tokens: u64, from: &'static str) -> Resolved {
        if self.budget.is_none_or(|b| tokens < b) {
            self.budget = Some(tokens);
            self.budget_from = from;
        }
        self
    }

    /// The token budget of the run, if any.
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// Tokens (input + output) spent so far by this run.
    pub fn tokens_used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// What answers, for messages: `anthropic claude-haiku-4-5 at https://…`.
    pub fn describe(&self) -> String {
        let model = self.model.as_deref().unwrap_or("(default model)");
        match &self.endpoint {
            Some(url) => format!("{} model `{model}` at {url}", self.kind.as_str()),
            None => format!("{} model `{model}`", self.kind.as_str()),
        }
    }

    /// Asks once, within the token budget: a request whose input, estimated
    /// ([`ModelRequest::estimated_input_tokens`]), leaves no output token of what is left
    /// is refused without sending (so one large request cannot overshoot the budget),
    /// and the output tokens asked for are lowered to what the input leaves.
    ///
    /// # Errors
    ///
    /// The provider's error, or the budget's.
    pub async fn complete(&self, mut request: ModelRequest) -> Result<ModelReply, ModelError> {
        request.model = self.model.clone();
        if let Some(budget) = self.budget {
            let left = budget.saturating_sub(self.tokens_used());
            if left == 0 {
                return Err(ModelError::new(
                    FailureKind::Limit,
                    format!(
                        "the token budget of {budget} per event ({}) is spent",
                        self.budget_from
                    ),
                ));
            }
            let input = request.estimated_input_tokens();
            if input >= left {
                return Err(ModelError::new(
                    FailureKind::Limit,
                    format!(
                        "this request's input, about {input} tokens ({} bytes of text over \
                         {BYTES_PER_TOKEN}), does not fit the {left} left of the token budget \
                         of {budget} per event ({}); it was not sent",
                        request.text_bytes(),
                        self.budget_from
                    ),
                ));
            }
            request.max_tokens = request.max_tokens.min(left - input);
        }
        let reply = self.client.complete(&request).await?;
        self.spend(reply.input_tokens.saturating_add(reply.output_tokens));
        Ok(reply)
    }

    /// Counts `tokens` as spent, saturating: the counts are the provider's words (any
    /// `u64` it writes), and a count that wrapped past `u64::MAX` would hand a spent
    /// budget back whole.
    fn spend(&self, tokens: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                Some(used.saturating_add(tokens))
            });
    }
}

#[cfg(test)]
mod tests;
