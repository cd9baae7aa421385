//! What hookhost adds to a command hook's environment besides what it inherits: the
//! event's context for a hook with `"contextEnv": true` ("small data in env vars, big
//! data on stdin"), and the depth guard's `HOOKHOST_DEPTH` for every hook.
//!
//! Every value is bounded before a process gets it ([`CONTEXT_VALUE_CHARS`] characters,
//! cut on a character boundary, with a `…_TRUNCATED=1` marker beside it) and has no NUL
//! byte (which `execve` cannot carry: one would make the hook fail to start). The names
//! pass the same scrubbing as the inherited environment ([`super::command::hook_env`]);
//! a test checks that none of them is a name it would drop.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use serde_json::Value;

use super::Invocation;

/// The most characters of one context value (`HOOKHOST_TOOL_INPUT`, …) a hook gets.
pub const CONTEXT_VALUE_CHARS: usize = 10_000;

/// The names [`context_env`] sets (each may have a `_TRUNCATED` marker beside it).
pub const CONTEXT_NAMES: [&str; 4] = [
    "HOOKHOST_TOOL_NAME",
    "HOOKHOST_TOOL_INPUT",
    "HOOKHOST_TOOL_RESULT",
    "HOOKHOST_CWD",
];

/// The variable of the depth guard.
pub const DEPTH: &str = "HOOKHOST_DEPTH";

/// The longest prefix of `text` of at most `max` characters; whether it was cut.
fn cut_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

/// Pushes `name=value` (bounded, without NUL) and, when the value was cut,
/// `name_TRUNCATED=1`.
fn push(env: &mut Vec<(OsString, OsString)>, name: &str, value: &str) {
    let (kept, cut) = cut_chars(value, CONTEXT_VALUE_CHARS);
    env.push((name.into(), without_nul(OsStr::new(kept))));
    if cut {
        env.push((format!("{name}_TRUNCATED").into(), "1".into()));
    }
}

/// The event's context for a hook with `contextEnv`: `HOOKHOST_TOOL_NAME`,
/// `HOOKHOST_TOOL_INPUT` (compact JSON) and `HOOKHOST_TOOL_RESULT` (the `tool_response`,
/// a string as it is, anything else as compact JSON) where the input has them, and
/// `HOOKHOST_CWD`. (`HOOKHOST_SESSION_ID` and `HOOKHOST_EVENT` every command hook gets.)
pub fn context_env(invocation: &Invocation) -> Vec<(OsString, OsString)> {
    let mut env = Vec::new();
    let input = &invocation.input;
    let as_text = |value: &Value| match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(name) = input.get("tool_name") {
        push(&mut env, CONTEXT_NAMES[0], &as_text(name));
    }
    if let Some(tool_input) = input.get("tool_input") {
        push(&mut env, CONTEXT_NAMES[1], &tool_input.to_string());
    }
    if let Some(result) = input.get("tool_response") {
        push(&mut env, CONTEXT_NAMES[2], &as_text(result));
    }
    push(
        &mut env,
        CONTEXT_NAMES[3],
        &invocation.cwd.as_os_str().to_string_lossy(),
    );
    env
}

/// `HOOKHOST_DEPTH` for the processes hookhost starts: its own depth + 1
/// ([`crate::config::env::depth`]); a depth it could not read is handed on as the
/// largest one, so a child hookhost refuses too.
pub fn depth_var() -> (OsString, OsString) {
    let depth = crate::config::env::depth()
        .unwrap_or(crate::config::env::MAX_DEPTH_VALUE as u32)
        .saturating_add(1);
    (DEPTH.into(), depth.to_string().into())
}

/// A value hookhost sets in a hook's environment or argv, without NUL bytes (which
/// `execve` cannot carry: one would make the hook fail to start).
pub fn without_nul(value: &OsStr) -> OsString {
    let bytes = value.as_bytes();
    if bytes.contains(&0) {
        OsString::from_vec(bytes.iter().copied().filter(|&b| b != 0).collect())
    } else {
        value.to_os_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env::is_code_loading;
    use crate::event::EventCatalogue;
    use crate::policy::env::is_credential_name;

    fn invocation(input: Value) -> Invocation {
        let catalogue = EventCatalogue::default();
        let spec = catalogue.get("PostToolUse").unwrap().clone();
        Invocation::new(spec, input, std::path::Path::new("/p")).unwrap()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a str> {
        env.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_str().unwrap())
    }

    #[test]
    fn values_are_cut_on_a_character_boundary_and_marked() {
        let long = "é".repeat(CONTEXT_VALUE_CHARS + 5);
        let env = context_env(&invocation(serde_json::json!({
            "tool_name": "Bash\u{0}x",
            "tool_input": {"command": long},
            "tool_response": long,
            "cwd": "/w\u{0}d",
        })));
        assert_eq!(get(&env, "HOOKHOST_TOOL_NAME"), Some("Bashx"));
        assert_eq!(get(&env, "HOOKHOST_TOOL_NAME_TRUNCATED"), None);
        let result = get(&env, "HOOKHOST_TOOL_RESULT").unwrap();
        assert_eq!(result.chars().count(), CONTEXT_VALUE_CHARS);
        assert_eq!(get(&env, "HOOKHOST_TOOL_RESULT_TRUNCATED"), Some("1"));
        let input = get(&env, "HOOKHOST_TOOL_INPUT").unwrap();
        assert!(input.starts_with(r#"{"command":"éé"#));
        assert_eq!(input.chars().count(), CONTEXT_VALUE_CHARS);
        assert_eq!(get(&env, "HOOKHOST_TOOL_INPUT_TRUNCATED"), Some("1"));
        assert_eq!(get(&env, "HOOKHOST_CWD"), Some("/wd"));
        assert!(env.iter().all(|(_, v)| !v.as_encoded_bytes().contains(&0)));
    }

    #[test]
    fn events_without_a_tool_get_the_cwd_only() {
        let env = context_env(&invocation(serde_json::json!({"session_id": "s"})));
        assert_eq!(env.len(), 1);
        assert_eq!(get(&env, "HOOKHOST_CWD"), Some("/p"));
    }

    /// Generated from the names this file sets: none is one the environment's
    /// scrubbing would drop (a credential-looking or code-loading name), and each is
    /// declared (internal: never read from the environment).
    #[test]
    fn no_name_is_one_the_scrubbing_drops() {
        for name in CONTEXT_NAMES
            .iter()
            .flat_map(|n| [n.to_string(), format!("{n}_TRUNCATED")])
            .chain([DEPTH.to_string()])
        {
            assert!(!is_credential_name(&name), "{name}");
            assert!(!is_code_loading(name.as_bytes()), "{name}");
            assert!(crate::config::env::declared(&name).is_some(), "{name}");
        }
    }
}
