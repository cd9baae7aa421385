//! Reading an event's input JSON the way the agent meant it, never refusing it for its
//! shape.
//!
//! An input that hookhost cannot read reaches no hook, and the agent treats the host's
//! error as a non-blocking one: the tool runs as if every hook had allowed it. So an
//! input must not be refused for what a strict JSON parser refuses but an agent sends:
//!
//! - **lone surrogates.** Claude Code is JavaScript; `JSON.stringify` writes a string
//!   with half a surrogate pair (a text cut between the two halves of an emoji) as a
//!   `\udXXX` escape, which is valid JSON text but no Unicode scalar value, so
//!   serde_json refuses it. Each lone half is read as U+FFFD, which is what the agent
//!   itself writes when it encodes that string as UTF-8 for the tool.
//! - **bytes that are not UTF-8.** Replaced by U+FFFD.
//! - **deep nesting.** serde_json stops at 128 levels (its recursion limit, which keeps
//!   the stack safe). A container nested deeper than [`MAX_DEPTH`] levels is replaced by
//!   a string that says so, so the hooks see everything else of the input (a `command`
//!   next to a hostile 3,000-level `x`), and every later stage that walks the value
//!   (matching, the audit log, serializing it again) stays far from any recursion limit.
//!
//! Each repair is reported, for a notice on the outcome. Input that is not JSON at all
//! (truncated, garbage), or JSON that is not an object, is still an error: that is a
//! broken agent, not a hostile value (and under `--format claude` a refused input
//! blocks).
//!
//! Why by hand: serde_json has no option for lone surrogates or a depth cap (only its
//! fixed limit or none at all), and the scan is one pass over bytes that only builds a
//! copy when something needs repairing.

use std::borrow::Cow;

use serde_json::Value;

/// The deepest nesting of objects and arrays kept; a container below it is replaced by
/// [`TOO_DEEP`]. Below serde_json's limit of 128, with room for the envelopes that carry
/// an input (a daemon request, an async job).
pub const MAX_DEPTH: usize = 100;

/// The largest input read, in bytes. Agents send kilobytes (a tool's input, a capped
/// tool output); a larger input is a host error.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// What replaces a container nested deeper than [`MAX_DEPTH`].
pub const TOO_DEEP: &str = "[nested deeper than 100 levels: not shown to hooks]";

/// An input and the repairs that made it readable.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// The input value.
    pub value: Value,
    /// One message per kind of repair, for the outcome's notices.
    pub repairs: Vec<String>,
}

/// Parses an input (empty or blank: `{}`), repairing what the module docs list.
///
/// # Errors
///
/// An input over [`MAX_INPUT_BYTES`], one that is not JSON even after the repairs, or
/// JSON that is not an object; the message reads after "the input" (`is not valid JSON:
/// …`).
pub fn parse(bytes: &[u8]) -> Result<Input, String> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "is larger than the {MAX_INPUT_BYTES} bytes hookhost reads (MAX_INPUT_BYTES)"
        ));
    }
    let mut repairs = Vec::new();
    let text = String::from_utf8_lossy(bytes);
    if let Cow::Owned(_) = text {
        repairs.push(
            "the input holds bytes that are not UTF-8; hooks see U+FFFD in their place".into(),
        );
    }
    if text.trim().is_empty() {
        return Ok(Input {
            value: Value::Object(Default::default()),
            repairs,
        });
    }
    let repaired = repair(&text);
    if repaired.lone_surrogates {
        repairs.push(
            "the input holds lone UTF-16 surrogates (`\\udXXX` escapes of half a character); \
             hooks see U+FFFD in their place"
                .into(),
        );
    }
    if repaired.too_deep {
        repairs.push(format!(
            "the input nests deeper than {MAX_DEPTH} levels; hooks see `{TOO_DEEP}` in place \
             of each deeper value"
        ));
    }
    let value: Value =
        serde_json::from_str(&repaired.text).map_err(|e| format!("is not valid JSON: {e}"))?;
    // An event's input is an object; any other value reaches no hook, so it is refused
    // here, where every refused input is (and a refused input blocks where it can).
    if !value.is_object() {
        return Err(format!(
            "is JSON but not an object: an event's input must be a JSON object, this is {}",
            match value {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                Value::Null => "null",
                Value::Object(_) => "an object",
            }
        ));
    }
    Ok(Input { value, repairs })
}

