//! What a shell command line may run, for the `if` filter's `Bash(...)` rules.
//!
//! The line is parsed with `brush-parser` (the bash parser of the brush shell), then walked:
//! every simple command anywhere in it (lists, pipelines, groups, subshells, `if`/`while`/
//! `for`/`case` bodies, functions, `$( )`, backticks, `<( )`, here-documents), after quote
//! removal, becomes a [`Candidate`]. The walk looks through the shell's own ways of running a
//! string or another command: `sh -c` (and every other shell's `-c`), `eval`, `trap`, and
//! wrappers (`sudo`, `env`, `xargs`, `nohup`, `timeout` …, after which every later word may be
//! the command). Whatever it cannot be sure about makes the analysis *unknown*, and an unknown
//! line runs the hook: the filter may only skip a hook when it is sure the pattern's command is
//! not in the line.
//!
//! Quoted text that looks like code (whitespace or shell punctuation) is kept as a
//! *literal* and also parsed as a script of its own, because a shell or program may run it
//! later (`trap`, `alias`, `ssh host '…'`, bash's arithmetic on variable values): a pattern
//! found in it runs the hook too.
//!
//! Bounds (each makes the line unknown, so the hook runs): [`MAX_COMMAND_BYTES`] of input,
//! [`MAX_DEPTH`] levels of strings and substitutions inside each other, [`MAX_OPENERS`]
//! tokens that may nest (brackets, braces, backticks, `!`, `&`, `|` and compound keywords) in
//! one script, and a total parse budget. The parser recurses; it runs on a stack grown to the
//! input's count of such tokens (`stacker`), so no input can overflow the caller's stack.

use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use brush_parser::ParserOptions;
use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};

/// Commands longer than this are not parsed: the hook runs.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;

/// Strings and substitutions nested deeper than this (`$( $( … ) )`, `sh -c "eval '…'"`)
/// are not followed: the hook runs.
pub const MAX_DEPTH: usize = 64;

/// Tokens that may nest, in one script, above which it is not parsed: the hook runs.
pub const MAX_OPENERS: usize = 2048;

/// Bytes parsed in all (the line, then strings and substitutions in it) before giving up.
const PARSE_BUDGET: usize = 4 * MAX_COMMAND_BYTES;

/// Nesting tokens parsed in all before giving up (decoded strings can add new ones).
const OPENER_BUDGET: usize = 2 * MAX_OPENERS;

/// Stack reserved per nesting token, and in all, for a parse and the walk of its tree.
/// brush-parser uses about 4 KiB per nested compound command; the walk adds a few frames.
const STACK_PER_OPENER: usize = 24 * 1024;
const STACK_BASE: usize = 256 * 1024;

/// Command starts considered after a wrapper in one simple command.
const MAX_STARTS: usize = 64;

/// Candidates and literals kept in all.
const MAX_ITEMS: usize = 8192;

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

/// Shells whose `-c` string is a script the walk follows; without `-c` they read commands
/// from stdin or a file, which the filter cannot see.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "lksh", "pdksh", "oksh", "ash", "yash",
    "posh", "rbash", "fish", "csh", "tcsh", "elvish", "nu", "xonsh", "ion", "rc", "es",
];

/// Programs that run the command given in their later words. After one, every later word
/// may be the command.
const WRAPPERS: &[&str] = &[
    // bash's `time` keyword takes `--` (`time -- cmd`, `time -p -- cmd`), which the parser
    // leaves as the command's first word.
    "--",
    "command",
    "builtin",
    "exec",
    "nohup",
    "time",
    "sudo",
    "doas",
    "run0",
    "pkexec",
    "su",
    "runuser",
    "sg",
    "env",
    "nice",
    "ionice",
    "renice",
    "timeout",
    "stdbuf",
    "setsid",
    "setpriv",
    "chrt",
    "taskset",
    "numactl",
    "cgexec",
    "unbuffer",
    "chronic",
    "strace",
    "ltrace",
    "xargs",
    "parallel",
    "find",
    "flock",
    "chroot",
    "unshare",
    "nsenter",
    "ip",
    "script",
    "watch",
    "busybox",
    "toybox",
    "fakeroot",
    "firejail",
    "bwrap",
    "systemd-run",
    "proot",
    "torsocks",
    "proxychains",
    "proxychains4",
    "catchsegv",
    "valgrind",
    "caffeinate",
    "coproc",
    "ssh",
    "rsh",
    "gdb",
    "perf",
    "entr",
    "retry",
    "with-contenv",
    "dbus-launch",
    "xvfb-run",
    "npx",
    "pnpx",
    "bunx",
    "uvx",
];

