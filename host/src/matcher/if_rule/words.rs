//! The regexes a `Bash(...)` pattern builds, matched on ASCII text without a regex.
//!
//! Every regex of [`super::bash::BashPattern`] is made of the same few pieces: the
//! program's name (ASCII case aside), words compared byte for byte, `*` (any run of
//! bytes), whitespace (a run of one or more), and one of three frames: the whole text,
//! the whole text or the start of it before whitespace (a trailing ` *`), or the pattern
//! between non-word bytes (quoted text). A compiled regex holds 10–20 KB however short
//! its pattern, so 4,000 rules naming one program cost 60 MB as soon as a command ran
//! that program. A [`WordGlob`] holds a byte or two per byte of the rule and answers as
//! the regex does on ASCII text (`words_tests.rs` compares them on generated patterns
//! and commands); the regex stays for text beyond ASCII, and for text so long that the
//! glob's cost (text length times pattern length) would pass [`STEP_BUDGET`].

/// The most steps (bytes of text times steps of pattern) a glob takes before the regex
/// answers instead.
pub(super) const STEP_BUDGET: usize = 1 << 26;

/// One step of a glob: one byte of a class, or any run of them (`many`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Step {
    class: Class,
    many: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Any byte (`.` under `(?s)`).
    Any,
    /// ASCII whitespace as the regex's ASCII `\s` has it: tab, newline, vertical tab,
    /// form feed, carriage return, space.
    Space,
    /// This byte.
    Byte(u8),
    /// This byte, ASCII case aside (`(?i:)` in ASCII mode).
    Fold(u8),
}

impl Class {
    fn accepts(self, b: u8) -> bool {
        match self {
            Class::Any => true,
            Class::Space => is_space(b),
            Class::Byte(c) => b == c,
            Class::Fold(c) => b.eq_ignore_ascii_case(&c),
        }
    }
}

/// Where a glob must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Frame {
    /// `^...$`; with `tail`, `^...(?:\s.*)?$`.
    Whole { tail: bool },
    /// `(?:^|[^0-9A-Za-z_.-])...(?:[^0-9A-Za-z_.-]|$)`, anywhere.
    Quoted,
}

/// A glob over ASCII text, built from the same words as its regex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WordGlob {
    steps: Box<[Step]>,
    frame: Frame,
}

/// Builds a glob piece by piece, as [`super::bash::wildcard`] builds a regex.
#[derive(Debug, Default)]
pub(super) struct Builder {
    steps: Vec<Step>,
}

impl Builder {
    /// `pattern` as [`super::bash::wildcard`] reads it (`*` any run, whitespace a run of
    /// one or more), case-insensitive with `fold`. `None` for text beyond ASCII.
    pub(super) fn wildcard(mut self, pattern: &str, fold: bool) -> Option<Builder> {
        if !pattern.is_ascii() {
            return None;
        }
        let bytes = pattern.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'*' {
                while bytes.get(i + 1) == Some(&b'*') {
                    i += 1;
                }
                self.steps.push(Step {
                    class: Class::Any,
                    many: true,
                });
            } else if (b as char).is_whitespace() {
                while bytes
                    .get(i + 1)
                    .is_some_and(|c| (*c as char).is_whitespace())
                {
                    i += 1;
                }
                self.space();
            } else {
                let class = match fold {
                    true => Class::Fold(b),
                    false => Class::Byte(b),
                };
                self.steps.push(Step { class, many: false });
            }
            i += 1;
        }
        Some(self)
    }

    /// `\s+`.
    pub(super) fn space(&mut self) {
        for many in [false, true] {
            self.steps.push(Step {
                class: Class::Space,
                many,
            });
        }
    }

    pub(super) fn build(self, frame: Frame) -> WordGlob {
        WordGlob {
            steps: self.steps.into_boxed_slice(),
            frame,
        }
    }
}

/// The regex's ASCII `\s`.
fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ')
}

/// The quoted frame's word bytes: `[0-9A-Za-z_.-]`.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

impl WordGlob {
    /// Whether the glob matches `text` (ASCII), or `None` when that would take more than
    /// [`STEP_BUDGET`] steps.
    pub(super) fn is_match(&self, text: &[u8]) -> Option<bool> {
        let m = self.steps.len();
        if text.len().saturating_add(1).saturating_mul(m + 1) > STEP_BUDGET {
            return None;
        }
        // The set of steps reached so far: step j means the first j steps have matched.
        let mut now = vec![false; m + 1];
        let mut next = vec![false; m + 1];
        now[0] = true;
        self.close(&mut now);
        let quoted = self.frame == Frame::Quoted;
        for i in 0..=text.len() {
            if now[m] {
                let accepted = match (self.frame, text.get(i)) {
                    (_, None) => true,
                    (Frame::Whole { tail }, Some(&b)) => tail && is_space(b),
                    (Frame::Quoted, Some(&b)) => !is_word(b),
                };
                if accepted {
                    return Some(true);
                }
            }
            let Some(&b) = text.get(i) else { break };
            next.fill(false);
            let mut alive = false;
            for j in 0..m {
                if now[j] && self.steps[j].class.accepts(b) {
                    next[if self.steps[j].many { j } else { j + 1 }] = true;
                    alive = true;
                }
            }
            // Quoted text: the pattern may start after any non-word byte (and while
            // nothing is under way, only there).
            if quoted && !is_word(b) {
                next[0] = true;
            }
            if !alive && !quoted {
                return Some(false);
            }
            self.close(&mut next);
            std::mem::swap(&mut now, &mut next);
        }
        Some(false)
    }

    /// Whether `text` holds the glob's leading bytes (the program's name, ASCII case
    /// aside): at its start for a whole-text glob, anywhere for quoted text. A quick
    /// test before [`WordGlob::is_match`].
    pub(super) fn may_match(&self, text: &[u8]) -> bool {
        let lead = self
            .steps
            .iter()
            .take_while(|s| matches!(s.class, Class::Fold(_)) && !s.many)
            .count();
        if lead == 0 {
            return true;
        }
        let fits = |w: &[u8]| {
            w.iter()
                .zip(&self.steps[..lead])
                .all(|(b, s)| s.class.accepts(*b))
        };
        match self.frame {
            Frame::Whole { .. } => text.get(..lead).is_some_and(fits),
            Frame::Quoted => text.windows(lead).any(fits),
        }
    }

    /// The regex this glob stands for (for text beyond ASCII, or beyond the budget).
    pub(super) fn regex(&self) -> String {
        let mut out = String::from(match self.frame {
            Frame::Whole { .. } => "(?s)^",
            Frame::Quoted => "(?s)(?:^|[^0-9A-Za-z_.-])",
        });
        for step in self.steps.iter() {
            let one = match step.class {
                Class::Any => ".".to_string(),
                Class::Space => r"\s".to_string(),
                Class::Byte(b) => regex::escape(&(b as char).to_string()),
                Class::Fold(b) => format!("(?i:{})", regex::escape(&(b as char).to_string())),
            };
            out.push_str(&one);
            if step.many {
                out.push('*');
            }
        }
        out.push_str(match self.frame {
            Frame::Whole { tail: true } => r"(?:\s.*)?$",
            Frame::Whole { tail: false } => "$",
            Frame::Quoted => "(?:[^0-9A-Za-z_.-]|$)",
        });
        out
    }

    /// Adds the steps reached without a byte: past each `many` step.
    fn close(&self, set: &mut [bool]) {
        for j in 0..self.steps.len() {
            if set[j] && self.steps[j].many {
                set[j + 1] = true;
            }
        }
    }
}
