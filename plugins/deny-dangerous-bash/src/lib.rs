//! Denies destructive Bash commands before they run: deleting the filesystem root or the
//! home directory, piping a download into a shell, force-pushing to `main`/`master`,
//! formatting disks, and fork bombs. Everything else gets no opinion.

use hookhost_guest::{Event, Hook, Info, Response, register};

mod danger;
pub use danger::danger;

/// The plugin. Stateless.
#[derive(Default)]
pub struct DenyDangerousBash;

#[derive(serde::Deserialize)]
struct BashInput {
    #[serde(default)]
    command: String,
}

impl Hook for DenyDangerousBash {
    fn info() -> Info {
        Info::new("deny-dangerous-bash", env!("CARGO_PKG_VERSION")).events(&["PreToolUse"])
    }

    fn pre_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
        if event.tool_name() != Some("Bash") {
            return Ok(Response::none());
        }
        let input: BashInput = event.tool_input_as()?;
        Ok(match danger(&input.command) {
            Some(why) => Response::deny(format!(
                "deny-dangerous-bash: {why}: `{}`",
                input.command.trim()
            )),
            None => Response::none(),
        })
    }
}

register!(DenyDangerousBash);

#[cfg(test)]
mod tests {
    use super::danger;

    /// `cases.json` is shared with the Python port and the host's comparison test.
    fn cases(answer: &str) -> Vec<String> {
        let cases: serde_json::Value =
            serde_json::from_str(include_str!("../cases.json")).expect("cases.json");
        serde_json::from_value(cases[answer].clone()).expect("a list of commands")
    }

    #[test]
    fn dangerous_commands_are_caught() {
        for c in cases("deny") {
            assert!(danger(&c).is_some(), "{c}");
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for c in cases("allow") {
            assert!(danger(&c).is_none(), "{c}");
        }
    }
}
