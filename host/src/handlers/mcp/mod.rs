//! `mcp_tool` hooks: call one tool of an MCP server with the hook's `input` (its strings'
//! `${path}` placeholders filled from the event's input JSON) and read the tool's text
//! like a command hook's stdout ([`super::output::classify_stdout`], the one parser).
//!
//! Servers are found by name in the merged `mcpServers` ([`crate::policy::mcp`]), then
//! with the embedder ([`McpServerSource`]). Connections live in [`clients`]: a daemon
//! keeps them warm across events and restarts one whose server died; a one-shot
//! `hookhost dispatch` starts the servers its hooks name and stops them when it exits.
//!
//! Every problem is a non-blocking failure to which `onFailure` applies: an unknown or
//! refused server, one that cannot start or dies, a timeout, `isError: true`, an answer
//! that is not valid hook output. An answer over [`MAX_MESSAGE`] bytes is cut off while
//! it is read, never held whole, and refuses the call on an event whose outcome
//! [`crate::event::EventSpec::refuses_oversized_mcp`] says so (PreToolUse, as Claude Code
//! since 2.1.321).

mod clients;
mod substitute;

use std::time::Instant;

pub use clients::{McpClients, McpServerSource};
pub use substitute::{MAX_INPUT_BYTES, substitute};

use super::output::{Stdout, classify_stdout};
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::mcp::{McpServer, McpToolSpec};
use crate::policy::{Hook, Settings};

/// The largest JSON-RPC message read from a server: 16 MiB, Claude Code's bound on an
/// `mcp_tool` hook's answer. A longer line fails the connection as it passes the bound.
pub const MAX_MESSAGE: usize = 16 << 20;

/// Runs an `mcp_tool` hook once.
pub async fn run(
    clients: &McpClients,
    http: &reqwest::Client,
    spec: &McpToolSpec,
    hook: &Hook,
    invocation: &Invocation,
    settings: &Settings,
) -> HandlerRun {
    let started = Instant::now();
    let failed = |kind, message: String| HandlerRun::failed(kind, message, started);
    let what = format!("MCP server `{}` (tool `{}`)", spec.server, spec.tool);
    let Some(server) = settings
        .mcp_servers
        .get(&spec.server)
        .map(|(server, _)| server.clone())
        .or_else(|| clients.embedder_server(&spec.server))
    else {
        return failed(
            FailureKind::CannotStart,
            format!(
                "{what}: no such server in `mcpServers` (nor from the embedder); not connected"
            ),
        );
    };
    let managed = hook.origin.kind == crate::config::SourceKind::Managed;
    if let Err(why) = admitted(&server, &spec.server, managed, settings) {
        return failed(
            FailureKind::Refused,
            format!("{what}: {why}; not contacted"),
        );
    }
    let arguments = match substitute(&spec.input, &invocation.input) {
        Ok(arguments) => arguments,
        Err(why) => {
            return failed(
                FailureKind::InvalidOutput,
                format!("{what}: `input`: {why}"),
            );
        }
    };
    let call = clients.call(
        &spec.server,
        &server,
        &spec.tool,
        arguments,
        invocation,
        settings,
        http,
    );
    let result = match tokio::time::timeout(hook.timeout, call).await {
        Err(_) => {
            return failed(
                FailureKind::Timeout,
                format!("{what}: no answer within {:?}", hook.timeout),
            );
        }
        Ok(Err(failure)) => {
            let mut run = failed(failure.kind, format!("{what}: {}", failure.message));
            run.diagnostics = failure.stderr;
            if failure.oversized && invocation.spec.refuses_oversized_mcp() {
                run.verdict = Verdict::Answer(Answer {
                    blocking_error: Some(format!(
                        "{what} answered with more than {} MiB; the call is refused",
                        MAX_MESSAGE >> 20
                    )),
                    ..Answer::default()
                });
            }
            return run;
        }
        Ok(Ok(result)) => result,
    };
    let done = |verdict| HandlerRun {
        verdict,
        exit_code: None,
        duration: started.elapsed(),
        usage: Usage::default(),
        diagnostics: None,
    };
    let text = result_text(&result);
    if result.is_error == Some(true) {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return done(Verdict::failed(
            FailureKind::PluginError,
            super::output::cap_text(&format!("{what} answered with isError: {}", first.trim())),
        ));
    }
    done(verdict(&text, &what, hook, invocation))
}

/// The tool's answer read as a command hook's stdout (exit 0). With `onFailure: "block"`
/// on an event whose block stops something, only hook JSON (or `{}`, or nothing) is an
/// answer: plain text, or JSON without any hook output field, is a failure (Claude Code
/// 2.1.328).
fn verdict(text: &str, what: &str, hook: &Hook, invocation: &Invocation) -> Verdict {
    let strict = hook.on_failure == crate::config::schema::OnFailure::Block
        && invocation.spec.honours_on_failure();
    match classify_stdout(text, &invocation.spec.name) {
        Stdout::Empty => Verdict::Answer(Answer::default()),
        Stdout::Json(output) => {
            if strict && no_hook_field(&output) && text.trim() != "{}" {
                return Verdict::failed(
                    FailureKind::InvalidOutput,
                    format!("{what}: the answer holds no hook output field (onFailure: \"block\")"),
                );
            }
            Verdict::Answer(Answer {
                output,
                ..Answer::default()
            })
        }
        Stdout::InvalidJson(e) => {
            Verdict::failed(FailureKind::InvalidOutput, format!("{what}: {e}"))
        }
        Stdout::Text(_) if strict => Verdict::failed(
            FailureKind::InvalidOutput,
            format!("{what}: the answer is plain text, not hook output (onFailure: \"block\")"),
        ),
        Stdout::Text(text) => Verdict::Answer(Answer {
            plain_text: Some(text),
            ..Answer::default()
        }),
    }
}

/// Whether an answer holds none of a hook output's fields, or only `reason`.
fn no_hook_field(output: &super::HookOutput) -> bool {
    output.continue_.is_none()
        && output.stop_reason.is_none()
        && output.system_message.is_none()
        && output.suppress_output.is_none()
        && output.decision.is_none()
        && output.specific.is_empty()
}

/// The text of a tool's result: its text contents, one per line; else its structured
/// content as JSON. Images, audio and resources are not text and are left out.
fn result_text(result: &rmcp::model::CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    if texts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        return structured.to_string();
    }
    texts.join("\n")
}

/// Whether this host may use `server`: managed `ceilings.mcpServers`, and for an HTTP
/// server the same `allowedHttpHookUrls` check as HTTP hooks.
fn admitted(
    server: &McpServer,
    name: &str,
    managed: bool,
    settings: &Settings,
) -> Result<(), String> {
    if let Some(ceilings) = settings.ceilings.as_ref().filter(|_| !managed) {
        ceilings.admits_mcp_server(name, server)?;
    }
    if let (McpServer::Http { url }, Some(allowlist)) = (server, &settings.allowed_http_hook_urls)
        && let Err(why) = allowlist.check(url)
    {
        let patterns: Vec<&str> = allowlist.patterns().collect();
        return Err(format!(
            "URL `{url}` is not in `allowedHttpHookUrls` {patterns:?} ({why})"
        ));
    }
    Ok(())
}

/// Why a call got no result.
#[derive(Debug)]
pub(crate) struct CallFailure {
    kind: FailureKind,
    message: String,
    /// The server's stderr so far (stdio), capped.
    stderr: Option<String>,
    /// The server sent a message over [`MAX_MESSAGE`].
    oversized: bool,
}
