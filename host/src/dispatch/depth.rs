//! The depth guard: a hook that runs an agent whose hooks run hookhost again (hook →
//! agent → hook) nests without end unless something counts. hookhost hands every
//! process it starts `HOOKHOST_DEPTH` = its own depth + 1
//! ([`crate::handlers::command::hook_env`]), reads its own through the one reader of the
//! environment ([`crate::config::env::depth`]), and at `maxHookDepth` (default 4) runs
//! no hook.
//!
//! Where it runs none, it fails closed on the events that honour `onFailure`
//! (PreToolUse, PermissionRequest, UserPromptSubmit, …: a block or deny saying why, as
//! when hookhost cannot check an action at all), and says so in a notice elsewhere (a
//! Stop goes ahead, so the nested agent can end). The variable is the environment's,
//! so anyone who starts hookhost can set it; failing closed means that setting it high
//! (or to junk, which counts as past the limit) stops the agent's guarded actions
//! rather than lifting the guards. Unsetting it (or leaving it empty) starts the count
//! again: a hook that wants to nest deeper can do so on purpose, as it could by running
//! anything else; the guard is against loops, not against the hook's author.

use std::sync::Arc;

use super::Dispatcher;
use crate::event::EventSpec;
use crate::outcome::{Executed, HookResult, Outcome, unanswered};
use crate::policy::Hook;

impl Dispatcher {
    /// Why this hookhost runs no hook (its depth is at `maxHookDepth`, or unreadable).
    pub(super) fn depth_refusal(&self) -> Option<String> {
        refusal(
            crate::config::env::depth(),
            self.policy.settings.max_hook_depth,
        )
    }
}

/// The refusal for `depth` (as read) under `max`.
fn refusal(depth: Result<u32, String>, max: u32) -> Option<String> {
    match depth {
        Ok(depth) if depth < max => None,
        Ok(depth) => Some(format!(
            "HOOKHOST_DEPTH is {depth}: hookhost runs inside hooks {depth} levels deep, at \
             `maxHookDepth` ({max}), so it runs no hook (a hook that runs an agent whose hooks \
             run hookhost again)"
        )),
        Err(why) => Some(format!("{why}: hookhost runs no hook")),
    }
}

/// The selected hooks as not run, with `why`.
pub(super) fn skipped(selected: Vec<(bool, Vec<Arc<Hook>>)>, why: &str) -> Vec<Executed> {
    selected
        .into_iter()
        .flat_map(|(_, hooks)| hooks)
        .map(|hook| Executed {
            result: HookResult::Skipped(hook.skip.clone().unwrap_or_else(|| why.to_string())),
            hook,
        })
        .collect()
}

/// Applies a refusal to the outcome of hooks that were not run: when one of them would
/// have run, a block where the event honours `onFailure`, else a notice.
pub(super) fn refuse(spec: &EventSpec, would_run: bool, why: &str, outcome: &mut Outcome) {
    if !would_run {
        return;
    }
    let refused = unanswered(spec, why);
    outcome.decision = refused.decision;
    outcome.reason = refused.reason;
    outcome.notices.extend(refused.notices);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_table() {
        // (depth as read, max) → refused
        let rows: [(Result<u32, String>, u32, bool); 7] = [
            (Ok(0), 4, false),
            (Ok(3), 4, false),
            (Ok(4), 4, true),
            (Ok(u32::MAX), 4, true),
            (Ok(0), 1, false),
            (Ok(1), 1, true),
            (Err("junk".into()), 64, true),
        ];
        for (depth, max, refused) in rows {
            assert_eq!(
                refusal(depth.clone(), max).is_some(),
                refused,
                "{depth:?} {max}"
            );
        }
    }
}
