//! What is kept of a hook's answer (a command hook's stdout, an HTTP hook's body): at
//! most a limit in bytes, and, when the answer is a JSON object, its *structure* before
//! the length of its strings.
//!
//! A guard that refuses often quotes what it refuses (`"permissionDecisionReason":
//! "refusing rm -rf / …"`), and the agent writes that text: a command padded past the
//! limit once made the guard's whole answer longer than what was kept, the cut JSON did
//! not parse, and the deny became a failure (issue 24, second round). So the bytes of a
//! JSON string past [`STRING_KEEP`] are dropped while the string's end and everything
//! after it are still kept, and the answer still parses, with its decision; each text is
//! then capped as usual ([`super::output::cap_text`]). A value that was cut is no longer
//! the hook's value, so [`restrictive_or_invalid`] keeps a cut answer only when it
//! restricts (a deny, a block, a stop), without its `updated…` fields.

use serde_json::{Map, Value};

use super::output::{HookOutput, Stdout};

/// Bytes of one JSON string kept (whole characters and escapes): more than any text's
/// cap once shown ([`super::output::OUTPUT_TEXT_BYTES`]), so that the cap still marks a
/// cut text as truncated.
pub const STRING_KEEP: usize = 64 << 10;

/// The bytes kept of an answer as they arrive.
#[derive(Debug)]
pub struct Capture {
    kept: Vec<u8>,
    limit: usize,
    /// `None` until the first byte that is not white space: whether it opens an object.
    json: Option<bool>,
    in_string: bool,
    escaped: bool,
    /// Hex digits of a `\u` escape still to come, and its value so far.
    hex_left: u8,
    hex: u32,
    /// The last escape was a high surrogate: its low half must be kept with it.
    after_high: bool,
    string_len: usize,
    dropping: bool,
    /// Bytes of some string were dropped.
    pub cut: bool,
    /// More bytes came than the limit keeps (outside strings, or not JSON).
    pub overflow: bool,
}

impl Capture {
    pub fn new(limit: usize) -> Capture {
        Capture {
            kept: Vec::new(),
            limit,
            json: None,
            in_string: false,
            escaped: false,
            hex_left: 0,
            hex: 0,
            after_high: false,
            string_len: 0,
            dropping: false,
            cut: false,
            overflow: false,
        }
    }

    /// A capture of text that is never read as JSON (stderr): bytes up to the limit.
    pub fn text(limit: usize) -> Capture {
        Capture {
            json: Some(false),
            ..Capture::new(limit)
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.kept
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.json.is_none()
            && let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace())
        {
            self.json = Some(*first == b'{');
        }
        if self.json != Some(true) {
            self.keep_raw(bytes);
            return;
        }
        for &byte in bytes {
            self.step(byte);
        }
    }

    fn keep_raw(&mut self, bytes: &[u8]) {
        let room = self.limit.saturating_sub(self.kept.len());
        self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if bytes.len() > room {
            self.overflow = true;
        }
    }

    fn keep(&mut self, byte: u8) {
        if self.kept.len() < self.limit {
            self.kept.push(byte);
        } else {
            self.overflow = true;
        }
    }

    /// One byte of a JSON object.
    fn step(&mut self, byte: u8) {
        if !self.in_string {
            if byte == b'"' {
                self.in_string = true;
                self.string_len = 0;
                self.dropping = false;
            }
            self.keep(byte);
            return;
        }
        if self.dropping {
            // Only the string's end matters now.
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                self.keep(byte);
            }
            return;
        }
        let boundary = !self.escaped
            && self.hex_left == 0
            && !self.after_high_pending(byte)
            && (byte & 0xc0) != 0x80;
        if boundary && byte != b'"' && self.string_len >= STRING_KEEP {
            self.dropping = true;
            self.cut = true;
            self.escaped = byte == b'\\';
            return;
        }
        if self.hex_left > 0 {
            self.hex = (self.hex << 4) | char::from(byte).to_digit(16).unwrap_or(0);
            self.hex_left -= 1;
            if self.hex_left == 0 {
                self.after_high = (0xd800..0xdc00).contains(&self.hex);
            }
        } else if self.escaped {
            self.escaped = false;
            if byte == b'u' {
                self.hex_left = 4;
                self.hex = 0;
            }
        } else if byte == b'\\' {
            self.escaped = true;
        } else if byte == b'"' {
            self.in_string = false;
        } else {
            self.after_high = false;
        }
        self.string_len += 1;
        self.keep(byte);
    }

    /// Whether `byte` would separate a high surrogate's escape from its low half.
    fn after_high_pending(&mut self, byte: u8) -> bool {
        if self.after_high && byte != b'\\' {
            self.after_high = false;
        }
        self.after_high
    }
}

