//! The per-handler `if` filter: one permission rule in Claude Code's syntax.
//!
//! - `Bash(pattern)`: the pattern is tested against every subcommand of the command line
//!   (split on `&&`, `||`, `;`, `|`, `&` and newlines, plus the commands inside `$( )` and
//!   backticks), each with leading `VAR=value` assignments stripped. `*` matches anything;
//!   a trailing ` *` also matches the bare command, and the legacy `prefix:*` form means
//!   "starts with prefix". When a subcommand runs the pattern's program with arguments the
//!   host cannot see (`$( )`, backticks, `$VAR`), or the line cannot be parsed, the hook runs:
//!   the filter only ever saves a run, it never hides a command from a hook.
//! - `Edit(glob)`, `Write(glob)`, `Read(glob)`: the glob is tested against
//!   `tool_input.file_path` (gitignore-like: a pattern without `/` matches the file name at
//!   any depth; `//abs` is absolute, `~/` the home directory, `/x` the project directory,
//!   anything else the cwd). `Edit` covers every file-editing tool.
//! - `Tool` alone: the tool name (`*` allowed; `mcp__server` covers that server's tools).
//! - `Tool(pattern)` for other tools: the glob is tested against the tool's main string
//!   field (`command`, `file_path`, `path`, `url`, `pattern`, `query`).
//!
//! The rule runs only on tool events; a hook with `if` never runs on any other event.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::Regex;
use serde_json::Value;

/// A compiled `if` rule.
#[derive(Debug, Clone)]
pub struct IfRule {
    source: String,
    tool: GlobMatcher,
    tool_name: String,
    argument: Option<Argument>,
}

#[derive(Debug, Clone)]
enum Argument {
    Bash { pattern: Regex, program: String },
    Path { pattern: String },
    Other { pattern: GlobMatcher },
}

/// Tools whose `file_path` an `Edit(...)` rule covers.
const EDIT_TOOLS: &[&str] = &["Edit", "MultiEdit", "Write", "NotebookEdit"];

