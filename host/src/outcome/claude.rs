//! Rendering an [`Outcome`] as Claude Code's hook output, for `--format claude`: the
//! JSON on stdout, exit code 2 with the reason on stderr when the action is blocked.

use serde_json::{Map, Value, json};

use super::{Decision, Outcome};
use crate::event::{DecisionStyle, EventSpec, Exit2};

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
    if !outcome.system_messages.is_empty() {
        top.insert(
            "systemMessage".into(),
            json!(outcome.system_messages.join("\n")),
        );
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
        stderr.push_str(outcome.reason.as_deref().unwrap_or("blocked by hook"));
        stderr.push('\n');
    }
    for notice in &outcome.notices {
        stderr.push_str(&format!("hookhost: {}: {}\n", notice.hook, notice.message));
    }
    let stdout = if top.is_empty() {
        String::new()
    } else {
        Value::Object(top).to_string()
    };
    ClaudeResponse {
        stdout,
        stderr,
        exit_code: if blocked { 2 } else { 0 },
    }
}
