//! Stage 6 of the pipeline: merging what the hooks said into one [`Outcome`].
//!
//! The rules (Claude Code's, made deterministic):
//! - `continue: false` beats everything: the agent stops after the hooks;
//! - PreToolUse: `deny` > `defer` > `ask` > `allow`; exit 2 is a deny; the deprecated
//!   top-level `decision: "approve" | "block"` means allow / deny;
//! - PermissionRequest: `deny` > `allow`, from `hookSpecificOutput.decision.behavior`;
//! - events with `decision: "block"`: any block blocks; exit 2 blocks on events that can
//!   block and is a notice on the others;
//! - the reasons of every hook that chose the winning decision are kept, in config order;
//! - every `additionalContext` (and plain stdout where the event reads it as context) is
//!   kept, in config order;
//! - `updatedInput` replaces the whole input; when several hooks rewrite it (or
//!   `updatedToolOutput`, or another event-specific field), the hook with the highest
//!   `priority` wins, then the first in config order, and the outcome names it;
//! - a failed hook is a notice (fail open), or a block with `onFailure: "block"` on events
//!   that can block;
//! - fields the event does not honour are ignored;
//! - every text of the outcome (`reason`, `stopReason`, each `additionalContext`,
//!   `systemMessages` entry, notice, and hook `message` / `diagnostics`) is cut at
//!   [`crate::handlers::output::OUTPUT_TEXT_CAP`] characters with a marker saying how much was cut
//!   ([`Outcome::enforce_caps`]), whatever handler produced it.

mod claude;

pub use claude::{ClaudeResponse, notice_line, to_claude, untrusted_notice};

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::config::schema::OnFailure;
use crate::event::{DecisionStyle, EventSpec, Exit2};
use crate::handlers::output::{cap_in_place, cap_text};
use crate::handlers::{Answer, Failure, FailureKind, HandlerRun, Verdict};
use crate::policy::{Hook, RunMode};

/// The merged decision of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// No hook expressed a decision.
    #[default]
    None,
    /// Allow (skip the permission prompt).
    Allow,
    /// Ask the user.
    Ask,
    /// Defer the tool call (headless agents).
    Defer,
    /// Deny the tool call.
    Deny,
    /// Block the action (prompt, stop, post-tool feedback, ...).
    Block,
}

impl Decision {
    /// Whether the action does not go ahead.
    pub fn is_blocking(self) -> bool {
        matches!(self, Decision::Deny | Decision::Block)
    }
}

/// Status of one hook in an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookStatus {
    /// Ran and answered without blocking.
    Ok,
    /// Ran and blocked or denied.
    Blocked,
    /// Ran and failed.
    Failed,
    /// Hit its deadline.
    Timeout,
    /// Did not run; `message` says why.
    Skipped,
    /// Started in the background.
    Async,
}

/// One hook's line in an outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookReport {
    /// The hook's id.
    pub id: String,
    /// Its source (`managed`, `cli`, `local`, `project`, `user`, `embedded`).
    pub source: String,
    /// Its handler type.
    #[serde(rename = "type")]
    pub kind: String,
    /// What happened.
    pub status: HookStatus,
    /// Exit code (command) or HTTP status (http).
    pub exit_code: Option<i32>,
    /// Wall-clock time in milliseconds.
    pub duration_ms: Option<f64>,
    /// Fuel used (wasm).
    pub fuel: Option<u64>,
    /// Peak memory in bytes (wasm).
    pub memory_bytes: Option<u64>,
    /// Why it failed, blocked or was skipped.
    pub message: Option<String>,
    /// Captured stderr, or a wasm plugin's stdout / stderr / log records, capped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<String>,
}

/// A non-blocking message attributed to a hook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    /// The hook's id, or `hookhost` for the host's own notices.
    pub hook: String,
    /// The message.
    pub message: String,
}