/// Wrappers that append arguments of their own to the command they run.
const APPENDING_WRAPPERS: &[&str] = &["xargs", "parallel", "find"];

/// Programs and builtins that run code the filter cannot see (files, aliases, callbacks):
/// the line is unknown.
const OPAQUE: &[&str] = &[
    "source", ".", "alias", "hash", "enable", "fc", "bind", "complete", "compgen", "let",
];

/// Interpreters and the options that give them code on the command line.
const INTERPRETERS: &[(&str, &[&str])] = &[
    ("python", &["c"]),
    ("pypy", &["c"]),
    ("perl", &["e", "E"]),
    ("ruby", &["e"]),
    ("node", &["e", "p", "-eval", "-print"]),
    ("nodejs", &["e", "p", "-eval", "-print"]),
    ("bun", &["e", "p", "-eval", "-print"]),
    ("deno", &["e", "-eval"]),
    ("php", &["r"]),
    ("lua", &["e"]),
    ("luajit", &["e"]),
    ("rscript", &["e"]),
    ("osascript", &["e"]),
    ("pwsh", &["c", "command", "encodedcommand", "ec"]),
    ("powershell", &["c", "command", "encodedcommand", "ec"]),
    ("tclsh", &[]),
    ("wish", &[]),
    ("expect", &["c"]),
    ("jshell", &[]),
    ("irb", &[]),
    ("groovy", &["e"]),
    ("julia", &["e", "E"]),
];

/// awk dialects: their program can run commands (`system()`, pipes).
const AWKS: &[&str] = &["awk", "gawk", "mawk", "nawk", "busybox-awk"];

/// Builtins whose arguments name variables; a name with a subscript (`a[$(cmd)]`) runs the
/// subscript as arithmetic, which runs command substitutions in the variable's value.
const NAMING_BUILTINS: &[&str] = &[
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "read",
    "unset",
    "mapfile",
    "readarray",
    "printf",
    "test",
    "[",
];

/// Variables whose value a shell later runs as code.
const CODE_VARIABLES: &[&str] = &[
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "ZDOTDIR",
];

