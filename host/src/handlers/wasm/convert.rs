//! Conversions at the edge of the sandbox: an [`Invocation`] into the WIT `event`, and the
//! WIT `response` into the [`HookOutput`] a command hook's JSON would have parsed to.

use serde_json::{Map, Value, json};

use super::bindings::{Event, Permission, Response};
use crate::event::{DecisionStyle, EventSpec};
use crate::handlers::{Answer, HookOutput, Invocation};

/// The WIT event of an invocation.
pub fn event(invocation: &Invocation, config: Option<&Value>) -> Event {
    Event {
        name: invocation.spec.name.to_string(),
        session_id: invocation.session_id.clone(),
        cwd: invocation.cwd.to_string_lossy().into_owned(),
        workspace: invocation.project_dir.to_string_lossy().into_owned(),
        tool_name: invocation
            .input
            .get("tool_name")
            .and_then(Value::as_str)
            .map(str::to_string),
        input_json: invocation.input_json.clone(),
        config_json: config.map(Value::to_string),
    }
}

fn parse_json(text: &str, field: &str) -> Result<Value, String> {
    serde_json::from_str(text)
        .map_err(|e| format!("response field `{field}` is not valid JSON: {e}"))
}

fn permission_name(p: Permission) -> &'static str {
    match p {
        Permission::Allow => "allow",
        Permission::Deny => "deny",
        Permission::Ask => "ask",
        Permission::Defer => "defer",
    }
}

