//! Merging the results of an event's hooks into one [`Outcome`] by the rules of the
//! protocol (listed in the [module](super) doc): decisions, rewrites, contexts, messages
//! and failures.

use serde_json::Value;

use super::admit::admitted;
use super::rewrite::{Gathered, rewrites_of};
use super::{Decision, Executed, HookResult, HookStatus, Notice, Outcome, report};
use crate::event::{DecisionStyle, EventSpec, Exit2};
use crate::handlers::output::cap_text;
use crate::handlers::{Answer, Failure, FailureKind, Verdict};
use crate::policy::{FailureEffect, Hook, RunMode};

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
    /// `updatedInput`, `updatedToolOutput`, `updatedPrompt`, `skip` (`outcome::rewrite`).
    rewrites: Gathered,
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

/// Merges the results of an event's hooks (in config order) into an [`Outcome`], without
/// `rewrites` (they are patches of the input, which [`merge_event`] is given).
pub fn merge(spec: &EventSpec, executed: &[Executed]) -> Outcome {
    merge_inner(spec, None, executed)
}

/// Merges the results of an event's hooks (in config order) into an [`Outcome`]; each
/// entry of its `rewrites` is a patch of `input` as the hook saw it.
pub fn merge_event(spec: &EventSpec, input: &Value, executed: &[Executed]) -> Outcome {
    merge_inner(spec, Some(input), executed)
}

