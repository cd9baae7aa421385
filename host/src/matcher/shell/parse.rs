//! The one place the shell analysis calls brush-parser: every script and every word it parses
//! passes through [`program`] or [`word`], so whatever the parser does wrong on hostile input
//! is handled here, once, for every caller. brush-parser 0.4 has three such weaknesses, each
//! met before the parser runs, and a catch for whatever else it may do:
//! - **exponential time**: its PEG grammar backtracked without memoising, so each level of an
//!   unterminated or `case`-nested compound command doubled the work (25 levels of `( `
//!   took seconds, 24 of `case a in a) ` minutes). hookhost builds it with its grammar rules
//!   memoised (`vendor/brush-parser/PATCHED.md`, which also fixes the tokenizer's quadratic
//!   cases), and, as a second bound, tokenizes a script first (linear) and does not parse one
//!   whose compound commands nest deeper than [`MAX_NESTING`] ([`nesting`], an upper bound
//!   read from the tokens): the line is *unknown*, so the hook runs;
//! - **stack**: the parser recurses once per level of nesting (3,000 nested `coproc` overflowed
//!   an 8 MiB stack); the same bound limits its depth, and the stack the parse runs on grows
//!   with the tokens that may nest (`super::OPENERS`);
//! - **panics**: it read numbers with an unchecked `parse().unwrap()` (`2147483648>f`, an I/O
//!   number past `i32`; `~99999999999999999999`, a directory-stack index past `usize`) and
//!   unwrapped a character past the end of the input (a here-document tag inside `${ }` or
//!   `$( )`). The vendored copy fails those rules instead, so the number is read as a word
//!   and the tag as an unterminated expansion, as bash reads them (`PATCHED.md`). Any other
//!   panic in the tokenizer or parser is caught ([`guarded`]): the line is unknown, and the
//!   process's panic hook reports the panic once, as the bug it is.

use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::Token;
use brush_parser::ast;
use brush_parser::word::WordPieceWithSource;

use super::clip;

/// Compound commands (groups, subshells, `if`, loops, `case`, `[[ ]]`, functions, `coproc`)
/// nested deeper than this in one script are not parsed: the hook runs. Strings and
/// substitutions inside a script are parsed as scripts of their own, each under this bound
/// (and [`super::MAX_DEPTH`] bounds how deep those go).
pub const MAX_NESTING: usize = 12;

/// Tokens above which a script is not parsed: the hook runs. The parser's memoised rules
/// keep a copy of each nested list's tree per level, so its memory grows with tokens ×
/// levels; a script this long holds more commands than the analysis keeps anyway
/// (`MAX_ITEMS`).
pub const MAX_TOKENS: usize = 16 * 1024;

/// The parser's options: bash, with extglob (its `@( )` patterns parse as words).
fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// Parses a script (the line itself, or a string or substitution in it).
pub(super) fn program(text: &str) -> Result<ast::Program, String> {
    guarded(|| {
        let options = parser_options();
        let refused = |e: &dyn std::fmt::Display| {
            format!(
                "the shell parser does not accept it: {}",
                clip(&e.to_string())
            )
        };
        let tokens = brush_parser::uncached_tokenize_str(text, &options.tokenizer_options())
            .map_err(|e| refused(&e))?;
        if tokens.len() > MAX_TOKENS {
            return Err(format!(
                "one script holds {} tokens (at most {MAX_TOKENS} are parsed)",
                tokens.len()
            ));
        }
        let depth = nesting(&tokens);
        if depth > MAX_NESTING {
            return Err(format!(
                "compound commands are nested {depth} levels deep (at most {MAX_NESTING} are parsed)"
            ));
        }
        brush_parser::parse_tokens(&tokens, &options).map_err(|e| refused(&e))
    })
}

/// Parses one word (or a here-document's body) into its pieces.
pub(super) fn word(raw: &str, heredoc: bool) -> Result<Vec<WordPieceWithSource>, String> {
    guarded(|| {
        let options = parser_options();
        let pieces = if heredoc {
            brush_parser::word::parse_heredoc(raw, &options)
        } else {
            brush_parser::word::parse(raw, &options)
        };
        pieces.map_err(|e| format!("a word does not parse: {}", clip(&e.to_string())))
    })
}