/// Converts a response into an answer for `spec`, and the Claude Code hook output JSON
/// it corresponds to.
///
/// - `permission`: `permissionDecision` on PreToolUse, `decision.behavior` on
///   PermissionRequest (allow / deny only), ignored elsewhere;
/// - `block`: a deny on those two events, `decision: "block"` on events that take it,
///   and a blocking error (like exit 2) on the others;
/// - the JSON fields become `updatedInput`, `updatedToolOutput` and further
///   `hookSpecificOutput` fields; the merge ignores what the event does not honour.
///
/// # Errors
///
/// A JSON field that does not parse, or an output the event's schema rejects.
pub fn response(r: Response, spec: &EventSpec) -> Result<(Answer, Value), String> {
    let mut top = Map::new();
    let mut specific = match r.extras_json.as_deref() {
        None => Map::new(),
        Some(text) => match parse_json(text, "extras-json")? {
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "response field `extras-json` must be a JSON object, found {other}"
                ));
            }
        },
    };
    if let Some(c) = r.continue_ {
        top.insert("continue".into(), Value::Bool(c));
    }
    if let Some(s) = r.stop_reason {
        top.insert("stopReason".into(), Value::String(s));
    }
    if let Some(s) = r.system_message {
        top.insert("systemMessage".into(), Value::String(s));
    }
    if let Some(c) = r.additional_context {
        specific.insert("additionalContext".into(), Value::String(c));
    }
    let updated_input = r
        .updated_input_json
        .as_deref()
        .map(|t| parse_json(t, "updated-input-json"))
        .transpose()?;
    if let Some(v) = r.updated_output_json.as_deref() {
        specific.insert(
            "updatedToolOutput".into(),
            parse_json(v, "updated-output-json")?,
        );
    }
    let mut blocking_error = None;
    match spec.decision {
        DecisionStyle::Permission => {
            let permission = if r.block {
                Some(Permission::Deny)
            } else {
                r.permission
            };
            if let Some(p) = permission {
                specific.insert(
                    "permissionDecision".into(),
                    Value::String(permission_name(p).into()),
                );
            }
            if let Some(reason) = r.reason {
                specific.insert("permissionDecisionReason".into(), Value::String(reason));
            }
            if let Some(v) = updated_input {
                specific.insert("updatedInput".into(), v);
            }
        }
        DecisionStyle::PermissionRequest => {
            let behavior = match (r.block, r.permission) {
                (true, _) | (false, Some(Permission::Deny)) => Some("deny"),
                (false, Some(Permission::Allow)) => Some("allow"),
                _ => None,
            };
            if let Some(behavior) = behavior {
                let mut decision = json!({ "behavior": behavior });
                if behavior == "deny" {
                    if let Some(reason) = r.reason {
                        decision["message"] = Value::String(reason);
                    }
                } else if let Some(v) = updated_input {
                    decision["updatedInput"] = v;
                }
                specific.insert("decision".into(), decision);
            }
        }
        DecisionStyle::Block => {
            if r.block {
                top.insert("decision".into(), Value::String("block".into()));
            }
            if let Some(reason) = r.reason {
                top.insert("reason".into(), Value::String(reason));
            }
            if let Some(v) = updated_input {
                specific.insert("updatedInput".into(), v);
            }
        }
        DecisionStyle::ContinueOnly | DecisionStyle::None => {
            if r.block {
                blocking_error = Some(
                    r.reason
                        .clone()
                        .unwrap_or_else(|| "blocked by a wasm hook".to_string()),
                );
            }
            if let Some(reason) = r.reason {
                top.insert("reason".into(), Value::String(reason));
            }
            if let Some(v) = updated_input {
                specific.insert("updatedInput".into(), v);
            }
        }
    }
    if !specific.is_empty() {
        specific.insert("hookEventName".into(), Value::String(spec.name.to_string()));
        top.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    let json = Value::Object(top);
    let output = HookOutput::from_json(json.clone(), &spec.name)?;
    Ok((
        Answer {
            output,
            blocking_error,
            plain_text: None,
        },
        json,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventCatalogue;

    fn empty() -> Response {
        Response {
            permission: None,
            block: false,
            reason: None,
            continue_: None,
            stop_reason: None,
            system_message: None,
            additional_context: None,
            updated_input_json: None,
            updated_output_json: None,
            extras_json: None,
        }
    }

    fn convert(event: &str, r: Response) -> Result<(Answer, Value), String> {
        let catalogue = EventCatalogue::default();
        response(r, catalogue.get(event).unwrap())
    }

    #[test]
    fn empty_response_is_no_opinion() {
        let (answer, json) = convert("PreToolUse", empty()).unwrap();
        assert_eq!(answer, Answer::default());
        assert_eq!(json, json!({}));
    }

    #[test]
    fn pre_tool_use_fields_match_a_command_hooks_json() {
        let r = Response {
            permission: Some(Permission::Ask),
            reason: Some("check".into()),
            additional_context: Some("ctx".into()),
            updated_input_json: Some(r#"{"command":"ls -la"}"#.into()),
            system_message: Some("hi".into()),
            ..empty()
        };
        let (answer, json) = convert("PreToolUse", r).unwrap();
        let expected = json!({
            "systemMessage": "hi",
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "ask",
                "permissionDecisionReason": "check",
                "additionalContext": "ctx",
                "updatedInput": {"command": "ls -la"}
            }
        });
        assert_eq!(json, expected);
        assert_eq!(
            answer.output,
            HookOutput::from_json(expected, "PreToolUse").unwrap()
        );
    }

    #[test]
    fn block_maps_per_event_style() {
        let block = || Response {
            block: true,
            reason: Some("no".into()),
            ..empty()
        };
        let (_, json) = convert("PreToolUse", block()).unwrap();
        assert_eq!(json["hookSpecificOutput"]["permissionDecision"], "deny");
        let (answer, json) = convert("Stop", block()).unwrap();
        assert_eq!(json, json!({"decision": "block", "reason": "no"}));
        assert_eq!(answer.output.decision.as_deref(), Some("block"));
        let (_, json) = convert("PermissionRequest", block()).unwrap();
        assert_eq!(
            json["hookSpecificOutput"]["decision"],
            json!({"behavior": "deny", "message": "no"})
        );
        let (answer, _) = convert("TaskCompleted", block()).unwrap();
        assert_eq!(answer.blocking_error.as_deref(), Some("no"));
    }

    #[test]
    fn extras_merge_into_hook_specific_output() {
        let r = Response {
            extras_json: Some(r#"{"sessionTitle":"t","watchPaths":["/a"]}"#.into()),
            continue_: Some(false),
            stop_reason: Some("done".into()),
            ..empty()
        };
        let (answer, _) = convert("SessionStart", r).unwrap();
        assert_eq!(answer.output.specific["sessionTitle"], "t");
        assert_eq!(answer.output.continue_, Some(false));
        assert_eq!(answer.output.stop_reason.as_deref(), Some("done"));
    }

    #[test]
    fn bad_json_fields_are_named() {
        let r = Response {
            updated_input_json: Some("{oops".into()),
            ..empty()
        };
        assert!(
            convert("PreToolUse", r)
                .unwrap_err()
                .contains("updated-input-json")
        );
        let r = Response {
            extras_json: Some("[1]".into()),
            ..empty()
        };
        assert!(
            convert("PreToolUse", r)
                .unwrap_err()
                .contains("extras-json")
        );
        let r = Response {
            extras_json: Some(r#"{"additionalContext": 3}"#.into()),
            ..empty()
        };
        assert!(
            convert("PreToolUse", r)
                .unwrap_err()
                .contains("additionalContext")
        );
    }
}
