//! A hook's JSON output (Claude Code's output schema), shared by every handler type: the
//! command handler reads it from stdout, the HTTP handler from the response body, and the
//! wasm handler converts its typed response into it.

use serde::Deserialize;
use serde_json::{Map, Value};

/// Claude Code caps `additionalContext`, `systemMessage` and plain stdout at 10,000
/// characters; hookhost caps every text of an outcome there (the marker included).
pub const OUTPUT_TEXT_CAP: usize = 10_000;

/// The fields of a hook's JSON output that hookhost reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookOutput {
    /// `continue: false` stops the agent after the hooks.
    #[serde(rename = "continue", default)]
    pub continue_: Option<bool>,
    /// Shown to the user with `continue: false`.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// A warning shown to the user.
    #[serde(default)]
    pub system_message: Option<String>,
    /// Accepted; no effect (as in Claude Code).
    #[serde(default)]
    pub suppress_output: Option<bool>,
    /// Top-level `decision`: `block` (and on PreToolUse the deprecated `approve`).
    #[serde(default)]
    pub decision: Option<String>,
    /// The reason of `decision`.
    #[serde(default)]
    pub reason: Option<String>,
    /// `hookSpecificOutput`, without `hookEventName`.
    #[serde(default, rename = "hookSpecificOutput", deserialize_with = "specific")]
    pub specific: Map<String, Value>,
}

fn specific<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    Option::<Map<String, Value>>::deserialize(d).map(Option::unwrap_or_default)
}

impl HookOutput {
    /// Parses a JSON object and checks it against the event: field types, the
    /// `hookEventName`, and the decision values.
    ///
    /// # Errors
    ///
    /// A message naming the field that does not fit the schema.
    pub fn from_json(value: Value, event: &str) -> Result<HookOutput, String> {
        if !value.is_object() {
            return Err("hook output is not a JSON object".into());
        }
        let mut output: HookOutput = serde_path_to_error::deserialize(&value)
            .map_err(|e| format!("invalid hook output at `{}`: {}", e.path(), e.inner()))?;
        if let Some(name) = output.specific.remove("hookEventName")
            && name.as_str() != Some(event)
        {
            return Err(format!(
                "`hookSpecificOutput.hookEventName` is {name}, expected \"{event}\""
            ));
        }
        if let Some(decision) = &output.decision
            && !matches!(decision.as_str(), "block" | "approve")
        {
            return Err(format!("`decision` is \"{decision}\", expected \"block\""));
        }
        if let Some(d) = output.specific.get("permissionDecision")
            && !matches!(d.as_str(), Some("allow" | "deny" | "ask" | "defer"))
        {
            return Err(format!(
                "`permissionDecision` is {d}, expected allow, deny, ask or defer"
            ));
        }
        if let Some(c) = output.specific.get("additionalContext")
            && !c.is_string()
        {
            return Err("`hookSpecificOutput.additionalContext` must be a string".into());
        }
        Ok(output)
    }

    /// The blocking reason the output gives, if any.
    pub fn reason_text(&self) -> Option<&str> {
        self.reason
            .as_deref()
            .or_else(|| {
                self.specific
                    .get("permissionDecisionReason")
                    .and_then(Value::as_str)
            })
            .filter(|r| !r.trim().is_empty())
    }
}

/// How a hook's stdout (or an HTTP body) reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Stdout {
    /// Nothing but whitespace.
    Empty,
    /// Starts with `{` and parses as an output object.
    Json(HookOutput),
    /// Starts with `{` but is not a valid output object.
    InvalidJson(String),
    /// Anything else: plain text.
    Text(String),
}

/// Classifies stdout: JSON only when its first non-blank character is `{`.
pub fn classify_stdout(stdout: &str, event: &str) -> Stdout {
    let trimmed = stdout.trim();
    if trimmed.is_empty() {
        return Stdout::Empty;
    }
    if !trimmed.starts_with('{') {
        return Stdout::Text(cap_text(trimmed));
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(value) => match HookOutput::from_json(value, event) {
            Ok(output) => Stdout::Json(output),
            Err(e) => Stdout::InvalidJson(e),
        },
        Err(e) => Stdout::InvalidJson(format!("hook output is not valid JSON: {e}")),
    }
}

