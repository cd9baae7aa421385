//! `deny-dangerous-bash` as an Extism plugin: the same checks (`danger.rs` of the hookhost
//! plugin, compiled from the same file), reading the event the way the hookhost guest SDK
//! does (`tool_name`, and `tool_input` parsed from its raw JSON), answering with Claude
//! Code's hook output JSON.

use extism_pdk::{FnResult, plugin_fn};
use serde::Deserialize;
use serde_json::value::RawValue;

#[path = "../../../../plugins/deny-dangerous-bash/src/danger.rs"]
mod danger;

#[derive(Deserialize)]
struct Input<'a> {
    #[serde(default)]
    tool_name: Option<&'a str>,
    #[serde(borrow, default)]
    tool_input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct BashInput {
    #[serde(default)]
    command: String,
}

/// One PreToolUse event in, the hook output JSON out (`{}`: no opinion).
#[plugin_fn]
pub fn handle(event: String) -> FnResult<String> {
    let input: Input<'_> = serde_json::from_str(&event)?;
    if input.tool_name != Some("Bash") {
        return Ok("{}".into());
    }
    let bash: BashInput = match input.tool_input {
        Some(raw) => serde_json::from_str(raw.get())?,
        None => BashInput {
            command: String::new(),
        },
    };
    Ok(match danger::danger(&bash.command) {
        Some(why) => serde_json::json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason":
                format!("deny-dangerous-bash: {why}: `{}`", bash.command.trim()),
        }})
        .to_string(),
        None => "{}".into(),
    })
}
