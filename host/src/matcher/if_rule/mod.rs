//! The per-handler `if` filter: one permission rule in Claude Code's syntax.
//!
//! - `Bash(pattern)`: the command line is parsed as a shell script ([`super::shell`]) and
//!   the pattern is tested against every simple command that may run in it, after quote
//!   removal: in lists, pipelines, groups, subshells, compound commands and functions,
//!   inside `$( )`, backticks and `<( )`, inside the strings given to `sh -c` (any shell),
//!   `eval` and `trap`, and after any program not known to leave its arguments alone
//!   (`sudo`, `env`, `xargs`, `uv run`, `docker exec c`, a runner never heard of: every
//!   later word may start the command; only `echo`, `ls`, `grep` … of the short list
//!   `LEAVE_ARGUMENTS_ALONE` in `shell/programs.rs` keep their words out), each with
//!   leading `VAR=value` assignments stripped. The program also matches by its file name
//!   (`/usr/bin/git` is `git`), case-insensitively. `*` matches anything; a trailing ` *`
//!   also matches the bare command, and the legacy `prefix:*` form means "starts with
//!   prefix". When the pattern's program runs with arguments the host cannot see (`$( )`,
//!   `$VAR`, globs, `xargs`), when quoted text that may be code contains the pattern, or
//!   when the line cannot be understood, the hook runs: the filter only ever saves a run,
//!   it never hides a command from a hook.
//! - `Edit(glob)`, `Write(glob)`, `Read(glob)`: the glob is tested against
//!   `tool_input.file_path` (gitignore-like: a pattern without `/` matches the file name at
//!   any depth; `//abs` is absolute, `~/` the home directory, `/x` the project directory,
//!   anything else the cwd). `Edit` covers every file-editing tool. The home directory is
//!   given when the rule is compiled (config reads it: `$HOME`, else the password
//!   database); without one, a `~/` pattern matches nothing.
//! - `Tool` alone: the tool name (`*` allowed; `mcp__server` covers that server's tools).
//! - `Tool(pattern)` for other tools: the glob is tested against the tool's main string
//!   field (`command`, `file_path`, `path`, `url`, `pattern`, `query`).
//!
//! A rule is at most [`MAX_RULE_BYTES`] long with at most [`MAX_WILDCARDS`] wildcards, so
//! that no rule costs more than a bounded amount per event. The rule runs only on tool
//! events; a hook with `if` never runs on any other event.

mod bash;
mod lazy_glob;
mod paths;
#[cfg(test)]
mod runner_tests;
#[cfg(test)]
mod tests;
mod words;
#[cfg(test)]
mod words_tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

pub(crate) use self::bash::compile_regex;
use self::bash::{BashPattern, analysis};
use self::lazy_glob::LazyGlob;
use self::paths::PathPattern;
use super::shell::clip;

/// The longest `if` rule accepted (longer is a config error).
pub const MAX_RULE_BYTES: usize = 1024;

/// The most wildcards (`*`, `?`, `[`) an `if` rule may hold.
pub const MAX_WILDCARDS: usize = 32;

/// Compiled size allowed for one regex built from config.
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A compiled `if` rule. Identical rules share one compilation ([`IfRule::parse`]), so
/// that a config's memory grows with its distinct rules, not with its hooks.
#[derive(Debug, Clone)]
pub struct IfRule(Arc<Compiled>);

/// What a rule compiles to (shared by every [`IfRule`] of the same source and home).
/// A glob is kept as text and compiled when an event reaches it ([`LazyGlob`]).
#[derive(Debug)]
struct Compiled {
    source: String,
    /// The home directory the rule was compiled with (its key in [`COMPILED`]).
    home: Option<PathBuf>,
    /// The tool name's glob, when it has a `*` (a plain name is compared instead).
    tool: Option<LazyGlob>,
    tool_name: String,
    argument: Option<Argument>,
}

#[derive(Debug)]
enum Argument {
    Bash(Box<BashPattern>),
    Path(Box<PathPattern>),
    Other { pattern: LazyGlob },
}

/// Tools whose `file_path` an `Edit(...)` rule covers.
const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "Write", "NotebookEdit"];

/// Path rules whose tool name stands for a family of tools: `Edit(...)` covers every
/// file-editing tool.
const PATH_RULE_FAMILIES: &[(&str, &[&str])] = &[("Edit", EDIT_TOOLS)];

/// Rules compiled and still in use, by source and home: the one place every rule passes,
/// so 5,000 hooks with the same `if` hold one compiled rule. A rule leaves the table when
/// its last user drops it (a reloaded config dropped it: [`Compiled`]'s `Drop`): a `Weak`
/// left in the table would keep the rule's allocation. (Entries of rules gone without
/// that are swept when the table doubles.)
static COMPILED: Mutex<Option<Interned>> = Mutex::new(None);

#[derive(Default)]
struct Interned {
    rules: HashMap<(String, Option<PathBuf>), Weak<Compiled>>,
    sweep_at: usize,
}

