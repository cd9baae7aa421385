//! The Stop loop cap: after `stopBlockCap` loop-extending steps in a row in a session,
//! the next one is overridden so that the agent may stop. The steps are the blocks of the
//! capped events (Stop, SubagentStop: `caps_consecutive_blocks` in the event table) and
//! the `asyncRewake` wake-ups delivered to the session, counted together; an event that
//! ends the loop (`ends_block_loop`: a Stop that goes ahead) starts the count again. An
//! overridden block is lifted; an overridden wake-up is not delivered. A block that
//! stands carries the `stopEscapeHatch` sentence, when one is configured.
//!
//! The count lives in the session store every host of the data directory shares
//! ([`crate::session::DiskStore`]): blocks in the one-shot CLI, the dispatch daemon and
//! any number of `serve` daemons count together. This is the only place that reads or
//! writes it. When the count cannot be recorded (the data directory is not writable),
//! the cap fails closed: the block stands (and a wake-up is delivered), with a notice.

use super::Dispatcher;
use crate::handlers::Invocation;
use crate::outcome::{Decision, Outcome};

impl Dispatcher {
    /// Counts this event's block (or its going ahead) against the cap, atomically in the
    /// session store (concurrent events of a session never lose a block), and overrides
    /// a block past the cap.
    pub(super) fn apply_stop_cap(&self, invocation: &Invocation, outcome: &mut Outcome) {
        let spec = &invocation.spec;
        if !spec.caps_consecutive_blocks {
            return;
        }
        let blocked = outcome.decision == Decision::Block;
        if !blocked && !spec.ends_block_loop {
            return; // a SubagentStop that goes ahead neither counts nor ends the loop
        }
        let settings = &self.policy.settings;
        let cap = settings.stop_block_cap;
        match self.count_step(&invocation.session_id, blocked) {
            Err(e) => {
                // Fail closed: a hook's block is never lifted on a count nobody could keep.
                outcome.host_notice(format!(
                    "the Stop loop cap could not be applied to this {} (a block stands): {e}",
                    spec.name
                ));
            }
            Ok(true) => {
                outcome.decision = Decision::None;
                let overridden = outcome.reason.take().unwrap_or_default();
                outcome.host_notice(format!(
                    "Stop and SubagentStop hooks blocked {cap} times in a row (asyncRewake \
                     wake-ups count too); this {} block is overridden and the agent may stop \
                     (cap: HOOKHOST_STOP_BLOCK_CAP or `stopBlockCap`, 0 = no cap). Overridden \
                     reason: {overridden}",
                    spec.name
                ));
                return;
            }
            Ok(false) => {}
        }
        if let (true, Some(hatch)) = (blocked, &settings.stop_escape_hatch) {
            outcome.reason = Some(match outcome.reason.take() {
                Some(reason) if !reason.is_empty() => format!("{reason}\n{hatch}"),
                _ => hatch.clone(),
            });
        }
    }

    /// Counts one step of the session's loop (`extends`: a block or a wake-up; else the
    /// loop ended); whether this step is past the cap (and is to be overridden).
    fn count_step(&self, session: &str, extends: bool) -> Result<bool, String> {
        let cap = self.policy.settings.stop_block_cap;
        let mut overridden = false;
        self.sessions.update_stop_blocks(session, &mut |count| {
            let (next, over) = next_count(count, extends, cap);
            overridden = over;
            next
        })?;
        Ok(overridden)
    }

    /// Whether an `asyncRewake` wake-up of `session` may be delivered: it counts as a step
    /// of the loop, and one past the cap is not delivered (`Err`: the notice that says
    /// so). A count that cannot be kept delivers it (the hook's word stands).
    pub(super) fn admit_wake(&self, session: &str, hook: &str) -> Result<(), String> {
        match self.count_step(session, true) {
            Ok(true) => Err(format!(
                "asyncRewake: the wake-up from `{hook}` is not delivered: Stop and SubagentStop \
                 blocks and wake-ups extended this session {} times in a row (`stopBlockCap`)",
                self.policy.settings.stop_block_cap
            )),
            Ok(false) | Err(_) => Ok(()),
        }
    }
}

/// The session's count of consecutive blocks after this event, from the count before
/// it, whether this event blocked, and the cap (0: no cap); and whether this block is
/// overridden (the count then starts again).
fn next_count(count: u32, blocked: bool, cap: u32) -> (u32, bool) {
    if !blocked {
        return (0, false);
    }
    let count = count.saturating_add(1);
    if cap != 0 && count > cap {
        (0, true)
    } else {
        (count, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_cap_table() {
        // (count before, blocked, cap) → (count after, overridden)
        let rows = [
            ((0, false, 3), (0, false)),
            ((2, false, 3), (0, false)),
            ((0, true, 3), (1, false)),
            ((2, true, 3), (3, false)),
            ((3, true, 3), (0, true)),
            ((0, true, 1), (1, false)),
            ((1, true, 1), (0, true)),
            ((1_000, true, 0), (1_001, false)),
            ((u32::MAX, true, 0), (u32::MAX, false)),
            ((u32::MAX, true, 5), (0, true)),
        ];
        for ((count, blocked, cap), want) in rows {
            assert_eq!(
                next_count(count, blocked, cap),
                want,
                "{count} {blocked} {cap}"
            );
        }
    }
}
