//! The `rewrites` of an audit line: what each winning rewrite changed, as its JSON Patch,
//! masked like `toolInput` ([`super::Redacted`], one byte budget for them all) and, where
//! the patch says which key it changes, by that key: an operation whose path goes
//! through a credential-named key (`/tool_input/env/GITHUB_TOKEN`) logs `[REDACTED]` for
//! its value, as `toolInput` does for the same key.

use serde::ser::Serializer;
use serde_json::{Value, json};

use super::redact::{REDACTED, Redacted};
use crate::outcome::Rewrite;
use crate::policy::env::is_credential_name;

/// The rewrites of an outcome as the audit line holds them (before [`Redacted`]), or
/// `None` when there are none.
pub(super) fn logged(rewrites: &[Rewrite]) -> Option<Value> {
    if rewrites.is_empty() {
        return None;
    }
    let entries = rewrites
        .iter()
        .map(|rewrite| {
            let ops: Vec<Value> = rewrite
                .patch
                .0
                .iter()
                .map(|op| {
                    let mut op = serde_json::to_value(op).unwrap_or(Value::Null);
                    let secret = op
                        .get("path")
                        .and_then(Value::as_str)
                        .is_some_and(through_credential);
                    if secret && let Some(value) = op.get_mut("value") {
                        *value = Value::String(REDACTED.into());
                    }
                    op
                })
                .collect();
            let mut entry = json!({"hook": rewrite.hook, "field": rewrite.field, "patch": ops});
            if let Some(bytes) = rewrite.omitted_bytes {
                entry["omittedBytes"] = json!(bytes);
            }
            entry
        })
        .collect();
    Some(Value::Array(entries))
}

/// Whether a JSON Pointer goes through a credential-named key.
fn through_credential(pointer: &str) -> bool {
    pointer
        .split('/')
        .any(|token| is_credential_name(&token.replace("~1", "/").replace("~0", "~")))
}

/// Serializes [`logged`]'s value through [`Redacted`].
pub(super) fn redacted<S: Serializer>(
    value: &Option<Value>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_some(&Redacted(value)),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_under_a_credential_key_is_masked_and_the_rest_redacted() {
        let before = json!({"tool_input": {"command": "ls", "env": {}}});
        let after = json!({"tool_input": {"command": "ls -la ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "env": {"GITHUB_TOKEN": "plain-looking-value"}}});
        let rewrite = Rewrite {
            hook: "h".into(),
            field: "updatedInput".into(),
            patch: json_patch::diff(&before, &after),
            omitted_bytes: None,
        };
        let line = serde_json::to_string(&Redacted(&logged(&[rewrite]).unwrap())).unwrap();
        assert!(!line.contains("plain-looking-value"), "{line}");
        assert!(
            !line.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            "{line}"
        );
        assert!(line.contains("/tool_input/env/GITHUB_TOKEN"), "{line}");
        assert!(line.contains("ls -la"), "{line}");
        assert!(logged(&[]).is_none());
    }
}