/// Substrings that may open a nested construct; their count sizes the parser's stack.
static OPENERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::new([
        "(", "{", "[", "`", "!", "&", "|", "if", "while", "until", "for", "case", "select",
        "function", "do",
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
}

/// The parser's options: bash, with extglob (its `@( )` patterns parse as words).
fn parser_options() -> ParserOptions {
    ParserOptions::default()
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

    fn room(&mut self) -> bool {
        if self.out.commands.len() + self.out.literals.len() >= MAX_ITEMS {
            self.fail(
                true,
                format!("the command holds more than {MAX_ITEMS} commands and strings"),
            );
            return false;
        }
        true
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
        let stack = STACK_BASE + openers * STACK_PER_OPENER;
        stacker::maybe_grow(stack, stack, || {
            let mut parser = brush_parser::Parser::new(text.as_bytes(), &parser_options());
            match parser.parse_program() {
                Ok(program) => {
                    for list in &program.complete_commands {
                        self.compound_list(list, depth, sound);
                    }
                }
                Err(e) => self.fail(
                    sound,
                    format!(
                        "the shell parser does not accept it: {}",
                        clip(&e.to_string())
                    ),
                ),
            }
        });
    }

    fn compound_list(&mut self, list: &ast::CompoundList, depth: usize, sound: bool) {
        for ast::CompoundListItem(and_or, _) in &list.0 {
            self.pipeline(&and_or.first, depth, sound);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth, sound),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize, sound: bool) {
        for command in &pipeline.seq {
            if self.done() {
                return;
            }
            self.command(command, depth, sound);
        }
    }

    fn command(&mut self, command: &ast::Command, depth: usize, sound: bool) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth, sound),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth, sound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, depth, sound);
                    }
                }
            }
            ast::Command::Function(function) => {
                self.word(&function.fname.value, depth, sound);
                let ast::FunctionBody(body, redirects) = &function.body;
                self.compound(body, depth, sound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, depth, sound);
                    }
                }
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.extended_test(&test.expr, depth, sound);
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, depth, sound);
                    }
                }
            }
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize, sound: bool) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => self.arithmetic(&a.expr.value, sound),
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(&expr.value, sound);
                }
                self.compound_list(&f.body.list, depth, sound);
            }
            C::BraceGroup(g) => self.compound_list(&g.list, depth, sound),
            C::Subshell(s) => self.compound_list(&s.list, depth, sound),
            C::ForClause(f) => {
                for w in f.values.iter().flatten() {
                    self.word(&w.value, depth, sound);
                }
                self.compound_list(&f.body.list, depth, sound);
            }
            C::CaseClause(c) => {
                self.word(&c.value.value, depth, sound);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, depth, sound);
                    }
                    if let Some(list) = &item.cmd {
                        self.compound_list(list, depth, sound);
                    }
                }
            }
            C::IfClause(i) => {
                self.compound_list(&i.condition, depth, sound);
                self.compound_list(&i.then, depth, sound);
                for e in i.elses.iter().flatten() {
                    if let Some(condition) = &e.condition {
                        self.compound_list(condition, depth, sound);
                    }
                    self.compound_list(&e.body, depth, sound);
                }
            }
            C::Coprocess(c) => {
                if let Some(name) = &c.name {
                    self.word(&name.value, depth, sound);
                }
                self.command(&c.body, depth, sound);
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.compound_list(&w.0, depth, sound);
                self.compound_list(&w.1.list, depth, sound);
            }
        }
    }

    fn extended_test(&mut self, expr: &ast::ExtendedTestExpr, depth: usize, sound: bool) {
        use ast::{BinaryPredicate as B, ExtendedTestExpr as E, UnaryPredicate as U};
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, depth, sound);
                self.extended_test(b, depth, sound);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, depth, sound),
            E::UnaryTest(predicate, w) => {
                let value = self.word(&w.value, depth, sound);
                if matches!(
                    predicate,
                    U::ShellVariableIsSetAndAssigned | U::ShellVariableIsSetAndNameRef
                ) {
                    self.variable_name(&value, sound);
                }
            }
            E::BinaryTest(predicate, a, b) => {
                self.word(&a.value, depth, sound);
                self.word(&b.value, depth, sound);
                if matches!(
                    predicate,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                ) {
                    self.arithmetic(&a.value, sound);
                    self.arithmetic(&b.value, sound);
                }
            }
        }
    }

    /// bash evaluates a variable's value inside arithmetic as an expression, and array
    /// subscripts in it run command substitutions: arithmetic that reads any variable may
    /// run code the line does not show.
    fn arithmetic(&mut self, expr: &str, sound: bool) {
        if expr
            .chars()
            .any(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '`'))
        {
            self.fail(
                sound,
                format!(
                    "arithmetic `{}` reads variables, whose values bash may run as code",
                    clip(expr)
                ),
            );
        }
    }

    /// A variable name that a builtin will evaluate: a subscript or an expansion in it may
    /// run code.
    fn variable_name(&mut self, name: &Value, sound: bool) {
        match name {
            Value::Static(s) if !s.contains('[') => {}
            _ => self.fail(
                sound,
                "a variable name with a subscript or an expansion may run code".to_string(),
            ),
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect, depth: usize, sound: bool) {
        match redirect {
            ast::IoRedirect::File(_, _, target) => match target {
                ast::IoFileRedirectTarget::Filename(w)
                | ast::IoFileRedirectTarget::Duplicate(w) => {
                    self.word(&w.value, depth, sound);
                }
                ast::IoFileRedirectTarget::Fd(_) => {}
                ast::IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.compound_list(&sub.list, depth, sound);
                }
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    self.word_with(&doc.doc.value, depth, sound, true);
                } else {
                    self.literal(&doc.doc.value, depth);
                }
            }
            ast::IoRedirect::HereString(_, w) | ast::IoRedirect::OutputAndError(w, _) => {
                self.word(&w.value, depth, sound);
            }
        }
    }

    fn assignment(&mut self, assignment: &ast::Assignment, depth: usize, sound: bool) {
        match &assignment.name {
            ast::AssignmentName::VariableName(name) => {
                if CODE_VARIABLES.contains(&name.as_str()) || name.starts_with("BASH_FUNC_") {
                    self.fail(
                        sound,
                        format!("it sets `{name}`, whose value a shell runs as code"),
                    );
                }
            }
            ast::AssignmentName::ArrayElementName(_, index) => self.arithmetic(index, sound),
        }
        match &assignment.value {
            ast::AssignmentValue::Scalar(w) => {
                self.word(&w.value, depth, sound);
            }
            ast::AssignmentValue::Array(elements) => {
                for (key, value) in elements {
                    if let Some(key) = key {
                        self.word(&key.value, depth, sound);
                        self.arithmetic(&key.value, sound);
                    }
                    self.word(&value.value, depth, sound);
                }
            }
        }
    }

    fn simple(&mut self, command: &ast::SimpleCommand, depth: usize, sound: bool) {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut words = Vec::new();
        for item in command.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, depth, sound),
                Item::Word(w) => {
                    let value = self.word(&w.value, depth, sound);
                    words.push(value);
                }
                Item::AssignmentWord(a, _) => self.assignment(a, depth, sound),
                Item::ProcessSubstitution(_, sub) => {
                    self.compound_list(&sub.list, depth, sound);
                    words.push(Value::Dynamic {
                        prefix: String::new(),
                    });
                }
            }
        }
        if let Some(name) = &command.word_or_name {
            let value = self.word(&name.value, depth, sound);
            words.push(value);
        }
        for item in command.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, depth, sound),
                Item::Word(w) => {
                    let value = self.word(&w.value, depth, sound);
                    words.push(value);
                }
                Item::AssignmentWord(a, w) => {
                    self.assignment(a, depth, sound);
                    words.push(Self::word_value_only(&w.value));
                }
                Item::ProcessSubstitution(_, sub) => {
                    self.compound_list(&sub.list, depth, sound);
                    words.push(Value::Dynamic {
                        prefix: String::new(),
                    });
                }
            }
        }
        self.command_words(&words, depth, sound);
    }

    /// The candidates of one simple command: the command itself and, after a wrapper, every
    /// later word as a possible command.
    fn command_words(&mut self, words: &[Value], depth: usize, sound: bool) {
        let Some(first) = words.first() else {
            return;
        };
        let Some(first) = first.as_static() else {
            self.fail(
                sound,
                "the command's name comes from an expansion".to_string(),
            );
            return;
        };
        let wrapped = WRAPPERS.contains(&basename(first).as_str());
        let starts = if wrapped { words.len() } else { 1 };
        if starts > MAX_STARTS {
            self.fail(
                sound,
                format!("more than {MAX_STARTS} words follow `{}`", clip(first)),
            );
            return;
        }
        let mut appending = false;
        for start in 0..starts {
            if self.done() {
                return;
            }
            // `env A=1 cmd`: leading assignments are not the command.
            let mut at = start;
            if start > 0 {
                while words
                    .get(at)
                    .and_then(Value::as_static)
                    .is_some_and(is_assignment_word)
                {
                    at += 1;
                }
            }
            let Some(program) = words.get(at) else {
                continue;
            };
            let Some(program) = program.as_static() else {
                self.fail(
                    sound,
                    "a word that may be the command comes from an expansion".to_string(),
                );
                return;
            };
            let base = basename(program);
            let args = &words[at + 1..];
            self.program(&base, args, depth, sound);
            if !self.room() {
                return;
            }
            let mut rest = String::new();
            let mut dynamic = appending;
            for arg in args {
                rest.push(' ');
                match arg {
                    Value::Static(s) => rest.push_str(s),
                    Value::Dynamic { .. } => {
                        rest.push('\0');
                        dynamic = true;
                    }
                }
            }
            self.out.commands.push(Candidate {
                text: format!("{program}{rest}"),
                base_text: format!("{base}{rest}"),
                program: base.to_lowercase(),
                dynamic,
            });
            if APPENDING_WRAPPERS.contains(&base.as_str()) {
                appending = true;
            }
        }
    }

    /// What a program does with its arguments, when it runs code from them.
    fn program(&mut self, base: &str, args: &[Value], depth: usize, sound: bool) {
        let lower = base.to_lowercase();
        let name = lower.as_str();
        if SHELLS.contains(&name) {
            self.shell(name, args, depth, sound);
        } else if name == "eval" {
            let mut script = String::new();
            for arg in args {
                let Some(s) = arg.as_static() else {
                    self.fail(sound, "`eval` of an expansion".to_string());
                    return;
                };
                if !script.is_empty() {
                    script.push(' ');
                }
                script.push_str(s);
            }
            self.script(&script, depth + 1, sound);
        } else if name == "trap" {
            let operand = args
                .iter()
                .find(|a| !matches!(a.as_static(), Some("-p" | "-l" | "-P" | "--")));
            match operand {
                None => {}
                Some(Value::Static(s)) => self.script(s, depth + 1, sound),
                Some(Value::Dynamic { .. }) => {
                    self.fail(sound, "`trap` of an expansion".to_string());
                }
            }
        } else if OPAQUE.contains(&name) {
            self.fail(
                sound,
                format!("`{name}` runs commands the filter cannot see"),
            );
        } else if let Some(flags) = interpreter_flags(name) {
            self.interpreter(name, flags, args, sound);
        } else if AWKS.contains(&name) {
            self.awk(args, sound);
        } else if NAMING_BUILTINS.contains(&name) {
            self.naming_builtin(name, args, sound);
        }
    }

    /// `sh -c 'script'` is followed; a shell without `-c` reads commands the filter cannot
    /// see (stdin, a file).
    fn shell(&mut self, name: &str, args: &[Value], depth: usize, sound: bool) {
        let mut has_c = false;
        let mut i = 0;
        while i < args.len() {
            let Some(arg) = args[i].as_static() else {
                self.fail(
                    sound,
                    format!("`{name}` is given an option from an expansion"),
                );
                return;
            };
            if arg == "--" || arg == "-" {
                i += 1;
                break;
            }
            if let Some(long) = arg.strip_prefix("--") {
                if long == "command" {
                    has_c = true;
                } else if let Some(script) = long.strip_prefix("command=") {
                    self.script(script, depth + 1, sound);
                    return;
                } else if matches!(long, "rcfile" | "init-file") {
                    i += 1;
                }
                i += 1;
                continue;
            }
            let Some(cluster) = arg.strip_prefix('-').or_else(|| arg.strip_prefix('+')) else {
                break;
            };
            if cluster.is_empty() {
                break;
            }
            if arg.starts_with('-') && cluster.contains('c') {
                has_c = true;
            }
            // `-o pipefail`, `-O extglob`: the option takes the next word.
            if cluster.ends_with(['o', 'O']) {
                i += 1;
            }
            i += 1;
        }
        if !has_c {
            self.fail(
                sound,
                format!("`{name}` reads its commands from standard input or a file"),
            );
            return;
        }
        match args.get(i) {
            None => self.fail(sound, format!("`{name} -c` without a command")),
            Some(Value::Dynamic { .. }) => {
                self.fail(sound, format!("`{name} -c` of an expansion"));
            }
            Some(Value::Static(script)) => self.script(script, depth + 1, sound),
        }
    }

    fn interpreter(&mut self, name: &str, flags: &[&str], args: &[Value], sound: bool) {
        // Every option is checked, not only those before the script: an option's own
        // argument (`-W ignore`) would otherwise pass for the script.
        let mut operand = None;
        for arg in args {
            let Some(arg) = arg.as_static() else {
                if operand.is_none() {
                    self.fail(
                        sound,
                        format!("`{name}` is given an option from an expansion"),
                    );
                    return;
                }
                continue;
            };
            if arg == "--" {
                break;
            }
            let Some(option) = arg.strip_prefix('-') else {
                operand.get_or_insert(arg);
                continue;
            };
            let inline = flags.iter().any(|flag| match flag.strip_prefix('-') {
                // A long option: `--eval`, `--eval=…`.
                Some(long) => option
                    .strip_prefix('-')
                    .is_some_and(|o| o == long || o.starts_with(&format!("{long}="))),
                // A word option (`-Command`), or a short one alone or in a cluster (`-c`,
                // `-Bc`).
                None if flag.len() > 1 => option.eq_ignore_ascii_case(flag),
                None => !option.starts_with('-') && option.contains(flag),
            });
            if inline || option.is_empty() {
                self.fail(
                    sound,
                    format!("`{name}` runs code given on the command line"),
                );
                return;
            }
        }
        match operand {
            None => self.fail(
                sound,
                format!("`{name}` reads its code from standard input"),
            ),
            Some("eval") if name == "deno" => {
                self.fail(
                    sound,
                    "`deno eval` runs code given on the command line".into(),
                );
            }
            Some(_) => {}
        }
    }

    fn awk(&mut self, args: &[Value], sound: bool) {
        let mut i = 0;
        while i < args.len() {
            let Some(arg) = args[i].as_static() else {
                self.fail(sound, "`awk` is given an expansion".to_string());
                return;
            };
            match arg {
                "-f" | "--file" => return,
                "-e" | "--source" => {
                    if let Some(program) = args.get(i + 1) {
                        self.awk_program(program, sound);
                    }
                    i += 2;
                }
                "-v" | "-F" | "--assign" | "--field-separator" => i += 2,
                "--" => {
                    if let Some(program) = args.get(i + 1) {
                        self.awk_program(program, sound);
                    }
                    return;
                }
                _ if arg.starts_with('-') && arg.len() > 1 => i += 1,
                _ => {
                    self.awk_program(&args[i], sound);
                    return;
                }
            }
        }
    }

    fn awk_program(&mut self, program: &Value, sound: bool) {
        match program {
            Value::Static(p) if !(p.contains("system") || p.contains('|')) => {}
            _ => self.fail(
                sound,
                "an awk program that may run commands (`system`, pipes)".to_string(),
            ),
        }
    }

    fn naming_builtin(&mut self, name: &str, args: &[Value], sound: bool) {
        match name {
            // Only `-v NAME` names a variable.
            "printf" | "test" | "[" => {
                let mut iter = args.iter();
                while let Some(arg) = iter.next() {
                    if arg.as_static() == Some("-v")
                        && let Some(var) = iter.next()
                    {
                        self.variable_name(var, sound);
                    }
                }
            }
            _ => {
                for arg in args {
                    let prefix = arg.prefix();
                    if let Some(options) = prefix
                        .strip_prefix('-')
                        .or_else(|| prefix.strip_prefix('+'))
                    {
                        // `declare -i`: values are arithmetic; `-n`: a name reference;
                        // `mapfile -C`: a callback.
                        if matches!(
                            name,
                            "declare" | "typeset" | "local" | "export" | "readonly"
                        ) && options.contains(['i', 'n'])
                            || matches!(name, "mapfile" | "readarray") && options.contains('C')
                        {
                            self.fail(sound, format!("`{name} -{options}` may run code"));
                            return;
                        }
                        if arg.as_static().is_none() {
                            self.fail(
                                sound,
                                format!("`{name}` is given an option from an expansion"),
                            );
                            return;
                        }
                        continue;
                    }
                    let named = match prefix.split_once('=') {
                        Some((var, _)) => Value::Static(var.to_string()),
                        None => arg.clone(),
                    };
                    self.variable_name(&named, sound);
                }
            }
        }
    }

    /// The value of a word, walking the commands inside it.
    fn word(&mut self, raw: &str, depth: usize, sound: bool) -> Value {
        self.word_with(raw, depth, sound, false)
    }

    /// The value of a word whose commands were already walked (brush splits an assignment
    /// argument into the assignment and its word).
    fn word_value_only(raw: &str) -> Value {
        Analyzer::default().word_with(raw, MAX_DEPTH + 1, false, false)
    }

    fn word_with(&mut self, raw: &str, depth: usize, sound: bool, heredoc: bool) -> Value {
        if self.done() {
            return Value::Dynamic {
                prefix: String::new(),
            };
        }
        // Plain words (the common case) need no word parser.
        if !heredoc
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./:,=+%@^".contains(&b))
        {
            return Value::Static(raw.to_string());
        }
        let options = parser_options();
        let pieces = if heredoc {
            brush_parser::word::parse_heredoc(raw, &options)
        } else {
            brush_parser::word::parse(raw, &options)
        };
        let pieces = match pieces {
            Ok(p) => p,
            Err(e) => {
                self.fail(
                    sound,
                    format!("a word does not parse: {}", clip(&e.to_string())),
                );
                return Value::Dynamic {
                    prefix: String::new(),
                };
            }
        };
        let mut state = WordState::default();
        for piece in &pieces {
            self.piece(piece, raw, depth, sound, false, &mut state);
        }
        state.flush_run(self, depth);
        if !heredoc {
            // Globs and brace expansion act on unquoted text only.
            if is_glob(&state.unquoted) || is_brace_expansion(&state.unquoted) {
                state.dynamic = true;
            }
        }
        if state.dynamic {
            Value::Dynamic {
                prefix: state.prefix.unwrap_or(state.value),
            }
        } else {
            Value::Static(state.value)
        }
    }

    fn piece(
        &mut self,
        piece: &WordPieceWithSource,
        raw: &str,
        depth: usize,
        sound: bool,
        quoted: bool,
        state: &mut WordState,
    ) {
        match &piece.piece {
            WordPiece::Text(s) => {
                state.push(s);
                if !quoted {
                    state.unquoted.push_str(s);
                }
            }
            WordPiece::SingleQuotedText(s) => state.push(s),
            WordPiece::AnsiCQuotedText(s) => match decode_ansi_c(s) {
                Some(decoded) => state.push(&decoded),
                None => state.expansion(self, depth),
            },
            WordPiece::DoubleQuotedSequence(pieces) => {
                for p in pieces {
                    self.piece(p, raw, depth, sound, true, state);
                }
            }
            WordPiece::GettextDoubleQuotedSequence(pieces) => {
                // `$"…"` may be translated into anything by a message catalogue.
                for p in pieces {
                    self.piece(p, raw, depth, sound, true, state);
                }
                state.dynamic = true;
            }
            WordPiece::TildeExpansion(_) => state.expansion(self, depth),
            WordPiece::ParameterExpansion(_) => {
                let text = raw.get(piece.start_index..piece.end_index).unwrap_or(raw);
                self.parameter_expansion(text, sound);
                state.expansion(self, depth);
            }
            WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                state.expansion(self, depth);
                self.script(s, depth + 1, sound);
            }
            WordPiece::EscapeSequence(s) => {
                let escaped = s.strip_prefix('\\').unwrap_or(s);
                if escaped == "\n" {
                    // A line continuation.
                } else if !quoted || escaped.len() == 1 && "$`\"\\".contains(escaped) {
                    state.push(escaped);
                } else {
                    state.push(s);
                }
            }
            WordPiece::ArithmeticExpression(expr) => {
                self.arithmetic(&expr.value, sound);
                state.expansion(self, depth);
            }
        }
    }

    /// `${…}`: the filter does not look inside; where it could run code (a substitution in
    /// a default value, `${!indirect}`, `${x@P}`, subscripts and offsets, which are
    /// arithmetic), the line is unknown.
    fn parameter_expansion(&mut self, text: &str, sound: bool) {
        let Some(inner) = text.strip_prefix("${") else {
            return; // `$name`, `$1`, `$?`
        };
        let risky = inner.contains("$(")
            || inner.contains('`')
            || inner.contains("<(")
            || inner.contains(">(")
            || inner.starts_with('!')
            || inner.contains("@P")
            || risky_subscript(inner)
            || substring_offset(inner).is_some_and(|rest| {
                rest.chars()
                    .any(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '`'))
            });
        if risky {
            self.fail(
                sound,
                format!("parameter expansion `{}` may run code", clip(text)),
            );
        }
    }

    /// Quoted text that may be code: kept for a pattern search, and parsed as a script
    /// whose commands count (but whose doubts do not: most such text is not code).
    fn literal(&mut self, text: &str, depth: usize) {
        if self.done() || !looks_like_code(text) || !self.room() {
            return;
        }
        self.out.literals.push(text.to_string());
        self.script(text, depth + 1, false);
    }
}

