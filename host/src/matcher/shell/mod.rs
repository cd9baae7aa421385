//! What a shell command line may run, for the `if` filter's `Bash(...)` rules.
//!
//! The line is parsed with `brush-parser` (the bash parser of the brush shell), then walked:
//! every simple command anywhere in it (lists, pipelines, groups, subshells, `if`/`while`/
//! `for`/`case` bodies, functions, `$( )`, backticks, `<( )`, here-documents), after quote
//! removal, becomes a [`Candidate`]. The walk looks through the shell's own ways of running a
//! string or another command: `sh -c` (and every other shell's `-c`), `eval`, `trap`, and
//! runners: after any program not known to leave its arguments alone (`sudo`, `env`,
//! `xargs`, `uv run`, `npm exec`, `docker exec`, a program the filter has never heard of),
//! every later word may be the command. Only the programs of a short list
//! (`programs::LEAVE_ARGUMENTS_ALONE`: `echo`, `ls`, `grep` …) keep their words out. Whatever it cannot be sure about makes the analysis *unknown*, and an unknown
//! line runs the hook: the filter may only skip a hook when it is sure the pattern's command is
//! not in the line.
//!
//! Quoted text that looks like code (whitespace or shell punctuation) is kept as a
//! *literal* and also parsed as a script of its own, because a shell or program may run it
//! later (`trap`, `alias`, `ssh host '…'`, bash's arithmetic on variable values): a pattern
//! found in it runs the hook too.
//!
//! Bounds (each makes the line unknown, so the hook runs): [`MAX_COMMAND_BYTES`] of input,
//! [`MAX_DEPTH`] levels of strings and substitutions inside each other, [`MAX_NESTING`]
//! levels of compound commands in one script (`parse.rs`, where every call into the parser
//! and its guards are), [`MAX_OPENERS`]
//! tokens that may nest (brackets, braces, backticks, `!`, `&`, `|` and compound keywords) in
//! one script, a total parse budget, and what the analysis keeps (`MAX_ITEMS` commands and
//! strings, `MAX_KEPT_BYTES` of their text). The parser recurses; it runs on a stack grown to the
//! input's count of such tokens (`stacker`), so no input can overflow the caller's stack.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;

/// Commands longer than this are not parsed: the hook runs.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Strings and substitutions nested deeper than this (`$( $( … ) )`, `sh -c "eval '…'"`)
/// are not followed: the hook runs.
pub const MAX_DEPTH: usize = 64;

/// Tokens that may nest, in one script, above which it is not parsed: the hook runs.
pub const MAX_OPENERS: usize = 2048;

/// Tokens that may nest times the bytes of the script, above which it is not parsed: the
/// word parser tries an array index (`a[…`) at each `[` and reads to the end of the word for
/// its `]`, so 2,000 `a[` padded to 64 KB took 2.4 s; at this bound, about 0.15 s.
const MAX_OPENER_BYTES: usize = 8 << 20;

/// Bytes parsed in all (the line, then strings and substitutions in it) before giving up.
const PARSE_BUDGET: usize = 4 * MAX_COMMAND_BYTES;

/// Nesting tokens parsed in all before giving up (decoded strings can add new ones).
const OPENER_BUDGET: usize = 2 * MAX_OPENERS;

/// Stack reserved per nesting token, and in all, for a parse and the walk of its tree.
/// brush-parser uses about 4 KiB per nested compound command; the walk adds a few frames.
const STACK_PER_OPENER: usize = 24 * 1024;
const STACK_BASE: usize = 256 * 1024;

/// Command starts considered in one simple command (after a program that may run its
/// arguments); more makes the line unknown.
const MAX_STARTS: usize = 64;

/// Candidates and literals kept in all.
const MAX_ITEMS: usize = 8192;

/// Bytes of candidates and literals kept in all: a runner's every later word may start the
/// command, and each start keeps the rest of the line (twice), so a count alone let one
/// 50 KB line keep 290 MB.
const MAX_KEPT_BYTES: usize = 4 * 1024 * 1024;

/// One simple command that may run, after quote removal.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The words joined by single spaces (an expansion shows as U+0000).
    pub text: String,
    /// The same with the program word replaced by its file name.
    pub base_text: String,
    /// The program's file name (`/usr/bin/git` → `git`), lowercased.
    pub program: String,
    /// Whether some argument is known only when the command runs (`$VAR`, `$( )`, a glob,
    /// arguments that `xargs` or `find -exec` add).
    pub dynamic: bool,
}

/// The result of analysing one command line.
#[derive(Debug, Default, Clone)]
pub struct Analysis {
    /// Why the line cannot be understood, if it cannot: the hook must run.
    pub unknown: Option<String>,
    /// Every simple command that may run.
    pub commands: Vec<Candidate>,
    /// Quoted text that looks like code (a pattern found in it runs the hook).
    pub literals: Vec<String>,
}

