//! The golden plugin of `hookhost:hook@0.2.0`, built straight from `wit/hook.wit` (world
//! `plugin-with-model`) with wit-bindgen: what a plugin built for 0.2.0 looks like to the
//! host. PreToolUse on Bash: as the 0.1.0 golden plugin (denies `rm -rf`, else context),
//! and with `config: {"ask": true}` it first asks the model through `model.complete`
//! directly: an answer containing `DENY` denies with the answer as the reason, an error is
//! the hook's error.

wit_bindgen::generate!({
    world: "plugin-with-model",
    path: "../../wit",
});

use exports::hookhost::hook::hook::{Event, Guest, PluginInfo, Response};
use hookhost::hook::host::{Level, log};
use hookhost::hook::model::{Message, Request, Role, complete};
use hookhost::hook::types::{Capabilities, Permission};

struct Golden;

fn input(event: &Event) -> serde_json::Value {
    serde_json::from_str(&event.input_json).unwrap_or_default()
}

fn empty() -> Response {
    Response {
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
    }
}

impl Guest for Golden {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "golden".into(),
            version: "0.2.0".into(),
            events: vec!["PreToolUse".into()],
            capabilities: Capabilities {
                dirs: vec![],
                env: vec![],
                http: vec![],
            },
        }
    }

    fn handle(event: Event) -> Result<Response, String> {
        let command = input(&event)["tool_input"]["command"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let config: serde_json::Value = event
            .config_json
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        let mut response = empty();
        if config["ask"] == true {
            let reply = complete(&Request {
                system: "Answer ALLOW or DENY, then why.".into(),
                messages: vec![Message {
                    role: Role::User,
                    text: format!("May a coding agent run `{command}`?"),
                }],
                max_tokens: Some(64),
            })?;
            if reply.text.contains("DENY") {
                response.permission = Some(Permission::Deny);
                response.reason = Some(reply.text);
                return Ok(response);
            }
        }
        if command.contains("rm -rf") {
            log(
                Level::Info,
                "denied",
                &[("command".into(), command.clone())],
            );
            response.permission = Some(Permission::Deny);
            response.reason = Some(format!("golden 0.2.0: `{command}` deletes"));
        } else {
            response.additional_context = Some(format!("golden 0.2.0 saw `{command}`"));
        }
        Ok(response)
    }
}

export!(Golden);
