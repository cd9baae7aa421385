//! Rendering an [`Outcome`] as Claude Code's hook output, for `--format claude`: the
//! JSON on stdout, exit code 2 with the reason on stderr when the action is blocked.
//!
//! Claude Code shows stderr to the user and the model, so everything on it that came
//! from a hook (a reason, a notice) is escaped for the terminal; the JSON on stdout
//! stays JSON (serde escapes control characters there).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Decision, Outcome};
use crate::config::SourceKind;
use crate::event::{DecisionStyle, EventSpec, Exit2};
use crate::policy::Policy;
use crate::policy::trust::{ManagedTrust, TrustDecision, TrustInput, decide};
use crate::text::{escape, escape_multiline};

/// What a command hook prints and returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaudeResponse {
    /// The JSON object for stdout (empty when there is nothing to say).
    pub stdout: String,
    /// Text for stderr: the reason of a block, then notices.
    pub stderr: String,
    /// 0, or 2 when blocked.
    pub exit_code: i32,
}

/// Converts an outcome to Claude Code's output for the event.
pub fn to_claude(spec: &EventSpec, outcome: &Outcome) -> ClaudeResponse {
    let mut top = Map::new();
    let mut specific = Map::new();
    if !outcome.continue_ {
        top.insert("continue".into(), json!(false));
        if let Some(reason) = &outcome.stop_reason {
            top.insert("stopReason".into(), json!(reason));
        }
    }
    let messages: Vec<String> = (outcome.system_messages.iter().cloned())
        .chain(super::rewrite::unsupported_by_claude(outcome))
        .collect();
    if !messages.is_empty() {
        top.insert("systemMessage".into(), json!(messages.join("\n")));
    }
    match spec.decision {
        DecisionStyle::Permission if outcome.decision != Decision::None => {
            specific.insert("permissionDecision".into(), json!(outcome.decision));
            if let Some(reason) = &outcome.reason {
                specific.insert("permissionDecisionReason".into(), json!(reason));
            }
        }
        DecisionStyle::Block if outcome.decision == Decision::Block => {
            top.insert("decision".into(), json!("block"));
            top.insert(
                "reason".into(),
                json!(outcome.reason.as_deref().unwrap_or("blocked by hook")),
            );
        }
        // A deny with no hook's `decision` object (`onFailure: "block"`, a dispatch that
        // could not run): Claude Code denies through JSON only on PermissionRequest.
        DecisionStyle::PermissionRequest
            if outcome.decision.is_blocking()
                && !outcome.hook_specific_output.contains_key("decision") =>
        {
            specific.insert(
                "decision".into(),
                json!({"behavior": "deny", "message": outcome.reason.as_deref().unwrap_or("denied by hook")}),
            );
        }
        _ => {}
    }
    if let Some(input) = &outcome.updated_input
        && spec.honours("updatedInput")
    {
        specific.insert("updatedInput".into(), input.clone());
    }
    if let Some(output) = &outcome.updated_tool_output {
        specific.insert("updatedToolOutput".into(), output.clone());
    }
    if !outcome.additional_context.is_empty() && spec.honours("additionalContext") {
        specific.insert(
            "additionalContext".into(),
            json!(outcome.additional_context.join("\n\n")),
        );
    }
    for (field, value) in &outcome.hook_specific_output {
        specific.insert(field.clone(), value.clone());
    }
    if !specific.is_empty() {
        let mut with_name = Map::new();
        with_name.insert("hookEventName".into(), json!(outcome.event));
        with_name.extend(specific);
        top.insert("hookSpecificOutput".into(), Value::Object(with_name));
    }

    // Exit 2 only where Claude Code honours it; PermissionRequest denies through JSON.
    let blocked = outcome.decision.is_blocking() && spec.exit2 == Exit2::Blocks;
    let mut stderr = String::new();
    if blocked {
        let reason = outcome.reason.as_deref().unwrap_or("blocked by hook");
        stderr.push_str(&escape_multiline(reason));
        stderr.push('\n');
    }
    for notice in &outcome.notices {
        stderr.push_str(&notice_line(&notice.hook, &notice.message));
    }
    // JSON, with what a terminal would act on escaped too (the same value once parsed).
    let stdout = if top.is_empty() {
        String::new()
    } else {
        crate::text::escape_json(&Value::Object(top).to_string()).into_owned()
    };
    ClaudeResponse {
        stdout,
        stderr,
        exit_code: if blocked { 2 } else { 0 },
    }
}

/// One notice as a line of stderr: `hookhost: HOOK: MESSAGE`, or `hookhost: MESSAGE` for
/// the host's own notices (not `hookhost: hookhost: …`). Escaped, on one line.
pub fn notice_line(hook: &str, message: &str) -> String {
    if hook == "hookhost" {
        format!("hookhost: {}\n", escape(message))
    } else {
        format!("hookhost: {}: {}\n", escape(hook), escape(message))
    }
}

/// The message that tells the user that the project's hooks are not running because
/// the workspace is not trusted (or changed since it was trusted), or `None` when no
/// project or local hook is skipped for trust. `workspace` is the canonical path the
/// trust decision was taken for. The directory and the changed files are escaped: they
/// come from the repository.
pub fn untrusted_notice(policy: &Policy, workspace: &Path) -> Option<String> {
    let Some(TrustDecision::Untrusted { reason, changes }) = &policy.workspace_trust else {
        return None;
    };
    let count = policy
        .hooks
        .iter()
        .filter(|h| matches!(h.origin.kind, SourceKind::Project | SourceKind::Local))
        .count();
    if count == 0 {
        return None;
    }
    let dir = escape(&workspace.display().to_string()).into_owned();
    // The plain "never trusted" case is the decision for no trust at all; anything else
    // without changes (managed policy forbids trust, the store cannot be read) keeps the
    // policy's own words, since `hookhost trust` would not help.
    let never_trusted = || {
        decide(
            workspace,
            &Default::default(),
            &Default::default(),
            &TrustInput::Untrusted,
            &ManagedTrust::default(),
        )
    };
    let why = if !changes.is_empty() {
        let files: Vec<String> = changes.iter().map(|c| escape(c).into_owned()).collect();
        format!(
            "this workspace changed since you trusted it: {} — review the changes, then run \
             `hookhost trust` in {dir}",
            files.join("; ")
        )
    } else if matches!(never_trusted(), TrustDecision::Untrusted { reason: plain, .. } if plain == *reason)
    {
        format!("this workspace is not trusted — run `hookhost trust` in {dir}")
    } else {
        escape(reason).into_owned()
    };
    let (hooks, are) = if count == 1 {
        ("hook", "is")
    } else {
        ("hooks", "are")
    };
    Some(format!(
        "hookhost: {count} project {hooks} {are} not running: {why}"
    ))
}
