//! MCP servers of the program that embeds hookhost: it answers the tool calls itself,
//! through its own connections ([`McpProvider`]). A Rust program passes one to
//! [`crate::HostBuilder::mcp_provider`]; over `hookhost serve`, the client that dispatched
//! the event names its servers in the request (`mcpServers`) and answers `mcpCall`
//! requests ([`with_caller_mcp`]).
//!
//! A name in the settings' `mcpServers` is taken from there first: an embedder's server
//! is used only for names the settings do not define.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};

/// One tool call for an embedder's server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpCall {
    /// The server's name, as the hook gives it.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The hook's `input`, its placeholders filled.
    pub arguments: Map<String, Value>,
}

/// A tool's result, as hookhost reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpToolResult {
    /// The text contents, in order (images, audio and resources are not text).
    pub texts: Vec<String>,
    /// The structured content, read when there is no text.
    pub structured: Option<Value>,
    /// The tool reported an error (`isError: true`).
    pub is_error: bool,
}

impl McpToolResult {
    /// A result of one text.
    pub fn text(text: impl Into<String>) -> McpToolResult {
        McpToolResult {
            texts: vec![text.into()],
            ..McpToolResult::default()
        }
    }

    /// Reads MCP's `CallToolResult` JSON: `content` (its `text` items), `structuredContent`,
    /// `isError`.
    ///
    /// # Errors
    ///
    /// `value` is not an object with a `content` array (or `structuredContent`).
    pub fn from_json(value: &Value) -> Result<McpToolResult, String> {
        let content = value.get("content");
        let structured = value.get("structuredContent").filter(|v| !v.is_null());
        let items = match content {
            Some(Value::Array(items)) => items.as_slice(),
            None if structured.is_some() => &[],
            _ => return Err("no `content` array".into()),
        };
        Ok(McpToolResult {
            texts: items
                .iter()
                .filter(|item| item.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|item| item.get("text").and_then(Value::as_str))
                .map(str::to_string)
                .collect(),
            structured: structured.cloned(),
            is_error: value.get("isError").and_then(Value::as_bool) == Some(true),
        })
    }

    /// What the hook reads: the texts, one per line; else the structured content as JSON.
    pub fn answer(&self) -> String {
        match &self.structured {
            Some(structured) if self.texts.is_empty() => structured.to_string(),
            _ => self.texts.join("\n"),
        }
    }

    /// Bytes [`McpToolResult::answer`] holds, without building it.
    pub(super) fn len(&self) -> usize {
        if self.texts.is_empty() {
            return self.structured.as_ref().map_or(0, |s| s.to_string().len());
        }
        self.texts.iter().map(String::len).sum::<usize>() + self.texts.len() - 1
    }
}

impl From<rmcp::model::CallToolResult> for McpToolResult {
    fn from(result: rmcp::model::CallToolResult) -> McpToolResult {
        McpToolResult {
            texts: result
                .content
                .into_iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect(),
            structured: result.structured_content,
            is_error: result.is_error == Some(true),
        }
    }
}

/// MCP servers the embedder serves itself.
pub trait McpProvider: Send + Sync {
    /// Whether it has a server called `name` (asked only for names the settings'
    /// `mcpServers` do not define).
    fn has_server(&self, name: &str) -> bool;

    /// Calls one tool. The hook's timeout bounds the wait: the future is dropped then.
    ///
    /// # Errors
    ///
    /// Why no result came (the server is not connected, the call failed): a failure of
    /// the hook under `onFailure`. A tool's own error is a result with `is_error`.
    fn call_tool<'a>(&'a self, call: &'a McpCall) -> BoxFuture<'a, Result<McpToolResult, String>>;
}

impl std::fmt::Debug for dyn McpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpProvider(..)")
    }
}

tokio::task_local! {
    /// The MCP servers of the client that dispatched the event being handled (`hookhost
    /// serve`'s connections).
    static CALLER_MCP: Arc<dyn McpProvider>;
}

/// Runs `future` (a dispatch) with `provider` as the caller's MCP servers.
pub async fn with_caller_mcp<F: std::future::Future>(
    provider: Arc<dyn McpProvider>,
    future: F,
) -> F::Output {
    CALLER_MCP.scope(provider, future).await
}

/// The caller's MCP servers, inside [`with_caller_mcp`].
pub fn caller_mcp() -> Option<Arc<dyn McpProvider>> {
    CALLER_MCP.try_with(Arc::clone).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_tool_result_reads_as_the_sdks_does() {
        let value = json!({"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "x", "mimeType": "image/png"},
                                       {"type": "text", "text": "b"}], "isError": true});
        let read = McpToolResult::from_json(&value).unwrap();
        assert_eq!(read.answer(), "a\nb");
        assert!(read.is_error);
        let structured = json!({"structuredContent": {"decision": "block"}});
        let read = McpToolResult::from_json(&structured).unwrap();
        assert_eq!(read.answer(), r#"{"decision":"block"}"#);
        assert_eq!(read.len(), read.answer().len());
        assert!(McpToolResult::from_json(&json!({"text": "x"})).is_err());
        assert!(McpToolResult::from_json(&json!("x")).is_err());
        // The SDK's own type reads the same.
        let sdk: rmcp::model::CallToolResult = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(
            McpToolResult::from(sdk),
            McpToolResult::from_json(&value).unwrap()
        );
    }
}