/// The merged result of one event, as printed by `hookhost dispatch`.
/// Field names are stable: fields get added, never renamed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The event name.
    pub event: String,
    /// The merged decision.
    pub decision: Decision,
    /// Why (the reasons of the hooks that chose the decision).
    pub reason: Option<String>,
    /// `false` when a hook asked the agent to stop.
    #[serde(rename = "continue")]
    pub continue_: bool,
    /// Shown to the user when `continue` is false.
    pub stop_reason: Option<String>,
    /// Context for the model, in config order.
    pub additional_context: Vec<String>,
    /// Messages for the user, in config order.
    pub system_messages: Vec<String>,
    /// The rewritten tool input, replacing the whole input.
    pub updated_input: Option<Value>,
    /// The hook whose rewrite was used.
    pub updated_input_by: Option<String>,
    /// The rewritten tool output (PostToolUse).
    pub updated_tool_output: Option<Value>,
    /// Other event-specific fields (`sessionTitle`, `watchPaths`, PermissionRequest's
    /// `decision`, ...).
    pub hook_specific_output: Map<String, Value>,
    /// Non-blocking errors and host notices.
    pub notices: Vec<Notice>,
    /// One entry per hook that matched.
    pub hooks: Vec<HookReport>,
}

impl Outcome {
    /// An outcome with no hooks.
    pub fn empty(event: &str) -> Outcome {
        Outcome {
            event: event.to_string(),
            decision: Decision::None,
            reason: None,
            continue_: true,
            stop_reason: None,
            additional_context: Vec::new(),
            system_messages: Vec::new(),
            updated_input: None,
            updated_input_by: None,
            updated_tool_output: None,
            hook_specific_output: Map::new(),
            notices: Vec::new(),
            hooks: Vec::new(),
        }
    }

    /// Adds a notice from the host itself (capped like every notice).
    pub fn host_notice(&mut self, message: impl Into<String>) {
        let mut message = message.into();
        cap_in_place(&mut message);
        self.notices.push(Notice {
            hook: "hookhost".into(),
            message,
        });
    }

    /// Cuts every text of the outcome at
    /// [`OUTPUT_TEXT_CAP`](crate::handlers::output::OUTPUT_TEXT_CAP) characters, with a marker
    /// saying how much was cut: the last line of defence, so that no handler (present or
    /// future) and no host notice can make an outcome carry a hook's megabytes. Texts
    /// within the cap are not scanned (a length check each).
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
    }
}

/// What became of one matched hook.
#[derive(Debug, Clone)]
pub enum HookResult {
    /// It ran.
    Ran(Box<HandlerRun>),
    /// It did not run, for this reason.
    Skipped(String),
    /// It was started in the background.
    Started,
}

/// A matched hook and what became of it.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The hook.
    pub hook: Arc<Hook>,
    /// Its result.
    pub result: HookResult,
}

/// A value proposed by a hook for a field only one hook can set.
#[derive(Debug, Clone)]
struct Candidate {
    priority: i64,
    order: usize,
    hook: String,
    value: Value,
}

impl Candidate {
    fn new(hook: &Hook, value: Value) -> Candidate {
        Candidate {
            priority: hook.priority,
            order: hook.order,
            hook: hook.id.clone(),
            value,
        }
    }

    /// Highest priority first, then config order.
    fn beats(&self, other: &Candidate) -> bool {
        (self.priority, std::cmp::Reverse(self.order))
            > (other.priority, std::cmp::Reverse(other.order))
    }
}

/// Keeps the winning candidate of a field.
fn propose(slot: &mut Option<Candidate>, candidate: Candidate) {
    if slot.as_ref().is_none_or(|current| candidate.beats(current)) {
        *slot = Some(candidate);
    }
}

/// What the merge has gathered so far.
#[derive(Default)]
struct MergeState {
    decisions: Vec<(Decision, Option<String>)>,
    updated_input: Option<Candidate>,
    updated_output: Option<Candidate>,
    /// Other event-specific fields, in first-seen order.
    extras: Vec<(String, Option<Candidate>)>,
    /// PermissionRequest `decision` objects, with the behavior each chose.
    permission_objects: Vec<(Decision, Candidate)>,
}

impl MergeState {
    fn propose_extra(&mut self, field: &str, candidate: Candidate) {
        match self.extras.iter_mut().find(|(f, _)| f == field) {
            Some((_, slot)) => propose(slot, candidate),
            None => self.extras.push((field.to_string(), Some(candidate))),
        }
    }
}

/// Whether a failed run blocks: `onFailure: "block"` on a sync hook of an event that can
/// block.
fn fails_closed(hook: &Hook, spec: &EventSpec) -> bool {
    hook.on_failure == OnFailure::Block && hook.mode == RunMode::Sync && spec.can_block()
}

