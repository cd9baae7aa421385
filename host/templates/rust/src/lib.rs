//! {{name}}: a hookhost plugin. It denies Bash commands that contain one of the words in
//! the hook's `config.deny` (default: `rm -rf /`) and has no opinion on anything else.
//!
//! Build: `cargo build --release --target wasm32-wasip2`
//! Test:  `cargo test`

use hookhost_guest::{Event, Hook, Info, Response, register};

/// The plugin. Stateless: every event gets a fresh instance.
#[derive(Default)]
pub struct Plugin;

#[derive(serde::Deserialize)]
struct Config {
    #[serde(default = "default_deny")]
    deny: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config { deny: default_deny() }
    }
}

fn default_deny() -> Vec<String> {
    vec!["rm -rf /".to_string()]
}

#[derive(serde::Deserialize)]
struct Bash {
    #[serde(default)]
    command: String,
}

/// The denied phrase `command` contains, if any.
pub fn denied<'a>(deny: &'a [String], command: &str) -> Option<&'a str> {
    deny.iter().map(String::as_str).find(|d| command.contains(d))
}

impl Hook for Plugin {
    fn info() -> Info {
        Info::new("{{name}}", env!("CARGO_PKG_VERSION")).events(&["PreToolUse"])
    }

    fn pre_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
        if event.tool_name() != Some("Bash") {
            return Ok(Response::none());
        }
        let config: Config = event.config_as()?;
        let bash: Bash = event.tool_input_as()?;
        Ok(match denied(&config.deny, &bash.command) {
            Some(phrase) => Response::deny(format!("{{name}}: `{phrase}` is not allowed")),
            None => Response::none(),
        })
    }
}

register!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denies_configured_phrases_only() {
        let deny = default_deny();
        assert_eq!(denied(&deny, "sudo rm -rf / --no-preserve-root"), Some("rm -rf /"));
        assert_eq!(denied(&deny, "rm -rf ./target"), None);
    }
}
