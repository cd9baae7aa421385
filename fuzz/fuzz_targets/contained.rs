//! Panics that hookhost contains: the shell analysis catches a panic inside brush-parser
//! (`matcher/shell/parse.rs`) and makes the line unknown. libFuzzer's panic hook aborts on
//! every panic, caught or not; this hook lets a panic whose location is in brush-parser's
//! source through (printed, so the run's log shows it), and records it so the target can
//! check the analysis answered unknown. Every other panic still aborts the run.

use std::cell::Cell;

thread_local! {
    static PARSER_PANICKED: Cell<bool> = const { Cell::new(false) };
}

/// Installs the hook; call from the target's `init:`.
pub fn install() {
    let libfuzzer = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // `vendor/brush-parser/…` (the patched copy the build uses) or a registry's
        // `brush-parser-0.4.0/…`.
        let in_parser = info
            .location()
            .is_some_and(|l| l.file().contains("brush-parser"));
        if in_parser {
            eprintln!("contained: a panic in brush-parser: {info}");
            PARSER_PANICKED.with(|p| p.set(true));
        } else {
            libfuzzer(info);
        }
    }));
}

/// Whether a panic in brush-parser was caught since the last call (and clears it).
pub fn parser_panicked() -> bool {
    PARSER_PANICKED.with(|p| p.replace(false))
}
