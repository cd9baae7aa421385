//! `mcp_tool` hooks: call one tool of an MCP server with the hook's `input` (its strings'
//! `${path}` placeholders filled from the event's input JSON) and read the tool's text
//! like a command hook's stdout ([`super::output::classify_stdout`], the one parser).
//!
//! Servers are found by name: first in the merged `mcpServers` ([`crate::policy::mcp`]),
//! then among the embedder's ([`McpProvider`]: the daemon client that dispatched the
//! event, then the one given to [`crate::HostBuilder::mcp_provider`]). Every server,
//! whatever its source, passes `admitted` (managed `ceilings.mcpServers`, and an HTTP
//! server's URL `allowedHttpHookUrls`) before it is contacted. Connections to the
//! settings' servers live in `clients`: a daemon keeps them warm across events and
//! restarts one whose server died; a one-shot `hookhost dispatch` starts the servers its
//! hooks name and stops them when it exits. Every byte read from them passes
//! [`intake`].
//!
//! Every problem is a non-blocking failure to which `onFailure` applies: an unknown or
//! refused server, one that cannot start or dies, a timeout, `isError: true`, an answer
//! that is not valid hook output. An answer over [`MAX_MESSAGE`] bytes is cut off while
//! it is read, never held whole, and refuses the call on an event whose outcome
//! [`crate::event::EventSpec::refuses_oversized_mcp`] says so (PreToolUse, as Claude Code
//! since 2.1.321).

mod clients;
mod embedder;
mod http;
pub mod intake;
mod substitute;

use std::sync::Arc;
use std::time::Instant;

pub use clients::McpClients;
pub use embedder::{McpCall, McpProvider, McpToolResult, caller_mcp, with_caller_mcp};
pub use substitute::{MAX_INPUT_BYTES, substitute};

use super::output::{Stdout, classify_stdout};
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::mcp::{McpServer, McpToolSpec};
use crate::policy::{Hook, Settings};

/// The largest JSON-RPC message read from a server: 16 MiB, Claude Code's bound on an
/// `mcp_tool` hook's answer. A longer one fails the connection as it passes the bound.
pub const MAX_MESSAGE: usize = 16 << 20;

/// Where a hook's server is.
enum Route {
    /// Defined in the settings' `mcpServers`: hookhost connects.
    Settings(McpServer),
    /// The embedder's: it answers the call.
    Embedder(Arc<dyn McpProvider>),
}

/// The server called `name`: the settings' first, then the dispatching daemon client's,
/// then the embedder's given to the host.
fn route(
    name: &str,
    settings: &Settings,
    embedder: Option<&Arc<dyn McpProvider>>,
) -> Option<Route> {
    if let Some((server, _)) = settings.mcp_servers.get(name) {
        return Some(Route::Settings(server.clone()));
    }
    caller_mcp()
        .filter(|p| p.has_server(name))
        .or_else(|| embedder.filter(|p| p.has_server(name)).cloned())
        .map(Route::Embedder)
}

