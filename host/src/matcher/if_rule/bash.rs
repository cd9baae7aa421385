//! `Bash(pattern)`: a pattern compiled into regexes for the candidates and literals of the
//! shell analysis, and the per-thread cache of the last command's analysis.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::OnceLock;

use regex::{Regex, RegexBuilder};

use super::REGEX_SIZE_LIMIT;
use super::words::{Builder, Frame, WordGlob};
use crate::matcher::shell::{self, Analysis};

/// A `Bash(...)` pattern, compiled for the candidates of [`shell::analyze`].
///
/// What it costs: a compiled regex holds 10–20 KB however short its pattern, which made
/// 5,000 rules cost hundreds of megabytes. So a rule keeps each pattern as text and as a
/// [`WordGlob`] (a byte or two per byte of the rule) that answers on ASCII text without
/// a regex; a regex is compiled only for text beyond ASCII (or longer than the glob's
/// budget), the first time such a candidate gets past the plain-text test of its program
/// (the program's name, ASCII case aside, at the start of the candidate or in the quoted
/// text).
#[derive(Debug)]
pub(super) struct BashPattern {
    /// The whole pattern, against a candidate's words as written.
    full: Twin,
    /// The pattern with its program replaced by the program's file name, against a
    /// candidate whose program is also its file name (`None`: `full`, the pattern's
    /// program being a bare name).
    base: Option<Twin>,
    /// The pattern's program alone (file name), against a candidate's program.
    program: Twin,
    /// The pattern anywhere in a quoted text, between word boundaries.
    literal: Twin,
}

/// One pattern: a [`WordGlob`] for ASCII text (when the pattern is ASCII), else a regex
/// compiled when first needed, in ASCII mode for ASCII text (beyond the glob's budget)
/// and in Unicode mode for any other text; an ASCII pattern keeps no regex text, made
/// again from the glob ([`WordGlob::regex`]) when needed. A regex that fails to compile
/// then counts as a match (the filter never hides a command from a hook); a pattern
/// beyond ASCII is compiled when the rule is read, to report a bad one.
#[derive(Debug)]
pub(super) struct Twin {
    form: Form,
    lazy: OnceLock<Box<Lazy>>,
    /// The regex text as the rule built it, for the tests comparing glob and regex.
    #[cfg(test)]
    pattern: String,
}

#[derive(Debug)]
enum Form {
    Glob(WordGlob),
    Regex(Box<str>),
}

/// The regexes of a twin, compiled when first needed.
#[derive(Debug, Default)]
struct Lazy {
    ascii: OnceLock<Option<regex::bytes::Regex>>,
    unicode: OnceLock<Option<Regex>>,
}

impl Twin {
    /// The pattern as its glob, or as regex text beyond ASCII (compiled once to report a
    /// bad one, and let go).
    fn checked(pattern: String, glob: Option<WordGlob>) -> Result<Twin, String> {
        let form = match glob {
            Some(glob) => Form::Glob(glob),
            None => {
                compile_regex(&pattern)?;
                Form::Regex(pattern.clone().into_boxed_str())
            }
        };
        #[cfg(not(test))]
        drop(pattern);
        Ok(Twin {
            form,
            lazy: OnceLock::new(),
            #[cfg(test)]
            pattern,
        })
    }

    pub(super) fn is_match(&self, text: &str) -> bool {
        if text.is_ascii()
            && let Form::Glob(glob) = &self.form
        {
            // The program's name, ASCII case aside, first.
            if !glob.may_match(text.as_bytes()) {
                return false;
            }
            if let Some(answer) = glob.is_match(text.as_bytes()) {
                return answer;
            }
        }
        let lazy = self.lazy.get_or_init(Box::default);
        match &self.form {
            Form::Glob(glob) if text.is_ascii() => lazy
                .ascii
                .get_or_init(|| compile_ascii(&glob.regex()).ok())
                .as_ref()
                .is_none_or(|regex| regex.is_match(text.as_bytes())),
            form => lazy
                .unicode
                .get_or_init(|| {
                    let pattern = match form {
                        Form::Glob(glob) => glob.regex(),
                        Form::Regex(pattern) => pattern.to_string(),
                    };
                    compile_regex(&pattern).ok()
                })
                .as_ref()
                .is_none_or(|regex| regex.is_match(text)),
        }
    }
}

#[cfg(test)]
impl Twin {
    pub(super) fn glob(&self) -> Option<&WordGlob> {
        match &self.form {
            Form::Glob(glob) => Some(glob),
            Form::Regex(_) => None,
        }
    }

    pub(super) fn pattern(&self) -> &str {
        &self.pattern
    }
}

/// Every pattern of a rule, for tests.
#[cfg(test)]
pub(super) fn twins(p: &BashPattern) -> Vec<&Twin> {
    let mut twins = vec![&p.full, &p.program, &p.literal];
    twins.extend(p.base.as_ref());
    twins
}

