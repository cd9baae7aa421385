//! One matched hook's line in an outcome ([`HookReport`]): what became of it, how long it
//! ran, what it used, and why it failed or was skipped. Whether an answer blocked is the
//! merge's to say, since it depends on the event's rules.

use super::{Executed, HookReport, HookResult, HookStatus};
use crate::handlers::{Failure, FailureKind, Verdict};

/// The report of one matched hook, before the merge reads its answer.
pub fn report(executed: &Executed) -> HookReport {
    let Executed { hook, result } = executed;
    let mut report = HookReport {
        id: hook.id.clone(),
        source: hook.origin.kind.as_str().to_string(),
        kind: hook.handler.type_name().to_string(),
        status: HookStatus::Ok,
        required: hook.required,
        exit_code: None,
        duration_ms: None,
        fuel: None,
        memory_bytes: None,
        tokens: None,
        turns: None,
        failure: None,
        plugin: match &hook.handler {
            crate::policy::HandlerSpec::Wasm(spec) => spec.oci.as_ref().map(ToString::to_string),
            _ => None,
        },
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
            report.tokens = run.usage.tokens;
            report.turns = run.usage.turns;
            report.diagnostics = run.diagnostics.clone();
            if let Verdict::Failed(Failure { kind, message }) = &run.verdict {
                report.status = if *kind == FailureKind::Timeout {
                    HookStatus::Timeout
                } else {
                    HookStatus::Failed
                };
                report.failure = Some(*kind);
                report.message = Some(message.clone());
            }
        }
    }
    report
}
