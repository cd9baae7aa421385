//! Matchers and the shell analysis: any pattern compiles or is refused with an error (never a
//! panic), any subject is tested in bounded time, and any command line is analysed without a
//! panic or a stack overflow, with bounded output. A panic inside brush-parser is contained by
//! the analysis (`contained.rs`) and must leave the line unknown.
#![no_main]

mod contained;

use libfuzzer_sys::fuzz_target;

fuzz_target!(init: contained::install(), |data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (pattern, subject) = text.split_once('\n').unwrap_or((&text, "Bash"));
    for syntax in [
        hookhost::event::MatcherSyntax::Standard,
        hookhost::event::MatcherSyntax::Narrow,
    ] {
        if let Ok(m) = hookhost::matcher::Matcher::parse(Some(pattern), syntax) {
            let _ = m.is_match(Some(subject));
        }
    }
    contained::parser_panicked();
    let analysis = hookhost::matcher::shell::analyze(&text);
    if contained::parser_panicked() {
        assert!(analysis.unknown.is_some(), "a parser panic left the line known: {text:?}");
    }
    let kept: usize = analysis.commands.iter().map(|c| c.text.len()).sum::<usize>()
        + analysis.literals.iter().map(String::len).sum::<usize>();
    // What the analysis keeps is bounded by what it may parse: a word that looks like code is
    // kept and parsed again, once per nesting level at most (`shell::MAX_DEPTH`).
    let bound = 2 * (hookhost::matcher::shell::MAX_DEPTH + 1) * (text.len() + 64);
    assert!(kept <= bound, "{kept} bytes kept for {} of input", text.len());
});
