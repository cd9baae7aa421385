//! What a settings document may say that hookhost's types do not: fields a newer Claude
//! Code added, and values Claude Code reads leniently.
//!
//! - In Claude Code's own `settings.json` (`claude_format`), a key of a matcher group or
//!   of a hook entry that hookhost does not know is **dropped with a warning that names
//!   it**, and the entry loads: a Claude Code release that adds a field (`modelProvider`)
//!   must not disable every hook of the file. hookhost's own files stay strict (a typo
//!   there is an error). The known keys are read from the types' JSON Schema, so a field
//!   added to [`RawHandler`] or [`RawMatcherGroup`] is known here at once. A dropped key
//!   reaches nothing: it is removed before the entry is parsed, and every key that is
//!   kept passes the same validation and policy as in a strict file. An unknown key close
//!   to a known one (`onFailur`, `on_failure`, `If`) gets "did you mean": a misspelled
//!   safety key would otherwise fail open quietly.
//! - On an `mcp_tool` hook, an `onFailure` value hookhost does not know reads as `block`,
//!   with a warning (Claude Code 2.1.328: "Any other value reads as 'block'"); on the
//!   other handler types a bad value stays an error.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::ConfigWarning;
use super::schema::{OnFailure, RawHandler, RawMatcherGroup, SettingsFile};

/// The property names of a type's JSON Schema.
fn properties(schema: schemars::Schema) -> BTreeSet<String> {
    let value = serde_json::to_value(schema).unwrap_or_default();
    value
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The keys of a hook entry hookhost knows.
pub fn handler_keys() -> &'static BTreeSet<String> {
    static KEYS: OnceLock<BTreeSet<String>> = OnceLock::new();
    KEYS.get_or_init(|| properties(schemars::schema_for!(RawHandler)))
}

/// The keys of a matcher group hookhost knows.
pub fn group_keys() -> &'static BTreeSet<String> {
    static KEYS: OnceLock<BTreeSet<String>> = OnceLock::new();
    KEYS.get_or_init(|| properties(schemars::schema_for!(RawMatcherGroup)))
}

/// The top-level keys of a hookhost settings file (managed-only keys included).
pub fn top_level_keys() -> &'static BTreeSet<String> {
    static KEYS: OnceLock<BTreeSet<String>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let mut keys = properties(schemars::schema_for!(SettingsFile));
        keys.extend(super::schema::MANAGED_KEYS.iter().map(|k| k.to_string()));
        keys
    })
}

/// The known key `unknown` is most likely a misspelling of, if any: the same letters
/// without case and `_`/`-`, or at most two edits away from a key of four letters or more.
pub fn did_you_mean<'a>(unknown: &str, known: &'a BTreeSet<String>) -> Option<&'a str> {
    let squash = |s: &str| {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    let wanted = squash(unknown);
    known
        .iter()
        .map(|k| (strsim::levenshtein(&wanted, &squash(k)), k))
        .filter(|(d, k)| *d == 0 || (*d <= 2 && k.len() >= 4 && wanted.len() >= 3))
        .min()
        .map(|(_, k)| k.as_str())
}

/// A key or value as a message shows it: at most 80 characters (a key can be as long as
/// the file).
fn short(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The warning for an unknown key that was dropped.
pub fn unknown_key_warning(
    location: &str,
    path: String,
    key: &str,
    known: &BTreeSet<String>,
) -> ConfigWarning {
    let shown = short(key);
    let message = match did_you_mean(key, known) {
        Some(k) => format!("unknown field `{shown}` ignored; did you mean `{k}`?"),
        None => format!(
            "unknown field `{shown}` ignored (not a hookhost field; a newer Claude Code's?); \
             the entry still loads"
        ),
    };
    ConfigWarning {
        location: location.to_string(),
        path,
        message,
    }
}

/// Prepares the matcher groups of one event (`list`, at `path`) for parsing: unknown keys
/// dropped with a warning where `claude_format` says so, an `mcp_tool` hook's `onFailure`
/// read leniently everywhere. Values that are not the expected shape are left alone for
/// the typed parse to report.
pub fn prepare_groups(
    list: &mut Value,
    location: &str,
    path: &str,
    claude_format: bool,
    warnings: &mut Vec<ConfigWarning>,
) {
    let Value::Array(groups) = list else { return };
    for (g, group) in groups.iter_mut().enumerate() {
        let Value::Object(group) = group else {
            continue;
        };
        let group_path = format!("{path}[{g}]");
        if claude_format {
            prune(group, &group_path, location, group_keys(), warnings);
        }
        let Some(Value::Array(hooks)) = group.get_mut("hooks") else {
            continue;
        };
        for (h, hook) in hooks.iter_mut().enumerate() {
            let Value::Object(hook) = hook else { continue };
            let hook_path = format!("{group_path}.hooks[{h}]");
            if claude_format {
                prune(hook, &hook_path, location, handler_keys(), warnings);
            }
            lenient_mcp_on_failure(hook, &hook_path, location, warnings);
        }
    }
}

fn prune(
    object: &mut Map<String, Value>,
    path: &str,
    location: &str,
    known: &BTreeSet<String>,
    warnings: &mut Vec<ConfigWarning>,
) {
    let unknown: Vec<String> = object
        .keys()
        .filter(|k| !known.contains(k.as_str()))
        .cloned()
        .collect();
    for key in unknown {
        object.remove(&key);
        warnings.push(unknown_key_warning(
            location,
            format!("{path}.{}", short(&key)),
            &key,
            known,
        ));
    }
}

fn lenient_mcp_on_failure(
    hook: &mut Map<String, Value>,
    path: &str,
    location: &str,
    warnings: &mut Vec<ConfigWarning>,
) {
    if hook.get("type").and_then(Value::as_str) != Some("mcp_tool") {
        return;
    }
    let Some(value) = hook.get("onFailure") else {
        return;
    };
    if serde_json::from_value::<OnFailure>(value.clone()).is_ok() {
        return;
    }
    let shown = short(&value.to_string());
    hook.insert("onFailure".into(), Value::String("block".into()));
    warnings.push(ConfigWarning {
        location: location.to_string(),
        path: format!("{path}.onFailure"),
        message: format!(
            "`onFailure` {shown} is not a value hookhost knows; on an `mcp_tool` hook it \
             reads as \"block\" (as in Claude Code)"
        ),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_keys_come_from_the_types() {
        for key in [
            "type",
            "command",
            "onFailure",
            "if",
            "async",
            "statusMessage",
        ] {
            assert!(handler_keys().contains(key), "{key}");
        }
        for key in ["matcher", "hooks", "sequential"] {
            assert!(group_keys().contains(key), "{key}");
        }
        assert!(top_level_keys().contains("disableAllHooks"));
        assert!(top_level_keys().contains("pluginAllowlist"));
    }

    #[test]
    fn misspellings_of_known_keys_are_named() {
        let keys = handler_keys();
        assert_eq!(did_you_mean("onFailur", keys), Some("onFailure"));
        assert_eq!(did_you_mean("on_failure", keys), Some("onFailure"));
        assert_eq!(did_you_mean("If", keys), Some("if"));
        assert_eq!(did_you_mean("Timeout", keys), Some("timeout"));
        assert_eq!(did_you_mean("modelProvider", keys), None);
        assert_eq!(did_you_mean("xyz", keys), None);
    }
}
