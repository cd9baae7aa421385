//! The raw config types of model providers: `modelProvider`, a hook's `provider`,
//! managed `ceilings.models`, and a wasm hook's `capabilities.model` grant.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A model provider: who answers `prompt` hooks.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ModelProviderKind {
    /// The Anthropic Messages API (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`).
    Anthropic,
    /// An OpenAI-compatible chat-completions endpoint (`OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`: OpenAI, Ollama, llama.cpp's server, vLLM, LM Studio).
    Openai,
    /// The model of the program that embeds hookhost (`HostBuilder::model_client`).
    Embedder,
}

impl ModelProviderKind {
    /// The name used in config and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelProviderKind::Anthropic => "anthropic",
            ModelProviderKind::Openai => "openai",
            ModelProviderKind::Embedder => "embedder",
        }
    }
}

/// `modelProvider`: the provider of `prompt` hooks that name none. The API key is read
/// from the environment only (`apiKeyEnv`), never from a file.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawModelProvider {
    /// `anthropic`, `openai` or `embedder`.
    pub kind: ModelProviderKind,
    /// The API's base URL (`https://api.anthropic.com`, `http://localhost:11434/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default `ANTHROPIC_API_KEY` /
    /// `OPENAI_API_KEY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model of hooks that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
}

/// `ceilings.models` in managed policy: which providers and hosts model hooks may use,
/// and how many tokens one hook may spend on one event.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawModelCeiling {
    /// Providers that may be used (absent: any).
    #[serde(default)]
    pub providers: Option<Vec<ModelProviderKind>>,
    /// Host patterns (`api.anthropic.com`, `127.0.0.1:11434`, `*.example.com`) a
    /// provider's endpoint must fall within (absent: any).
    #[serde(default)]
    pub hosts: Option<Vec<String>>,
    /// Tokens (input + output) one hook may spend on one event.
    #[serde(default)]
    pub tokens_per_event: Option<u64>,
}

/// `capabilities.model` of a wasm hook: its plugin may ask the model of the hook's
/// provider (the hook's `model` / `provider`, else `modelProvider`) through
/// `hookhost:hook/model`, spending at most this many tokens per event.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawModelGrant {
    /// Tokens (input + output) the plugin may spend on one event, at least 1; managed
    /// `ceilings.models.tokensPerEvent` caps it.
    pub tokens_per_event: u64,
}
