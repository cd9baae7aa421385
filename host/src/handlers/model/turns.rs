//! Tool use in a model request (agent hooks): the tools the model is offered, the calls it
//! makes and the results sent back, in a form both wire formats ([`super::wire`]) and the
//! embedder's model ([`super::ModelClient`]) read. A request without tools is a single
//! turn, as a prompt hook's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDef {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON Schema of its input.
    pub input_schema: Value,
}

/// One call the model made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's id of the call (`toolu_…`, `call_…`), echoed in its result.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its input (OpenAI's `arguments` string parsed; a string that is not JSON is kept
    /// as a string, which no tool accepts).
    pub input: Value,
}

/// What a tool answered, sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The call it answers.
    pub id: String,
    /// The text.
    pub content: String,
    /// The call was refused or failed (Anthropic `is_error`; OpenAI has no flag, the
    /// text says so).
    pub is_error: bool,
}

/// A turn after the first user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "role")]
pub enum Turn {
    /// What the model said: its text and its calls.
    Assistant {
        /// Text beside the calls.
        text: String,
        /// The calls.
        calls: Vec<ToolCall>,
    },
    /// The tools' answers to the previous assistant turn's calls.
    ToolResults {
        /// One per call.
        results: Vec<ToolResult>,
    },
    /// A user message (a reminder to answer with the verdict tool).
    User {
        /// The text.
        text: String,
    },
}