/// Static text of a word being read, and its runs of static text between expansions.
#[derive(Default)]
struct WordState {
    value: String,
    /// The value before the first expansion.
    prefix: Option<String>,
    /// The current run of static text (for the literal scan).
    run: String,
    unquoted: String,
    dynamic: bool,
}

impl WordState {
    fn push(&mut self, s: &str) {
        self.value.push_str(s);
        self.run.push_str(s);
    }

    fn expansion(&mut self, analyzer: &mut Analyzer, depth: usize) {
        if !self.dynamic {
            self.prefix = Some(self.value.clone());
        }
        self.dynamic = true;
        self.flush_run(analyzer, depth);
    }

    fn flush_run(&mut self, analyzer: &mut Analyzer, depth: usize) {
        let run = std::mem::take(&mut self.run);
        analyzer.literal(&run, depth);
    }
}

/// Whether text may be shell code: it has whitespace or shell punctuation.
fn looks_like_code(text: &str) -> bool {
    text.bytes()
        .any(|b| b.is_ascii_whitespace() || b";&|()<>$`\\'\"{}".contains(&b))
}

/// A subscript other than `[@]`, `[*]` or a number: arithmetic (or, for an associative
/// array, a string the filter does not evaluate).
fn risky_subscript(inner: &str) -> bool {
    let mut rest = inner;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            return true;
        };
        let index = after[..close].trim();
        if !(index == "@"
            || index == "*"
            || (!index.is_empty() && index.bytes().all(|b| b.is_ascii_digit())))
        {
            return true;
        }
        rest = &after[close + 1..];
    }
    false
}

