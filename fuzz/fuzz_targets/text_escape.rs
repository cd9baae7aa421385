//! `hookhost::text::escape` never lets a control or reordering character through, and
//! never changes text that has none.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let escaped = hookhost::text::escape(&text);
    assert!(
        !escaped
            .chars()
            .any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)),
        "{escaped:?}"
    );
    if !text.chars().any(|c| {
        c.is_control()
            || ('\u{200b}'..='\u{206f}').contains(&c)
            || c == '\u{feff}'
            || c == '\u{061c}'
    }) {
        assert_eq!(escaped, text);
    }
    let multiline = hookhost::text::escape_multiline(&text);
    assert!(
        !multiline
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    );
});
