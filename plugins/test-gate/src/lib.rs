//! Keeps the agent working until the tests pass: on Stop (and SubagentStop) it blocks
//! unless a marker file in the workspace says `pass`. The marker is read through a
//! read-only `${workspace}` grant; its path comes from `config.marker` (default
//! `.hookhost/tests-passed`), relative to the workspace.

use hookhost_guest::{Event, Hook, Info, Response, register};

/// The plugin. Stateless.
#[derive(Default)]
pub struct TestGate;

#[derive(serde::Deserialize)]
struct Config {
    #[serde(default = "default_marker")]
    marker: String,
    /// Where the workspace is mounted in the guest, if the grant names a guest path.
    #[serde(default)]
    workspace_guest: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            marker: default_marker(),
            workspace_guest: None,
        }
    }
}

fn default_marker() -> String {
    ".hookhost/tests-passed".to_string()
}

/// Whether the marker's content says the tests passed.
pub fn says_passed(content: &str) -> bool {
    let first = content
        .trim()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(first.as_str(), "pass" | "passed" | "ok")
}

impl Hook for TestGate {
    fn info() -> Info {
        Info::new("test-gate", env!("CARGO_PKG_VERSION"))
            .events(&["Stop", "SubagentStop"])
            .read_dir("${workspace}")
    }

    fn stop(&mut self, event: &Event) -> hookhost_guest::Result {
        let config: Config = event.config_as()?;
        let root = config
            .workspace_guest
            .unwrap_or_else(|| event.workspace().to_string());
        let path = format!(
            "{}/{}",
            root.trim_end_matches('/'),
            config.marker.trim_start_matches('/')
        );
        Ok(match std::fs::read_to_string(&path) {
            Ok(content) if says_passed(&content) => Response::none(),
            Ok(content) => Response::block(format!(
                "test-gate: the tests have not passed yet (`{}` says `{}`); run them and write `pass` there when they do",
                config.marker,
                content.trim().lines().next().unwrap_or("")
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Response::block(format!(
                "test-gate: no test result yet (`{}` is missing); run the tests before stopping",
                config.marker
            )),
            Err(e) => {
                return Err(format!(
                    "test-gate: cannot read `{path}`: {e} (is `${{workspace}}` granted read-only?)"
                )
                .into());
            }
        })
    }

    fn subagent_stop(&mut self, event: &Event) -> hookhost_guest::Result {
        self.stop(event)
    }
}

register!(TestGate);

#[cfg(test)]
mod tests {
    #[test]
    fn marker_content() {
        assert!(super::says_passed("pass\n"));
        assert!(super::says_passed("  OK"));
        assert!(!super::says_passed("fail: 3 tests"));
        assert!(!super::says_passed(""));
    }
}
