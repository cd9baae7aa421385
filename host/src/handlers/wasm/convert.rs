//! Conversions at the edge of the sandbox: an [`Invocation`] into the WIT `event`, and the
//! WIT `response` into the [`HookOutput`] a command hook's JSON would have parsed to.

use serde_json::{Map, Value, json};

use super::bindings::{Event, Permission, Response};
use crate::config::kind_of;
use crate::event::{Channel, DecisionStyle, EventSpec};
use crate::handlers::output::{OUTPUT_JSON_CAP, OUTPUT_TEXT_CAP, cap_text};
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

/// The most a plugin's typed response can hold after conversion: four text fields of
/// [`OUTPUT_TEXT_CAP`] characters (plus the truncation note) and three JSON fields of
/// [`OUTPUT_JSON_CAP`] bytes. The fuzz target and the property test hold every
/// conversion to it.
pub const MAX_CONVERTED_BYTES: usize = 4 * (OUTPUT_TEXT_CAP * 4 + 64) + 3 * OUTPUT_JSON_CAP + 4096;

/// A plugin's response as plain Rust values: the WIT `response` record, for callers
/// outside the sandbox (the fuzz target, tests) of [`convert_response`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PluginResponse {
    /// `permission`: `allow`, `deny`, `ask` or `defer`; anything else is none.
    pub permission: Option<String>,
    /// `block`.
    pub block: bool,
    /// `reason`.
    pub reason: Option<String>,
    /// `continue`.
    pub continue_: Option<bool>,
    /// `stop-reason`.
    pub stop_reason: Option<String>,
    /// `system-message`.
    pub system_message: Option<String>,
    /// `additional-context`.
    pub additional_context: Option<String>,
    /// `updated-input-json`.
    pub updated_input_json: Option<String>,
    /// `updated-output-json`.
    pub updated_output_json: Option<String>,
    /// `extras-json`.
    pub extras_json: Option<String>,
}

/// What a response converts to: the answer and the Claude Code hook output JSON it
/// corresponds to, and notes on what was cut to fit the caps.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The answer, as a command hook's JSON would have parsed to.
    pub answer: Answer,
    /// The hook output JSON.
    pub json: Value,
    /// What was cut (`response field `reason` … cut to the cap of 10000 characters`).
    pub notes: Vec<String>,
}

/// Converts a plain response for the event named `event` (see `response`), as the
/// sandbox does with a plugin's answer. The entry point of the response fuzz target.
///
/// # Errors
///
/// As `response`; an unknown event.
pub fn convert_response(r: PluginResponse, event: &str) -> Result<Converted, String> {
    let catalogue = crate::event::EventCatalogue::default();
    let spec = catalogue
        .get(event)
        .ok_or_else(|| format!("unknown event `{event}`"))?;
    let permission = match r.permission.as_deref() {
        Some("allow") => Some(Permission::Allow),
        Some("deny") => Some(Permission::Deny),
        Some("ask") => Some(Permission::Ask),
        Some("defer") => Some(Permission::Defer),
        _ => None,
    };
    response(
        Response {
            permission,
            block: r.block,
            reason: r.reason,
            continue_: r.continue_,
            stop_reason: r.stop_reason,
            system_message: r.system_message,
            additional_context: r.additional_context,
            updated_input_json: r.updated_input_json,
            updated_output_json: r.updated_output_json,
            extras_json: r.extras_json,
        },
        spec,
    )
}

/// A text field capped at [`OUTPUT_TEXT_CAP`] characters, with a note when it was cut.
fn capped(text: Option<String>, field: &str, notes: &mut Vec<String>) -> Option<String> {
    let text = text?;
    // Fewer bytes than the cap: fewer characters too, and nothing to count.
    if text.len() <= OUTPUT_TEXT_CAP {
        return Some(text);
    }
    let cut = cap_text(&text);
    if cut.len() != text.len() {
        notes.push(format!(
            "response field `{field}` was {} characters; cut to the cap of {OUTPUT_TEXT_CAP} characters",
            text.chars().count()
        ));
    }
    Some(cut)
}