/// Runs an `mcp_tool` hook once.
pub async fn run(
    clients: &McpClients,
    embedder: Option<&Arc<dyn McpProvider>>,
    http: &reqwest::Client,
    spec: &McpToolSpec,
    hook: &Hook,
    invocation: &Invocation,
    settings: &Settings,
) -> HandlerRun {
    let started = Instant::now();
    let failed = |kind, message: String| HandlerRun::failed(kind, message, started);
    let what = format!("MCP server `{}` (tool `{}`)", spec.server, spec.tool);
    let Some(route) = route(&spec.server, settings, embedder) else {
        return failed(
            FailureKind::CannotStart,
            format!(
                "{what}: no such server in `mcpServers` (nor from the embedder); not connected"
            ),
        );
    };
    let managed = hook.origin.kind == crate::config::SourceKind::Managed;
    if let Err(why) = admitted(&route, &spec.server, managed, settings) {
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
    let called = match route {
        Route::Settings(server) => {
            clients
                .call(
                    &spec.server,
                    &server,
                    &spec.tool,
                    arguments,
                    invocation,
                    settings,
                    http,
                    hook.timeout,
                )
                .await
        }
        Route::Embedder(provider) => {
            let call = McpCall {
                server: spec.server.clone(),
                tool: spec.tool.clone(),
                arguments,
            };
            embedder_call(provider.as_ref(), &call, hook.timeout).await
        }
    };
    let result = match called {
        Ok(result) => result,
        Err(failure) => {
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
    };
    let done = |verdict| HandlerRun {
        verdict,
        exit_code: None,
        duration: started.elapsed(),
        usage: Usage::default(),
        diagnostics: None,
    };
    let text = result.answer();
    if result.is_error {
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return done(Verdict::failed(
            FailureKind::PluginError,
            super::output::cap_text(&format!("{what} answered with isError: {}", first.trim())),
        ));
    }
    done(verdict(&text, &what, hook, invocation))
}

/// One call to an embedder's server, within `timeout`; an answer over [`MAX_MESSAGE`]
/// is refused as a server's would be.
async fn embedder_call(
    provider: &dyn McpProvider,
    call: &McpCall,
    timeout: std::time::Duration,
) -> Result<McpToolResult, CallFailure> {
    let failure = |kind, message: String, oversized| CallFailure {
        kind,
        message,
        stderr: None,
        oversized,
    };
    match tokio::time::timeout(timeout, provider.call_tool(call)).await {
        Err(_) => Err(failure(
            FailureKind::Timeout,
            format!("the embedder's server gave no answer within {timeout:?}"),
            false,
        )),
        Ok(Err(why)) => Err(failure(
            FailureKind::CannotStart,
            super::output::cap_text(&format!("the embedder's server failed: {why}")),
            false,
        )),
        Ok(Ok(result)) if result.len() > MAX_MESSAGE => Err(failure(
            FailureKind::Limit,
            format!(
                "the embedder's server answered with more than {} MiB",
                MAX_MESSAGE >> 20
            ),
            true,
        )),
        Ok(Ok(result)) => Ok(result),
    }
}

/// The tool's answer read as a command hook's stdout (exit 0). With `onFailure: "block"`
/// on an event whose block stops something, only hook JSON (or `{}`, or nothing) is an
/// answer: plain text, or JSON without any hook output field, is a failure (Claude Code
/// 2.1.328). A required hook is held as strictly (docs/book/src/required-hooks.md): a
/// tool's plain text ("unavailable, try later") is no verdict, so the event fails closed.
fn verdict(text: &str, what: &str, hook: &Hook, invocation: &Invocation) -> Verdict {
    let strict = (hook.on_failure == crate::config::schema::OnFailure::Block || hook.required)
        && invocation.spec.honours_on_failure();
    let rule = if hook.required {
        "a required hook"
    } else {
        "onFailure: \"block\""
    };
    match classify_stdout(text, &invocation.spec.name) {
        Stdout::Empty => Verdict::Answer(Answer::default()),
        Stdout::Json(output) => {
            if strict && no_hook_field(&output) && text.trim() != "{}" {
                return Verdict::failed(
                    FailureKind::InvalidOutput,
                    format!("{what}: the answer holds no hook output field ({rule})"),
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
            format!("{what}: the answer is plain text, not hook output ({rule})"),
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

/// Whether this host may use the server called `name`: managed `ceilings.mcpServers`
/// (for hooks outside managed policy), and for an HTTP server the same
/// `allowedHttpHookUrls` check as HTTP hooks. An embedder's server is held to the
/// ceiling by its name.
fn admitted(route: &Route, name: &str, managed: bool, settings: &Settings) -> Result<(), String> {
    let server = match route {
        Route::Settings(server) => Some(server),
        Route::Embedder(_) => None,
    };
    if let Some(ceilings) = settings.ceilings.as_ref().filter(|_| !managed) {
        match server {
            Some(server) => ceilings.admits_mcp_server(name, server)?,
            None => ceilings.admits_embedder_mcp_server(name)?,
        }
    }
    if let (Some(McpServer::Http { url }), Some(allowlist)) =
        (server, &settings.allowed_http_hook_urls)
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
    /// The server passed a bound of [`intake`] (or the embedder's answer was over
    /// [`MAX_MESSAGE`]).
    oversized: bool,
}
