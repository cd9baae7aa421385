//! The shape of one audit line ([`Entry`]) and its bounds: what a dispatch's line holds,
//! taken from the invocation and the outcome it borrows, with every value redacted
//! ([`super::Redacted`]) and the hooks' messages held to one budget per line.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde::ser::Serializer;

use super::redact::{Redacted, RedactedText, VALUE_CAP};
use crate::handlers::Invocation;
use crate::outcome::{Decision, HookStatus, Outcome};

/// Bytes the hooks' `message`s of one line may take together; past it, messages are left
/// out with a note (2,000 hooks that each fail with a long message give a bounded line).
const MESSAGES_BUDGET: usize = 64 << 10;

/// The audit line of one dispatch, serialized straight from the invocation and the
/// outcome it borrows (a daemon writes thousands a second).
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    time: String,
    /// `host`, `user`, `hookhostVersion`, `managedPolicy`.
    #[serde(flatten)]
    origin: Option<&'a super::Origin>,
    session: &'a str,
    /// The agent that called (`claude`, `codex`, …), when the dispatch's format names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    agent: Option<&'static str>,
    event: &'a str,
    #[serde(serialize_with = "lossy_path")]
    project: &'a Path,
    #[serde(rename = "toolName", skip_serializing_if = "Option::is_none")]
    tool_name: Option<Redacted<'a>>,
    #[serde(rename = "toolInput", skip_serializing_if = "Option::is_none")]
    tool_input: Option<Redacted<'a>>,
    decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<RedactedText<'a>>,
    #[serde(rename = "continue")]
    continue_: bool,
    /// The rewritten tool input (redacted like `toolInput`), so a rewrite is auditable.
    #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
    updated_input: Option<Redacted<'a>>,
    /// The hook whose rewrite won.
    #[serde(rename = "updatedInputBy", skip_serializing_if = "Option::is_none")]
    updated_input_by: Option<&'a str>,
    /// What each winning rewrite changed (hook, field, JSON Patch), redacted like
    /// `toolInput`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::rewrites::redacted"
    )]
    rewrites: Option<serde_json::Value>,
    hooks: Vec<HookLine<'a>>,
    /// The decision receipt of the dispatch (its `seq` is the line's own, so absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<&'a crate::outcome::DecisionReceipt>,
    /// The line of an async hook's run, written after its event's line.
    #[serde(rename = "async", skip_serializing_if = "std::ops::Not::not")]
    is_async: bool,
}

/// A path as text, with any invalid UTF-8 replaced (a log line is never refused).
fn lossy_path<S: Serializer>(path: &&Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&path.display())
}

/// One hook of an [`Entry`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HookLine<'a> {
    id: &'a str,
    source: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    status: HookStatus,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    required: bool,
    duration_ms: Option<f64>,
    exit_code: Option<i32>,
    fuel: Option<u64>,
    memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turns: Option<u32>,
    /// An `oci://` plugin's reference and digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    plugin: Option<&'a str>,
    message: Option<Message<'a>>,
}

/// A hook's message in a line: redacted, or left out once the line's
/// [`MESSAGES_BUDGET`] is spent.
#[derive(Debug)]
enum Message<'a> {
    Logged(RedactedText<'a>),
    LeftOut(usize),
}

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::Logged(text) => text.serialize(serializer),
            Message::LeftOut(bytes) => serializer.collect_str(&format_args!(
                "[{bytes} bytes not logged: the line's messages are over {MESSAGES_BUDGET} bytes]"
            )),
        }
    }
}

impl<'a> Entry<'a> {
    /// The line, naming where it comes from.
    pub fn with_origin(mut self, origin: &'a super::Origin) -> Self {
        self.origin = Some(origin);
        self
    }

    /// Marks the line as that of an async hook's run.
    pub fn of_async_run(mut self) -> Self {
        self.is_async = true;
        self
    }
}

/// The audit line of one dispatch.
pub fn entry<'a>(invocation: &'a Invocation, outcome: &'a Outcome, now: SystemTime) -> Entry<'a> {
    let mut messages = 0usize;
    Entry {
        time: rfc3339(now),
        origin: None,
        // As hooks get it: an id of megabytes is not a line of megabytes.
        session: crate::handlers::command::session_id_text(&invocation.session_id),
        agent: invocation.agent,
        event: &outcome.event,
        project: &invocation.project_dir,
        tool_name: invocation.input.get("tool_name").map(Redacted),
        tool_input: invocation.input.get("tool_input").map(Redacted),
        decision: outcome.decision,
        reason: outcome.reason.as_deref().map(RedactedText),
        continue_: outcome.continue_,
        updated_input: outcome.updated_input.as_ref().map(Redacted),
        updated_input_by: outcome.updated_input_by.as_deref(),
        rewrites: super::rewrites::logged(&outcome.rewrites),
        hooks: outcome
            .hooks
            .iter()
            .map(|h| HookLine {
                id: &h.id,
                source: &h.source,
                kind: &h.kind,
                status: h.status,
                required: h.required,
                duration_ms: h.duration_ms,
                exit_code: h.exit_code,
                fuel: h.fuel,
                memory_bytes: h.memory_bytes,
                tokens: h.tokens,
                turns: h.turns,
                plugin: h.plugin.as_deref(),
                message: h.message.as_deref().map(|message| {
                    messages = messages.saturating_add(message.len().min(VALUE_CAP * 4));
                    if messages > MESSAGES_BUDGET {
                        Message::LeftOut(message.len())
                    } else {
                        Message::Logged(RedactedText(message))
                    }
                }),
            })
            .collect(),
        receipt: outcome.receipt.as_ref(),
        is_async: false,
    }
}

/// `2026-05-01T12:34:56.789Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_utc() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"),
            (1_777_638_896_789, "2026-05-01T12:34:56.789Z"),
        ];
        for (millis, want) in cases {
            assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(millis)), want);
        }
    }
}
