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
//! - a failed hook is what its `onFailure` says where it runs
//!   ([`crate::policy::FailureEffect`]): a notice (`continue`, and `block` or `abort` where
//!   they are ignored, saying so), nothing (`ignore`), a block (`block`) or `continue:
//!   false` naming the hook (`abort`);
//! - fields the event does not honour are ignored;
//! - every text of the outcome (`reason`, `stopReason`, each `additionalContext`,
//!   `systemMessages` entry, notice, and hook `message` / `diagnostics`) is cut at
//!   [`crate::handlers::output::OUTPUT_TEXT_CAP`] characters with a marker saying how much was cut
//!   ([`Outcome::enforce_caps`]), whatever handler produced it.
//!
//! The rooms: this file holds the types of an outcome; [`report`](report()) turns one
//! matched hook into its [`HookReport`], [`merge`](merge()) applies the rules above, and
//! `bounds` keeps the whole outcome bounded ([`Outcome::enforce_caps`]).

mod admit;
mod bounds;
mod claude;
mod merge;
mod receipt;
mod refuse_only;
mod report;
mod required;
#[cfg(test)]
mod required_tests;
mod rewrite;
#[cfg(test)]
mod rewrite_tests;
#[cfg(test)]
mod tests;

pub use bounds::{HOOK_TEXTS_CAP, LIST_TEXT_CAP, SHORT_TEXT_CAP};
pub use claude::{ClaudeResponse, notice_line, to_claude, untrusted_notice};
pub use merge::{Step, merge, merge_event, step, unanswered};
pub use receipt::{DecisionReceipt, ReceiptHook, input_digest};
pub use report::report;
pub use rewrite::{REWRITES_BUDGET, Rewrite};

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::handlers::output::cap_in_place;
use crate::handlers::{FailureKind, HandlerRun};
use crate::policy::Hook;

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
    /// The decision a blocking error (or a required hook without a verdict) means on
    /// `spec`'s event: a deny where its decisions are permissions, else a block.
    pub(crate) fn blocking_on(spec: &crate::event::EventSpec) -> Decision {
        use crate::event::DecisionStyle;
        match spec.decision {
            DecisionStyle::Permission | DecisionStyle::PermissionRequest => Decision::Deny,
            _ => Decision::Block,
        }
    }

    /// Its name, as the outcome and the audit log write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::None => "none",
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Defer => "defer",
            Decision::Deny => "deny",
            Decision::Block => "block",
        }
    }

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

impl HookStatus {
    /// Its name, as the outcome and the audit log write it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookStatus::Ok => "ok",
            HookStatus::Blocked => "blocked",
            HookStatus::Failed => "failed",
            HookStatus::Timeout => "timeout",
            HookStatus::Skipped => "skipped",
            HookStatus::Async => "async",
        }
    }

    /// Whether a hook in this state gave the event a verdict (it ran and answered, a
    /// block or not). Every other state is a required hook's failure to guard
    /// ([`merge`]); the match is exhaustive, so a new state must be judged here.
    pub fn gives_verdict(self) -> bool {
        match self {
            HookStatus::Ok | HookStatus::Blocked => true,
            HookStatus::Failed | HookStatus::Timeout | HookStatus::Skipped | HookStatus::Async => {
                false
            }
        }
    }

    /// Every status, for tests that must cover each one.
    pub const ALL: [HookStatus; 6] = [
        HookStatus::Ok,
        HookStatus::Blocked,
        HookStatus::Failed,
        HookStatus::Timeout,
        HookStatus::Skipped,
        HookStatus::Async,
    ];
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
    /// A required hook (docs/book/src/required-hooks.md): when it gives no verdict, the event
    /// fails closed. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// Exit code (command) or HTTP status (http).
    pub exit_code: Option<i32>,
    /// Wall-clock time in milliseconds.
    pub duration_ms: Option<f64>,
    /// Fuel used (wasm).
    pub fuel: Option<u64>,
    /// Peak memory in bytes (wasm).
    pub memory_bytes: Option<u64>,
    /// Model tokens spent, input and output (prompt and agent hooks, and wasm hooks whose
    /// plugin asks the model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Model turns taken (agent hooks), or model calls answered (wasm hooks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// The class of its failure (`cannotStart`: no process, descriptor, socket, thread
    /// or instance could be created for it, `timeout`, `exitCode`, …); absent unless it
    /// failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
    /// A wasm hook's plugin from an OCI registry: its reference, with the manifest's
    /// digest when the reference pins one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
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
    /// The rewritten prompt (UserPromptSubmit), for embedders that honour it; Claude Code
    /// cannot, so `--format claude` reports it in a message instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_prompt: Option<String>,
    /// Answer the tool call with `skipResult` without running the tool (PreToolUse), for
    /// embedders that honour it; `--format claude` reports it in a message instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skip: bool,
    /// The tool's answer when `skip` is true (`null` when the hook gave none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_result: Option<Value>,
    /// What each rewrite that made `updatedInput`, `updatedToolOutput`, `updatedPrompt`
    /// and `skipResult` changed, in config order: one entry per hook and field, with an
    /// RFC 6902 JSON Patch of the input as that hook saw it (in a transform chain, as the
    /// hooks before it rewrote it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rewrites: Vec<Rewrite>,
    /// Other event-specific fields (`sessionTitle`, `watchPaths`, PermissionRequest's
    /// `decision`, ...).
    pub hook_specific_output: Map<String, Value>,
    /// Non-blocking errors and host notices.
    pub notices: Vec<Notice>,
    /// One entry per hook that matched.
    pub hooks: Vec<HookReport>,
    /// The proof of this decision: the input's digest, the policy's, each hook with its
    /// status, the decision and the audit line's `seq` ([`DecisionReceipt`]). Set by every
    /// dispatch; not sent under `--format claude`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<DecisionReceipt>,
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
            updated_prompt: None,
            skip: false,
            skip_result: None,
            rewrites: Vec::new(),
            hook_specific_output: Map::new(),
            notices: Vec::new(),
            hooks: Vec::new(),
            receipt: None,
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
