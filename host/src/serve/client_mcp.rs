//! The MCP servers of the client that dispatched an event: a request naming them
//! (`"mcpServers": ["name", …]`) lets its `mcp_tool` hooks whose server the settings do
//! not define call them over the connection ([`super::client_calls`]):
//! `{"id": "mcp-N", "mcpCall": {"server", "tool", "arguments"}}`, answered by
//! `{"id": "mcp-N", "mcpResult": {…}}` with MCP's `CallToolResult` (`content`,
//! `structuredContent`, `isError`), or `{"error": …}`. A client that names no servers
//! is never asked.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::client_calls::{ClientCalls, Kind};
use crate::handlers::mcp::{McpCall, McpProvider, McpToolResult};

/// Servers a client named for one request, called over its connection.
pub struct ClientMcp {
    calls: Arc<ClientCalls>,
    servers: Vec<String>,
}

impl ClientMcp {
    /// The servers `servers` of the client behind `calls`.
    pub fn new(calls: Arc<ClientCalls>, servers: Vec<String>) -> ClientMcp {
        ClientMcp { calls, servers }
    }
}

impl McpProvider for ClientMcp {
    fn has_server(&self, name: &str) -> bool {
        self.servers.iter().any(|s| s == name)
    }

    fn call_tool<'a>(&'a self, call: &'a McpCall) -> BoxFuture<'a, Result<McpToolResult, String>> {
        Box::pin(async move {
            let body = serde_json::to_value(call).map_err(|e| e.to_string())?;
            let result = self
                .calls
                .ask(Kind::Mcp, body)
                .await
                .ok_or_else(|| "the client is gone".to_string())?;
            if let Some(error) = result.get("error") {
                let text = error
                    .as_str()
                    .map_or_else(|| error.to_string(), str::to_string);
                return Err(text.chars().take(200).collect());
            }
            McpToolResult::from_json(&result)
                .map_err(|why| format!("the client's `mcpResult` is not a tool result: {why}"))
        })
    }
}