/// The text with the repairs applied.
struct Repaired<'a> {
    text: Cow<'a, str>,
    lone_surrogates: bool,
    too_deep: bool,
}

/// The code unit of a `\uXXXX` escape starting at `at` (the backslash), if it is one.
fn escaped_unit(bytes: &[u8], at: usize) -> Option<u16> {
    let hex = bytes.get(at + 2..at + 6)?;
    if bytes.get(at + 1) != Some(&b'u') {
        return None;
    }
    u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

/// One pass over JSON text: lone surrogate escapes become `\ufffd`, containers deeper
/// than [`MAX_DEPTH`] become [`TOO_DEEP`]. Text that is not JSON is passed on as it is
/// (the parser reports it). A copy is made only from the first repair on.
fn repair(text: &str) -> Repaired<'_> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `text` before this offset are in `out` (or need not be)
    let mut lone_surrogates = false;
    let mut too_deep = false;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = 0;
    // Replaces text[from..to] with `with`.
    let splice = |out: &mut Option<String>, copied: &mut usize, from, to, with: &str| {
        let buffer = out.get_or_insert_with(|| String::with_capacity(text.len()));
        buffer.push_str(&text[*copied..from]);
        buffer.push_str(with);
        *copied = to;
    };
    while i < bytes.len() {
        let byte = bytes[i];
        if in_string {
            match byte {
                b'"' => in_string = false,
                b'\\' => {
                    match escaped_unit(bytes, i) {
                        Some(0xd800..=0xdbff) => {
                            let pair = bytes.get(i + 6) == Some(&b'\\')
                                && matches!(escaped_unit(bytes, i + 6), Some(0xdc00..=0xdfff));
                            if pair {
                                i += 12;
                            } else {
                                splice(&mut out, &mut copied, i, i + 6, "\\ufffd");
                                lone_surrogates = true;
                                i += 6;
                            }
                        }
                        Some(0xdc00..=0xdfff) => {
                            splice(&mut out, &mut copied, i, i + 6, "\\ufffd");
                            lone_surrogates = true;
                            i += 6;
                        }
                        Some(_) => i += 6,
                        None => i += 2, // `\"`, `\\`, `\n`, … (or broken: the parser says so)
                    }
                    continue;
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' if depth == MAX_DEPTH => {
                let end = end_of_container(bytes, i);
                splice(&mut out, &mut copied, i, end, &format!("\"{TOO_DEEP}\""));
                too_deep = true;
                i = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    let text = match out {
        None => Cow::Borrowed(text),
        Some(mut buffer) => {
            buffer.push_str(&text[copied.min(text.len())..]);
            Cow::Owned(buffer)
        }
    };
    Repaired {
        text,
        lone_surrogates,
        too_deep,
    }
}

/// The offset just past the container that opens at `start` (its matching bracket,
/// strings skipped), or the end of the text when it is never closed.
fn end_of_container(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut i = start;
    while i < bytes.len() {
        match (in_string, bytes[i]) {
            (true, b'\\') => i += 1,
            (true, b'"') => in_string = false,
            (false, b'"') => in_string = true,
            (false, b'{' | b'[') => depth += 1,
            (false, b'}' | b']') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// How much of an input [`event_name_in_prefix`] reads: Claude Code writes
/// `hook_event_name` right after the common fields (session id, transcript path, cwd,
/// permission mode), before the tool's input.
pub const EVENT_NAME_PREFIX: usize = 64 << 10;

/// The top-level `hook_event_name` of an input that [`parse`] refused (larger than
/// [`MAX_INPUT_BYTES`], or not JSON), read from its first [`EVENT_NAME_PREFIX`] bytes
/// only: the keys of the top-level object one after another, each other value skipped
/// whole (strings and nesting followed, so a string inside `tool_input` can never read
/// as the key). `None` when the prefix does not reach it, when it is not a string, when
/// it appears twice, or when the text is not an object's: the caller then cannot name
/// the event (and blocks).
pub fn event_name_in_prefix(bytes: &[u8]) -> Option<String> {
    string_in_prefix(bytes, "hook_event_name")
}

/// As [`event_name_in_prefix`], for the top-level string field `field` (another agent's
/// input names its event in its own field: the OpenCode plugin's `event`).
pub fn string_in_prefix(bytes: &[u8], field: &str) -> Option<String> {
    let bytes = &bytes[..bytes.len().min(EVENT_NAME_PREFIX)];
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut found = None;
    loop {
        at = skip_space(bytes, at);
        if bytes.get(at) != Some(&b'"') {
            return found;
        }
        let Some(key_end) = end_of_string(bytes, at) else {
            return found;
        };
        let key: Option<String> = serde_json::from_slice(&bytes[at..key_end]).ok();
        at = skip_space(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return found;
        }
        at = skip_space(bytes, at + 1);
        if key.as_deref() == Some(field) {
            if found.is_some() || bytes.get(at) != Some(&b'"') {
                return None;
            }
            let end = end_of_string(bytes, at)?;
            found = Some(serde_json::from_slice::<String>(&bytes[at..end]).ok()?);
            at = end;
        } else {
            match end_of_value(bytes, at) {
                Some(end) => at = end,
                // A value past the prefix (the tool's input): nothing more to read.
                None => return found,
            }
        }
        at = skip_space(bytes, at);
        match bytes.get(at) {
            Some(b',') => at += 1,
            _ => return found,
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// Just past the string that opens at `at` (a `"`), escapes followed; `None` when it does
/// not end within `bytes`.
fn end_of_string(bytes: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// Just past the value that starts at `at`: a string, a container (to its matching
/// bracket, strings followed) or a scalar (to the next `,`, `}`, `]` or space); `None`
/// when it does not end within `bytes`.
fn end_of_value(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => end_of_string(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = end_of_string(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))?;
            Some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(text: &str) -> Input {
        parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn valid_input_is_read_as_it_is() {
        for text in [
            r#"{"a":"\ud83d\ude00 \\udc80 \" ]}[{","b":[1,{"c":null}]}"#,
            "{}",
            r#"{"k\n":"\u00e9"}"#,
        ] {
            let input = parsed(text);
            assert_eq!(input.value, serde_json::from_str::<Value>(text).unwrap());
            assert!(input.repairs.is_empty(), "{text}: {:?}", input.repairs);
            assert!(matches!(repair(text).text, Cow::Borrowed(_)));
        }
        assert_eq!(parsed("  \n").value, json!({}));
        assert_eq!(parsed("").value, json!({}));
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        let cases = [
            (r#"{"a":"x\udc80y"}"#, "x\u{fffd}y"),
            (r#"{"a":"\ud83d"}"#, "\u{fffd}"),
            (r#"{"a":"\ud83dz"}"#, "\u{fffd}z"),
            (r#"{"a":"\ud83d\ud83d\ude00"}"#, "\u{fffd}\u{1f600}"),
            (r#"{"a":"\ude00\ud83d"}"#, "\u{fffd}\u{fffd}"),
            (r#"{"a":"\uD83D\n"}"#, "\u{fffd}\n"),
            (r#"{"a":"\\ud800"}"#, "\\ud800"),
        ];
        for (text, want) in cases {
            let input = parsed(text);
            assert_eq!(input.value["a"], want, "{text}");
            assert_eq!(input.repairs.len(), usize::from(want.contains('\u{fffd}')));
        }
        let key = parsed(r#"{"k\udfff":1}"#);
        assert_eq!(key.value, json!({"k\u{fffd}": 1}));
    }

    /// The event name of a refused input, generated: the name before a value that runs
    /// past the prefix or past the read limit, after every kind of value, with and
    /// without spaces; never from inside a string or a nested value; not when it is
    /// twice, not a string, beyond the prefix, or the text is no object.
    #[test]
    fn the_event_name_of_a_refused_input_is_read_from_its_prefix_only() {
        let tail = format!("{{\"command\":\"rm -rf /{}", " ".repeat(EVENT_NAME_PREFIX));
        let values = [
            r#""s""#,
            "12",
            "-1.5e3",
            "true",
            "null",
            r#"{"a":[1,{"b":"}"}],"c":"\"]"}"#,
            r#"["hook_event_name","x"]"#,
        ];
        for value in values {
            for space in ["", " ", "\n\t "] {
                let text = format!(
                    r#"{{{space}"cwd"{space}:{space}{value}{space},{space}"hook_event_name"{space}:{space}"PreToolUse"{space},"tool_input":{tail}"#
                );
                assert_eq!(
                    event_name_in_prefix(text.as_bytes()).as_deref(),
                    Some("PreToolUse"),
                    "{value:?} {space:?}"
                );
            }
        }
        let escaped = r#"{"hook\u005fevent_name":"Stop","x":"#.to_string() + &tail;
        assert_eq!(
            event_name_in_prefix(escaped.as_bytes()).as_deref(),
            Some("Stop")
        );
        let none = [
            // Only inside a string or a nested value.
            r#"{"tool_input":{"command":"\"hook_event_name\":\"SessionStart\""}"#.to_string()
                + &tail,
            r#"{"tool_input":{"hook_event_name":"SessionStart"},"x":"#.to_string() + &tail,
            // Twice, or not a string.
            r#"{"hook_event_name":"SessionStart","hook_event_name":"PreToolUse"}"#.into(),
            r#"{"hook_event_name":["PreToolUse"]}"#.into(),
            // Past the prefix.
            format!(
                r#"{{"pad":"{}","hook_event_name":"PreToolUse"}}"#,
                " ".repeat(EVENT_NAME_PREFIX)
            ),
            // No object.
            r#"["hook_event_name","PreToolUse"]"#.into(),
            "garbage".into(),
            String::new(),
        ];
        for text in none {
            assert_eq!(
                event_name_in_prefix(text.as_bytes()),
                None,
                "{}",
                &text[..text.len().min(80)]
            );
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_become_the_replacement_character() {
        let input = parse(b"{\"a\":\"x\xff\xc0\x80y\"}").unwrap();
        assert!(input.value["a"].as_str().unwrap().contains('\u{fffd}'));
        assert_eq!(input.repairs.len(), 1);
    }

    #[test]
    fn deep_nesting_is_cut_at_the_limit() {
        for depth in [MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 5000] {
            let text = format!(
                r#"{{"command":"rm","x":{}"s]{{\""{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            let input = parsed(&text);
            assert_eq!(input.value["command"], "rm", "{depth}");
            let mut levels = 1; // the outer object
            let mut value = &input.value["x"];
            while let Some(inner) = value.get(0) {
                levels += 1;
                value = inner;
            }
            if depth < MAX_DEPTH {
                assert_eq!(value, "s]{\"", "{depth}");
                assert!(input.repairs.is_empty());
            } else {
                assert_eq!(levels, MAX_DEPTH, "{depth}");
                assert_eq!(value, TOO_DEEP, "{depth}");
                assert_eq!(input.repairs.len(), 1);
            }
        }
        // Objects count as much as arrays; what follows the cut container is kept.
        let text = format!(r#"{}1{}"#, r#"{"a":"#.repeat(300), "}".repeat(300));
        assert!(parse(text.as_bytes()).is_ok());
        let text = format!(
            r#"{{"x":[{}],"after"]}}"#,
            "[".repeat(200) + &"]".repeat(199)
        );
        let input = parsed(&text);
        assert_eq!(input.value["x"][1], "after");
    }

    #[test]
    fn what_is_not_json_stays_an_error() {
        for text in [
            "{",
            "{\"a\":",
            "nope",
            "{\"a\":\"\\ud83d",
            &"[".repeat(500),
            "{\"a\":1}}",
        ] {
            assert!(parse(text.as_bytes()).is_err(), "{text}");
        }
        let big = vec![b' '; MAX_INPUT_BYTES + 1];
        assert!(parse(&big).unwrap_err().contains("larger than"));
        // JSON, but no event's input: refused, as what is not JSON is.
        for text in [
            "[]",
            "[{\"hook_event_name\":\"Stop\"}]",
            "\"x\"",
            "5",
            "true",
            "null",
        ] {
            let e = parse(text.as_bytes()).unwrap_err();
            assert!(e.contains("not an object"), "{text}: {e}");
        }
    }
}
