//! MCP servers of `mcp_tool` hooks: the `mcpServers` key of settings files (the shape of
//! Claude Code's `.mcp.json`), merged across layers, and the spec of one `mcp_tool` hook.
//!
//! A workspace's files reach here only when the workspace is trusted (the settings of an
//! untrusted project are dropped before merging, [`super::resolve`]), so a repository
//! cannot name a program for hookhost to start without the user's trust.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::schema::RawMcpServer;
use crate::config::{ConfigError, ConfigLayer};

/// How to reach one MCP server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum McpServer {
    /// A process spoken to over its stdin and stdout.
    Stdio {
        /// The program (a bare name is looked up in the hook `PATH`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the hook environment.
        env: Vec<(String, String)>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint.
        url: String,
    },
}

impl McpServer {
    /// A one-line description (`hookhost hooks`, messages).
    pub fn summary(&self) -> String {
        match self {
            McpServer::Stdio { command, args, .. } if args.is_empty() => command.clone(),
            McpServer::Stdio { command, args, .. } => format!("{command} {}", args.join(" ")),
            McpServer::Http { url } => url.clone(),
        }
    }

    /// Reads one `mcpServers` entry.
    ///
    /// # Errors
    ///
    /// `(field, message)`: the field below the entry and what is wrong with it.
    pub fn from_raw(raw: &RawMcpServer) -> Result<McpServer, (&'static str, String)> {
        match raw.kind.as_deref() {
            None | Some("stdio") => {
                if raw.url.is_some() {
                    return Err((
                        "url",
                        "a stdio server has no `url` (set `type: \"http\"`)".into(),
                    ));
                }
                let command = raw
                    .command
                    .clone()
                    .filter(|c| !c.trim().is_empty())
                    .ok_or(("command", "a stdio MCP server needs `command`".to_string()))?;
                Ok(McpServer::Stdio {
                    command,
                    args: raw.args.clone().unwrap_or_default(),
                    env: raw.env.clone().unwrap_or_default().into_iter().collect(),
                })
            }
            Some("http") => {
                if raw.command.is_some() || raw.args.is_some() || raw.env.is_some() {
                    return Err((
                        "command",
                        "an http MCP server has only `url` (`command`, `args` and `env` are for stdio)"
                            .into(),
                    ));
                }
                let url = raw
                    .url
                    .clone()
                    .ok_or(("url", "an http MCP server needs `url`".to_string()))?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err((
                        "url",
                        format!("`{url}` must start with http:// or https://"),
                    ));
                }
                Ok(McpServer::Http { url })
            }
            Some(other) => Err((
                "type",
                format!("MCP server type `{other}` is not supported (expected `stdio` or `http`)"),
            )),
        }
    }
}

/// The merged `mcpServers`: for each name, the server of the layer that comes first in
/// precedence (managed policy, then the command line, …, the user's files last), with
/// the file it came from.
pub(super) fn merge(
    layers: &[&ConfigLayer],
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, (McpServer, String)> {
    let mut servers = BTreeMap::new();
    for layer in layers {
        for (name, raw) in layer.settings.mcp_servers.iter().flatten() {
            match McpServer::from_raw(raw) {
                Ok(server) => {
                    servers
                        .entry(name.clone())
                        .or_insert_with(|| (server, layer.origin.location.clone()));
                }
                Err((field, message)) => errors.push(ConfigError {
                    location: layer.origin.location.clone(),
                    path: format!("$.mcpServers.{name}.{field}"),
                    message,
                }),
            }
        }
    }
    servers
}

/// An `mcp_tool` hook.
#[derive(Debug, Clone)]
pub struct McpToolSpec {
    /// The server's name in `mcpServers` (or the embedder's).
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The arguments, with `${path}` placeholders in their strings
    /// (substituted from the input JSON by the handler).
    pub input: Map<String, Value>,
}