/// Caps a text in place at [`OUTPUT_TEXT_CAP`] characters, saying how much was cut (see
/// [`cap_text`]). A text of at most that many bytes is left without scanning it.
pub fn cap_in_place(text: &mut String) {
    if text.len() > OUTPUT_TEXT_CAP {
        *text = cap_text(text);
    }
}

/// Caps a text at [`OUTPUT_TEXT_CAP`] characters, the marker saying how much was cut
/// (`… [N characters truncated]`) included: a capped text is within the cap, so capping
/// it again changes nothing.
pub fn cap_text(text: &str) -> String {
    let marker = |dropped: usize| format!("… [{dropped} characters truncated]");
    if text.len() <= OUTPUT_TEXT_CAP || text.chars().count() <= OUTPUT_TEXT_CAP {
        return text.to_string();
    }
    let total = text.chars().count();
    // The marker's length depends on the count it names; two rounds settle it.
    let mut kept = OUTPUT_TEXT_CAP - marker(total - OUTPUT_TEXT_CAP).chars().count();
    loop {
        let again = OUTPUT_TEXT_CAP - marker(total - kept).chars().count();
        if again >= kept {
            break;
        }
        kept = again;
    }
    let cut = text.char_indices().nth(kept).map_or(text.len(), |(i, _)| i);
    format!("{}{}", &text[..cut], marker(total - kept))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stdout_is_json_only_when_it_starts_with_a_brace() {
        assert_eq!(classify_stdout("  \n", "Stop"), Stdout::Empty);
        assert!(
            matches!(classify_stdout(" \n {\"continue\": false}", "Stop"), Stdout::Json(o) if o.continue_ == Some(false))
        );
        assert!(matches!(classify_stdout("[1]", "Stop"), Stdout::Text(_)));
        assert!(matches!(classify_stdout("\"x\"", "Stop"), Stdout::Text(_)));
        assert!(matches!(
            classify_stdout("hello {", "Stop"),
            Stdout::Text(_)
        ));
        assert!(matches!(
            classify_stdout("{oops", "Stop"),
            Stdout::InvalidJson(_)
        ));
    }

    #[test]
    fn schema_violations_name_the_field() {
        let cases = [
            (json!({"continue": "no"}), "continue"),
            (json!({"decision": "deny"}), "decision"),
            (
                json!({"hookSpecificOutput": {"hookEventName": "Stop"}}),
                "hookEventName",
            ),
            (
                json!({"hookSpecificOutput": {"permissionDecision": "maybe"}}),
                "permissionDecision",
            ),
            (
                json!({"hookSpecificOutput": {"additionalContext": 3}}),
                "additionalContext",
            ),
        ];
        for (value, field) in cases {
            let e = HookOutput::from_json(value.clone(), "PreToolUse").unwrap_err();
            assert!(e.contains(field), "{value}: {e}");
        }
    }

    #[test]
    fn text_is_capped_at_10000_characters() {
        let long = "é".repeat(10_005);
        let capped = cap_text(&long);
        assert_eq!(capped.chars().count(), OUTPUT_TEXT_CAP);
        assert!(capped.starts_with(&"é".repeat(9_900)));
        let kept = capped.chars().filter(|&c| c == 'é').count();
        assert!(capped.ends_with(&format!("… [{} characters truncated]", 10_005 - kept)));
        assert_eq!(cap_text(&capped), capped, "capping twice changes nothing");
        assert_eq!(cap_text(&"é".repeat(10_000)), "é".repeat(10_000));
        let huge = cap_text(&"x".repeat(5_000_000));
        assert_eq!(huge.chars().count(), OUTPUT_TEXT_CAP);
        assert_eq!(cap_text("short"), "short");
        let mut in_place = long.clone();
        cap_in_place(&mut in_place);
        assert_eq!(in_place, capped);
        let mut exact = "x".repeat(OUTPUT_TEXT_CAP);
        cap_in_place(&mut exact);
        assert_eq!(exact.len(), OUTPUT_TEXT_CAP);
    }
}