impl IfRule {
    /// Compiles a rule as written in config, or shares the compilation of an identical
    /// rule still in use.
    ///
    /// # Errors
    ///
    /// A rule that is not `Tool` or `Tool(pattern)`, or whose glob does not compile.
    pub fn parse(rule: &str, home: Option<&Path>) -> Result<IfRule, String> {
        let key = (rule.trim().to_string(), home.map(Path::to_path_buf));
        let mut table = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
        let table = table.get_or_insert_with(Interned::default);
        if let Some(compiled) = table.rules.get(&key).and_then(Weak::upgrade) {
            return Ok(IfRule(compiled));
        }
        let compiled = Arc::new(Compiled::parse(rule, home)?);
        table.rules.insert(key, Arc::downgrade(&compiled));
        if table.rules.len() > table.sweep_at {
            table.rules.retain(|_, rule| rule.strong_count() > 0);
            table.sweep_at = (table.rules.len() * 2).max(64);
        }
        Ok(IfRule(compiled))
    }

    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.0.source
    }

    /// Whether the hook should run for this tool call.
    pub fn matches(
        &self,
        tool_name: &str,
        tool_input: &Value,
        cwd: &Path,
        project_dir: &Path,
    ) -> bool {
        self.0.matches(tool_name, tool_input, cwd, project_dir)
    }

    /// Whether two rules share one compilation.
    #[cfg(test)]
    fn shares(&self, other: &IfRule) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Compiled {
    /// Compiles a rule as written in config. `home` is the user's home directory, the
    /// anchor of `~/` path patterns ([`crate::policy::ResolveOptions::home_dir`]); with
    /// `None`, a `~/` pattern matches nothing.
    ///
    /// # Errors
    ///
    /// A rule that is not `Tool` or `Tool(pattern)`, or whose glob does not compile.
    fn parse(rule: &str, home: Option<&Path>) -> Result<Compiled, String> {
        let rule = rule.trim();
        let wildcards = rule
            .bytes()
            .filter(|c| matches!(c, b'*' | b'?' | b'['))
            .count();
        if wildcards > MAX_WILDCARDS {
            return Err(format!(
                "`if` rule `{}` has {wildcards} wildcards; at most {MAX_WILDCARDS} are allowed",
                clip(rule)
            ));
        }
        if rule.len() > MAX_RULE_BYTES {
            return Err(format!(
                "`if` rule `{}` is longer than {MAX_RULE_BYTES} bytes",
                clip(rule)
            ));
        }
        let (tool, argument) = match rule.find('(') {
            Some(open) => {
                let Some(inner) = rule[open + 1..].strip_suffix(')') else {
                    return Err(format!(
                        "invalid `if` rule `{rule}`: expected `Tool(pattern)`"
                    ));
                };
                (&rule[..open], Some(inner))
            }
            None => (rule, None),
        };
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-*".contains(c))
        {
            return Err(format!(
                "invalid `if` rule `{rule}`: `{tool}` is not a tool name"
            ));
        }
        let tool_glob = match tool.contains('*') {
            true => Some(
                LazyGlob::new(tool, false)
                    .map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?,
            ),
            false => None,
        };
        let argument = match argument {
            None => None,
            Some("") if tool == "Bash" => None,
            Some(arg) if tool == "Bash" => Some(Argument::Bash(Box::new(
                BashPattern::parse(arg).map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?,
            ))),
            Some(arg) if matches!(tool, "Edit" | "Write" | "Read") => {
                Some(Argument::Path(Box::new(
                    PathPattern::parse(arg, home)
                        .map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?,
                )))
            }
            Some(arg) => Some(Argument::Other {
                pattern: LazyGlob::new(arg, true)
                    .map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?,
            }),
        };
        Ok(Compiled {
            source: rule.to_string(),
            home: home.map(Path::to_path_buf),
            tool: tool_glob,
            tool_name: tool.to_string(),
            argument,
        })
    }

    fn matches(&self, tool_name: &str, tool_input: &Value, cwd: &Path, project_dir: &Path) -> bool {
        if !self.tool_matches(tool_name) {
            return false;
        }
        match &self.argument {
            None => true,
            Some(Argument::Bash(pattern)) => {
                // A Bash call without a string command is not understood: the hook runs.
                let Some(command) = tool_input.get("command").and_then(Value::as_str) else {
                    return true;
                };
                pattern.matches(&analysis(command))
            }
            Some(Argument::Path(pattern)) => {
                // A call of the rule's tool without a string path is not understood: the
                // hook runs, as for a Bash call without a command (another agent's edit
                // tool mapped to `Edit` carries a patch, not a path: OpenCode's and
                // Codex's `apply_patch`).
                let Some(path) = ["file_path", "notebook_path", "path"]
                    .iter()
                    .find_map(|f| tool_input.get(*f).and_then(Value::as_str))
                else {
                    return true;
                };
                pattern.matches(path, cwd, project_dir)
            }
            Some(Argument::Other { pattern }) => {
                ["command", "file_path", "path", "url", "pattern", "query"]
                    .iter()
                    .find_map(|f| tool_input.get(*f).and_then(Value::as_str))
                    .is_some_and(|value| pattern.is_match(value))
            }
        }
    }

    fn tool_matches(&self, tool_name: &str) -> bool {
        if matches!(self.argument, Some(Argument::Path(_)))
            && let Some((_, family)) = PATH_RULE_FAMILIES
                .iter()
                .find(|(rule_tool, _)| *rule_tool == self.tool_name)
        {
            return family.contains(&tool_name);
        }
        self.tool
            .as_ref()
            .map_or(tool_name == self.tool_name, |glob| glob.is_match(tool_name))
            || (self.tool_name.starts_with("mcp__")
                && tool_name
                    .strip_prefix(self.tool_name.as_str())
                    .is_some_and(|rest| rest.starts_with("__")))
    }
}

impl Drop for Compiled {
    /// Takes the rule's entry out of the table, unless the entry is already a new
    /// compilation of the same rule. (No rule is dropped while the table is locked:
    /// [`IfRule::parse`] drops only `Weak`s under the lock.)
    fn drop(&mut self) {
        let mut table = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(table) = table.as_mut() else { return };
        let key = (std::mem::take(&mut self.source), self.home.take());
        if table
            .rules
            .get(&key)
            .is_some_and(|rule| rule.strong_count() == 0)
        {
            table.rules.remove(&key);
        }
    }
}