/// `${name:offset…}` → the offset and length part (arithmetic); `None` for the `:-`, `:=`,
/// `:?`, `:+` operators and for expansions without `:`.
fn substring_offset(inner: &str) -> Option<&str> {
    let name_end = inner.find(|c: char| {
        !(c.is_ascii_alphanumeric() || c == '_' || c == '#' || c == '@' || c == '*')
    })?;
    let rest = inner[name_end..].strip_prefix(':')?;
    if rest.starts_with(['-', '=', '?', '+']) {
        None
    } else {
        Some(rest)
    }
}

fn is_assignment_word(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The file name of a program path.
fn basename(program: &str) -> String {
    program.rsplit('/').next().unwrap_or(program).to_string()
}

fn interpreter_flags(name: &str) -> Option<&'static [&'static str]> {
    INTERPRETERS.iter().find_map(|(interpreter, flags)| {
        let matches = name == *interpreter
            || name
                .strip_prefix(interpreter)
                .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'));
        matches.then_some(*flags)
    })
}

/// Pathname expansion: `*`, `?`, `[…]`, extglob `@(…)`.
fn is_glob(unquoted: &str) -> bool {
    unquoted.contains(['*', '?', '('])
        || unquoted
            .find('[')
            .is_some_and(|open| unquoted[open + 1..].contains(']'))
}

