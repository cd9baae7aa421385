//! Masks secrets: in PreToolUse it rewrites a tool input that contains tokens (so the
//! command runs with them masked only where they would leak, e.g. `echo`), and in
//! PostToolUse it rewrites the tool output so tokens never reach the model. Recognises
//! GitHub, AWS, Slack, OpenAI/Anthropic-style keys, bearer tokens and private key blocks.

use hookhost_guest::{Event, Hook, Info, Response, Value, register};

/// The plugin. Stateless.
#[derive(Default)]
pub struct RedactSecrets;

const PREFIXES: [&str; 10] = [
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "AKIA",
    "xoxb-",
    "xoxp-",
    "sk-ant-",
    "sk-",
    "glpat-",
];
const MASK: &str = "[REDACTED]";

fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
}

/// Masks every token in `text`; returns the count.
pub fn redact(text: &str) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut count = 0;
    let mut rest = text;
    'outer: while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("-----BEGIN ")
            && let Some(end) = after.find("-----END ")
            && after[..end].contains("PRIVATE KEY")
        {
            let close = after[end + 9..]
                .find("-----")
                .map(|i| end + 9 + i + 5)
                .unwrap_or(after.len());
            out.push_str(MASK);
            count += 1;
            rest = &after[close..];
            continue;
        }
        let boundary = out.chars().last().is_none_or(|c| !token_char(c));
        if boundary {
            for prefix in PREFIXES {
                if let Some(after) = rest.strip_prefix(prefix) {
                    let len = after.find(|c: char| !token_char(c)).unwrap_or(after.len());
                    if len >= 12 {
                        out.push_str(MASK);
                        count += 1;
                        rest = &after[len..];
                        continue 'outer;
                    }
                }
            }
            for bearer in ["Bearer ", "bearer "] {
                if let Some(after) = rest.strip_prefix(bearer) {
                    let len = after
                        .find(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                        .unwrap_or(after.len());
                    if len >= 16 {
                        out.push_str(bearer);
                        out.push_str(MASK);
                        count += 1;
                        rest = &after[len..];
                        continue 'outer;
                    }
                }
            }
        }
        let c = rest.chars().next().expect("rest is not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    (out, count)
}

/// Masks every string in a JSON value; returns the count.
pub fn redact_value(value: &Value) -> (Value, usize) {
    match value {
        Value::String(s) => {
            let (masked, n) = redact(s);
            (Value::String(masked), n)
        }
        Value::Array(items) => {
            let mut total = 0;
            let items = items
                .iter()
                .map(|v| {
                    let (v, n) = redact_value(v);
                    total += n;
                    v
                })
                .collect();
            (Value::Array(items), total)
        }
        Value::Object(map) => {
            let mut total = 0;
            let map = map
                .iter()
                .map(|(k, v)| {
                    let (v, n) = redact_value(v);
                    total += n;
                    (k.clone(), v)
                })
                .collect();
            (Value::Object(map), total)
        }
        other => (other.clone(), 0),
    }
}

impl Hook for RedactSecrets {
    fn info() -> Info {
        Info::new("redact-secrets", env!("CARGO_PKG_VERSION"))
            .events(&["PreToolUse", "PostToolUse"])
    }

    fn pre_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
        let (masked, n) = redact_value(event.tool_input());
        Ok(if n == 0 {
            Response::none()
        } else {
            hookhost_guest::log::info("masked secrets in tool input", &[("count", &n.to_string())]);
            Response::rewrite_input(masked).with_context(format!(
                "redact-secrets masked {n} secret(s) in the tool input"
            ))
        })
    }

    fn post_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
        let Some(output) = event.tool_response() else {
            return Ok(Response::none());
        };
        let (masked, n) = redact_value(output);
        Ok(if n == 0 {
            Response::none()
        } else {
            Response::none()
                .with_updated_output(masked)
                .with_context(format!(
                    "redact-secrets masked {n} secret(s) in the tool output"
                ))
        })
    }
}

register!(RedactSecrets);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_tokens_and_keeps_the_rest() {
        let (out, n) =
            redact("token=ghp_abcdefghijklmnopqrstuvwxyz0123 ok AKIAABCDEFGHIJKLMNOP done");
        assert_eq!(out, "token=[REDACTED] ok [REDACTED] done");
        assert_eq!(n, 2);
        let (out, n) = redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyz\n");
        assert_eq!(out, "Authorization: Bearer [REDACTED]\n");
        assert_eq!(n, 1);
        let (out, n) =
            redact("a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nb");
        assert_eq!(out, "a\n[REDACTED]\nb");
        assert_eq!(n, 1);
        assert_eq!(redact("task-1234 sk-short my_ghp_notatoken_x").1, 0);
    }
}
