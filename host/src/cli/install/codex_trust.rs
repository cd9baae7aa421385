//! Codex 0.171 runs a command hook only once the user trusted it: it keeps a
//! `trusted_hash` per hook in `config.toml` (`[hooks.state."<hooks.json>:<event>:<group>:
//! <handler>"]`), set when the user approves the hook in the TUI's `/hooks`, and skips an
//! untrusted hook without a word. hookhost does not forge that hash (Codex's own hash of
//! the hook, which hookhost could not verify against the real client without its
//! `--dangerously-bypass-hook-trust`): `install --codex` says exactly what to approve,
//! and `hookhost hooks` / `validate` warn while a drop-in has no trust entry.

use std::path::{Path, PathBuf};

use serde_json::Value;

use hookhost::text::escape;

/// The most of `hooks.json` and `config.toml` read.
const CAP: u64 = 4 << 20;

/// Codex's name of an event in a trust key (`PreToolUse` → `pre_tool_use`).
fn snake(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The trust keys of hookhost's drop-ins in the Codex hooks file `path` (its JSON
/// `value`): `(event, key)`.
fn drop_in_keys(path: &Path, value: &Value) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    let Some(hooks) = value.get("hooks").and_then(Value::as_object) else {
        return keys;
    };
    for (event, groups) in hooks {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            for (h, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let command = handler.get("command").and_then(Value::as_str);
                if command.is_some_and(|c| super::drop_in::is_installed_form(c, None)) {
                    keys.push((
                        event.clone(),
                        format!("{}:{}:{g}:{h}", path.display(), snake(event)),
                    ));
                }
            }
        }
    }
    keys
}

/// Whether Codex's `config.toml` text has a `trusted_hash` for `key`.
fn has_trust(config: &str, key: &str) -> bool {
    let header = format!("[hooks.state.\"{key}\"]");
    let Some(at) = config.find(&header) else {
        return false;
    };
    config[at + header.len()..]
        .lines()
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with('['))
        .any(|line| line.trim_start().starts_with("trusted_hash"))
}

fn read(path: &Path) -> Option<String> {
    let (bytes, _) = hookhost::config::file::read_regular(path, CAP).ok()?;
    String::from_utf8(bytes).ok()
}

/// The text `install --codex` prints: what the user must approve for Codex to run the
/// drop-in in `hooks_json`.
pub(super) fn approve_text(hooks_json: &Path) -> String {
    let value = read(hooks_json)
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let keys: Vec<String> = drop_in_keys(hooks_json, &value)
        .into_iter()
        .map(|(event, key)| format!("    {} ({})", escape(&event), escape(&key)))
        .collect();
    format!(
        "  Codex 0.171 skips a hook it has not trusted, without a word: start `codex`, type \
         `/hooks`, and approve the hookhost hook of each event:\n{}\n  (`hookhost validate` \
         warns until each has a trust entry in config.toml)",
        keys.join("\n")
    )
}

/// Codex's directory: `$CODEX_HOME`, else `~/.codex`.
fn codex_home() -> Option<PathBuf> {
    let workspaces = hookhost::config::env::workspaces_of(None);
    match hookhost::config::env::path_var("CODEX_HOME", &workspaces) {
        Ok(Some(dir)) => Some(dir),
        _ => hookhost::config::env::home_dir().map(|h| h.join(".codex")),
    }
}

/// A warning for each hookhost drop-in in the user's Codex `hooks.json` that Codex has
/// no trust entry for (so it does not run it).
pub(crate) fn warnings() -> Vec<String> {
    let Some(home) = codex_home() else {
        return Vec::new();
    };
    let hooks_json = home.join("hooks.json");
    let Some(value) = read(&hooks_json).and_then(|t| serde_json::from_str::<Value>(&t).ok()) else {
        return Vec::new();
    };
    let config = read(&home.join("config.toml")).unwrap_or_default();
    drop_in_keys(&hooks_json, &value)
        .into_iter()
        .filter(|(_, key)| !has_trust(&config, key))
        .map(|(event, key)| {
            format!(
                "Codex does not run hookhost's {event} hook yet: it is not trusted (no \
                 `trusted_hash` for \"{key}\" in {}); approve it in Codex's `/hooks`",
                home.join("config.toml").display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_keys_and_entries() {
        assert_eq!(snake("PreToolUse"), "pre_tool_use");
        let value = serde_json::json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./mine"}]},
            {"matcher": "*", "hooks": [{"type": "command", "command": "hookhost dispatch --format codex"}]}]}});
        let keys = drop_in_keys(Path::new("/h/hooks.json"), &value);
        assert_eq!(
            keys,
            [(
                "PreToolUse".to_string(),
                "/h/hooks.json:pre_tool_use:1:0".to_string()
            )]
        );
        let config =
            "[hooks.state.\"/h/hooks.json:pre_tool_use:1:0\"]\ntrusted_hash = \"sha256:ab\"\n";
        assert!(has_trust(config, &keys[0].1));
        assert!(!has_trust(
            "[hooks.state.\"/h/hooks.json:pre_tool_use:1:0\"]\n[other]\ntrusted_hash = 1\n",
            &keys[0].1
        ));
    }
}
