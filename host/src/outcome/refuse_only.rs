//! Events where a hook can only refuse ([`EventSpec::refuses_only`]: PreSkillShellCommand,
//! Claude Code 2.1.332), events where a timeout blocks ([`EventSpec::timeout_blocks`]:
//! PreModelSwitch, 2.1.251), and events whose permission decisions have no `defer`
//! ([`EventSpec::takes_defer`]: PreModelSwitch).
//!
//! On a refuse-only event every answer is read the way Claude Code reads it, so that
//! scripts written for PreToolUse or PermissionRequest can be reused, and reduced to a
//! deny or to nothing before the merge sees it:
//! - `permissionDecision` `deny`, `ask` or `defer` refuses (`ask` and `defer` with the
//!   reason "the hook asked for approval, which a skill can't wait for"); `allow` adds
//!   nothing;
//! - any `updatedInput` (top level of `hookSpecificOutput` or inside a PermissionRequest
//!   `decision`) refuses: the command is never rewritten ("the hook changed the command,
//!   which isn't supported here");
//! - a PermissionRequest-shaped `decision.behavior: "deny"` refuses (`interrupt: true`
//!   also stops the agent); `behavior: "allow"` with `updatedInput` or
//!   `updatedPermissions` refuses;
//! - top-level `decision: "block"` refuses.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::event::EventSpec;
use crate::handlers::{Answer, FailureKind};
use crate::policy::{Hook, RunMode};

/// Why a refuse-only answer that asks for approval refuses.
const ASKED: &str = "the hook asked for approval, which a skill can't wait for";
/// Why a refuse-only answer that rewrites the input refuses.
const CHANGED: &str = "the hook changed the command, which isn't supported here";

/// The answer as the merge should read it on `spec`: on a refuse-only event, a
/// `permissionDecision: "deny"` with its reason, or no decision; on an event whose
/// permission decisions have no `defer` ([`EventSpec::takes_defer`]: PreModelSwitch takes
/// allow, deny or ask), a `defer` read as `ask` with a notice (passed on, Claude Code
/// would refuse the whole answer and let the switch go ahead); otherwise unchanged.
pub(super) fn normalize<'a>(spec: &EventSpec, answer: &'a Answer) -> Cow<'a, Answer> {
    if !spec.refuses_only() {
        let deferred = spec.decision == crate::event::DecisionStyle::Permission
            && !spec.takes_defer()
            && answer.output.specific.get("permissionDecision")
                == Some(&Value::String("defer".into()));
        if !deferred {
            return Cow::Borrowed(answer);
        }
        let mut answer = answer.clone();
        answer
            .output
            .specific
            .insert("permissionDecision".into(), Value::String("ask".into()));
        answer.output.warnings.push(format!(
            "`permissionDecision: \"defer\"` is not an answer on {} (it takes allow, deny or \
             ask): read as \"ask\"",
            spec.name
        ));
        return Cow::Owned(answer);
    }
    let mut answer = answer.clone();
    let output = &mut answer.output;
    let specific = &mut output.specific;
    let said_reason = output
        .reason
        .clone()
        .or_else(|| text(specific, "permissionDecisionReason"));
    let mut refusals: Vec<String> = Vec::new();
    match specific
        .remove("permissionDecision")
        .as_ref()
        .and_then(Value::as_str)
    {
        Some("deny") => refusals.push(said_reason.clone().unwrap_or_default()),
        Some("ask" | "defer") => refusals.push(join(said_reason.as_deref(), ASKED)),
        _ => {}
    }
    specific.remove("permissionDecisionReason");
    if specific.remove("updatedInput").is_some() {
        refusals.push(join(said_reason.as_deref(), CHANGED));
    }
    if let Some(Value::Object(decision)) = specific.remove("decision") {
        let message = decision
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string);
        match decision.get("behavior").and_then(Value::as_str) {
            Some("deny") => {
                refusals.push(message.or(said_reason.clone()).unwrap_or_default());
                if decision.get("interrupt") == Some(&Value::Bool(true)) {
                    output.continue_ = Some(false);
                }
            }
            Some("allow")
                if decision.contains_key("updatedInput")
                    || decision.contains_key("updatedPermissions") =>
            {
                refusals.push(join(said_reason.as_deref(), CHANGED));
            }
            _ => {}
        }
    }
    if output.decision.as_deref() == Some("block") {
        refusals.push(said_reason.clone().unwrap_or_default());
    }
    output.decision = None;
    output.reason = None;
    if let Some(first) = refusals.first() {
        let reason = if first.trim().is_empty() {
            "blocked by hook".to_string()
        } else {
            first.clone()
        };
        specific.insert("permissionDecision".into(), Value::String("deny".into()));
        specific.insert("permissionDecisionReason".into(), Value::String(reason));
    }
    Cow::Owned(answer)
}

fn text(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).map(str::to_string)
}

fn join(reason: Option<&str>, why: &str) -> String {
    match reason.filter(|r| !r.trim().is_empty()) {
        Some(r) => format!("{r} ({why})"),
        None => why.to_string(),
    }
}

/// The reason a failed sync hook blocks because the event blocks on a timeout
/// ([`EventSpec::timeout_blocks`]), whatever its `onFailure`; `None` otherwise.
pub(super) fn timeout_block(
    hook: &Hook,
    spec: &EventSpec,
    kind: FailureKind,
    message: &str,
) -> Option<String> {
    (kind == FailureKind::Timeout && spec.timeout_blocks() && hook.mode == RunMode::Sync).then(
        || {
            format!(
                "hook `{}` timed out, and a timeout blocks {} (fail closed): {message}",
                hook.id, spec.name
            )
        },
    )
}