/// Merges the results of an event's hooks (in config order) into an [`Outcome`].
pub fn merge(spec: &EventSpec, executed: &[Executed]) -> Outcome {
    let mut outcome = Outcome::empty(&spec.name);
    let mut state = MergeState::default();

    for Executed { hook, result } in executed {
        let mut report = HookReport {
            id: hook.id.clone(),
            source: hook.origin.kind.as_str().to_string(),
            kind: hook.handler.type_name().to_string(),
            status: HookStatus::Ok,
            exit_code: None,
            duration_ms: None,
            fuel: None,
            memory_bytes: None,
            message: None,
            diagnostics: None,
        };
        match result {
            HookResult::Skipped(reason) => {
                report.status = HookStatus::Skipped;
                report.message = Some(reason.clone());
            }
            HookResult::Started => report.status = HookStatus::Async,
            HookResult::Ran(run) => {
                report.exit_code = run.exit_code;
                report.duration_ms = Some((run.duration.as_secs_f64() * 1e6).round() / 1e3);
                report.fuel = run.usage.fuel;
                report.memory_bytes = run.usage.memory_bytes;
                report.diagnostics = run.diagnostics.clone();
                match &run.verdict {
                    Verdict::Failed(Failure { kind, message }) => {
                        report.status = if *kind == FailureKind::Timeout {
                            HookStatus::Timeout
                        } else {
                            HookStatus::Failed
                        };
                        report.message = Some(message.clone());
                        if fails_closed(hook, spec) {
                            let reason = format!(
                                "hook `{}` failed and has `onFailure: \"block\"`: {message}",
                                hook.id
                            );
                            state
                                .decisions
                                .push((blocking_decision(spec), Some(reason)));
                        } else {
                            outcome.notices.push(Notice {
                                hook: hook.id.clone(),
                                message: message.clone(),
                            });
                        }
                    }
                    Verdict::Answer(answer) => {
                        let blocked = apply_answer(spec, hook, answer, &mut outcome, &mut state);
                        if blocked {
                            report.status = HookStatus::Blocked;
                            report.message = answer
                                .blocking_error
                                .clone()
                                .or_else(|| answer.output.reason_text().map(str::to_string));
                        }
                    }
                }
            }
        }
        outcome.hooks.push(report);
    }

    if let Some(winner) = state.decisions.iter().map(|(d, _)| *d).max() {
        outcome.decision = winner;
        let reasons: Vec<&str> = state
            .decisions
            .iter()
            .filter(|(d, _)| *d == winner)
            .filter_map(|(_, r)| r.as_deref())
            .collect();
        let mut unique: Vec<&str> = Vec::new();
        for r in reasons {
            if !unique.contains(&r) {
                unique.push(r);
            }
        }
        outcome.reason = (!unique.is_empty()).then(|| cap_text(&unique.join("\n")));
    }
    let mut permission_object = None;
    for (decision, candidate) in state.permission_objects {
        if decision == outcome.decision {
            propose(&mut permission_object, candidate);
        }
    }
    if let Some(c) = permission_object {
        // A rewrite inside the winning `decision` object is the input rewrite.
        if let Some(input) = c.value.get("updatedInput") {
            propose(
                &mut state.updated_input,
                Candidate {
                    value: input.clone(),
                    ..c.clone()
                },
            );
        }
        outcome
            .hook_specific_output
            .insert("decision".into(), c.value);
    }
    if let Some(c) = state.updated_input {
        outcome.updated_input = Some(c.value);
        outcome.updated_input_by = Some(c.hook);
    }
    if let Some(c) = state.updated_output {
        outcome.updated_tool_output = Some(c.value);
    }
    for (field, c) in state.extras {
        if let Some(c) = c {
            outcome.hook_specific_output.insert(field, c.value);
        }
    }
    outcome.enforce_caps();
    outcome
}

/// Whether one hook's result blocks the event or stops the agent: a sequential group
/// runs no further hooks after it.
pub fn stops_the_rest(spec: &EventSpec, executed: &Executed) -> bool {
    let merged = merge(spec, std::slice::from_ref(executed));
    merged.decision.is_blocking() || !merged.continue_
}

/// The decision a blocking error means on this event.
fn blocking_decision(spec: &EventSpec) -> Decision {
    match spec.decision {
        DecisionStyle::Permission | DecisionStyle::PermissionRequest => Decision::Deny,
        _ => Decision::Block,
    }
}