fn merge_inner(spec: &EventSpec, input: Option<&Value>, executed: &[Executed]) -> Outcome {
    let mut outcome = Outcome::empty(&spec.name);
    let mut state = MergeState::default();

    for executed in executed {
        let Executed { hook, result } = executed;
        let mut report = report(executed);
        // A required hook that gave no verdict, whatever the reason (every skip, failure,
        // timeout, background start): the event fails closed, instead of what its
        // `onFailure` says.
        if hook.required && !report.status.gives_verdict() {
            super::required::fail_closed(spec, &report, &mut outcome, &mut state.decisions);
            outcome.hooks.push(report);
            continue;
        }
        if let HookResult::Ran(run) = result {
            match &run.verdict {
                Verdict::Failed(Failure { message, kind }) => {
                    if let Some(reason) =
                        super::refuse_only::timeout_block(hook, spec, *kind, message)
                    {
                        state
                            .decisions
                            .push((Decision::blocking_on(spec), Some(reason)));
                    } else {
                        apply_failure(spec, hook, *kind, message, &mut outcome, &mut state);
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
            let hook = (c.hook.clone(), c.priority, c.order);
            state.rewrites.propose_decision_input(hook, input.clone());
        }
        outcome
            .hook_specific_output
            .insert("decision".into(), c.value);
    }
    let resolved = state.rewrites.resolve(input);
    if let Some(won) = resolved.input {
        outcome.updated_input = Some(won.value);
        outcome.updated_input_by = Some(won.by);
    }
    outcome.updated_tool_output = resolved.tool_output.map(|won| won.value);
    outcome.updated_prompt = resolved
        .prompt
        .and_then(|won| won.value.as_str().map(str::to_string));
    if let Some(won) = resolved.skip {
        outcome.skip = true;
        outcome.skip_result = Some(won.value);
    }
    outcome.rewrites = resolved.rewrites;
    for (field, c) in state.extras {
        if let Some(c) = c {
            outcome.hook_specific_output.insert(field, c.value);
        }
    }
    outcome.enforce_caps();
    outcome
}

/// Applies a failed run by the hook's `onFailure` where it runs
/// ([`Hook::failure_effect`]). Every failure kind passes here, "could not start" (out of
/// processes, descriptors, memory) included.
fn apply_failure(
    spec: &EventSpec,
    hook: &Hook,
    kind: FailureKind,
    message: &str,
    outcome: &mut Outcome,
    state: &mut MergeState,
) {
    let failed = |mode: &str| {
        format!(
            "hook `{}` failed and has `onFailure: \"{mode}\"`: {message}",
            hook.id
        )
    };
    // A plugin not admitted ([`FailureKind::fails_closed`]: its pin or the allowlist
    // refused it after a change under the hook) blocks a sync hook of an event that honours
    // `onFailure`, whatever `onFailure` says.
    if kind.fails_closed() && hook.mode == RunMode::Sync && spec.honours_on_failure() {
        let reason = format!(
            "hook `{}` failed and its plugin is not admitted, which fails closed: {message}",
            hook.id
        );
        state
            .decisions
            .push((Decision::blocking_on(spec), Some(reason)));
        return;
    }
    match hook.failure_effect(spec) {
        FailureEffect::Block => state
            .decisions
            .push((Decision::blocking_on(spec), Some(failed("block")))),
        FailureEffect::Abort => {
            outcome.continue_ = false;
            if outcome.stop_reason.is_none() {
                outcome.stop_reason = Some(cap_text(&failed("abort")));
            }
        }
        FailureEffect::Silent => {}
        FailureEffect::Notice { ignored } => outcome.notices.push(Notice {
            hook: hook.id.clone(),
            message: match ignored {
                Some(why) => format!("{message}; {why}"),
                None => message.to_string(),
            },
        }),
    }
}

/// What one hook's result means for the hooks after it in a sequential group, read
/// from one merge of it alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// It blocks the event or stops the agent: the group runs no further hooks.
    pub stops: bool,
    /// In a transform chain, the input the next hook gets: the one it was given with
    /// the rewrites the merge kept in their fields (`None`: it rewrote nothing, or it
    /// stops the rest).
    pub input: Option<Value>,
}

/// One hook's [`Step`] in a sequential group; `chain_input` is the input it was given
/// when it is in a transform chain. One merge answers both questions, so a chain hands
/// on exactly the rewrites the event's merge would keep (the allow-list, refuse-only
/// events, the caps), at the cost of one merge per hook.
pub fn step(spec: &EventSpec, executed: &Executed, chain_input: Option<&Value>) -> Step {
    let merged = merge(spec, std::slice::from_ref(executed));
    let stops = merged.decision.is_blocking() || !merged.continue_;
    let input = match chain_input {
        Some(input) if !stops => super::rewrite::handed_on(input, merged),
        _ => None,
    };
    Step { stops, input }
}

/// The outcome of an event that hookhost could not dispatch at all (its dispatch daemon
/// was lost mid-request and the dispatch in-process could not run either): on an event
/// that honours `onFailure` ([`EventSpec::honours_on_failure`]) a block or deny whose
/// reason says why, since an agent must not read "no answer" as "go ahead"; elsewhere a
/// notice of the host.
pub fn unanswered(spec: &EventSpec, why: &str) -> Outcome {
    let mut outcome = Outcome::empty(&spec.name);
    let message = format!("hookhost could not check this action: {why}");
    if spec.honours_on_failure() {
        outcome.decision = Decision::blocking_on(spec);
        outcome.reason = Some(cap_text(&format!("{message}; blocked (fail closed)")));
    } else {
        outcome.host_notice(message);
    }
    outcome
}

/// Applies one answer; returns whether this hook blocked or denied.
fn apply_answer(
    spec: &EventSpec,
    hook: &Hook,
    answer: &Answer,
    outcome: &mut Outcome,
    state: &mut MergeState,
) -> bool {
    let answer = &*super::refuse_only::normalize(spec, answer);
    let output = &answer.output;
    let specific = admitted(spec, hook, answer, &mut outcome.notices);
    let mut blocked = false;

    if let Some(message) = &answer.blocking_error {
        match spec.exit2 {
            Exit2::Blocks => {
                state
                    .decisions
                    .push((Decision::blocking_on(spec), Some(message.clone())));
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
    for warning in &output.warnings {
        outcome.notices.push(Notice {
            hook: hook.id.clone(),
            message: warning.clone(),
        });
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
            let specific = specific.get("permissionDecision").and_then(Value::as_str);
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
            if let Some(object) = specific.get("decision") {
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

    if let Some(context) = specific.get("additionalContext").and_then(Value::as_str) {
        outcome.additional_context.push(cap_text(context));
    }
    if spec.plain_stdout_is_context
        && let Some(text) = &answer.plain_text
    {
        outcome.additional_context.push(text.clone());
    }
    let (rewrites, problems) = rewrites_of(&specific);
    state.rewrites.propose(hook, rewrites);
    for message in problems {
        outcome.notices.push(Notice {
            hook: hook.id.clone(),
            message,
        });
    }
    for (field, value) in &specific {
        match field.as_str() {
            "additionalContext"
            | "permissionDecision"
            | "permissionDecisionReason"
            | "decision" => {}
            "updatedInput"
            | "updatedToolOutput"
            | "updatedMCPToolOutput"
            | "updatedPrompt"
            | "skip"
            | "skipResult" => {}
            _ => state.propose_extra(field, Candidate::new(hook, value.clone())),
        }
    }
    blocked
}
