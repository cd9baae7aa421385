//! A hook's JSON output (Claude Code's output schema), shared by every handler type: the
//! command handler reads it from stdout, the HTTP handler from the response body, and the
//! wasm handler converts its typed response into it.

use serde::Deserialize;
use serde_json::{Map, Value};

/// Claude Code caps `additionalContext`, `systemMessage` and plain stdout at 10,000
/// characters; hookhost caps every text of an outcome there (the marker included).
pub const OUTPUT_TEXT_CAP: usize = 10_000;

/// Bytes of JSON a hook may hand back in `updatedInput`, `updatedToolOutput` and the
/// other `hookSpecificOutput` fields: the 1 MiB that a command hook's stdout is captured
/// to. Sandboxed plugins' JSON fields are checked against it before they are parsed.
pub const OUTPUT_JSON_CAP: usize = 1 << 20;

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
    /// What reading the output dropped (a `hookSpecificOutput` of another event beside a
    /// block), for notices that name the hook.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

mod compat;

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
    pub fn from_json(mut value: Value, event: &str) -> Result<HookOutput, String> {
        let Value::Object(object) = &mut value else {
            return Err("hook output is not a JSON object".into());
        };
        compat::rewrite_synonyms(object)?;
        let warning = compat::drop_mismatched_specific(object, event);
        let mut output: HookOutput = serde_path_to_error::deserialize(&value)
            .map_err(|e| format!("invalid hook output at `{}`: {}", e.path(), e.inner()))?;
        output.warnings.extend(warning);
        if let Some(name) = output.specific.remove("hookEventName")
            && !compat::names_event(&name, event)
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

/// Bytes a text may take once shown (JSON-escaped, or escaped for a terminal:
/// [`crate::text::shown_len`]) per character of its cap: a text capped at
/// [`OUTPUT_TEXT_CAP`] characters takes at most [`OUTPUT_TEXT_BYTES`] bytes in any answer,
/// however it is made (1 GiB of NUL bytes, each shown as the six bytes `\u0000`, keeps
/// 3,328 of them).
pub const SHOWN_BYTES_PER_CHARACTER: usize = 2;

/// Bytes a capped text takes at most once shown.
pub const OUTPUT_TEXT_BYTES: usize = OUTPUT_TEXT_CAP * SHOWN_BYTES_PER_CHARACTER;

/// Caps a text in place at [`OUTPUT_TEXT_CAP`] characters and [`OUTPUT_TEXT_BYTES`] shown
/// bytes, saying how much was cut (see [`cap_text`]). A short text is left without
/// scanning it.
pub fn cap_in_place(text: &mut String) {
    // Shown, a byte is at most six.
    if text.len() > OUTPUT_TEXT_BYTES / 6 {
        *text = cap_text(text);
    }
}

/// Caps a text at [`OUTPUT_TEXT_CAP`] characters and [`OUTPUT_TEXT_BYTES`] bytes once shown
/// (escaped for JSON or a terminal), the marker saying how much was cut (`… [N characters
/// truncated]`) included: a capped text is within both caps, so capping it again changes
/// nothing.
pub fn cap_text(text: &str) -> String {
    cap_text_at(text, OUTPUT_TEXT_CAP)
}

/// [`cap_text`] at `cap` characters and `cap` × [`SHOWN_BYTES_PER_CHARACTER`] shown bytes
/// (`cap` at least the marker's length, about 40). Every text of an outcome passes here
/// (the handlers', the merge's and `Outcome::enforce_caps`'s caps).
pub fn cap_text_at(text: &str, cap: usize) -> String {
    use crate::text::{shown_len, shown_width};
    let marker = |dropped: usize| format!("… [{dropped} characters truncated]");
    let byte_cap = cap.saturating_mul(SHOWN_BYTES_PER_CHARACTER);
    // Shown, a byte is at most six.
    if text.len() <= cap && text.len().saturating_mul(6) <= byte_cap {
        return text.to_string();
    }
    let total = text.chars().count();
    if total <= cap && shown_len(text) <= byte_cap {
        return text.to_string();
    }
    let cap = cap.max(marker(total).chars().count());
    let byte_cap = byte_cap.max(shown_len(&marker(total)));
    // The marker's length depends on the count it names; two rounds settle it.
    let mut by_characters = cap - marker(total.saturating_sub(cap)).chars().count();
    loop {
        let again = cap - marker(total.saturating_sub(by_characters)).chars().count();
        if again >= by_characters {
            break;
        }
        by_characters = again;
    }
    // Then as many of those as fit the shown bytes, with room for the longest marker.
    let room = byte_cap - shown_len(&marker(total));
    let (mut shown, mut cut, mut kept) = (0usize, text.len(), total);
    for (n, (i, c)) in text.char_indices().enumerate() {
        shown += shown_width(c);
        if n == by_characters || shown > room {
            (cut, kept) = (i, n);
            break;
        }
    }
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

    /// Every byte value, and invalid UTF-8 (as a hook's output is read: lossily), in any
    /// amount: the capped text stays within the characters and the shown bytes, capping
    /// again changes nothing, and what is kept is the text's beginning.
    #[test]
    fn text_is_capped_in_shown_bytes_for_every_byte() {
        use crate::text::shown_len;
        let mut inputs: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b; 50_000]).collect();
        inputs.push(b"\xc3".repeat(30_000)); // a lead byte without its continuation
        inputs.push(b"\xe2\x80\xae".repeat(20_000)); // U+202E, bidi override
        inputs.push(b"\xf0\x9f\x98\x80\x00\"".repeat(20_000));
        for bytes in inputs {
            let text = String::from_utf8_lossy(&bytes);
            for cap in [OUTPUT_TEXT_CAP, 200, 80] {
                let capped = cap_text_at(&text, cap);
                assert!(capped.chars().count() <= cap, "{:?}", &bytes[..4]);
                assert!(
                    shown_len(&capped) <= cap * SHOWN_BYTES_PER_CHARACTER,
                    "{:?} at {cap}: {} shown bytes",
                    &bytes[..4],
                    shown_len(&capped)
                );
                assert_eq!(cap_text_at(&capped, cap), capped, "{:?}", &bytes[..4]);
                let marker = capped.rfind("… [").unwrap();
                assert!(text.starts_with(&capped[..marker]));
                let json = crate::text::escape_json(&serde_json::to_string(&capped).unwrap()).len();
                assert!(json <= cap * SHOWN_BYTES_PER_CHARACTER + 2, "{json}");
            }
        }
        let nul = cap_text(&"\0".repeat(1 << 20));
        assert!(
            nul.starts_with(&"\0".repeat(3_000)),
            "NULs are cut, not dropped"
        );
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