/// An upper bound on how deep the compound commands of a script nest, read from its tokens.
///
/// A reserved word opens or closes a construct only where a command may start (after a
/// separator, an opening word or `(`), as in bash; a closing word closes only the
/// construct of its kind on top (`fi` an `if`, `done` a loop, `esac` a `case`, `}` a `{`,
/// `]]` a `[[`) and `)` only a `(`, so a word used as an argument (`echo done`) or a `case`
/// pattern's `)` never lowers the count. `coproc`, which nothing closes, only raises it.
/// Erring high only makes a line unknown.
fn nesting(tokens: &[Token]) -> usize {
    let mut open: Vec<&str> = Vec::new();
    let mut deepest = 0;
    // Whether the next word may be a command's first (where reserved words are read).
    let mut command_start = true;
    // The next word is a redirection's target, not a command.
    let mut target = false;
    // The next word may be the name after `function` or `coproc`.
    let mut name = false;
    for (i, token) in tokens.iter().enumerate() {
        // Only the token right after `function` or `coproc` may be the name.
        let naming = std::mem::take(&mut name);
        match token {
            Token::Operator(op, _) => {
                match op.as_str() {
                    "(" | "((" => open.push("("),
                    ")" | "))" if open.last() == Some(&"(") => {
                        open.pop();
                    }
                    _ => {}
                }
                target = op.starts_with(['<', '>']) || op.ends_with(['<', '>']);
                if !target {
                    command_start = true;
                }
            }
            Token::Word(..) if target => target = false,
            // A name after `function` or `coproc`: a compound command may follow (after
            // `coproc`, the word may also be a reserved word that starts one).
            Token::Word(word, _) if naming && !is_reserved(word) => command_start = true,
            Token::Word(word, _) if word == "]]" && open.last() == Some(&"[[") => {
                open.pop();
            }
            Token::Word(word, _) if command_start => match word.as_str() {
                "function" => {
                    name = true;
                    command_start = false;
                }
                "{" | "if" | "while" | "until" | "[[" | "case" | "for" | "select" | "coproc" => {
                    open.push(word);
                    // A command follows these; a name or a word follows the others.
                    command_start =
                        matches!(word.as_str(), "{" | "if" | "while" | "until" | "coproc");
                    name = word == "coproc";
                }
                "then" | "do" | "else" | "elif" | "!" | "time" => {}
                // `time`'s options: a command still follows.
                "-p" | "--" if i > 0 && tokens[i - 1].to_str() == "time" => {}
                // A closing word before `)` or `|` is a `case` pattern (`esac) …`).
                "}" | "fi" | "done" | "esac" | "]]" if matches!(tokens.get(i + 1), Some(Token::Operator(op, _)) if op == ")" || op == "|") =>
                {
                    command_start = false;
                }
                "}" | "fi" | "done" | "esac" | "]]" => {
                    let opener: &[&str] = match word.as_str() {
                        "}" => &["{"],
                        "fi" => &["if"],
                        "done" => &["while", "until", "for", "select"],
                        "esac" => &["case"],
                        _ => &["[["],
                    };
                    if open.last().is_some_and(|top| opener.contains(top)) {
                        open.pop();
                    }
                    command_start = false;
                }
                _ => command_start = false,
            },
            Token::Word(..) => {}
        }
        deepest = deepest.max(open.len());
    }
    deepest
}

/// The words bash reserves where a command starts.
fn is_reserved(word: &str) -> bool {
    matches!(
        word,
        "{" | "}"
            | "if"
            | "then"
            | "else"
            | "elif"
            | "fi"
            | "while"
            | "until"
            | "do"
            | "done"
            | "for"
            | "select"
            | "in"
            | "case"
            | "esac"
            | "function"
            | "coproc"
            | "[["
            | "]]"
            | "!"
            | "time"
    )
}

