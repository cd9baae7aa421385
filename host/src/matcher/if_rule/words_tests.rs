//! The glob of each `Bash(...)` pattern answers as its regex on ASCII text: every twin of
//! generated patterns (programs with paths and wildcards, words, ` *` and `:*` ends)
//! against generated text made of the bytes each piece of a glob tells apart (word and
//! non-word bytes, every ASCII whitespace, case), and beyond ASCII (the Kelvin sign
//! folds to `k`, no-break space is whitespace) where the regex made from the glob answers.

use super::bash::{BashPattern, twins};
use super::compile_regex;

/// Pieces of patterns: a program's and words' letters in both cases, `*`, separators.
const PATTERN: &str = "(git|GiT|a|b|-|\\.|/|_|\\*|\\*\\*|x=1|\\?|\\[|\\\\|\\$|\\(){1,4}( (a|b|-|\\*|git|\\.|'|x){1,3}){0,3}( \\*|:\\*| |  )?";
/// Pieces of text: the same, and every byte class the regexes tell apart.
const TEXT: &str = "(git|GIT|gIt|a|A|b|-|\\.|/|_|\\*|x=1|\\?|\\[|\\\\|\\$|\\(| |  |\t|\n|\u{b}|\u{c}|\r|'|\"|;|:|,|~|\u{7f}|\u{1}|\u{212a}|\u{e4}|\u{a0}|\u{2003}){0,12}";

fn check(pattern: &str, text: &str) -> Result<(), String> {
    let Ok(p) = BashPattern::parse(pattern) else {
        return Ok(());
    };
    for twin in twins(&p) {
        let Some(glob) = twin.glob() else {
            return Err(format!("no glob for ASCII pattern {pattern:?}"));
        };
        // The regex the rule built, in Unicode mode: the reference.
        let unicode = compile_regex(twin.pattern()).unwrap().is_match(text);
        let made = compile_regex(&glob.regex()).unwrap().is_match(text);
        let whole = twin.is_match(text);
        let (fast, ascii) = match text.is_ascii() {
            true => (
                glob.is_match(text.as_bytes()),
                regex::bytes::RegexBuilder::new(twin.pattern())
                    .unicode(false)
                    .build()
                    .unwrap()
                    .is_match(text.as_bytes()),
            ),
            // Beyond ASCII only the regexes answer.
            false => (Some(unicode), unicode),
        };
        if fast != Some(unicode) || ascii != unicode || made != unicode || whole != unicode {
            return Err(format!(
                "`Bash({pattern})` twin {:?} on {text:?}: Unicode regex {unicode}, glob \
                 {fast:?}, ASCII regex {ascii}, regex made from the glob {made}, twin {whole}",
                twin.pattern()
            ));
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

    /// Generated patterns against generated text.
    #[test]
    fn the_glob_answers_as_the_regex(pattern in PATTERN, text in TEXT) {
        proptest::prop_assert!(check(&pattern, &text).is_ok(), "{}", check(&pattern, &text).unwrap_err());
    }

    /// Generated patterns against text made from the pattern itself, with pieces
    /// changed, so that matches are common and near misses too.
    #[test]
    fn the_glob_answers_as_the_regex_near_its_pattern(
        pattern in PATTERN,
        cut in 0usize..40,
        insert in TEXT,
        before in "( |\"|'|;|a|/usr/bin/|x )?",
        after in "( |\"|'|;|a|x| x y)?",
    ) {
        let plain = pattern.replace('*', "");
        let cut = plain.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(plain.len());
        for text in [
            format!("{before}{plain}{after}"),
            format!("{before}{}{insert}{}{after}", &plain[..cut], &plain[cut..]),
            format!("{before}{}{after}", plain.to_uppercase()),
        ] {
            proptest::prop_assert!(check(&pattern, &text).is_ok(), "{}", check(&pattern, &text).unwrap_err());
        }
    }
}

/// Cases where a byte-by-byte glob goes wrong most easily: vertical tab (the regex's ASCII
/// `\s`, not Rust's `is_ascii_whitespace`), runs of `*`, a pattern ending in a wildcard,
/// quoted text at either end, case in the program only.
#[test]
fn the_glob_answers_as_the_regex_on_edge_cases() {
    let rows: &[(&str, &str)] = &[
        ("git push *", "git\u{b}push"),
        ("git push *", "git push\u{b}x"),
        ("git push *", "GIT push"),
        ("git push *", "git PUSH"),
        ("git push *", "git pushx"),
        ("git push:*", "git push"),
        ("git push:*", "git pushed"),
        ("git ** x", "git a b x"),
        ("git *", "git"),
        ("git*", "gitx y"),
        ("/usr/bin/git push", "/usr/bin/git push"),
        ("/usr/bin/git push", "git push"),
        ("rm -rf", "echo 'rm -rf'"),
        ("rm -rf", "xrm -rf"),
        ("rm -rf", ".rm -rf"),
        ("rm -rf", "/rm -rf/"),
        ("rm -rf", "rm -rf."),
        ("rm -rf", "rm  \t -rf"),
        ("a*b", "ab"),
        ("a*b", "a b b"),
        ("*", ""),
        (" ", ""),
    ];
    for (pattern, text) in rows {
        check(pattern, text).unwrap();
    }
}

/// Text longer than the glob's budget takes the regex, with the same answer.
#[test]
fn text_beyond_the_budget_takes_the_regex() {
    let p = BashPattern::parse("git push *").unwrap();
    let long = format!("git push {}", "x".repeat(super::words::STEP_BUDGET / 4));
    for twin in twins(&p) {
        assert_eq!(twin.glob().unwrap().is_match(long.as_bytes()), None);
    }
    assert!(twins(&p)[0].is_match(&long));
}
