//! Text that came from a plugin, a hook, a repository or the environment, made safe to
//! show on a terminal.
//!
//! A plugin's name, a hook's reason, a command in a repository's `hooks.json` or a session
//! id can hold ESC sequences (which recolour, move the cursor or retitle the window),
//! carriage returns and backspaces (which overwrite what was printed before them), NUL,
//! and Unicode bidi overrides (which reorder what is shown, "Trojan source"). Printed raw,
//! such text can forge lines of a report the user reads before trusting something.
//! Everything hookhost prints *for a person* passes through [`escape`] or
//! [`escape_multiline`]; JSON output stays JSON-escaped by serde instead. And text made
//! one word for a shell ([`shell_word`]).

use std::borrow::Cow;
use std::fmt::Write;

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Whether `c` must not reach a terminal raw: whole Unicode classes rather than picked
/// members, looked up in the Unicode Character Database's tables (`unicode-properties`,
/// kept by unicode-rs, so a format character a later Unicode adds is escaped once the
/// tables are): every control (`Cc`: C0, DEL, C1), every format character (`Cf`: bidi
/// marks, embeddings, overrides and isolates, zero-width and invisible characters, soft
/// hyphen, tag characters, interlinear annotations) and the line and paragraph separators
/// (`Zl`, `Zp`: U+2028 and U+2029 end a line in many viewers and in JavaScript).
fn is_unsafe(c: char, keep_newlines: bool) -> bool {
    match c {
        '\n' | '\t' => !keep_newlines,
        ' '..='~' => false,
        c => matches!(
            c.general_category(),
            GeneralCategory::Control
                | GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        ),
    }
}

fn escape_with(text: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c, keep_newlines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_unsafe(c, keep_newlines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// `text` on one line with every control and reordering character shown as an escape
/// (`\x1b`, `\r`, `\n`, `\u{202e}`): for names, ids, commands and other one-line fields.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, false)
}

/// Like [`escape`], but newlines and tabs are kept: for messages that are multi-line by
/// nature (a hook's reason, captured stderr). A forged line still cannot overwrite or
/// recolour anything, since `\r`, ESC and the rest are escaped.
pub fn escape_multiline(text: &str) -> Cow<'_, str> {
    escape_with(text, true)
}

/// JSON text (serde's output) with the characters serde leaves raw but a terminal acts
/// on — DEL, C1 controls, bidi and invisible marks — written as `\uXXXX` escapes. The
/// result is the same JSON value, byte for byte once parsed; these characters can only
/// occur inside strings, where the escape means the same character.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if json.is_ascii() && !json.contains('\u{7f}') {
        return Cow::Borrowed(json);
    }
    if !json.chars().any(|c| c >= '\u{7f}' && is_unsafe(c, true)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c >= '\u{7f}' && is_unsafe(c, true) {
            // JSON escapes a character beyond the BMP as its UTF-16 surrogate pair.
            for unit in c.encode_utf16(&mut [0; 2]) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The most bytes `c` takes once hookhost shows it: JSON-escaped (serde, then
/// [`escape_json`]: `\u0000` is six bytes) or escaped for a terminal ([`escape`]:
/// `\u{202e}` is eight). A text's [`shown_len`] bounds the bytes it adds to any answer.
pub fn shown_width(c: char) -> usize {
    match c {
        '\n' | '\r' | '\t' | '"' | '\\' => 2,
        c if is_unsafe(c, false) && (c as u32) < 0x100 => 6,
        // `\ud834\udd73` in JSON; `\u{1d173}` (nine) for a terminal.
        c if is_unsafe(c, false) && (c as u32) > 0xffff => 12,
        c if is_unsafe(c, false) => 8,
        c => c.len_utf8(),
    }
}

/// The most bytes `text` takes once shown, escaped for JSON or a terminal (the sum of
/// [`shown_width`]): at most six times its length in bytes.
pub fn shown_len(text: &str) -> usize {
    if text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return text.len() + text.bytes().filter(|b| matches!(b, b'"' | b'\\')).count();
    }
    text.chars().map(shown_width).sum()
}

/// `text` as one POSIX shell word: as it is when it holds only characters no shell
/// treats specially, else in single quotes (each `'` written `'\''`).
pub fn shell_word(text: &str) -> Cow<'_, str> {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c));
    if plain {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("'{}'", text.replace('\'', r"'\''")))
    }
}

/// The text of a panic's payload (`panic!` with a literal or a formatted message), or
/// `"a panic without a message"`.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Bytes as lowercase hex: the digests of every event (the audit chain's `prev`, the
/// receipt's input and plugin digests, a session's file name). `hex::encode` builds its
/// string a `char` at a time; its table encoder into a buffer is several times faster.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    hex_into(&mut out, bytes);
    String::from_utf8(out).unwrap_or_default()
}

/// [`hex()`] appended to `out`: a digest written into a line being built, with no string
/// of its own.
pub fn hex_into(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + bytes.len() * 2, 0);
    // The new tail is exactly twice the input: `encode_to_slice` cannot fail.
    let _ = hex::encode_to_slice(bytes, &mut out[start..]);
}

/// A JSON value as one line of compact JSON (what every hook gets as its input),
/// written into a buffer sized for a usual event so that it does not regrow on the way
/// (`Value`'s `to_string` starts from an empty string and regrows it a few times).
pub fn json_line(value: &serde_json::Value) -> String {
    let mut out = Vec::with_capacity(JSON_LINE_CAPACITY);
    // A `Value` always serializes (its map keys are strings), and only as UTF-8.
    let _ = serde_json::to_writer(&mut out, value);
    String::from_utf8(out).unwrap_or_default()
}