/// A cut answer ([`Capture::cut`]) parsed as `stdout`: kept when it restricts (a deny,
/// an ask, a block, `continue: false`), without its `updated…` fields (values that
/// may have been cut); any other is an invalid answer, as an answer longer than the
/// limit always was.
pub fn restrictive_or_invalid(stdout: Stdout, what: &str) -> Stdout {
    match stdout {
        Stdout::Json(mut output) if restricts(&output) => {
            drop_updates(&mut output.specific);
            Stdout::Json(output)
        }
        Stdout::Json(_) | Stdout::Text(_) | Stdout::Empty => Stdout::InvalidJson(format!(
            "{what} has strings longer than {STRING_KEEP} bytes and no deny or block; ignored"
        )),
        invalid @ Stdout::InvalidJson(_) => invalid,
    }
}

/// Whether `output` restricts: a deny, an ask, a block, `continue: false`.
pub(super) fn restricts(output: &HookOutput) -> bool {
    let specific = |key: &str| output.specific.get(key).and_then(Value::as_str);
    matches!(output.decision.as_deref(), Some("block" | "deny"))
        || output.continue_ == Some(false)
        || matches!(specific("permissionDecision"), Some("deny" | "ask"))
        || matches!(specific("decision"), Some("block" | "deny"))
        || output
            .specific
            .get("decision")
            .and_then(|d| d.get("behavior"))
            == Some(&Value::from("deny"))
}

fn drop_updates(map: &mut Map<String, Value>) {
    map.retain(|key, _| !key.starts_with("updated"));
    for value in map.values_mut() {
        if let Value::Object(inner) = value {
            drop_updates(inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(json: &str, chunk: usize) -> Capture {
        let mut capture = Capture::new(1 << 20);
        for part in json.as_bytes().chunks(chunk) {
            capture.push(part);
        }
        capture
    }

    /// Long strings of every kind of character (ASCII, escapes, multi-byte UTF-8,
    /// surrogate pairs) are cut on a boundary: the rest still parses, keys after them
    /// included, whatever the chunking.
    #[test]
    fn a_cut_answer_still_parses() {
        for piece in ["x", "\\u0000", "é", "😀", "\\ud83d\\ude00", "\\\"", "\\\\"] {
            let long = piece.repeat(3 * STRING_KEEP / piece.len());
            let json = format!(r#"{{"reason": "{long}", "decision": "block", "x": ["{long}"]}}"#);
            for chunk in [1, 7, 8192] {
                let capture = through(&json, chunk);
                assert!(capture.cut && !capture.overflow, "{piece}");
                let value: Value = serde_json::from_slice(capture.bytes())
                    .unwrap_or_else(|e| panic!("{piece} by {chunk}: {e}"));
                assert_eq!(value["decision"], "block");
                let kept = value["reason"].as_str().unwrap();
                assert!(
                    long.len() > STRING_KEEP && kept.len() <= STRING_KEEP + 12,
                    "{piece}"
                );
            }
        }
    }

    #[test]
    fn short_answers_and_plain_text_are_kept_as_they_came() {
        let json = r#"{"reason": "a \"b\" \\ c", "n": [1, 2]}"#;
        let capture = through(json, 3);
        assert_eq!(capture.bytes(), json.as_bytes());
        assert!(!capture.cut);
        let text = "\"".to_string() + &"x".repeat(2 << 20);
        let capture = through(&text, 4096);
        assert_eq!(capture.bytes().len(), 1 << 20);
        assert!(capture.overflow && !capture.cut);
    }

    #[test]
    fn a_cut_answer_counts_only_when_it_restricts() {
        let parse = |json: &str| crate::handlers::output::classify_stdout(json, "PreToolUse");
        let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "updatedInput": {"command": "rm"}}}"#;
        let Stdout::Json(kept) = restrictive_or_invalid(parse(deny), "x") else {
            panic!("a deny is kept");
        };
        assert!(!kept.specific.contains_key("updatedInput"));
        let allow = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "rm"}}}"#;
        assert!(matches!(
            restrictive_or_invalid(parse(allow), "x"),
            Stdout::InvalidJson(_)
        ));
    }
}
