//! What a hook's `onFailure` does where it runs: the one rule the merge of a failed hook,
//! the config warning and the audit line follow.
//!
//! - `continue` (default): a notice; the action goes ahead;
//! - `ignore`: no notice; the failure stays in the hook's report and the audit log;
//! - `block`: the failure blocks like exit 2 (a deny on permission events), on a sync hook
//!   of an event that honours it ([`EventSpec::honours_on_failure`]: not Stop,
//!   SubagentStop, TaskCompleted, TeammateIdle, as in Claude Code 2.1.295) and never on
//!   async hooks; where it is ignored, it is a notice that says so;
//! - `abort`: `continue: false` with a stop reason naming the hook, on a sync hook of an
//!   event that honours `continue` ([`EventSpec::honours_continue`]); elsewhere a notice
//!   that says it was ignored.

use crate::config::schema::OnFailure;
use crate::event::EventSpec;

use super::spec::{Hook, RunMode};

/// What a failure of a hook does, after the rules of where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureEffect {
    /// A notice with the failure (`continue`); `ignored` says why a configured `block` or
    /// `abort` does not apply here (`not blocking (…)`), appended to the notice.
    Notice {
        /// Why the configured mode was set aside, if it was.
        ignored: Option<String>,
    },
    /// Nothing but the report (`ignore`).
    Silent,
    /// A block (deny on permission events).
    Block,
    /// `continue: false`, the agent stops.
    Abort,
}

/// Why `on_failure` does not apply to a hook in `mode` on `spec`, in Claude Code's words
/// (`not blocking (onFailure: "block" is ignored on Stop)`); `None` when it applies.
pub fn ignored(on_failure: OnFailure, mode: RunMode, spec: &EventSpec) -> Option<String> {
    let (verb, applies, cannot) = match on_failure {
        OnFailure::Continue | OnFailure::Ignore => return None,
        OnFailure::Block => ("blocking", spec.honours_on_failure(), "cannot block"),
        OnFailure::Abort => ("aborting", spec.honours_continue, "cannot stop the agent"),
    };
    let mode_name = on_failure.as_str();
    if mode != RunMode::Sync {
        return Some(format!(
            "not {verb} (onFailure: \"{mode_name}\" is ignored on async hooks)"
        ));
    }
    if applies {
        return None;
    }
    Some(if on_failure == OnFailure::Block && spec.can_block() {
        format!(
            "not {verb} (onFailure: \"{mode_name}\" is ignored on {})",
            spec.name
        )
    } else {
        format!(
            "not {verb} (onFailure: \"{mode_name}\" is ignored on {}, which {cannot})",
            spec.name
        )
    })
}

impl Hook {
    /// What a failure of this hook does on `spec`.
    pub fn failure_effect(&self, spec: &EventSpec) -> FailureEffect {
        if let Some(why) = ignored(self.on_failure, self.mode, spec) {
            return FailureEffect::Notice { ignored: Some(why) };
        }
        match self.on_failure {
            OnFailure::Continue => FailureEffect::Notice { ignored: None },
            OnFailure::Ignore => FailureEffect::Silent,
            OnFailure::Block => FailureEffect::Block,
            OnFailure::Abort => FailureEffect::Abort,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventCatalogue, built_in_names};

    /// Generated over every built-in event and every mode: `block` applies exactly where
    /// the event honours `onFailure` and the hook is sync, `abort` exactly where it
    /// honours `continue`, and the others always.
    #[test]
    fn every_mode_on_every_event() {
        let c = EventCatalogue::default();
        for name in built_in_names() {
            let spec = c.get(name).unwrap();
            for mode in [RunMode::Sync, RunMode::Async, RunMode::AsyncRewake] {
                let sync = mode == RunMode::Sync;
                for (on_failure, applies) in [
                    (OnFailure::Continue, true),
                    (OnFailure::Ignore, true),
                    (OnFailure::Block, sync && spec.honours_on_failure()),
                    (OnFailure::Abort, sync && spec.honours_continue),
                ] {
                    let why = ignored(on_failure, mode, spec);
                    assert_eq!(why.is_none(), applies, "{name} {mode:?} {on_failure:?}");
                    if let Some(why) = why {
                        assert!(
                            why.contains(&format!("\"{}\" is ignored on", on_failure.as_str())),
                            "{why}"
                        );
                    }
                }
            }
        }
        let stop = c.get("Stop").unwrap();
        assert_eq!(
            ignored(OnFailure::Block, RunMode::Sync, stop).as_deref(),
            Some("not blocking (onFailure: \"block\" is ignored on Stop)")
        );
        assert_eq!(ignored(OnFailure::Abort, RunMode::Sync, stop), None);
    }
}
