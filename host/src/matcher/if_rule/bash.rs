//! `Bash(pattern)`: a pattern compiled into regexes for the candidates and literals of the
//! shell analysis, and the per-thread cache of the last command's analysis.

use std::cell::RefCell;
use std::rc::Rc;

use regex::{Regex, RegexBuilder};

use super::REGEX_SIZE_LIMIT;
use crate::matcher::shell::{self, Analysis};

/// A `Bash(...)` pattern, compiled for the candidates of [`shell::analyze`].
#[derive(Debug, Clone)]
pub(super) struct BashPattern {
    /// The whole pattern, against a candidate's words as written.
    full: Regex,
    /// The pattern with its program replaced by the program's file name, against a
    /// candidate whose program is also its file name.
    base: Regex,
    /// The pattern's program alone (file name), against a candidate's program.
    program: Regex,
    /// The pattern anywhere in a quoted text, between word boundaries.
    literal: Regex,
}

impl BashPattern {
    pub(super) fn parse(pattern: &str) -> Result<BashPattern, String> {
        let (body, open_end) = if let Some(prefix) = pattern.strip_suffix(":*") {
            (prefix, true)
        } else if let Some(prefix) = pattern.strip_suffix(" *") {
            (prefix, true)
        } else {
            (pattern, false)
        };
        let mut words = body.split_whitespace();
        let program = words.next().unwrap_or("");
        let program_base = program.rsplit('/').next().unwrap_or(program);
        let rest: String = words.map(|w| format!(r"\s+{}", wildcard(w))).collect();
        let tail = if open_end { r"(?:\s.*)?" } else { "" };
        let anchored = |program: &str| format!(r"(?s)^(?i:{}){rest}{tail}$", wildcard(program));
        // Quoted text: the pattern between non-word characters (a `/` may precede the
        // program: `/usr/bin/git`).
        let literal = format!(
            r"(?s)(?:^|[^\w.-])(?i:{}){rest}(?:[^\w.-]|$)",
            wildcard(program_base)
        );
        Ok(BashPattern {
            full: compile_regex(&anchored(program))?,
            base: compile_regex(&anchored(program_base))?,
            program: compile_regex(&format!(r"(?s)^(?i:{})$", wildcard(program_base)))?,
            literal: compile_regex(&literal)?,
        })
    }

    pub(super) fn matches(&self, analysis: &Analysis) -> bool {
        if analysis.unknown.is_some() {
            return true;
        }
        analysis.commands.iter().any(|c| {
            self.full.is_match(&c.text)
                || self.base.is_match(&c.base_text)
                || (c.dynamic && self.program.is_match(&c.program))
        }) || analysis.literals.iter().any(|l| self.literal.is_match(l))
    }
}

/// A regex from config, under a size limit (a pattern too large is an error, never a panic).
pub(crate) fn compile_regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => {
                format!("the pattern compiles to more than {limit} bytes")
            }
            other => other.to_string(),
        })
}

/// `*` matches any run of characters (a run of `*` is one); whitespace matches any run of
/// whitespace; everything else matches itself.
pub(super) fn wildcard(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut chars = pattern.chars().peekable();
    let mut buf = [0u8; 4];
    while let Some(c) = chars.next() {
        if c == '*' {
            while chars.peek() == Some(&'*') {
                chars.next();
            }
            out.push_str(".*");
        } else if c.is_whitespace() {
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            out.push_str(r"\s+");
        } else {
            out.push_str(&regex::escape(c.encode_utf8(&mut buf)));
        }
    }
    out
}

thread_local! {
    /// The analysis of the last command seen on this thread: every `Bash(...)` rule of one
    /// event tests the same command, which is parsed once.
    static LAST_ANALYSIS: RefCell<Option<(String, Rc<Analysis>)>> = const { RefCell::new(None) };
}

pub(super) fn analysis(command: &str) -> Rc<Analysis> {
    LAST_ANALYSIS.with(|cell| {
        if let Some((last, analysis)) = &*cell.borrow()
            && last == command
        {
            return analysis.clone();
        }
        let analysis = Rc::new(shell::analyze(command));
        *cell.borrow_mut() = Some((command.to_string(), analysis.clone()));
        analysis
    })
}