impl IfRule {
    /// Compiles a rule as written in config.
    ///
    /// # Errors
    ///
    /// A rule that is not `Tool` or `Tool(pattern)`, or whose glob does not compile.
    pub fn parse(rule: &str) -> Result<IfRule, String> {
        let rule = rule.trim();
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
        let tool_glob = Glob::new(tool)
            .map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?
            .compile_matcher();
        let argument = match argument {
            None => None,
            Some(arg) if tool == "Bash" => Some(bash_argument(arg)),
            Some(arg) if matches!(tool, "Edit" | "Write" | "Read") => {
                // Validate now; the glob is resolved against the cwd at match time.
                compile_glob(&resolve_path_pattern(arg, Path::new("/"), Path::new("/")))
                    .map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?;
                Some(Argument::Path {
                    pattern: arg.to_string(),
                })
            }
            Some(arg) => Some(Argument::Other {
                pattern: compile_glob(arg)
                    .map_err(|e| format!("invalid `if` rule `{rule}`: {e}"))?,
            }),
        };
        Ok(IfRule {
            source: rule.to_string(),
            tool: tool_glob,
            tool_name: tool.to_string(),
            argument,
        })
    }

    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether the hook should run for this tool call.
    pub fn matches(
        &self,
        tool_name: &str,
        tool_input: &Value,
        cwd: &Path,
        project_dir: &Path,
    ) -> bool {
        if !self.tool_matches(tool_name) {
            return false;
        }
        match &self.argument {
            None => true,
            Some(Argument::Bash { pattern, program }) => {
                let command = tool_input
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                bash_matches(command, pattern, program)
            }
            Some(Argument::Path { pattern }) => {
                let Some(path) = ["file_path", "notebook_path", "path"]
                    .iter()
                    .find_map(|f| tool_input.get(*f).and_then(Value::as_str))
                else {
                    return false;
                };
                let resolved = resolve_path_pattern(pattern, cwd, project_dir);
                let absolute = if Path::new(path).is_absolute() {
                    PathBuf::from(path)
                } else {
                    cwd.join(path)
                };
                compile_glob(&resolved).is_ok_and(|glob| glob.is_match(&absolute))
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
        if self.tool_name == "Edit" && matches!(self.argument, Some(Argument::Path { .. })) {
            return EDIT_TOOLS.contains(&tool_name);
        }
        self.tool.is_match(tool_name)
            || (self.tool_name.starts_with("mcp__")
                && tool_name
                    .strip_prefix(self.tool_name.as_str())
                    .is_some_and(|rest| rest.starts_with("__")))
    }
}

fn compile_glob(pattern: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()?
        .compile_matcher())
}

/// Turns a permission-rule path pattern into an absolute glob.
fn resolve_path_pattern(pattern: &str, cwd: &Path, project_dir: &Path) -> String {
    if let Some(abs) = pattern.strip_prefix("//") {
        return format!("/{abs}");
    }
    if let Some(rest) = pattern.strip_prefix("~/") {
        let home = std::env::var("HOME").unwrap_or_default();
        return format!("{}/{rest}", home.trim_end_matches('/'));
    }
    if let Some(rest) = pattern.strip_prefix('/') {
        return format!(
            "{}/{rest}",
            project_dir.display().to_string().trim_end_matches('/')
        );
    }
    let rest = pattern.strip_prefix("./").unwrap_or(pattern);
    let base = cwd.display().to_string();
    if rest.contains('/') {
        format!("{}/{rest}", base.trim_end_matches('/'))
    } else {
        // gitignore: a bare name matches at any depth.
        format!("**/{rest}")
    }
}

fn bash_argument(pattern: &str) -> Argument {
    let program = pattern
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches(":*")
        .to_string();
    let regex = if let Some(prefix) = pattern.strip_suffix(":*") {
        format!(r"^{}(?:\s.*)?$", regex::escape(prefix))
    } else if let Some(prefix) = pattern.strip_suffix(" *") {
        format!(r"^{}(?:\s.*)?$", wildcard(prefix))
    } else {
        format!("^{}$", wildcard(pattern))
    };
    let pattern = Regex::new(&regex).expect("escaped pattern is a valid regex");
    Argument::Bash { pattern, program }
}

fn wildcard(pattern: &str) -> String {
    pattern
        .split('*')
        .map(regex::escape)
        .collect::<Vec<_>>()
        .join(".*")
}

fn bash_matches(command: &str, pattern: &Regex, program: &str) -> bool {
    let Some(subcommands) = split_subcommands(command) else {
        return true; // unparseable: fail open, the hook runs
    };
    subcommands.iter().any(|sub| {
        let sub = strip_assignments(sub);
        if pattern.is_match(sub) {
            return true;
        }
        // The host cannot see what `$(...)`, backticks or `$VAR` expand to: when the
        // pattern's program is the one that runs, the hook runs.
        let dynamic = sub.contains("$(") || sub.contains('`') || sub.contains('$');
        dynamic && sub.split_whitespace().next() == Some(program)
    })
}

/// Leading `VAR=value` words are environment assignments, not the command.
fn strip_assignments(mut command: &str) -> &str {
    loop {
        command = command.trim_start();
        let word_end = command.find(char::is_whitespace).unwrap_or(command.len());
        let word = &command[..word_end];
        let is_assignment = word.find('=').is_some_and(|eq| {
            eq > 0
                && word[..eq]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !is_assignment || word_end == command.len() {
            return command.trim_end();
        }
        command = &command[word_end..];
    }
}

/// Splits a command line into its simple commands, including those inside `$( )` and
/// backticks, which are returned as commands of their own (and also stay in the text of
/// the command that contains them). `None` when quotes or parentheses do not balance.
fn split_subcommands(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    split_into(line, &mut out)?;
    Some(out)
}

fn split_into(line: &str, out: &mut Vec<String>) -> Option<()> {
    let chars: Vec<char> = line.chars().collect();
    let mut current = String::new();
    let mut i = 0;
    let mut quote: Option<char> = None;
    let flush = |current: &mut String, out: &mut Vec<String>| {
        let trimmed = current.trim();
        if !trimmed.is_empty() {
            out.push(trimmed.to_string());
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some('\'') => {
                current.push(c);
                if c == '\'' {
                    quote = None;
                }
                i += 1;
                continue;
            }
            Some(_) if c == '\\' && i + 1 < chars.len() => {
                current.push(c);
                current.push(chars[i + 1]);
                i += 2;
                continue;
            }
            Some('"') if c == '"' => {
                quote = None;
                current.push(c);
                i += 1;
                continue;
            }
            _ => {}
        }
        if c == '\\' && quote.is_none() && i + 1 < chars.len() {
            current.push(c);
            current.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if (c == '\'' || c == '"') && quote.is_none() {
            quote = Some(c);
            current.push(c);
            i += 1;
            continue;
        }
        // Command substitution works inside double quotes too.
        if c == '$' && chars.get(i + 1) == Some(&'(') {
            let end = matching_paren(&chars, i + 1)?;
            let inner: String = chars[i + 2..end].iter().collect();
            split_into(&inner, out)?;
            current.extend(&chars[i..=end]);
            i = end + 1;
            continue;
        }
        if c == '`' {
            let end = chars[i + 1..].iter().position(|&d| d == '`')? + i + 1;
            let inner: String = chars[i + 1..end].iter().collect();
            split_into(&inner, out)?;
            current.extend(&chars[i..=end]);
            i = end + 1;
            continue;
        }
        if quote.is_none() && matches!(c, ';' | '&' | '|' | '\n' | '(' | ')') {
            flush(&mut current, out);
            i += 1;
            continue;
        }
        current.push(c);
        i += 1;
    }
    if quote.is_some() {
        return None;
    }
    flush(&mut current, out);
    Some(())
}

fn matching_paren(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (offset, &c) in chars[open..].iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(rule: &str, command: &str) -> bool {
        IfRule::parse(rule).unwrap().matches(
            "Bash",
            &json!({ "command": command }),
            Path::new("/repo"),
            Path::new("/repo"),
        )
    }

    #[test]
    fn bash_rules() {
        let rows: &[(&str, &str, bool)] = &[
            ("Bash(git *)", "git push origin main", true),
            ("Bash(git *)", "git", true),
            ("Bash(git *)", "gitk", false),
            ("Bash(git push *)", "git status", false),
            ("Bash(git push *)", "cd repo && git push", true),
            ("Bash(git push *)", "make || git push -f", true),
            ("Bash(git push *)", "ls; git push", true),
            ("Bash(git push *)", "echo x | git push", true),
            ("Bash(git push *)", "echo $(git push now)", true),
            ("Bash(git push *)", "echo `git push now`", true),
            ("Bash(git push *)", "echo \"$(git push now)\"", true),
            ("Bash(git push *)", "GIT_DIR=x FOO=1 git push", true),
            ("Bash(git push *)", "echo 'git push && x'", false),
            ("Bash(rm -rf *)", "rm -rf /", true),
            ("Bash(rm -rf *)", "rm -r /", false),
            ("Bash(npm run test:*)", "npm run test --watch", true),
            ("Bash(npm run test:*)", "npm run build", false),
            ("Bash(npm test)", "npm test", true),
            ("Bash(npm test)", "npm test -- -u", false),
            // the host cannot see through substitutions or variables: the hook runs
            ("Bash(git push *)", "git $SUB", true),
            ("Bash(git push *)", "git $(echo push)", true),
            // unparseable: fail open
            ("Bash(git push *)", "echo 'unterminated", true),
            ("Bash", "anything at all", true),
        ];
        for &(rule, command, expected) in rows {
            assert_eq!(bash(rule, command), expected, "{rule} vs {command}");
        }
    }

    #[test]
    fn path_rules() {
        let rows: &[(&str, &str, &str, bool)] = &[
            ("Edit(*.ts)", "Edit", "/repo/src/a.ts", true),
            ("Edit(*.ts)", "Write", "/repo/a.ts", true),
            ("Edit(*.ts)", "MultiEdit", "/repo/a.ts", true),
            ("Edit(*.ts)", "Read", "/repo/a.ts", false),
            ("Edit(*.ts)", "Edit", "/repo/a.rs", false),
            ("Write(src/**)", "Write", "/repo/src/deep/a.rs", true),
            ("Write(src/**)", "Write", "/repo/lib/src/a.rs", false),
            ("Write(**/src/**)", "Write", "/repo/lib/src/a.rs", true),
            ("Read(.env)", "Read", "/repo/config/.env", true),
            ("Read(//etc/**)", "Read", "/etc/passwd", true),
            ("Read(/secrets/*)", "Read", "/repo/secrets/k", true),
            ("Read(./src/*.rs)", "Read", "src/main.rs", true),
        ];
        for &(rule, tool, path, expected) in rows {
            let r = IfRule::parse(rule).unwrap();
            let got = r.matches(
                tool,
                &json!({ "file_path": path }),
                Path::new("/repo"),
                Path::new("/repo"),
            );
            assert_eq!(got, expected, "{rule} vs {tool} {path}");
        }
    }

    #[test]
    fn tool_name_rules() {
        let input = json!({});
        let cwd = Path::new("/");
        assert!(
            IfRule::parse("WebFetch")
                .unwrap()
                .matches("WebFetch", &input, cwd, cwd)
        );
        assert!(
            !IfRule::parse("WebFetch")
                .unwrap()
                .matches("Bash", &input, cwd, cwd)
        );
        assert!(IfRule::parse("mcp__memory").unwrap().matches(
            "mcp__memory__create",
            &input,
            cwd,
            cwd
        ));
        assert!(!IfRule::parse("mcp__memory").unwrap().matches(
            "mcp__memoryx__create",
            &input,
            cwd,
            cwd
        ));
        assert!(
            IfRule::parse("mcp__*")
                .unwrap()
                .matches("mcp__a__b", &input, cwd, cwd)
        );
        let fetch = IfRule::parse("WebFetch(https://example.com/*)").unwrap();
        assert!(fetch.matches(
            "WebFetch",
            &json!({"url": "https://example.com/x"}),
            cwd,
            cwd
        ));
        assert!(!fetch.matches("WebFetch", &json!({"url": "https://evil.com/x"}), cwd, cwd));
    }

    #[test]
    fn invalid_rules_are_rejected() {
        for rule in ["Bash(git", "Ba sh", "", "Edit([)"] {
            assert!(IfRule::parse(rule).is_err(), "{rule}");
        }
    }
}
