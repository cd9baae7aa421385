//! The `agent` handler: a multi-step verifier, as Claude Code's agent hooks. The model
//! gets the prompt (`$ARGUMENTS` as in a prompt hook) and read-only tools confined to
//! the workspace ([`tools`]), and ends by calling the verdict tool
//! ([`crate::handlers::model::wire::ANSWER_TOOL`], Claude Code's `{ok, reason,
//! impossible}`); the verdict then does what a prompt hook's with `continueOnBlock: true`
//! does ([`super::prompt::answer`]).
//!
//! - Every request goes through the provider layer ([`super::model::resolve`],
//!   [`super::model::Resolved::complete`]): the same endpoint checks, keys and managed
//!   token budget as prompt hooks; the hook's own `tokenBudget` is checked before each
//!   turn.
//! - At most `maxTurns` model turns (default 50) within the hook's timeout (default
//!   60 s); running out of either is a failure `onFailure` handles.
//! - The report has the tokens, the turns, and one line per tool call (tool and path).

pub mod tools;

use std::sync::Mutex;
use std::time::Instant;

use super::model::{
    DEFAULT_MAX_TOKENS, ModelError, ModelRequest, Resolved, ToolDef, Turn, wire::ANSWER_TOOL,
};
use super::output::cap_text;
use super::prompt::{parse_verdict, substitute, verdict_schema};
use super::{FailureKind, HandlerRun, Invocation, Usage};
use crate::policy::places::HostPlaces;
use crate::policy::{AgentSpec, Hook};

const SYSTEM: &str = "You are a hook in a coding agent: a verifier that checks one event \
of the agent's session against the user's instructions below. You may read the \
workspace with the tools Read, Grep, Glob and LS (read-only; paths relative to the \
workspace). When you know, call the tool hook_verdict with {\"ok\": true|false, \
\"reason\": \"…\", \"impossible\": true|false}: ok true allows the action; ok false \
blocks it and reason says why, for the agent to read; impossible true says the \
condition can never be met.";

const REMIND: &str = "Answer by calling the tool hook_verdict with {\"ok\": boolean, \
\"reason\": string, \"impossible\": boolean}.";

/// What a run did so far (kept when the deadline cuts it short).
#[derive(Default)]
struct Progress {
    turns: u32,
    log: Vec<String>,
}

/// Runs an agent hook against `model` (resolved and checked by the caller), with tools
/// over the event's project directory.
pub async fn run(
    spec: &AgentSpec,
    hook: &Hook,
    invocation: &Invocation,
    model: Result<Resolved, ModelError>,
    places: &HostPlaces,
) -> HandlerRun {
    let started = Instant::now();
    // The hook's own budget is held where every model request's is
    // ([`Resolved::complete`]): the lower of it and managed policy's.
    let model = match model {
        Ok(model) => match spec.token_budget {
            Some(tokens) => model.within(tokens, "the hook's `tokenBudget`"),
            None => model,
        },
        Err(e) => return HandlerRun::failed(e.kind, e.message, started),
    };
    let workspace = match tools::Workspace::open(&invocation.project_dir, places.clone()) {
        Ok(workspace) => workspace,
        Err(e) => return HandlerRun::failed(FailureKind::CannotStart, e, started),
    };
    let progress = Mutex::new(Progress::default());
    // An agent hook refuses as a prompt hook with `continueOnBlock: true`.
    let work = converse(spec, invocation, &model, workspace, &progress);
    let verdict = super::prompt::judged(hook, &model, true, invocation, work).await;
    let progress = progress.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut diagnostics = format!("{}; {} turns", model.describe(), progress.turns);
    if !progress.log.is_empty() {
        diagnostics.push_str("; tools: ");
        diagnostics.push_str(&progress.log.join(", "));
    }
    HandlerRun {
        verdict,
        exit_code: None,
        duration: started.elapsed(),
        usage: Usage {
            tokens: Some(model.tokens_used()),
            turns: Some(progress.turns),
            ..Usage::default()
        },
        diagnostics: Some(cap_text(&diagnostics)),
    }
}

/// The loop: ask, run the calls, send the results, until the verdict tool is called.
async fn converse(
    spec: &AgentSpec,
    invocation: &Invocation,
    model: &Resolved,
    workspace: tools::Workspace,
    progress: &Mutex<Progress>,
) -> Result<super::prompt::ModelVerdict, ModelError> {
    let mut tool_defs = tools::defs();
    tool_defs.push(ToolDef {
        name: ANSWER_TOOL.to_string(),
        description: "Report your verdict on the hook event; this ends your work.".into(),
        input_schema: verdict_schema(),
    });
    let mut request = ModelRequest {
        model: None,
        system: SYSTEM.to_string(),
        prompt: substitute(&spec.prompt, &invocation.input_json),
        schema: None,
        max_tokens: DEFAULT_MAX_TOKENS,
        tools: tool_defs,
        turns: Vec::new(),
    };
    let workspace = std::sync::Arc::new(Mutex::new(workspace));
    let note =
        |f: &dyn Fn(&mut Progress)| f(&mut progress.lock().unwrap_or_else(|e| e.into_inner()));
    for _ in 0..spec.max_turns {
        let reply = model.complete(request.clone()).await?;
        note(&|p| p.turns += 1);
        if let Some(call) = reply.tool_calls.iter().find(|c| c.name == ANSWER_TOOL) {
            return parse_verdict(&call.input.to_string()).map_err(|e| {
                ModelError::new(FailureKind::InvalidOutput, format!("the verdict: {e}"))
            });
        }
        if reply.tool_calls.is_empty() {
            if let Ok(verdict) = parse_verdict(&reply.text) {
                return Ok(verdict);
            }
            request.turns.push(Turn::Assistant {
                text: cap_text(&reply.text),
                calls: Vec::new(),
            });
            request.turns.push(Turn::User {
                text: REMIND.to_string(),
            });
            continue;
        }
        // Filesystem work off the async threads; every step of it is bounded.
        let calls = reply.tool_calls.clone();
        let ws = workspace.clone();
        let (results, log) = tokio::task::spawn_blocking(move || {
            let mut ws = ws.lock().unwrap_or_else(|e| e.into_inner());
            let before = ws.log.len();
            let results: Vec<_> = calls.iter().map(|c| ws.call(c)).collect();
            (results, ws.log[before..].to_vec())
        })
        .await
        .map_err(|e| ModelError::new(FailureKind::CannotStart, format!("a tool crashed: {e}")))?;
        note(&|p| p.log.extend(log.iter().cloned()));
        request.turns.push(Turn::Assistant {
            text: cap_text(&reply.text),
            calls: reply.tool_calls,
        });
        request.turns.push(Turn::ToolResults { results });
    }
    Err(ModelError::new(
        FailureKind::Limit,
        format!("no verdict within `maxTurns` ({}) turns", spec.max_turns),
    ))
}
