//! Reading one word: its value after quote removal (static or known only at run time),
//! the commands inside its expansions, and the quoted text in it that may be code.

use brush_parser::word::{WordPiece, WordPieceWithSource};

use super::{Analyzer, MAX_DEPTH, Value, clip, parse};

impl Analyzer {
    /// The value of a word, walking the commands inside it.
    pub(super) fn word(&mut self, raw: &str, depth: usize, sound: bool) -> Value {
        self.word_with(raw, depth, sound, false)
    }

    /// The value of a word whose commands were already walked (brush splits an assignment
    /// argument into the assignment and its word).
    pub(super) fn word_value_only(raw: &str) -> Value {
        Analyzer::default().word_with(raw, MAX_DEPTH + 1, false, false)
    }

    pub(super) fn word_with(
        &mut self,
        raw: &str,
        depth: usize,
        sound: bool,
        heredoc: bool,
    ) -> Value {
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
        let pieces = match parse::word(raw, heredoc) {
            Ok(p) => p,
            Err(why) => {
                self.fail(sound, why);
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

    pub(super) fn piece(
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
    pub(super) fn parameter_expansion(&mut self, text: &str, sound: bool) {
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
    pub(super) fn literal(&mut self, text: &str, depth: usize) {
        if self.done() || !looks_like_code(text) || !self.room() {
            return;
        }
        self.keep_literal(text);
        self.script(text, depth + 1, false);
    }
}

/// Static text of a word being read, and its runs of static text between expansions.
#[derive(Default)]
pub(super) struct WordState {
    value: String,
    /// The value before the first expansion.
    prefix: Option<String>,
    /// The current run of static text (for the literal scan).
    run: String,
    unquoted: String,
    dynamic: bool,
}

impl WordState {
    pub(super) fn push(&mut self, s: &str) {
        self.value.push_str(s);
        self.run.push_str(s);
    }

    pub(super) fn expansion(&mut self, analyzer: &mut Analyzer, depth: usize) {
        if !self.dynamic {
            self.prefix = Some(self.value.clone());
        }
        self.dynamic = true;
        self.flush_run(analyzer, depth);
    }

    pub(super) fn flush_run(&mut self, analyzer: &mut Analyzer, depth: usize) {
        let run = std::mem::take(&mut self.run);
        analyzer.literal(&run, depth);
    }
}

/// Whether text may be shell code: it has whitespace or shell punctuation.
pub(super) fn looks_like_code(text: &str) -> bool {
    text.bytes()
        .any(|b| b.is_ascii_whitespace() || b";&|()<>$`\\'\"{}".contains(&b))
}

/// A subscript other than `[@]`, `[*]` or a number: arithmetic (or, for an associative
/// array, a string the filter does not evaluate).
pub(super) fn risky_subscript(inner: &str) -> bool {
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
pub(super) fn substring_offset(inner: &str) -> Option<&str> {
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

pub(super) fn is_assignment_word(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Pathname expansion: `*`, `?`, `[…]`, extglob `@(…)`.
pub(super) fn is_glob(unquoted: &str) -> bool {
    unquoted.contains(['*', '?', '('])
        || unquoted
            .find('[')
            .is_some_and(|open| unquoted[open + 1..].contains(']'))
}

/// Brace expansion `{a,b}` / `{1..3}`, and the `{}` placeholder of `find -exec` and
/// `xargs -I`.
pub(super) fn is_brace_expansion(unquoted: &str) -> bool {
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
pub(super) fn decode_ansi_c(body: &str) -> Option<String> {
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