/// An ASCII pattern compiled without Unicode: `\s`, `.` and case folding of ASCII, which
/// on ASCII text match exactly what the Unicode regex matches.
fn compile_ascii(pattern: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::RegexBuilder::new(pattern)
        .unicode(false)
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

impl BashPattern {
    pub(super) fn parse(pattern: &str) -> Result<BashPattern, String> {
        let (body, open_end) = if let Some(prefix) = pattern.strip_suffix(":*") {
            (prefix, true)
        } else if let Some(prefix) = pattern.strip_suffix(" *") {
            (prefix, true)
        } else {
            (pattern, false)
        };
        let words: Vec<&str> = body.split_whitespace().collect();
        let program = words.first().copied().unwrap_or("");
        let words = words.get(1..).unwrap_or_default();
        let program_base = program.rsplit('/').next().unwrap_or(program);
        let rest: String = words
            .iter()
            .map(|w| format!(r"\s+{}", wildcard(w)))
            .collect();
        let tail = if open_end { r"(?:\s.*)?" } else { "" };
        let anchored = |program: &str| format!(r"(?s)^(?i:{}){rest}{tail}$", wildcard(program));
        // The same pieces as a glob, for ASCII text.
        let glob = |program: &str, rest: bool, frame: Frame| {
            let mut glob = Builder::default().wildcard(program, true)?;
            for word in words.iter().filter(|_| rest) {
                glob.space();
                glob = glob.wildcard(word, false)?;
            }
            Some(glob.build(frame))
        };
        let whole = Frame::Whole { tail: open_end };
        // Quoted text: the pattern between non-word characters (a `/` may precede the
        // program: `/usr/bin/git`). Word characters are ASCII's: Unicode's `\w` made each
        // rule's automaton a hundred times larger (120 KB), and a non-ASCII letter taken
        // as a boundary only makes the hook run more often.
        let literal = format!(
            r"(?s)(?:^|[^0-9A-Za-z_.-])(?i:{}){rest}(?:[^0-9A-Za-z_.-]|$)",
            wildcard(program_base)
        );
        Ok(BashPattern {
            full: Twin::checked(anchored(program), glob(program, true, whole))?,
            base: (program_base != program)
                .then(|| Twin::checked(anchored(program_base), glob(program_base, true, whole)))
                .transpose()?,
            program: Twin::checked(
                format!(r"(?s)^(?i:{})$", wildcard(program_base)),
                glob(program_base, false, Frame::Whole { tail: false }),
            )?,
            literal: Twin::checked(literal, glob(program_base, true, Frame::Quoted))?,
        })
    }

    pub(super) fn matches(&self, analysis: &Analysis) -> bool {
        if analysis.unknown.is_some() {
            return true;
        }
        let base = self.base.as_ref().unwrap_or(&self.full);
        analysis.commands.iter().any(|c| {
            self.full.is_match(&c.text)
                || base.is_match(&c.base_text)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// On ASCII text, the ASCII-mode regex answers as the Unicode one, for every shape
    /// of pattern a rule builds (anchored, open-ended, program alone, quoted text) and
    /// texts around each ASCII byte.
    #[test]
    fn ascii_mode_answers_as_unicode_on_ascii_text() {
        let patterns = ["git push *", "rm -rf", "/usr/bin/KILL -9:*", "s*d x", "ls"];
        let mut texts: Vec<String> = Vec::new();
        for b in 0..0x80u8 {
            let c = b as char;
            for text in ["git push x", "rm -rf /", "kill -9 1", "sed x", "ls"] {
                texts.push(format!("{text}{c}"));
                texts.push(format!("{c}{text}"));
                texts.push(text.replacen(' ', &c.to_string(), 1));
            }
        }
        for pattern in patterns {
            let p = BashPattern::parse(pattern).unwrap();
            let base = p.base.as_ref().unwrap_or(&p.full);
            for twin in [&p.full, base, &p.program, &p.literal] {
                let unicode = compile_regex(&twin.pattern).unwrap();
                for text in &texts {
                    assert_eq!(
                        twin.is_match(text),
                        unicode.is_match(text),
                        "{:?} on {text:?}",
                        twin.pattern
                    );
                }
            }
        }
    }

    /// A rule keeps no compiled regex for ASCII text (its glob answers), and compiles
    /// its Unicode regex only when text beyond ASCII gets past the program's name.
    #[test]
    fn regexes_are_compiled_only_for_text_beyond_ascii() {
        let p = BashPattern::parse("git push origin *").unwrap();
        assert!(!p.full.is_match("ls -la"));
        assert!(p.full.is_match("GIT push origin main"));
        assert!(!p.full.is_match("git push"));
        assert!(p.full.lazy.get().is_none(), "compiled for ASCII text");
        assert!(p.full.is_match("git push origin m\u{e4}in"));
        let lazy = p.full.lazy.get().unwrap();
        assert!(lazy.unicode.get().is_some() && lazy.ascii.get().is_none());
        // Text beyond ASCII takes the Unicode regex (`\u{212a}` folds to `k`).
        let k = BashPattern::parse("kill *").unwrap();
        assert!(k.full.is_match("\u{212a}ill -9 1"));
    }
}