/// Runs one call into the parser; a panic in it becomes an error that makes the line unknown.
fn guarded<T>(parse: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(parse)).unwrap_or_else(|payload| {
        Err(format!(
            "the shell parser failed on it (a bug in brush-parser: {})",
            clip(crate::text::panic_message(payload.as_ref()))
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::shell::analyze;

    /// Every place brush-parser 0.4 read a number unchecked, with numbers at and past each
    /// integer's edge, in each position a command line can put them, and here-document tags
    /// inside expansions (where it read past the end): nothing panics, not even into the
    /// catch in [`guarded`], and each line is read as the same line with a small number is
    /// (a number past the descriptor type is a word, as in bash).
    #[test]
    fn numbers_and_tags_the_parser_read_unchecked_parse_without_a_panic() {
        let numbers = [
            "2147483647",
            "02147483647",
            "2147483648",
            "4294967296",
            "18446744073709551616",
            "0000000000000000000000000001",
            "9".repeat(400).leak(),
        ];
        let redirects = ["<", ">", ">>", "<&", ">&", "<>", ">|", "<<<", "<<"];
        let mut lines = Vec::new();
        for op in redirects {
            lines.push(format!("echo hi N{op}x\nx"));
            lines.push(format!("N{op}x echo\nx"));
            if op != "<<" {
                // (A here-document's body cannot follow inside these.)
                lines.push(format!("echo $( N{op}x )"));
                lines.push(format!("sh -c 'true N{op}x'"));
            }
        }
        for tilde in ["~", "~+", "~-"] {
            lines.push(format!("ls {tilde}N"));
            lines.push(format!("ls {tilde}N/sub"));
            lines.push(format!("a={tilde}N ls"));
            lines.push(format!("export a=x:{tilde}N"));
            lines.push(format!("cat <<E\n{tilde}N\nE"));
        }
        let unknown = |line: &str| {
            let analysis = std::panic::catch_unwind(|| analyze(line))
                .unwrap_or_else(|_| panic!("a panic escaped the analysis of {line:?}"));
            let why = analysis.unknown;
            assert!(
                !why.as_deref().unwrap_or_default().contains("brush-parser"),
                "{line:?}: the parser panicked: {why:?}"
            );
            why.is_some()
        };
        for line in lines {
            let small = unknown(&line.replace('N', "3"));
            for number in numbers {
                let line = line.replace('N', number);
                assert_eq!(unknown(&line), small, "{line:?}");
            }
        }
        // Here-document tags inside `${ }` and `$( )`: the body consumes the closing
        // brace or parenthesis (brush-parser unwrapped the character after it).
        for line in [
            "echo ${x<<E}${y\nE\n",
            "echo $(cat<<E)$(\nE\n",
            "echo ${x<<E}${y",
            "echo ${x<<E}\nE",
            "echo $(cat <<E)",
            "echo $(cat <<E)\nE\n",
            "echo $((1<<E))",
        ] {
            unknown(line);
        }
    }

    /// Constructs that nest, each repeated unterminated, closed, and closed oddly (`case`
    /// patterns' `)`), from the parser's worst cases: past [`MAX_NESTING`] levels the line
    /// is unknown without parsing; just under the bound it parses (in a few milliseconds: the
    /// exponential stays small).
    #[test]
    fn nesting_past_the_bound_is_not_parsed() {
        let constructs: &[(&str, &str)] = &[
            ("( ", " )"),
            ("(( ( ", " ) ))"),
            ("{ ", "; }"),
            ("if a; then ", "; fi"),
            ("while a; do ", "; done"),
            ("until a; do ", "; done"),
            ("for i in a; do ", "; done"),
            ("select i in a; do ", "; done"),
            ("case a in a) ", ";; esac"),
            ("case a in (a) ", ";; esac"),
            ("case a in\na)\n", "\n;; esac"),
            ("case a in a|b) ", ";; esac"),
            ("case a in a) b;; a) ", ";; esac"),
            ("f() { ", "; }"),
            ("function f { ", "; }"),
            ("coproc ", ""),
            ("coproc\n", ""),
            ("coproc c { ", "; }"),
            ("case a in a) ;; esac ) ", ""),
            ("case a in\nesac) ", ""),
            ("case a in a) b;& esac) ", ""),
            ("case a in a|b) ;; esac|c) ", ""),
            ("time -p case a in a) ", ";; esac"),
            ("time -p -- ( ", " )"),
            ("time -p coproc ", ""),
            ("coproc while a; do ", "; done"),
            ("! ( ", " )"),
            ("[[ ( a ) ]] && ( ", " )"),
        ];
        for (open, close) in constructs {
            // `((` is two levels (brush reads it as two `(`), `coproc` one more than what it
            // runs; a `case` pattern's `(` is one more while it is open.
            let levels = match open.split(' ').next() {
                Some("((") => 3,
                Some("coproc") if open.len() > 7 => 2,
                _ => 1,
            };
            let bound = MAX_NESTING / levels;
            for depth in [bound - 1, bound + 1, 200, 3000] {
                let inner = "true";
                for closed in [false, true] {
                    let close = if closed { *close } else { "" };
                    let line = format!("{}{inner}{}", open.repeat(depth), close.repeat(depth));
                    let started = std::time::Instant::now();
                    let why = analyze(&line).unknown.unwrap_or_default();
                    // Far past it, another bound (size, tokens that may nest) may come first.
                    let nested = why.starts_with("compound commands are nested")
                        || (depth > 1000 && !why.is_empty());
                    if depth > bound {
                        assert!(nested, "{open:?} x{depth}: {why:?}");
                    } else {
                        assert!(!nested, "{open:?} x{depth} is within the bound: {why:?}");
                    }
                    eprintln!("{open:?} x{depth} closed={closed}: {:?}", started.elapsed());
                }
            }
        }
    }

    /// Inputs on which brush-parser's time grew exponentially (each level doubled) or
    /// quadratically: they are answered, unknown or not. (vendor/brush-parser/PATCHED.md
    /// has their times before the patch: seconds to minutes each; now milliseconds.)
    #[test]
    fn inputs_that_were_slow_to_parse_are_answered() {
        let lines = [
            "case a in a) ".repeat(12) + &"a;".repeat(3000) + &" esac".repeat(12),
            "case a in a) ".repeat(8) + &"a;".repeat(20000),
            "case a in a) ;; esac ) ".repeat(22),
            "time -p case a in a) ".repeat(22),
            "cat <<'".to_string() + &"A".repeat(32000) + "'\n" + &"\n".repeat(32000),
            "cat <<E".to_string() + &" x".repeat(30000) + "\nE\n",
            "cat".to_string() + &" <<a".repeat(10000) + "\n" + &"a\n".repeat(10000),
            // The word parser (each level of `$((` tried as arithmetic, then again as a
            // command substitution), also in a here-document's body and an array index.
            "echo ".to_string() + &"$((a); ".repeat(20) + &") ".repeat(20),
            "cat <<E\n".to_string() + &"$(".repeat(20) + "\nE\n",
            "a[".to_string() + &"$((a); ".repeat(20) + &") ".repeat(20) + "]=x",
            "echo $(cat".to_string() + &" <<a".repeat(10000) + "\n" + &"a\n".repeat(10000) + ")",
            // The word parser tries an array index at each `[`, to the end of the word.
            "echo ".to_string() + &("a[".to_string() + &"x".repeat(30)).repeat(2000),
        ];
        // The last is refused by the bound on nesting tokens times bytes, not parsed.
        let why = analyze(lines.last().expect("lines"))
            .unknown
            .unwrap_or_default();
        assert!(why.contains("the parser's work grows"), "{why}");
        for line in &lines {
            let analysis = analyze(line);
            assert!(
                analysis.unknown.is_some() || !analysis.commands.is_empty(),
                "{:?}",
                &line[..40]
            );
        }
    }

    /// A runner's every later word may start the command, and each start keeps the rest of
    /// the line: what the analysis keeps is bounded in bytes, not only in count (one 50 KB
    /// line kept 290 MB).
    #[test]
    fn what_the_analysis_keeps_is_bounded_in_bytes() {
        use crate::matcher::shell::MAX_KEPT_BYTES;
        let word = |n| " -".to_string() + &"a".repeat(n);
        let lines = [
            "sh -c 'eval".to_string() + &word(800).repeat(63) + "'",
            "eval".to_string() + &word(1000).repeat(63),
            "x".to_string() + &word(1000).repeat(63),
            "sudo".to_string() + &" a".repeat(63) + &word(900),
        ];
        for line in &lines {
            let analysis = analyze(line);
            let kept: usize = analysis
                .commands
                .iter()
                .map(|c| c.text.len() + c.base_text.len())
                .chain(analysis.literals.iter().map(String::len))
                .sum();
            assert!(
                kept <= MAX_KEPT_BYTES + 2 * line.len(),
                "{kept} bytes for {:?}",
                &line[..20]
            );
        }
    }

    /// Constructs one after another do not add up: a long script of closed blocks is parsed.
    #[test]
    fn constructs_in_sequence_do_not_count_as_nesting() {
        let blocks = [
            "if a; then b; fi",
            "for i in a b; do echo done; done",
            "while a; do b; done",
            "case x in a) b;; (c) d;; esac",
            "{ a; }",
            "( a )",
            "[[ -n x ]] && [[ ( a ) ]]",
            "f() { a; }",
            "cat <<E\nfi done }\nE",
            "echo fi done esac } ]]",
        ];
        let script = blocks.repeat(8).join("\n");
        let tokens =
            brush_parser::uncached_tokenize_str(&script, &parser_options().tokenizer_options())
                .expect("tokens");
        assert_eq!(nesting(&tokens), 2);
        assert!(
            analyze(&script).unknown.is_none(),
            "{:?}",
            analyze(&script).unknown
        );
    }

    /// An empty here-document tag at the end of the input looped the tokenizer for ever,
    /// growing memory by about 0.5 GB/s (an abort, which no catch stops): the inputs an
    /// attack review reduced it to (helper-56) end, as unterminated here-documents, and an
    /// empty tag with a body still parses.
    #[test]
    fn an_empty_here_document_tag_at_the_end_ends() {
        for line in [
            "<<'' ",
            "cat <<'' ",
            "<<$(  ",
            "${<<''}$(",
            "$(<< )$(",
            "$(``<<  ",
            "<<''&$(",
            "''<<'' ",
            "git push <<'' ",
        ] {
            let why = analyze(line).unknown.unwrap_or_default();
            assert!(why.contains("does not accept it"), "{line:?}: {why:?}");
        }
        assert_eq!(analyze("cat <<''\n\n").unknown, None);
        assert_eq!(analyze("cat <<''\nbody\n\necho hi").unknown, None);
        // The bound on retries at the end refuses none of a line's here-documents: 100
        // of them, the last ended by the input's end.
        let many = "cat".to_string() + &" <<a".repeat(100) + "\n" + &"a\n".repeat(99) + "a";
        assert_eq!(analyze(&many).unknown, None);
    }

    /// Assignments before a command are not its program, in every form (the vendored
    /// grammar tries a word as an assignment only if it holds an `=`).
    #[test]
    fn assignments_before_a_command_are_not_its_program() {
        for line in [
            "A=1 ls -l",
            "A=1 B+=2 c[0]=3 ls -l",
            "a[1]=1 ls -l",
            "A='x y' ls -l",
            "A= ls -l",
        ] {
            let analysis = analyze(line);
            assert_eq!(analysis.unknown, None, "{line:?}");
            let programs: Vec<&str> = analysis
                .commands
                .iter()
                .map(|c| c.program.as_str())
                .collect();
            assert!(programs.contains(&"ls"), "{line:?}: {programs:?}");
            assert!(
                !programs.iter().any(|p| p.contains('=')),
                "{line:?}: {programs:?}"
            );
        }
    }

    #[test]
    fn a_panic_in_the_parser_becomes_an_error() {
        let answer: Result<(), String> = guarded(|| panic!("index out of range"));
        assert_eq!(
            answer.unwrap_err(),
            "the shell parser failed on it (a bug in brush-parser: index out of range)"
        );
    }
}
