//! Output shapes hookhost reads besides Claude Code's current one, rewritten into it
//! before the output is checked against the schema:
//!
//! - the founding article's result fields (its flat config format, `docs/book/src/configuration.md`):
//!   `blocked` → `decision: "block"`, `blockReason` → `reason`, `modifiedParams` →
//!   `hookSpecificOutput.updatedInput`. When both spellings appear, **a block in either
//!   blocks** (`blocked: true` beside `decision: "approve"` blocks: the safe reading of a
//!   contradiction), and for the texts and the rewrite Claude Code's field wins (`reason`
//!   over `blockReason`, `updatedInput` over `modifiedParams`);
//! - `decision: "block"` beside a `hookSpecificOutput` whose `hookEventName` names another
//!   event (Claude Code 2.1.326): the block holds, the `hookSpecificOutput` is dropped,
//!   with the warning "Set hookEventName to `<event>` to use it". Without a block, a
//!   mismatched `hookEventName` is still an invalid output.

use serde_json::{Map, Value};

/// Rewrites the founding article's fields into Claude Code's, in place.
///
/// # Errors
///
/// A synonym of the wrong type, named.
pub(super) fn rewrite_synonyms(object: &mut Map<String, Value>) -> Result<(), String> {
    if let Some(blocked) = object.remove("blocked") {
        let Value::Bool(blocked) = blocked else {
            return Err("`blocked` must be a boolean".into());
        };
        if blocked {
            object.insert("decision".into(), Value::String("block".into()));
        }
    }
    if let Some(reason) = object.remove("blockReason") {
        if !reason.is_string() {
            return Err("`blockReason` must be a string".into());
        }
        object.entry("reason").or_insert(reason);
    }
    if let Some(params) = object.remove("modifiedParams") {
        if !params.is_object() {
            return Err("`modifiedParams` must be an object".into());
        }
        let specific = object
            .entry("hookSpecificOutput")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(specific) = specific {
            specific.entry("updatedInput").or_insert(params);
        }
    }
    Ok(())
}

/// Whether a `hookSpecificOutput.hookEventName` of `named` fits `event`: its own name,
/// or on a refuse-only event ([`crate::event::EventSpec::refuses_only`]) the name of
/// another guard event, whose answers it reads (a PreToolUse or PermissionRequest script
/// reused on PreSkillShellCommand, as Claude Code 2.1.332 allows).
pub(super) fn names_event(named: &Value, event: &str) -> bool {
    use std::sync::OnceLock;
    static CATALOGUE: OnceLock<crate::event::EventCatalogue> = OnceLock::new();
    let Some(named) = named.as_str() else {
        return false;
    };
    if named == event {
        return true;
    }
    let catalogue = CATALOGUE.get_or_init(crate::event::EventCatalogue::default);
    catalogue.get(event).is_some_and(|e| e.refuses_only())
        && catalogue.get(named).is_some_and(|n| n.is_guard())
}

/// Drops a `hookSpecificOutput` whose `hookEventName` is not `event` when the output
/// blocks (`decision: "block"`), returning the warning; leaves everything else alone.
pub(super) fn drop_mismatched_specific(
    object: &mut Map<String, Value>,
    event: &str,
) -> Option<String> {
    if object.get("decision").and_then(Value::as_str) != Some("block") {
        return None;
    }
    let named = object
        .get("hookSpecificOutput")?
        .get("hookEventName")?
        .clone();
    if names_event(&named, event) {
        return None;
    }
    object.remove("hookSpecificOutput");
    Some(format!(
        "`hookSpecificOutput.hookEventName` is {}, so the block holds and \
         `hookSpecificOutput` was dropped. Set hookEventName to {event} to use it",
        super::cap_text_at(&named.to_string(), 80)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::HookOutput;
    use serde_json::json;

    fn read(value: serde_json::Value, event: &str) -> Result<HookOutput, String> {
        HookOutput::from_json(value, event)
    }

    #[test]
    fn synonyms_read_as_claude_fields_and_a_block_in_either_wins() {
        let o = read(
            json!({"blocked": true, "blockReason": "node_modules", "modifiedParams": {"a": 1}}),
            "PreToolUse",
        )
        .unwrap();
        assert_eq!(o.decision.as_deref(), Some("block"));
        assert_eq!(o.reason.as_deref(), Some("node_modules"));
        assert_eq!(o.specific["updatedInput"], json!({"a": 1}));
        // Claude Code's fields win for texts and rewrites; a block in either blocks.
        let o = read(
            json!({"blocked": true, "decision": "approve", "reason": "r", "blockReason": "b",
                   "modifiedParams": {"a": 1}, "hookSpecificOutput": {"updatedInput": {"b": 2}}}),
            "PreToolUse",
        )
        .unwrap();
        assert_eq!(o.decision.as_deref(), Some("block"));
        assert_eq!(o.reason.as_deref(), Some("r"));
        assert_eq!(o.specific["updatedInput"], json!({"b": 2}));
        let o = read(json!({"blocked": false, "decision": "block"}), "Stop").unwrap();
        assert_eq!(o.decision.as_deref(), Some("block"));
        let o = read(json!({"blocked": false}), "Stop").unwrap();
        assert_eq!(o.decision, None);
        for (bad, field) in [
            (json!({"blocked": "yes"}), "blocked"),
            (json!({"blockReason": 1}), "blockReason"),
            (json!({"modifiedParams": [1]}), "modifiedParams"),
        ] {
            assert!(read(bad, "PreToolUse").unwrap_err().contains(field));
        }
    }

    #[test]
    fn a_block_with_another_events_specific_output_keeps_the_block() {
        let o = read(
            json!({"decision": "block", "reason": "no",
                   "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "x"}}),
            "Stop",
        )
        .unwrap();
        assert_eq!(o.decision.as_deref(), Some("block"));
        assert!(o.specific.is_empty());
        assert_eq!(o.warnings.len(), 1);
        assert!(
            o.warnings[0].contains("Set hookEventName to Stop to use it"),
            "{:?}",
            o.warnings
        );
        // Without a block the mismatch is still an invalid output.
        assert!(
            read(
                json!({"hookSpecificOutput": {"hookEventName": "PreToolUse"}}),
                "Stop"
            )
            .is_err()
        );
        // A matching name keeps the specific output.
        let o = read(
            json!({"decision": "block", "hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "x"}}),
            "Stop",
        )
        .unwrap();
        assert!(o.warnings.is_empty());
        assert_eq!(o.specific["additionalContext"], "x");
    }
}