/// Applies one answer; returns whether this hook blocked or denied.
fn apply_answer(
    spec: &EventSpec,
    hook: &Hook,
    answer: &Answer,
    outcome: &mut Outcome,
    state: &mut MergeState,
) -> bool {
    let output = &answer.output;
    let mut blocked = false;

    if let Some(message) = &answer.blocking_error {
        match spec.exit2 {
            Exit2::Blocks => {
                state
                    .decisions
                    .push((blocking_decision(spec), Some(message.clone())));
                blocked = true;
            }
            Exit2::Notice => outcome.notices.push(Notice {
                hook: hook.id.clone(),
                message: message.clone(),
            }),
            Exit2::Ignored => {}
        }
    }
    if spec.honours_continue && output.continue_ == Some(false) {
        outcome.continue_ = false;
        if outcome.stop_reason.is_none() {
            outcome.stop_reason = output.stop_reason.as_deref().map(cap_text);
        }
    }
    if let Some(message) = &output.system_message {
        outcome.system_messages.push(cap_text(message));
    }

    let reason = output.reason_text().map(str::to_string);
    match spec.decision {
        DecisionStyle::Block => {
            if output.decision.as_deref() == Some("block") {
                state.decisions.push((
                    Decision::Block,
                    reason.or_else(|| Some(format!("blocked by hook `{}`", hook.id))),
                ));
                blocked = true;
            }
        }
        DecisionStyle::Permission => {
            let specific = output
                .specific
                .get("permissionDecision")
                .and_then(Value::as_str);
            let decision = match (specific, output.decision.as_deref()) {
                (Some("allow"), _) | (None, Some("approve")) => Some(Decision::Allow),
                (Some("ask"), _) => Some(Decision::Ask),
                (Some("defer"), _) => Some(Decision::Defer),
                (Some("deny"), _) | (None, Some("block")) => Some(Decision::Deny),
                _ => None,
            };
            if let Some(decision) = decision {
                blocked |= decision == Decision::Deny;
                state.decisions.push((decision, reason));
            }
        }
        DecisionStyle::PermissionRequest => {
            if let Some(object) = output.specific.get("decision") {
                let decision = match object.get("behavior").and_then(Value::as_str) {
                    Some("allow") => Some(Decision::Allow),
                    Some("deny") => Some(Decision::Deny),
                    _ => None,
                };
                if let Some(decision) = decision {
                    let message = object
                        .get("message")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    blocked |= decision == Decision::Deny;
                    state.decisions.push((decision, message));
                    state
                        .permission_objects
                        .push((decision, Candidate::new(hook, object.clone())));
                }
            }
        }
        DecisionStyle::ContinueOnly | DecisionStyle::None => {}
    }

    if spec.honours("additionalContext")
        && let Some(context) = output
            .specific
            .get("additionalContext")
            .and_then(Value::as_str)
    {
        outcome.additional_context.push(cap_text(context));
    }
    if spec.plain_stdout_is_context
        && let Some(text) = &answer.plain_text
    {
        outcome.additional_context.push(text.clone());
    }
    for (field, value) in &output.specific {
        if !spec.honours(field) {
            continue;
        }
        match field.as_str() {
            "additionalContext"
            | "permissionDecision"
            | "permissionDecisionReason"
            | "decision" => {}
            "updatedInput" => propose(
                &mut state.updated_input,
                Candidate::new(hook, value.clone()),
            ),
            "updatedToolOutput" | "updatedMCPToolOutput" => propose(
                &mut state.updated_output,
                Candidate::new(hook, value.clone()),
            ),
            _ => state.propose_extra(field, Candidate::new(hook, value.clone())),
        }
    }
    blocked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Origin, SourceKind};
    use crate::event::EventCatalogue;
    use crate::handlers::{HookOutput, Usage};
    use crate::policy::HandlerSpec;
    use serde_json::json;
    use std::time::Duration;

    fn hook(id: &str, order: usize, priority: i64, on_failure: OnFailure) -> Arc<Hook> {
        Arc::new(Hook {
            id: id.into(),
            event: String::new(),
            origin: Origin {
                kind: SourceKind::Project,
                location: "hooks.json".into(),
            },
            config_path: String::new(),
            handler: HandlerSpec::Unsupported(crate::config::schema::HandlerType::Prompt),
            if_rule: None,
            timeout: Duration::from_secs(1),
            on_failure,
            priority,
            mode: RunMode::Sync,
            status_message: None,
            skip: None,
            order,
        })
    }

    fn ran(verdict: Verdict) -> HookResult {
        HookResult::Ran(Box::new(HandlerRun {
            verdict,
            exit_code: Some(0),
            duration: Duration::from_millis(1),
            usage: Usage::default(),
            diagnostics: None,
        }))
    }

    fn json_answer(value: serde_json::Value, event: &str) -> Verdict {
        Verdict::Answer(Answer {
            output: HookOutput::from_json(value, event).unwrap(),
            ..Answer::default()
        })
    }

    fn merged(event: &str, answers: Vec<(i64, Verdict)>) -> Outcome {
        let catalogue = EventCatalogue::default();
        let executed: Vec<Executed> = answers
            .into_iter()
            .enumerate()
            .map(|(i, (priority, verdict))| Executed {
                hook: hook(&format!("h{i}"), i, priority, OnFailure::Continue),
                result: ran(verdict),
            })
            .collect();
        merge(catalogue.get(event).unwrap(), &executed)
    }

    fn permission(decision: &str) -> Verdict {
        json_answer(
            json!({"hookSpecificOutput": {"permissionDecision": decision, "permissionDecisionReason": decision}}),
            "PreToolUse",
        )
    }

    #[test]
    fn permission_merge_table() {
        let rows: &[(&[&str], Decision)] = &[
            (&[], Decision::None),
            (&["allow"], Decision::Allow),
            (&["allow", "ask"], Decision::Ask),
            (&["ask", "defer"], Decision::Defer),
            (&["defer", "deny", "allow"], Decision::Deny),
        ];
        for (decisions, expected) in rows {
            let out = merged(
                "PreToolUse",
                decisions.iter().map(|d| (0, permission(d))).collect(),
            );
            assert_eq!(out.decision, *expected, "{decisions:?}");
        }
        // deprecated top-level decision on PreToolUse
        assert_eq!(
            merged(
                "PreToolUse",
                vec![(0, json_answer(json!({"decision": "approve"}), "PreToolUse"))]
            )
            .decision,
            Decision::Allow
        );
        assert_eq!(
            merged(
                "PreToolUse",
                vec![(0, json_answer(json!({"decision": "block"}), "PreToolUse"))]
            )
            .decision,
            Decision::Deny
        );
    }

    #[test]
    fn exit_2_per_event() {
        let blocking = || {
            Verdict::Answer(Answer {
                blocking_error: Some("stderr".into()),
                ..Answer::default()
            })
        };
        let rows: &[(&str, Decision, usize)] = &[
            ("PreToolUse", Decision::Deny, 0),
            ("Stop", Decision::Block, 0),
            ("UserPromptSubmit", Decision::Block, 0),
            ("TeammateIdle", Decision::Block, 0),
            ("SessionStart", Decision::None, 1),
            ("PermissionRequest", Decision::None, 0),
            ("Notification", Decision::None, 0),
        ];
        for &(event, decision, notices) in rows {
            let out = merged(event, vec![(0, blocking())]);
            assert_eq!(out.decision, decision, "{event}");
            assert_eq!(out.notices.len(), notices, "{event}");
        }
    }

    #[test]
    fn rewrites_pick_priority_then_config_order() {
        let rewrite = |cmd: &str| {
            json_answer(
                json!({"hookSpecificOutput": {"updatedInput": {"command": cmd}}}),
                "PreToolUse",
            )
        };
        let out = merged(
            "PreToolUse",
            vec![
                (0, rewrite("a")),
                (5, rewrite("b")),
                (5, rewrite("c")),
                (1, rewrite("d")),
            ],
        );
        assert_eq!(out.updated_input, Some(json!({"command": "b"})));
        assert_eq!(out.updated_input_by.as_deref(), Some("h1"));
        // a field the event does not honour is ignored
        let out = merged(
            "Stop",
            vec![(
                0,
                json_answer(json!({"hookSpecificOutput": {"updatedInput": {}}}), "Stop"),
            )],
        );
        assert_eq!(out.updated_input, None);
    }

    #[test]
    fn continue_false_contexts_and_messages() {
        let out = merged(
            "PostToolUse",
            vec![
                (
                    0,
                    json_answer(
                        json!({"hookSpecificOutput": {"additionalContext": "one"}, "systemMessage": "m1"}),
                        "PostToolUse",
                    ),
                ),
                (
                    0,
                    json_answer(
                        json!({"continue": false, "stopReason": "halt", "decision": "block", "reason": "r"}),
                        "PostToolUse",
                    ),
                ),
                (
                    0,
                    json_answer(
                        json!({"hookSpecificOutput": {"additionalContext": "two"}, "systemMessage": "m2"}),
                        "PostToolUse",
                    ),
                ),
            ],
        );
        assert!(!out.continue_);
        assert_eq!(out.stop_reason.as_deref(), Some("halt"));
        assert_eq!(out.additional_context, ["one", "two"]);
        assert_eq!(out.system_messages, ["m1", "m2"]);
        assert_eq!(out.decision, Decision::Block);
        // events that discard `continue`
        let out = merged(
            "Notification",
            vec![(0, json_answer(json!({"continue": false}), "Notification"))],
        );
        assert!(out.continue_);
    }

    #[test]
    fn failures_fail_open_unless_on_failure_block() {
        let catalogue = EventCatalogue::default();
        let failure = || ran(Verdict::failed(FailureKind::Timeout, "timed out after 1s"));
        for (event, on_failure, expected) in [
            ("PreToolUse", OnFailure::Continue, Decision::None),
            ("PreToolUse", OnFailure::Block, Decision::Deny),
            ("Stop", OnFailure::Block, Decision::Block),
            ("SessionStart", OnFailure::Block, Decision::None),
        ] {
            let executed = [Executed {
                hook: hook("x", 0, 0, on_failure),
                result: failure(),
            }];
            let out = merge(catalogue.get(event).unwrap(), &executed);
            assert_eq!(out.decision, expected, "{event} {on_failure:?}");
            assert_eq!(out.hooks[0].status, HookStatus::Timeout);
        }
    }

    #[test]
    fn permission_request_keeps_the_winning_decision_object() {
        let decide = |behavior: &str| {
            json_answer(
                json!({"hookSpecificOutput": {"decision": {"behavior": behavior, "message": behavior}}}),
                "PermissionRequest",
            )
        };
        let out = merged(
            "PermissionRequest",
            vec![(9, decide("allow")), (0, decide("deny"))],
        );
        assert_eq!(out.decision, Decision::Deny);
        assert_eq!(out.hook_specific_output["decision"]["behavior"], "deny");
    }

    /// Whatever a handler puts in a failure message or a reason, the outcome carries at
    /// most the cap of each, with the marker.
    #[test]
    fn every_text_is_capped_at_the_outcome() {
        let huge = "e".repeat(1 << 20);
        let out = merged(
            "Stop",
            vec![
                (0, Verdict::failed(FailureKind::ExitCode, huge.clone())),
                (
                    0,
                    json_answer(
                        json!({"decision": "block", "reason": huge, "systemMessage": huge,
                               "continue": false, "stopReason": huge}),
                        "Stop",
                    ),
                ),
            ],
        );
        let texts = [
            out.notices[0].message.clone(),
            out.hooks[0].message.clone().unwrap(),
            out.hooks[1].message.clone().unwrap(),
            out.reason.clone().unwrap(),
            out.stop_reason.clone().unwrap(),
            out.system_messages[0].clone(),
        ];
        for text in texts {
            assert!(text.chars().count() <= 10_000, "{} characters", text.len());
            assert!(text.ends_with("characters truncated]"), "no marker");
        }
        let mut outcome = Outcome::empty("Stop");
        outcome.host_notice("n".repeat(20_000));
        outcome.additional_context.push("c".repeat(20_000));
        outcome.enforce_caps();
        for text in [&outcome.notices[0].message, &outcome.additional_context[0]] {
            assert_eq!(text.chars().count(), 10_000);
            assert!(text.ends_with("characters truncated]"));
        }
    }

    #[test]
    fn outcome_field_names_are_stable() {
        let value = serde_json::to_value(Outcome::empty("Stop")).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "event",
                "decision",
                "reason",
                "continue",
                "stopReason",
                "additionalContext",
                "systemMessages",
                "updatedInput",
                "updatedInputBy",
                "updatedToolOutput",
                "hookSpecificOutput",
                "notices",
                "hooks"
            ]
        );
    }
}
