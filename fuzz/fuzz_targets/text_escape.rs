//! `hookhost::text::escape` never lets a control, format or separator character (Unicode
//! general categories Cc, Cf, Zl, Zp) through, and never changes text that has none.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

fn unsafe_class(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    )
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let escaped = hookhost::text::escape(&text);
    assert!(!escaped.chars().any(unsafe_class), "{escaped:?}");
    if !text.chars().any(unsafe_class) {
        assert_eq!(escaped, text);
    }
    let multiline = hookhost::text::escape_multiline(&text);
    assert!(
        !multiline
            .chars()
            .any(|c| unsafe_class(c) && c != '\n' && c != '\t')
    );
});
