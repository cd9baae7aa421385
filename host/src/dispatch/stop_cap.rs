//! The Stop loop cap: after `stopBlockCap` consecutive blocks of a capped event (Stop)
//! in a session, the next block is overridden so that the agent may stop.
//!
//! The count lives in the session store every host of the data directory shares
//! ([`crate::session::DiskStore`]): blocks in the one-shot CLI, the dispatch daemon and
//! any number of `serve` daemons count together. This is the only place that reads or
//! writes it, and only on capped events. When the count cannot be recorded (the data
//! directory is not writable), the cap fails closed: the block stands, with a notice.

use super::Dispatcher;
use crate::handlers::Invocation;
use crate::outcome::{Decision, Outcome};

impl Dispatcher {
    /// After `cap` consecutive blocks of a capped event (Stop) in a session, the next block is overridden.
    /// The count is read, changed and written in one locked update of the session
    /// store, so concurrent Stops of a session never lose a block.
    pub(super) fn apply_stop_cap(&self, invocation: &Invocation, outcome: &mut Outcome) {
        if !invocation.spec.caps_consecutive_blocks {
            return;
        }
        let cap = self.policy.settings.stop_block_cap;
        let blocked = outcome.decision == Decision::Block;
        let mut overridden = false;
        let updated = self
            .sessions
            .update_stop_blocks(&invocation.session_id, &mut |count| {
                let (next, over) = next_count(count, blocked, cap);
                overridden = over;
                next
            });
        if let Err(e) = updated {
            // Fail closed: a hook's block is never lifted on a count nobody could keep.
            outcome.host_notice(format!(
                "the Stop loop cap could not be applied to this Stop (a block stands): {e}"
            ));
            return;
        }
        if overridden {
            outcome.decision = Decision::None;
            let overridden = outcome.reason.take().unwrap_or_default();
            outcome.host_notice(format!(
                "Stop hooks blocked {cap} times in a row; this block is overridden and the agent may stop \
                 (cap: HOOKHOST_STOP_BLOCK_CAP or `stopBlockCap`, 0 = no cap). Overridden reason: {overridden}"
            ));
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