/// Analyses a command line.
pub fn analyze(command: &str) -> Analysis {
    let mut analyzer = Analyzer::default();
    if command.len() > MAX_COMMAND_BYTES {
        analyzer.fail(
            true,
            format!(
                "the command is {} bytes long; commands over {MAX_COMMAND_BYTES} bytes are not parsed",
                command.len()
            ),
        );
    } else {
        analyzer.script(command, 0, true);
    }
    analyzer.out
}

mod parse;
pub use parse::{MAX_NESTING, MAX_TOKENS};
mod programs;
mod walk;
mod words;

/// The programs known to leave their arguments alone, for the `if` rule's tests.
#[cfg(test)]
pub(crate) use programs::{LEAVE_ARGUMENTS_ALONE, NAMING_BUILTINS};

/// Substrings that may open a nested construct; their count sizes the parser's stack.
static OPENERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::new([
        "(", "{", "[", "`", "!", "&", "|", "if", "while", "until", "for", "case", "select",
        "function", "do", "coproc",
    ])
    .expect("static patterns")
});

fn count_openers(text: &str) -> usize {
    OPENERS.find_iter(text).count()
}

/// A word's value: known before the command runs, or not.
#[derive(Debug, Clone)]
enum Value {
    Static(String),
    /// Known only at run time; `prefix` is the static text before the first expansion.
    Dynamic {
        prefix: String,
    },
}

impl Value {
    fn as_static(&self) -> Option<&str> {
        match self {
            Value::Static(s) => Some(s),
            Value::Dynamic { .. } => None,
        }
    }

    fn prefix(&self) -> &str {
        match self {
            Value::Static(s) => s,
            Value::Dynamic { prefix } => prefix,
        }
    }
}

#[derive(Default)]
struct Analyzer {
    out: Analysis,
    parsed_bytes: usize,
    parsed_openers: usize,
    kept_bytes: usize,
}

impl Analyzer {
    fn done(&self) -> bool {
        self.out.unknown.is_some()
    }

    /// Records why the line cannot be understood. Outside the sound walk (code-like
    /// literals, which only add matches) a doubt changes nothing.
    fn fail(&mut self, sound: bool, why: String) {
        if sound && self.out.unknown.is_none() {
            self.out.unknown = Some(why);
        }
    }

    /// Whether one more candidate or literal may be kept (the count and the bytes kept so
    /// far); if not, the line is unknown.
    fn room(&mut self) -> bool {
        if self.out.commands.len() + self.out.literals.len() >= MAX_ITEMS {
            self.fail(
                true,
                format!("the command holds more than {MAX_ITEMS} commands and strings"),
            );
            return false;
        }
        if self.kept_bytes > MAX_KEPT_BYTES {
            self.fail(
                true,
                format!("the commands and strings in it exceed {MAX_KEPT_BYTES} bytes"),
            );
            return false;
        }
        true
    }

    /// Keeps a candidate (after [`Self::room`]), counting its bytes.
    fn keep_command(&mut self, candidate: Candidate) {
        self.kept_bytes += candidate.text.len() + candidate.base_text.len();
        self.out.commands.push(candidate);
    }

    /// Keeps a literal (after [`Self::room`]), counting its bytes.
    fn keep_literal(&mut self, text: &str) {
        self.kept_bytes += text.len();
        self.out.literals.push(text.to_string());
    }

    /// Parses and walks one script (the line itself, or a string or substitution in it).
    fn script(&mut self, text: &str, depth: usize, sound: bool) {
        if self.done() {
            return;
        }
        if depth > MAX_DEPTH {
            self.fail(
                sound,
                format!("strings and substitutions are nested more than {MAX_DEPTH} levels deep"),
            );
            return;
        }
        self.parsed_bytes += text.len();
        if self.parsed_bytes > PARSE_BUDGET {
            // Literals count too: skipping one would make a skip less sure.
            self.fail(
                true,
                format!("the command and the strings in it exceed {PARSE_BUDGET} bytes"),
            );
            return;
        }
        let openers = count_openers(text);
        self.parsed_openers += openers;
        if openers > MAX_OPENERS || self.parsed_openers > OPENER_BUDGET {
            self.fail(
                true,
                format!(
                    "the command has more than {MAX_OPENERS} brackets, operators and keywords that may nest"
                ),
            );
            return;
        }
        if openers.saturating_mul(text.len()) > MAX_OPENER_BYTES {
            self.fail(
                true,
                format!(
                    "the command has {openers} brackets, operators and keywords that may nest in \
                     {} bytes (the parser's work grows with both; at most {MAX_OPENER_BYTES} \
                     for their product)",
                    text.len()
                ),
            );
            return;
        }
        let stack = STACK_BASE + openers * STACK_PER_OPENER;
        stacker::maybe_grow(stack, stack, || match parse::program(text) {
            Ok(program) => {
                for list in &program.complete_commands {
                    self.compound_list(list, depth, sound);
                }
            }
            Err(why) => self.fail(sound, why),
        });
    }
}

/// A pattern or text cut for a message.
pub(crate) fn clip(text: &str) -> String {
    const LIMIT: usize = 80;
    if text.len() <= LIMIT {
        return text.to_string();
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}
