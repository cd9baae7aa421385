//! Event sets added with Claude Code 2.1.251–2.1.332, as attributes of [`EventSpec`]
//! (name-keyed like the other sets of the table, so embedders' `EventSpec`s keep their
//! shape).

use super::EventSpec;

/// Events where a sync hook that times out blocks, whatever its `onFailure`
/// (PreModelSwitch: Claude Code's one fail-closed default, 2.1.251).
const TIMEOUT_BLOCKS_EVENTS: [&str; 1] = ["PreModelSwitch"];

/// Guard events: they decide whether a call runs, so Claude Code fails closed around
/// them (a matcher or input that cannot be handled blocks; an unloadable entry under one
/// disables the hooks of its file). 2.1.332 adds PreSkillShellCommand.
const GUARD_EVENTS: [&str; 3] = ["PreToolUse", "PermissionRequest", "PreSkillShellCommand"];

/// Events where a hook can only refuse (PreSkillShellCommand): deny, ask, defer, any
/// `updatedInput`, a PermissionRequest-shaped deny or rewrite all block; `allow` adds
/// nothing; `prompt` and `agent` hooks count as a block ([`crate::outcome`]).
const REFUSE_ONLY_EVENTS: [&str; 1] = ["PreSkillShellCommand"];

/// Events whose `permissionDecision` takes `defer` (Claude Code: PreToolUse; on
/// PreSkillShellCommand a `defer` refuses). On every other event with a permission
/// decision (PreModelSwitch takes allow, deny or ask; an embedder's own) a `defer` is read
/// as `ask`, with a notice ([`crate::outcome`]'s refuse-only normalization).
const DEFER_EVENTS: [&str; 2] = ["PreToolUse", "PreSkillShellCommand"];

impl EventSpec {
    /// Whether `permissionDecision: "defer"` is one of the event's answers
    /// (`DEFER_EVENTS`).
    pub fn takes_defer(&self) -> bool {
        DEFER_EVENTS.contains(&self.name.as_ref())
    }

    /// Whether a hook that times out blocks by default (`TIMEOUT_BLOCKS_EVENTS`).
    pub fn timeout_blocks(&self) -> bool {
        TIMEOUT_BLOCKS_EVENTS.contains(&self.name.as_ref())
    }

    /// Whether the event is a guard event (`GUARD_EVENTS`).
    pub fn is_guard(&self) -> bool {
        GUARD_EVENTS.contains(&self.name.as_ref())
    }

    /// Whether hooks on the event can only refuse (`REFUSE_ONLY_EVENTS`).
    pub fn refuses_only(&self) -> bool {
        REFUSE_ONLY_EVENTS.contains(&self.name.as_ref())
    }
}
