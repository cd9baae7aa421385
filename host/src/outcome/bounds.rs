//! The whole outcome bounded: every text cut at the per-text cap, and the lists and the
//! hooks' texts of one outcome held to totals ([`Outcome::enforce_caps`]), however many
//! hooks (or queued async results) it gathers.

use serde_json::Value;

use super::{Notice, Outcome};
use crate::handlers::output::{SHOWN_BYTES_PER_CHARACTER, cap_in_place, cap_text_at};
use crate::text::shown_len;

/// The size of a text against a cap of characters: its characters, or half its shown
/// bytes ([`SHOWN_BYTES_PER_CHARACTER`]) when more, so that a total of characters bounds
/// the bytes of the answer too (a NUL counts three: `\u0000`).
fn size(text: &str) -> usize {
    text.chars()
        .count()
        .max(shown_len(text).div_ceil(SHOWN_BYTES_PER_CHARACTER))
}

impl Outcome {
    /// Cuts every text of the outcome at
    /// [`OUTPUT_TEXT_CAP`](crate::handlers::output::OUTPUT_TEXT_CAP) characters, with a marker
    /// saying how much was cut, and at twice as many bytes once shown (escaped for JSON or
    /// a terminal: [`crate::text::shown_len`]): the last line of defence, so that no
    /// handler (present or future) and no host notice can make an outcome carry a hook's
    /// megabytes, however its bytes escape. Short texts are not scanned (a length check
    /// each). Every cap below counts a text's characters, or half its shown bytes when
    /// more.
    ///
    /// The whole outcome is bounded too, however many hooks (or queued async results)
    /// each stay under the cap: `additionalContext`, `systemMessages` and `notices` keep
    /// at most [`LIST_TEXT_CAP`] characters each (later entries are left out, and a last
    /// entry says how many), the hooks' `message` and `diagnostics` together at most
    /// [`HOOK_TEXTS_CAP`] (past it, a hook's diagnostics are left out and its message is
    /// cut to [`SHORT_TEXT_CAP`]), and the string fields of `hookSpecificOutput`
    /// (`sessionTitle`, PermissionRequest's `decision.message`, …) are capped like texts.
    pub fn enforce_caps(&mut self) {
        let texts = self
            .reason
            .iter_mut()
            .chain(self.stop_reason.iter_mut())
            .chain(self.additional_context.iter_mut())
            .chain(self.system_messages.iter_mut())
            .chain(self.notices.iter_mut().map(|n| &mut n.message))
            .chain(
                self.hooks
                    .iter_mut()
                    .flat_map(|h| h.message.iter_mut().chain(h.diagnostics.iter_mut())),
            );
        for text in texts {
            cap_in_place(text);
        }
        for (field, value) in self.hook_specific_output.iter_mut() {
            // Not inside `decision.updatedInput`: a rewrite is applied as it is.
            let text = match (field.as_str(), value) {
                (_, Value::String(text)) => Some(text),
                ("decision", Value::Object(decision)) => match decision.get_mut("message") {
                    Some(Value::String(text)) => Some(text),
                    _ => None,
                },
                _ => None,
            };
            if let Some(text) = text {
                cap_in_place(text);
            }
        }
        let field =
            |what: &str| format!("the outcome keeps at most {LIST_TEXT_CAP} characters of {what}");
        if let Some(left_out) = bound_list(&mut self.additional_context, String::as_str) {
            self.additional_context
                .push(left_out.marker(&field("additionalContext")));
        }
        if let Some(left_out) = bound_list(&mut self.system_messages, String::as_str) {
            self.system_messages
                .push(left_out.marker(&field("systemMessages")));
        }
        if let Some(left_out) = bound_list(&mut self.notices, |n| n.message.as_str()) {
            self.notices.push(Notice {
                hook: "hookhost".into(),
                message: left_out.marker(&field("notices")),
            });
        }
        self.bound_hook_texts();
    }

    /// The hooks' `message` and `diagnostics` within [`HOOK_TEXTS_CAP`] together.
    fn bound_hook_texts(&mut self) {
        let total: usize = self
            .hooks
            .iter()
            .map(|h| {
                h.message.as_ref().map_or(0, String::len)
                    + h.diagnostics.as_ref().map_or(0, String::len)
            })
            .sum();
        if total.saturating_mul(6) <= HOOK_TEXTS_CAP * SHOWN_BYTES_PER_CHARACTER {
            return; // shown, a byte is at most six: within the cap for sure
        }
        let mut used = 0usize;
        for hook in &mut self.hooks {
            let chars = |t: &Option<String>| t.as_deref().map_or(0, size);
            let own = chars(&hook.message) + chars(&hook.diagnostics);
            if used + own <= HOOK_TEXTS_CAP {
                used += own;
                continue;
            }
            hook.diagnostics = None;
            if let Some(message) = &mut hook.message {
                *message = cap_text_at(message, SHORT_TEXT_CAP);
                used += size(message);
            }
        }
    }
}

/// Characters that `additionalContext`, `systemMessages` and `notices` of one outcome
/// each keep at most (ten hooks' worth at the per-text cap), the note on what was left
/// out included; and twice as many bytes once shown (escaped for JSON or a terminal).
pub const LIST_TEXT_CAP: usize = 100_000;

/// Characters that the `message` and `diagnostics` of all the hooks of one outcome keep
/// together, before later hooks' texts are cut short (and twice as many shown bytes).
pub const HOOK_TEXTS_CAP: usize = 200_000;

/// Characters a hook's `message` keeps once [`HOOK_TEXTS_CAP`] is spent.
pub const SHORT_TEXT_CAP: usize = 200;

/// Room kept under [`LIST_TEXT_CAP`] for the note on what was left out.
const NOTE_ROOM: usize = 200;

/// Entries a list of texts left out.
struct LeftOut {
    entries: usize,
    characters: usize,
}

impl LeftOut {
    fn marker(&self, why: &str) -> String {
        format!(
            "… [{} more entries ({} characters) left out: {why}]",
            self.entries, self.characters
        )
    }
}

/// When `list` holds more than [`LIST_TEXT_CAP`] characters, keeps the entries that fit
/// it less the room for a note, and returns what it left out (so a bounded list with its
/// note is left alone by the next call). A list within the cap in bytes is not scanned.
fn bound_list<T>(list: &mut Vec<T>, text: impl Fn(&T) -> &str) -> Option<LeftOut> {
    if list.iter().map(|t| text(t).len()).sum::<usize>() * 6
        <= LIST_TEXT_CAP * SHOWN_BYTES_PER_CHARACTER
        || list.iter().map(|t| size(text(t))).sum::<usize>() <= LIST_TEXT_CAP
    {
        return None;
    }
    let mut used = 0usize;
    let keep = list.iter().position(|t| {
        used += size(text(t));
        used > LIST_TEXT_CAP - NOTE_ROOM
    })?;
    let left: Vec<T> = list.split_off(keep);
    Some(LeftOut {
        entries: left.len(),
        characters: left.iter().map(|t| text(t).chars().count()).sum(),
    })
}
