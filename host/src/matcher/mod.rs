//! Stage 3 of the pipeline: which configured handlers apply to one event.
//!
//! Matchers and `if` rules are checked once, while the policy resolves; at dispatch time
//! this stage only tests them (a regex or glob compiled then, through a bounded cache).
//! Claude Code's rules (hooks reference §1.4):
//!
//! - `*`, empty or absent: everything;
//! - only letters, digits, `_`, `-`, spaces, `,` and `|`: an exact name, or a list of
//!   exact names separated by `|` or `,` (whitespace around them ignored); FileChanged and
//!   StopFailure use the narrower set of letters, digits, `_` and `|`;
//! - anything else: an unanchored regex;
//! - always case-sensitive; ignored on events that have no matcher field.
//!
//! A matcher is at most [`MAX_MATCHER_BYTES`] long, and a regex matcher compiles under a size
//! limit: a larger one is a config error naming the pattern, never a panic.

mod compiled_cache;
mod if_rule;
mod lazy_regex;
pub mod shell;

pub use if_rule::{IfRule, MAX_RULE_BYTES, MAX_WILDCARDS};
pub use lazy_regex::{CACHED_REGEXES, LazyRegex};
use serde_json::Value;

use crate::event::{EventSpec, MatcherSyntax};

/// The longest matcher accepted (longer is a config error).
pub const MAX_MATCHER_BYTES: usize = 4096;

/// A compiled matcher.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// Matches every subject.
    All,
    /// Matches one of these names exactly.
    Exact(Vec<String>),
    /// Matches when the regex finds a match anywhere in the subject (compiled when an
    /// event reaches it, [`LazyRegex`]).
    Regex(LazyRegex),
}

impl Matcher {
    /// Compiles a matcher as written in config.
    ///
    /// # Errors
    ///
    /// An invalid regex, with the pattern quoted.
    pub fn parse(pattern: Option<&str>, syntax: MatcherSyntax) -> Result<Matcher, String> {
        let pattern = match pattern {
            None => return Ok(Matcher::All),
            Some(p) if p.is_empty() || p == "*" => return Ok(Matcher::All),
            Some(p) => p,
        };
        if pattern.len() > MAX_MATCHER_BYTES {
            return Err(format!(
                "matcher `{}` is longer than {MAX_MATCHER_BYTES} bytes",
                shell::clip(pattern)
            ));
        }
        let exact_char = |c: char| match syntax {
            MatcherSyntax::Standard => c.is_ascii_alphanumeric() || "_- ,|".contains(c),
            MatcherSyntax::Narrow => c.is_ascii_alphanumeric() || "_|".contains(c),
        };
        if pattern.chars().all(exact_char) {
            let names = pattern
                .split(['|', ','])
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(String::from)
                .collect();
            return Ok(Matcher::Exact(names));
        }
        LazyRegex::new(pattern)
            .map(Matcher::Regex)
            .map_err(|e| format!("invalid matcher regex `{}`: {e}", shell::clip(pattern)))
    }

    /// Whether the matcher accepts `subject` (`None` when the input lacks the field).
    pub fn is_match(&self, subject: Option<&str>) -> bool {
        match (self, subject) {
            (Matcher::All, _) => true,
            (_, None) => false,
            (Matcher::Exact(names), Some(s)) => names.iter().any(|n| n == s),
            (Matcher::Regex(re), Some(s)) => re.is_match(s),
        }
    }
}

/// The subject an event's matcher tests, taken from the input JSON.
pub fn subject<'a>(spec: &EventSpec, input: &'a Value) -> Option<&'a str> {
    let field = spec.matcher_field.as_deref()?;
    let value = input.get(field)?.as_str()?;
    if spec.matcher_tests_basename {
        return Some(value.rsplit(['/', '\\']).next().unwrap_or(value));
    }
    Some(value)
}

