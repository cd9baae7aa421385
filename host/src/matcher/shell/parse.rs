//! The one place the shell analysis calls brush-parser: every script and every word it parses
//! passes through [`program`] or [`word`], so whatever the parser does wrong on hostile input
//! is handled here, once, for every caller.
//!
//! brush-parser 0.4 panics on some input: it reads numbers with an unchecked `parse().unwrap()`
//! (`2147483648>f`, an I/O number past `i32`; `~99999999999999999999`, a directory-stack index
//! past `usize`). Two layers keep that from the host:
//! - [`unreadable_number`] finds, before the parser runs, each number the grammar would read into
//!   an integer that cannot hold it, and makes the line *unknown* (the hook runs) with a message
//!   that names it;
//! - any other panic in the parser is caught ([`guarded`]) and makes the line unknown too; the
//!   process's panic hook still reports it once, as the bug it is.

use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::ast;
use brush_parser::word::WordPieceWithSource;

use super::clip;

/// The parser's options: bash, with extglob (its `@( )` patterns parse as words).
fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// Parses a script (the line itself, or a string or substitution in it).
pub(super) fn program(text: &str) -> Result<ast::Program, String> {
    screened(text)?;
    guarded(|| {
        brush_parser::Parser::new(text.as_bytes(), &parser_options())
            .parse_program()
            .map_err(|e| {
                format!(
                    "the shell parser does not accept it: {}",
                    clip(&e.to_string())
                )
            })
    })
}

/// Parses one word (or a here-document's body) into its pieces.
pub(super) fn word(raw: &str, heredoc: bool) -> Result<Vec<WordPieceWithSource>, String> {
    screened(raw)?;
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

fn screened(text: &str) -> Result<(), String> {
    match unreadable_number(text) {
        Some(number) => Err(format!(
            "the number {} is too large for the shell parser to read",
            clip(number)
        )),
        None => Ok(()),
    }
}

/// The largest number brush-parser reads without a panic where it reads numbers unchecked:
/// an I/O number is an `i32` (a directory-stack index is a `usize`, larger; one bound for
/// both only makes a few more lines unknown).
const LARGEST_READABLE: u64 = i32::MAX as u64;

/// A run of digits that brush-parser would read into an integer too small for it: directly
/// before `<` or `>` (an I/O number, `2>file`) or directly after `~`, `~+` or `~-` (a
/// directory-stack index, `~+2`). Runs in other places (quoted, a suffix of a longer word)
/// are flagged too: the rule looks at bytes, not tokens, so it can only err towards unknown.
fn unreadable_number(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let run = &text[start..i];
        let before = &bytes[..start];
        let tilde = [&b"~"[..], b"~+", b"~-"]
            .iter()
            .any(|t| before.ends_with(t));
        let redirect = matches!(bytes.get(i), Some(b'<' | b'>'));
        if (tilde || redirect) && !readable(run) {
            return Some(run);
        }
    }
    None
}

/// Whether a run of ASCII digits is at most [`LARGEST_READABLE`] (leading zeros allowed, as
/// Rust's integer parsing allows them).
fn readable(digits: &str) -> bool {
    let significant = digits.trim_start_matches('0');
    significant.len() <= 10
        && significant
            .parse::<u64>()
            .is_ok_and(|n| n <= LARGEST_READABLE)
}

/// Runs one call into the parser; a panic in it becomes an error that makes the line unknown.
fn guarded<T>(parse: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(parse)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Err(format!(
            "the shell parser failed on it (a bug in brush-parser: {})",
            clip(&what)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::shell::analyze;

    /// Every place brush-parser 0.4 reads a number unchecked, with numbers at and past each
    /// integer's edge, in each position a command line can put them: no panic reaches even the
    /// catch in [`guarded`] (the screen finds them first), and the line is unknown exactly
    /// when the number is past `i32`.
    #[test]
    fn numbers_the_parser_cannot_read_make_the_line_unknown_without_a_panic() {
        let numbers = [
            ("2147483647", false),
            ("02147483647", false),
            ("2147483648", true),
            ("4294967296", true),
            ("18446744073709551616", true),
            ("0000000000000000000000000001", false),
            ("9".repeat(400).leak(), true),
        ];
        let redirects = ["<", ">", ">>", "<&", ">&", "<>", ">|", "<<<", "<<"];
        let mut lines = Vec::new();
        for (number, unknown) in numbers {
            for op in redirects {
                lines.push((format!("echo hi {number}{op}x\nx"), unknown));
                lines.push((format!("{number}{op}x echo"), unknown));
                lines.push((format!("echo $( {number}{op}x )"), unknown));
                lines.push((format!("sh -c 'true {number}{op}x'"), unknown));
            }
            for tilde in ["~", "~+", "~-"] {
                lines.push((format!("ls {tilde}{number}"), unknown));
                lines.push((format!("ls {tilde}{number}/sub"), unknown));
                lines.push((format!("a={tilde}{number} ls"), unknown));
                lines.push((format!("export a=x:{tilde}{number}"), unknown));
                lines.push((format!("cat <<E\n{tilde}{number}\nE"), unknown));
            }
        }
        for (line, unknown) in lines {
            let analysis = std::panic::catch_unwind(|| analyze(&line))
                .unwrap_or_else(|_| panic!("a panic escaped the analysis of {line:?}"));
            let why = analysis.unknown.unwrap_or_default();
            assert!(
                !why.contains("brush-parser"),
                "{line:?}: the parser panicked: {why}"
            );
            assert_eq!(
                why.contains("too large for the shell parser"),
                unknown,
                "{line:?}: {why:?}"
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

    #[test]
    fn the_screen_reads_only_digits_next_to_a_redirect_or_a_tilde() {
        assert_eq!(unreadable_number("echo 99999999999 > x"), None);
        assert_eq!(unreadable_number("sleep 99999999999; ls ~"), None);
        assert_eq!(unreadable_number("ls ~x99999999999"), None);
        assert_eq!(unreadable_number("echo 99999999999>x"), Some("99999999999"));
        assert_eq!(unreadable_number("~+99999999999"), Some("99999999999"));
        assert_eq!(unreadable_number("é~99999999999"), Some("99999999999"));
    }
}
