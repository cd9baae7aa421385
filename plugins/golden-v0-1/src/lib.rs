//! The golden plugin of `hookhost:hook@0.1.0`, built straight from `wit/v0.1.0/hook.wit`
//! with wit-bindgen: what a plugin built for 0.1.0 looks like to the host, for ever.
//! PreToolUse on Bash: denies a command containing `rm -rf`, else adds context naming the
//! command; logs each decision.

wit_bindgen::generate!({
    world: "plugin",
    path: "../../wit/v0.1.0",
});

use exports::hookhost::hook::hook::{Event, Guest, PluginInfo, Response};
use hookhost::hook::host::{Level, log};
use hookhost::hook::types::{Capabilities, Permission};

struct Golden;

fn command(event: &Event) -> String {
    let input: serde_json::Value = serde_json::from_str(&event.input_json).unwrap_or_default();
    input["tool_input"]["command"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

impl Guest for Golden {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "golden".into(),
            version: "0.1.0".into(),
            events: vec!["PreToolUse".into()],
            capabilities: Capabilities {
                dirs: vec![],
                env: vec![],
                http: vec![],
            },
        }
    }

    fn handle(event: Event) -> Result<Response, String> {
        let command = command(&event);
        let mut response = Response {
            permission: None,
            block: false,
            reason: None,
            continue_: None,
            stop_reason: None,
            system_message: None,
            additional_context: None,
            updated_input_json: None,
            updated_output_json: None,
            extras_json: None,
        };
        if command.contains("rm -rf") {
            log(
                Level::Info,
                "denied",
                &[("command".into(), command.clone())],
            );
            response.permission = Some(Permission::Deny);
            response.reason = Some(format!("golden 0.1.0: `{command}` deletes"));
        } else {
            response.additional_context = Some(format!("golden 0.1.0 saw `{command}`"));
        }
        Ok(response)
    }
}

export!(Golden);