/// The first buffer of [`json_line`]: a tool call's event is a few hundred bytes to a
/// few KiB.
const JSON_LINE_CAPACITY: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_is_the_compact_json_of_to_string() {
        let value = serde_json::json!({"a": [1, "two\n", {"c": null}], "long": "x".repeat(3000)});
        assert_eq!(json_line(&value), value.to_string());
        assert_eq!(json_line(&serde_json::json!("")), "\"\"");
    }

    #[test]
    fn hex_is_hex_encode() {
        for bytes in [&[][..], &[0], &[0xff, 0x00, 0xa5], &[0x12; 32]] {
            assert_eq!(hex(bytes), hex::encode(bytes));
        }
    }

    #[test]
    fn a_panic_message_is_its_text_whatever_its_payload() {
        let text = |f: fn()| {
            let payload = std::panic::catch_unwind(f).unwrap_err();
            panic_message(payload.as_ref()).to_string()
        };
        assert_eq!(text(|| panic!("literal")), "literal");
        assert_eq!(text(|| panic!("formatted {}", 1)), "formatted 1");
        assert_eq!(
            text(|| std::panic::panic_any(7_u8)),
            "a panic without a message"
        );
    }

    /// Every character's width is at least what serde's JSON, [`escape_json`] and
    /// [`escape`] make of it, and no more than six bytes per byte of UTF-8.
    #[test]
    fn shown_width_bounds_every_escape() {
        let every = (0..=0x10ffffu32)
            .step_by(1)
            .filter_map(char::from_u32)
            .filter(|c| (*c as u32) < 0x3000 || (*c as u32).is_multiple_of(97));
        for c in every {
            let s = c.to_string();
            let json = escape_json(&serde_json::to_string(&s).unwrap()).len() - 2;
            let terminal = escape(&s).len().max(escape_multiline(&s).len());
            let width = shown_width(c);
            assert!(
                width >= json && width >= terminal,
                "{c:?}: {width} < {json}/{terminal}"
            );
            assert!(width <= 6 * c.len_utf8(), "{c:?}");
            assert_eq!(shown_len(&s), width, "{c:?}");
        }
    }

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(
            escape("ok: ./lint.sh — ünïcode"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(escape_multiline("a\n\tb"), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_and_reordering_characters_are_escaped() {
        assert_eq!(escape("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape("curl x | sh\r./lint.sh"), "curl x | sh\\r./lint.sh");
        assert_eq!(escape("a\nb\tc\0"), "a\\nb\\tc\\x00");
        assert_eq!(escape("\u{7f}\u{9b}"), "\\x7f\\x9b");
        assert_eq!(escape("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape_multiline("a\nb\x1b]0;t\x07"), "a\nb\\x1b]0;t\\x07");
    }

    /// The classes, not picked members: every format character (`Cf`) and both separators
    /// (`Zl`, `Zp`), in and beyond the BMP, is escaped for a terminal and in JSON.
    #[test]
    fn every_format_character_and_separator_is_escaped() {
        for c in [
            '\u{ad}',
            '\u{600}',
            '\u{6dd}',
            '\u{180e}',
            '\u{200b}',
            '\u{2028}',
            '\u{2029}',
            '\u{2060}',
            '\u{2064}',
            '\u{206f}',
            '\u{fff9}',
            '\u{110bd}',
            '\u{1d173}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
        ] {
            let s = format!("a{c}b");
            assert!(!escape(&s).contains(c), "{c:?}");
            assert!(!escape_multiline(&s).contains(c), "{c:?}");
            let json = serde_json::to_string(&s).unwrap();
            let escaped = escape_json(&json);
            assert!(!escaped.contains(c), "{c:?}");
            let back: String = serde_json::from_str(&escaped).unwrap();
            assert_eq!(back, s, "{c:?}: {escaped}");
        }
        // Letters, marks and spaces stay as they are.
        assert!(matches!(escape("é 中文 x"), Cow::Borrowed(_)));
    }

    /// Every character there is: one of the four classes never reaches the output raw,
    /// and any other character passes through unchanged (borrowed, not copied).
    #[test]
    fn every_character_is_judged_by_its_class() {
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            let class = matches!(
                c.general_category(),
                GeneralCategory::Control
                    | GeneralCategory::Format
                    | GeneralCategory::LineSeparator
                    | GeneralCategory::ParagraphSeparator
            );
            assert_eq!(class, is_unsafe(c, false), "{c:?}");
            let s = c.to_string();
            let shown = escape(&s);
            if class {
                assert!(!shown.contains(c) && shown.is_ascii(), "{c:?}");
            } else {
                assert!(matches!(shown, Cow::Borrowed(_)), "{c:?}");
            }
        }
    }

    #[test]
    fn json_keeps_its_value_and_loses_what_a_terminal_acts_on() {
        let value = serde_json::json!({"k\u{202e}": "a\u{7f}\u{9b}b\u{2066}ü\u{1b}"});
        let text = serde_json::to_string(&value).unwrap();
        let escaped = escape_json(&text);
        assert!(
            !escaped.chars().any(|c| is_unsafe(c, false) && c != '\\'),
            "{escaped}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&escaped).unwrap(),
            value
        );
        assert!(matches!(escape_json("{\"a\":\"ü\"}"), Cow::Borrowed(_)));
    }
}
