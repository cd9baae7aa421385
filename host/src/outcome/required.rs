//! The rule of required hooks (`"required": true`, docs/book/src/required-hooks.md): a required
//! hook that matched the event but gave no verdict (skipped for any reason, failed,
//! timed out, started in the background) makes the event fail closed the way the event
//! allows, by the same facts of the event table as `onFailure: "block"`
//! ([`EventSpec::honours_on_failure`]): a deny where decisions are permissions
//! (PreToolUse, PermissionRequest, PreModelSwitch, PreSkillShellCommand), a block on the
//! other events that can block (UserPromptSubmit, PostToolUse, …), and a notice where
//! the event cannot fail closed (Stop, SubagentStop, TaskCompleted, TeammateIdle: a block
//! there would trap the agent in a loop; events that cannot block at all).
//!
//! The merge applies it to every matched hook ([`super::merge`]), before anything else
//! reads the hook's result, so a reason to give no verdict added later is covered
//! without a change here: the rule reads the hook's status, never its reason.

use super::{Decision, HookReport, Notice, Outcome};
use crate::event::EventSpec;

/// Fails the event closed for `report`, a required hook without a verdict: a blocking
/// decision in `decisions` (the merge's list) where the event honours `onFailure`, else a
/// notice; the reason names the hook, its source and why it gave no verdict.
pub(super) fn fail_closed(
    spec: &EventSpec,
    report: &HookReport,
    outcome: &mut Outcome,
    decisions: &mut Vec<(Decision, Option<String>)>,
) {
    let why = match &report.message {
        Some(message) => format!("{}: {message}", report.status.as_str()),
        None => report.status.as_str().to_string(),
    };
    let reason = format!(
        "required hook `{}` ({}) gave no verdict ({why})",
        report.id, report.source
    );
    if spec.honours_on_failure() {
        decisions.push((
            Decision::blocking_on(spec),
            Some(format!("{reason}; fail closed")),
        ));
    } else {
        outcome.notices.push(Notice {
            hook: report.id.clone(),
            message: format!(
                "{reason}; `{}` cannot fail closed, so the action goes ahead",
                spec.name
            ),
        });
    }
}
