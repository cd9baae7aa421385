//! What a model hook's `ok: false` does on each event (Claude Code's hooks reference
//! §"Response schema", `shared/reference/claude-code-hooks.md` §1.10): one more column of
//! the event table, kept beside it so that the handler that asks the model never branches
//! on an event's name.

use super::{DecisionStyle, EventSpec};

/// The effect of a model's refusal (`ok: false`) on an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No effect: the answer is discarded (PermissionRequest, PermissionDenied, events
    /// that cannot block).
    NoEffect,
    /// The reason goes back to the agent and the turn continues: the action is blocked
    /// as by exit code 2 (a tool call denied, a stop refused, a tool error).
    FeedBack,
    /// Blocked as by exit code 2, and the turn ends with the reason as a warning line
    /// (`continue: false`, `stopReason`).
    EndTurn,
}

/// What `ok: false` does on one event, with and without `continueOnBlock`, and whether
/// `impossible: true` lets the action go (Stop, SubagentStop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelVerdictRule {
    /// Without `continueOnBlock`.
    pub refusal: Refusal,
    /// With `continueOnBlock: true`.
    pub refusal_continuing: Refusal,
    /// Whether `impossible: true` turns a refusal into an allow.
    pub honours_impossible: bool,
}

const fn rule(refusal: Refusal, continuing: Refusal) -> ModelVerdictRule {
    ModelVerdictRule {
        refusal,
        refusal_continuing: continuing,
        honours_impossible: false,
    }
}

use Refusal::{EndTurn, FeedBack, NoEffect};

/// The rows of §1.10. Events not listed: a refusal blocks (as exit 2) where the event can
/// block, and has no effect elsewhere.
#[rustfmt::skip]
const ROWS: &[(&str, ModelVerdictRule)] = &[
    ("Stop", ModelVerdictRule { refusal: FeedBack, refusal_continuing: FeedBack, honours_impossible: true }),
    ("SubagentStop", ModelVerdictRule { refusal: FeedBack, refusal_continuing: FeedBack, honours_impossible: true }),
    ("PreToolUse", rule(EndTurn, FeedBack)),
    ("PostToolUse", rule(EndTurn, FeedBack)),
    ("PostToolBatch", rule(EndTurn, EndTurn)),
    ("UserPromptSubmit", rule(EndTurn, EndTurn)),
    ("UserPromptExpansion", rule(EndTurn, EndTurn)),
    ("PostToolUseFailure", rule(FeedBack, FeedBack)),
    ("TaskCreated", rule(FeedBack, FeedBack)),
    // In a turn: a tool error, and the turn continues.
    ("TaskCompleted", rule(FeedBack, FeedBack)),
    // The teammate stops, unless `continueOnBlock` keeps it working.
    ("TeammateIdle", rule(EndTurn, FeedBack)),
    ("PermissionRequest", rule(NoEffect, NoEffect)),
    ("PermissionDenied", rule(NoEffect, NoEffect)),
];

impl EventSpec {
    /// What a model hook's `ok: false` does on this event.
    pub fn model_verdict(&self) -> ModelVerdictRule {
        if let Some((_, rule)) = ROWS.iter().find(|(name, _)| *name == self.name) {
            return *rule;
        }
        let blocks = self.can_block() && self.decision != DecisionStyle::PermissionRequest;
        let refusal = if blocks { FeedBack } else { NoEffect };
        rule(refusal, refusal)
    }

    /// Whether `agent` hooks are refused here (at load): on PermissionRequest, as Claude
    /// Code since 2.1.280 (a permission decision is not a multi-turn verifier's).
    pub fn refuses_agent_hooks(&self) -> bool {
        self.decision == DecisionStyle::PermissionRequest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventCatalogue;

    /// Every row names a built-in event (a typo would silently fall back to the default).
    #[test]
    fn every_row_is_an_event_and_every_event_has_a_rule() {
        let catalogue = EventCatalogue::default();
        for (name, _) in ROWS {
            assert!(catalogue.get(name).is_some(), "{name} is not an event");
        }
        for name in crate::event::built_in_names() {
            let spec = catalogue.get(name).unwrap();
            let rule = spec.model_verdict();
            if !spec.can_block() {
                assert_eq!(rule.refusal, NoEffect, "{name} cannot block");
            }
        }
    }
}