/// Brace expansion `{a,b}` / `{1..3}`, and the `{}` placeholder of `find -exec` and
/// `xargs -I`.
fn is_brace_expansion(unquoted: &str) -> bool {
    if unquoted.contains("{}") {
        return true;
    }
    let Some(open) = unquoted.find('{') else {
        return false;
    };
    let rest = &unquoted[open + 1..];
    rest.rfind('}')
        .is_some_and(|close| rest[..close].contains(',') || rest[..close].contains(".."))
}

/// Decodes the body of `$'…'` like bash; `None` where the result is not plain text
/// (bytes above 0x7f from `\x`/octal escapes, `\c` control escapes).
fn decode_ansi_c(body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let code = match e {
            'a' => 7,
            'b' => 8,
            'e' | 'E' => 0x1b,
            'f' => 0x0c,
            'n' => u32::from('\n'),
            'r' => u32::from('\r'),
            't' => u32::from('\t'),
            'v' => 0x0b,
            '\\' | '\'' | '"' | '?' => u32::from(e),
            '0'..='7' => {
                let mut value = e.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                if value > 0x7f {
                    return None;
                }
                value
            }
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut value = 0u32;
                let mut digits = 0;
                while digits < max {
                    match chars.peek().and_then(|d| d.to_digit(16)) {
                        Some(d) => {
                            value = value.checked_mul(16)?.checked_add(d)?;
                            chars.next();
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    out.push('\\');
                    out.push(e);
                    continue;
                }
                if e == 'x' && value > 0x7f {
                    return None;
                }
                value
            }
            'c' => return None,
            other => {
                out.push('\\');
                out.push(other);
                continue;
            }
        };
        if code == 0 {
            // bash ends the string at NUL.
            return Some(out);
        }
        out.push(char::from_u32(code)?);
    }
    Some(out)
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