/// Parses a JSON field, refusing it unread when it is larger than [`OUTPUT_JSON_CAP`]:
/// parsing builds several times its size in values, so the size is checked first.
fn parse_json(text: &str, field: &str) -> Result<Value, String> {
    if text.len() > OUTPUT_JSON_CAP {
        return Err(format!(
            "response field `{field}` is {} bytes, above the cap of {OUTPUT_JSON_CAP} bytes; not read",
            text.len()
        ));
    }
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
/// - the JSON fields become `updatedInput` and `updatedToolOutput`; `extras-json` is
///   handed to the merge as [`Answer::extras`], which admits each key by the event's
///   allow-list ([`EventSpec::admit`]: only keys that grant nothing; the rest are
///   dropped with a notice naming the hook and the key). The JSON shows the extras the
///   allow-list admits.
///
/// Everything is capped on the way: text fields at [`OUTPUT_TEXT_CAP`] characters (cut,
/// with a note), JSON fields at [`OUTPUT_JSON_CAP`] bytes (refused before parsing).
///
/// # Errors
///
/// A JSON field that is too large or does not parse, or an output the event's schema
/// rejects.
pub fn response(r: Response, spec: &EventSpec) -> Result<Converted, String> {
    let mut notes = Vec::new();
    let mut top = Map::new();
    let mut specific = Map::new();
    let extras = match r.extras_json.as_deref() {
        None => Map::new(),
        Some(text) => match parse_json(text, "extras-json")? {
            Value::Object(map) => map,
            other => {
                return Err(format!(
                    "response field `extras-json` must be a JSON object, found {}",
                    kind_of(&other)
                ));
            }
        },
    };
    let reason = capped(r.reason, "reason", &mut notes);
    if let Some(c) = r.continue_ {
        top.insert("continue".into(), Value::Bool(c));
    }
    if let Some(s) = capped(r.stop_reason, "stop-reason", &mut notes) {
        top.insert("stopReason".into(), Value::String(s));
    }
    if let Some(s) = capped(r.system_message, "system-message", &mut notes) {
        top.insert("systemMessage".into(), Value::String(s));
    }
    if let Some(c) = capped(r.additional_context, "additional-context", &mut notes) {
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
            if let Some(reason) = reason {
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
                    if let Some(reason) = reason {
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
            if let Some(reason) = reason {
                top.insert("reason".into(), Value::String(reason));
            }
            if let Some(v) = updated_input {
                specific.insert("updatedInput".into(), v);
            }
        }
        DecisionStyle::ContinueOnly | DecisionStyle::None => {
            if r.block {
                blocking_error = Some(
                    reason
                        .clone()
                        .unwrap_or_else(|| "blocked by a wasm hook".to_string()),
                );
            }
            if let Some(reason) = reason {
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
    let mut json = Value::Object(top);
    let output = HookOutput::from_json(json.clone(), &spec.name)?;
    let shown: Vec<(&String, &Value)> = extras
        .iter()
        .filter(|(k, _)| {
            spec.admit(k, Channel::Extras, &[]).is_ok() && !output.specific.contains_key(*k)
        })
        .collect();
    if !shown.is_empty() {
        let object = json.as_object_mut().expect("built as an object");
        let specific = object
            .entry("hookSpecificOutput")
            .or_insert_with(|| json!({ "hookEventName": spec.name }));
        if let Value::Object(specific) = specific {
            for (k, v) in shown {
                specific.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(Converted {
        answer: Answer {
            output,
            blocking_error,
            plain_text: None,
            extras,
        },
        json,
        notes,
    })
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
        response(r, catalogue.get(event).unwrap()).map(|c| (c.answer, c.json))
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
        let (answer, json) = convert("SessionStart", r).unwrap();
        assert_eq!(answer.extras["sessionTitle"], "t");
        assert_eq!(json["hookSpecificOutput"]["sessionTitle"], "t");
        assert_eq!(json["hookSpecificOutput"]["hookEventName"], "SessionStart");
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
    }

    #[test]
    fn extras_that_the_allow_list_refuses_are_not_shown_as_the_output() {
        // Typed and widening keys in extras are the merge's to drop (with a notice); the
        // JSON the conversion shows holds none of them.
        let r = Response {
            extras_json: Some(
                r#"{"additionalContext": 3, "permissionDecision": "allow", "retry": true}"#.into(),
            ),
            ..empty()
        };
        let (answer, json) = convert("PreToolUse", r).unwrap();
        assert_eq!(json, json!({}));
        assert!(answer.output.specific.is_empty());
        assert_eq!(answer.extras.len(), 3);
    }
}
