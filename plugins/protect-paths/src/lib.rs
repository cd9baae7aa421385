//! Denies Edit / Write / MultiEdit / NotebookEdit on protected paths. The globs come from
//! the hook's `config.globs` (default: `.env`, `.env.*`, `.git/**`, `**/*.pem`,
//! `**/id_rsa*`); a glob without `/` matches the file name anywhere. Paths are taken
//! relative to the event's `cwd` when they are under it.

use hookhost_guest::{Event, Hook, Info, Response, register};

/// The plugin. Stateless.
#[derive(Default)]
pub struct ProtectPaths;

#[derive(serde::Deserialize)]
struct Config {
    #[serde(default = "default_globs")]
    globs: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            globs: default_globs(),
        }
    }
}

fn default_globs() -> Vec<String> {
    [".env", ".env.*", ".git/**", "**/*.pem", "**/id_rsa*"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

const EDIT_TOOLS: [&str; 4] = ["Edit", "Write", "MultiEdit", "NotebookEdit"];

/// Matches a glob (`*` within a segment, `**` across segments, `?` one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some((b'*', rest)) if rest.first() == Some(&b'*') => {
                let rest = &rest[1..];
                let rest = rest.strip_prefix(b"/").unwrap_or(rest);
                (0..=t.len()).any(|i| go(rest, &t[i..]))
            }
            Some((b'*', rest)) => (0..=t.len())
                .take_while(|&i| i == 0 || t[i - 1] != b'/')
                .any(|i| go(rest, &t[i..])),
            Some((b'?', rest)) => t.first().is_some_and(|c| *c != b'/') && go(rest, &t[1..]),
            Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// The glob that protects `path` (relative to the project), if any.
pub fn protected_by<'a>(globs: &'a [String], path: &str) -> Option<&'a str> {
    let path = path.trim_start_matches("./");
    let name = path.rsplit('/').next().unwrap_or(path);
    globs.iter().map(String::as_str).find(|g| {
        if g.contains('/') {
            glob_match(g, path) || glob_match(&format!("**/{g}"), path)
        } else {
            glob_match(g, name) || path.split('/').any(|seg| glob_match(g, seg))
        }
    })
}

impl Hook for ProtectPaths {
    fn info() -> Info {
        Info::new("protect-paths", env!("CARGO_PKG_VERSION")).events(&["PreToolUse"])
    }

    fn pre_tool_use(&mut self, event: &Event) -> hookhost_guest::Result {
        let Some(tool) = event.tool_name().filter(|t| EDIT_TOOLS.contains(t)) else {
            return Ok(Response::none());
        };
        let config: Config = event.config_as()?;
        let input = event.tool_input();
        let Some(path) = input
            .get("file_path")
            .or_else(|| input.get("notebook_path"))
            .and_then(|v| v.as_str())
        else {
            return Ok(Response::none());
        };
        let cwd = event.cwd().trim_end_matches('/');
        let relative = path
            .strip_prefix(cwd)
            .map(|p| p.trim_start_matches('/'))
            .unwrap_or(path);
        Ok(match protected_by(&config.globs, relative) {
            Some(glob) => Response::deny(format!(
                "protect-paths: `{path}` is protected (matches `{glob}`); {tool} refused"
            )),
            None => Response::none(),
        })
    }
}

register!(ProtectPaths);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*.pem", "a.pem"));
        assert!(!glob_match("*.pem", "d/a.pem"));
        assert!(glob_match("**/*.pem", "d/e/a.pem"));
        assert!(glob_match("**/*.pem", "a.pem"));
        assert!(glob_match(".git/**", ".git/config"));
        assert!(glob_match("src/?.rs", "src/a.rs"));
    }

    #[test]
    fn default_globs_protect_secrets_and_git() {
        let g = default_globs();
        for p in [
            ".env",
            "app/.env",
            ".env.local",
            ".git/config",
            "keys/server.pem",
            "/abs/.git/HEAD",
            "home/id_rsa.pub",
        ] {
            assert!(protected_by(&g, p).is_some(), "{p}");
        }
        for p in ["src/main.rs", "environment.md", "git/notes"] {
            assert!(protected_by(&g, p).is_none(), "{p}");
        }
    }
}