/// Whether a group's matcher applies to this event: always when the event has no matcher
/// field (the matcher is ignored there).
pub fn group_applies(matcher: &Matcher, spec: &EventSpec, input: &Value) -> bool {
    spec.matcher_field.is_none() || matcher.is_match(subject(spec, input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventCatalogue;
    use serde_json::json;

    #[test]
    fn matcher_table() {
        use MatcherSyntax::{Narrow, Standard};
        // (pattern, syntax, subject, expected)
        let rows: &[(Option<&str>, MatcherSyntax, Option<&str>, bool)] = &[
            (None, Standard, Some("Bash"), true),
            (Some(""), Standard, Some("Bash"), true),
            (Some("*"), Standard, Some("Bash"), true),
            (Some("*"), Standard, None, true),
            (Some("Bash"), Standard, Some("Bash"), true),
            (Some("Bash"), Standard, Some("bash"), false),
            (Some("Bash"), Standard, None, false),
            (Some("Writ"), Standard, Some("Write"), false),
            (Some("rit"), Standard, Some("Write"), false),
            (Some("rit."), Standard, Some("Write"), true),
            (Some("W(rit)e"), Standard, Some("Write"), true),
            (Some("Edit|Write"), Standard, Some("Write"), true),
            (Some("Edit, Write"), Standard, Some("Write"), true),
            (Some("Edit ,Write"), Standard, Some("Edit"), true),
            (Some("Edit,Write"), Standard, Some("MultiEdit"), false),
            (Some("Edit.*"), Standard, Some("NotebookEdit"), true),
            (Some("^Edit$"), Standard, Some("NotebookEdit"), false),
            (
                Some("code-reviewer"),
                Standard,
                Some("senior-code-reviewer"),
                false,
            ),
            (Some("code-reviewer"), Standard, Some("code-reviewer"), true),
            (
                Some("mcp__memory"),
                Standard,
                Some("mcp__memory__create"),
                false,
            ),
            (
                Some("mcp__memory__.*"),
                Standard,
                Some("mcp__memory__create"),
                true,
            ),
            (
                Some("my-plugin:reviewer"),
                Standard,
                Some("my-plugin:reviewer"),
                true,
            ),
            (Some(".envrc|.env"), Narrow, Some(".env"), true),
            (
                Some("rate_limit|overloaded"),
                Narrow,
                Some("overloaded"),
                true,
            ),
            (Some("rate-limit"), Narrow, Some("rate_limit"), false),
        ];
        for &(pattern, syntax, subject, expected) in rows {
            let m = Matcher::parse(pattern, syntax).unwrap();
            assert_eq!(m.is_match(subject), expected, "{pattern:?} vs {subject:?}");
        }
    }

    #[test]
    fn narrow_syntax_treats_hyphen_as_regex() {
        assert!(matches!(
            Matcher::parse(Some("a-b"), MatcherSyntax::Narrow),
            Ok(Matcher::Regex(_))
        ));
        assert!(matches!(
            Matcher::parse(Some("a-b"), MatcherSyntax::Standard),
            Ok(Matcher::Exact(_))
        ));
    }

    #[test]
    fn invalid_regex_quotes_the_pattern() {
        let e = Matcher::parse(Some("Bash("), MatcherSyntax::Standard).unwrap_err();
        assert!(e.contains("`Bash(`"), "{e}");
    }

    #[test]
    fn matcher_is_ignored_on_events_without_a_matcher_field() {
        let c = EventCatalogue::default();
        let m = Matcher::parse(Some("Nothing"), MatcherSyntax::Standard).unwrap();
        assert!(group_applies(&m, c.get("Stop").unwrap(), &json!({})));
        assert!(!group_applies(
            &m,
            c.get("PreToolUse").unwrap(),
            &json!({"tool_name": "Bash"})
        ));
    }

    #[test]
    fn file_changed_matches_the_basename() {
        let c = EventCatalogue::default();
        let spec = c.get("FileChanged").unwrap();
        // `.` is outside the narrow exact set: this is an unanchored regex, as in Claude Code.
        let m = Matcher::parse(Some(".envrc|.env"), MatcherSyntax::Narrow).unwrap();
        assert!(group_applies(&m, spec, &json!({"file_path": "/repo/.env"})));
        assert!(group_applies(
            &m,
            spec,
            &json!({"file_path": "/repo/.env.local"})
        ));
        let anchored = Matcher::parse(Some(r"^\.env$"), MatcherSyntax::Narrow).unwrap();
        assert!(group_applies(
            &anchored,
            spec,
            &json!({"file_path": "/repo/.env"})
        ));
        assert!(!group_applies(
            &anchored,
            spec,
            &json!({"file_path": "/repo/.env.local"})
        ));
        assert!(!group_applies(
            &anchored,
            spec,
            &json!({"file_path": "/repo/x.env/file"})
        ));
        let exact = Matcher::parse(Some("Makefile|Cargo_lock"), MatcherSyntax::Narrow).unwrap();
        assert!(group_applies(
            &exact,
            spec,
            &json!({"file_path": "/repo/Makefile"})
        ));
        assert!(!group_applies(
            &exact,
            spec,
            &json!({"file_path": "/repo/GNUMakefile"})
        ));
    }

    /// A regex matcher is compiled when an event reaches it, into a bounded cache: more
    /// distinct matchers than the cache holds still answer, and the cache stays bounded.
    #[test]
    fn regex_matchers_compile_into_a_bounded_cache() {
        let matchers: Vec<Matcher> = (0..CACHED_REGEXES * 2)
            .map(|i| Matcher::parse(Some(&format!("^Tool{i}x.*")), MatcherSyntax::Standard))
            .collect::<Result<_, _>>()
            .unwrap();
        for round in 0..2 {
            for (i, m) in matchers.iter().enumerate() {
                assert!(m.is_match(Some(&format!("Tool{i}xyz"))), "{round} {i}");
                assert!(!m.is_match(Some(&format!("Tool{i}y"))), "{round} {i}");
                assert!(LazyRegex::cached() <= CACHED_REGEXES);
            }
        }
    }
}
