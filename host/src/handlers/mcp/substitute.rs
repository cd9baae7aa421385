//! `${path}` placeholders in an `mcp_tool` hook's `input`, filled from the event's input.
//!
//! - A path is dotted keys from the input's top (`${tool_input.file_path}`); a key that is
//!   all digits also indexes an array (`${tool_input.edits.0.old_string}`).
//! - A string that is exactly one placeholder becomes the value as it is, with its type
//!   (a number stays a number, an object an object).
//! - A placeholder inside other text becomes the value's text: a string as it is,
//!   anything else as compact JSON.
//! - A path that names nothing gives the empty string (as an unset variable does in an
//!   HTTP hook's headers).
//! - Strings inside nested objects and arrays of `input` are filled too; keys are not.
//! - The filled arguments are bounded: past [`MAX_INPUT_BYTES`] of text the hook fails
//!   (the check runs as the text is built, so a placeholder repeated a thousand times
//!   cannot make the host hold a thousand copies of a large input).

use serde_json::{Map, Value};

/// The most text the filled `input` may hold: 1 MiB, what a command hook's stdout may say.
pub const MAX_INPUT_BYTES: usize = super::super::output::OUTPUT_JSON_CAP;

/// Fills the placeholders of `input` from `event`.
///
/// # Errors
///
/// The filled arguments would exceed [`MAX_INPUT_BYTES`].
pub fn substitute(input: &Map<String, Value>, event: &Value) -> Result<Map<String, Value>, String> {
    let mut budget = MAX_INPUT_BYTES;
    let mut out = Map::new();
    for (key, value) in input {
        out.insert(key.clone(), fill(value, event, &mut budget)?);
    }
    Ok(out)
}

fn fill(value: &Value, event: &Value, budget: &mut usize) -> Result<Value, String> {
    match value {
        Value::String(s) => fill_string(s, event, budget),
        Value::Array(items) => items
            .iter()
            .map(|v| fill(v, event, budget))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| Ok((k.clone(), fill(v, event, budget)?)))
            .collect::<Result<Map<_, _>, String>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

fn spend(budget: &mut usize, bytes: usize) -> Result<(), String> {
    *budget = budget.checked_sub(bytes).ok_or_else(|| {
        format!(
            "the filled input exceeds {} bytes; the tool is not called",
            MAX_INPUT_BYTES
        )
    })?;
    Ok(())
}

fn lookup<'a>(event: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(event, |at, key| match at {
        Value::Object(map) => map.get(key),
        Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

fn fill_string(s: &str, event: &Value, budget: &mut usize) -> Result<Value, String> {
    if let Some(path) = s.strip_prefix("${").and_then(|r| r.strip_suffix('}'))
        && !path.contains('}')
    {
        let value = lookup(event, path.trim())
            .cloned()
            .unwrap_or_else(|| Value::String(String::new()));
        spend(budget, value_len(&value))?;
        return Ok(value);
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        let Some(end) = rest[at..].find('}') else {
            break;
        };
        spend(budget, at)?;
        out.push_str(&rest[..at]);
        let path = rest[at + 2..at + end].trim();
        match lookup(event, path) {
            Some(Value::String(text)) => {
                spend(budget, text.len())?;
                out.push_str(text);
            }
            Some(other) => {
                spend(budget, value_len(other))?;
                out.push_str(&other.to_string());
            }
            None => {}
        }
        rest = &rest[at + end + 1..];
    }
    spend(budget, rest.len())?;
    out.push_str(rest);
    Ok(Value::String(out))
}

/// Bytes of a value's JSON text, without writing it out.
fn value_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sub(input: Value, event: Value) -> Result<Value, String> {
        substitute(input.as_object().unwrap(), &event).map(Value::Object)
    }

    #[test]
    fn placeholders_fill_by_the_documented_rules() {
        let event = json!({"tool_input": {"file_path": "/a b", "n": 3, "edits": [{"s": "x"}]}});
        let got = sub(
            json!({
                "whole": "${tool_input.file_path}",
                "typed": "${tool_input.n}",
                "object": "${tool_input}",
                "inner": "path=${tool_input.file_path} n=${tool_input.n} e=${tool_input.edits.0.s}",
                "missing": "[${nope.x}]",
                "missing_whole": "${nope}",
                "nested": {"list": ["${tool_input.n}", 1, true]},
                "unclosed": "a ${b",
            }),
            event.clone(),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({
                "whole": "/a b",
                "typed": 3,
                "object": event["tool_input"],
                "inner": "path=/a b n=3 e=x",
                "missing": "[]",
                "missing_whole": "",
                "nested": {"list": [3, 1, true]},
                "unclosed": "a ${b",
            })
        );
    }

    #[test]
    fn the_filled_input_is_bounded_as_it_is_built() {
        let big = "x".repeat(MAX_INPUT_BYTES / 4);
        let event = json!({"p": big});
        assert!(sub(json!({"a": "${p}${p}${p}"}), event.clone()).is_ok());
        let err = sub(json!({"a": "${p}${p}${p}${p}${p}"}), event.clone()).unwrap_err();
        assert!(err.contains("exceeds"), "{err}");
        let many: Vec<Value> = (0..8).map(|_| json!("${p}")).collect();
        assert!(sub(json!({ "a": many }), event).is_err());
    }
}
