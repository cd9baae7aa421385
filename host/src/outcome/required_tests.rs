//! The rule of required hooks, generated over the class: every state a matched hook can
//! end in ([`HookStatus::ALL`], each made from the [`HookResult`] and failure kind that
//! produce it), on every event of the catalogue. A state or failure kind added later does
//! not compile here until it is judged.

use super::*;
use crate::config::schema::OnFailure;
use crate::config::{Origin, SourceKind};
use crate::event::{EventCatalogue, built_in_names};
use crate::handlers::{Answer, Failure, FailureKind, HandlerRun, Usage, Verdict};
use crate::policy::{HandlerSpec, Hook, RunMode};
use std::time::Duration;

fn hook(required: bool, on_failure: OnFailure) -> Arc<Hook> {
    Arc::new(Hook {
        id: "guard".into(),
        event: String::new(),
        origin: Origin {
            kind: SourceKind::User,
            location: "hooks.json".into(),
        },
        config_path: String::new(),
        handler: HandlerSpec::Command(crate::policy::CommandSpec {
            command: "true".into(),
            args: None,
            shell: crate::policy::Shell::Sh,
            kill_grace: Duration::from_secs(3),
            context_env: false,
        }),
        if_rule: None,
        agents: None,
        timeout: Duration::from_secs(1),
        on_failure,
        priority: 0,
        mode: RunMode::Sync,
        status_message: None,
        skip: None,
        order: 0,
        widens: Vec::new(),
        chain: None,
        required,
    })
}

fn ran(verdict: Verdict) -> HookResult {
    HookResult::Ran(Box::new(HandlerRun {
        verdict,
        exit_code: Some(0),
        duration: Duration::from_millis(1),
        usage: Usage::default(),
        diagnostics: None,
    }))
}

/// Every failure kind; the match makes a new kind a compile error here.
fn every_failure_kind() -> Vec<FailureKind> {
    use FailureKind::*;
    let all = vec![
        CannotStart,
        Timeout,
        ExitCode,
        InvalidOutput,
        Http,
        Trap,
        PluginError,
        Limit,
        Refused,
        NotAdmitted,
    ];
    for kind in &all {
        match kind {
            CannotStart | Timeout | ExitCode | InvalidOutput | Http | Trap | PluginError
            | Limit | Refused | NotAdmitted => {}
        }
    }
    all
}

/// The results that end a hook in `status` (several for `failed`: one per kind).
fn results_in(status: HookStatus) -> Vec<HookResult> {
    let failed = |kind| {
        ran(Verdict::Failed(Failure {
            kind,
            message: "it broke".into(),
        }))
    };
    match status {
        HookStatus::Ok => vec![ran(Verdict::Answer(Answer::default()))],
        HookStatus::Blocked => vec![ran(Verdict::Answer(Answer {
            blocking_error: Some("no".into()),
            ..Answer::default()
        }))],
        HookStatus::Failed => every_failure_kind()
            .into_iter()
            .filter(|k| *k != FailureKind::Timeout)
            .map(failed)
            .collect(),
        HookStatus::Timeout => vec![failed(FailureKind::Timeout)],
        HookStatus::Skipped => vec![HookResult::Skipped("any reason, present or future".into())],
        HookStatus::Async => vec![HookResult::Started],
    }
}

#[test]
fn a_required_hook_without_a_verdict_fails_closed_on_every_event_in_every_state() {
    let catalogue = EventCatalogue::default();
    let mut judged = 0;
    for name in built_in_names() {
        let spec = catalogue.get(name).unwrap();
        for status in HookStatus::ALL {
            for result in results_in(status) {
                // `ignore`: the hook's own onFailure would let everything through.
                let executed = Executed {
                    hook: hook(true, OnFailure::Ignore),
                    result,
                };
                let out = merge(spec, std::slice::from_ref(&executed));
                let report = &out.hooks[0];
                assert!(report.required, "{name}: {report:?}");
                let closed = out
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains("required hook `guard` (user) gave no verdict"));
                let noticed = out.notices.iter().any(|n| {
                    n.hook == "guard" && n.message.contains("required hook `guard` (user)")
                });
                if status.gives_verdict() {
                    assert!(!closed && !noticed, "{name} {status:?}: {out:?}");
                    continue;
                }
                if status != HookStatus::Blocked {
                    assert_eq!(report.status, status, "{name}: {report:?}");
                }
                if spec.honours_on_failure() {
                    let expected = match spec.decision {
                        crate::event::DecisionStyle::Permission
                        | crate::event::DecisionStyle::PermissionRequest => Decision::Deny,
                        _ => Decision::Block,
                    };
                    assert_eq!(out.decision, expected, "{name} {status:?}: {out:?}");
                    assert!(closed, "{name} {status:?}: the reason names it: {out:?}");
                    // Why it gave no verdict is said.
                    assert!(
                        out.reason.as_deref().unwrap().contains(status.as_str()),
                        "{name}: {out:?}"
                    );
                } else {
                    assert!(!out.decision.is_blocking(), "{name}: {out:?}");
                    assert!(noticed, "{name} {status:?}: a notice names it: {out:?}");
                }
                judged += 1;
            }
        }
    }
    assert!(judged > 30 * 12, "{judged}");
}

/// The control: the same states without `required` follow `onFailure: "continue"`, so
/// a skipped, failed or background hook lets the action through (except the failures
/// that fail closed anyway: a plugin not admitted, a timeout on a timeout-blocking event).
#[test]
fn without_required_the_same_states_let_the_action_through() {
    let catalogue = EventCatalogue::default();
    let spec = catalogue.get("PreToolUse").unwrap();
    for status in HookStatus::ALL {
        if status == HookStatus::Blocked {
            continue;
        }
        for result in results_in(status) {
            let failure = match &result {
                HookResult::Ran(run) => match &run.verdict {
                    Verdict::Failed(f) => Some(f.kind),
                    Verdict::Answer(_) => None,
                },
                _ => None,
            };
            let executed = Executed {
                hook: hook(false, OnFailure::Continue),
                result,
            };
            let out = merge(spec, std::slice::from_ref(&executed));
            assert!(!out.hooks[0].required);
            let closes = failure.is_some_and(FailureKind::fails_closed);
            assert_eq!(out.decision.is_blocking(), closes, "{status:?}: {out:?}");
        }
    }
}

/// Stop cannot fail closed (a block there loops the agent): a notice, and the required
/// field is in the report.
#[test]
fn on_stop_a_required_hook_without_a_verdict_is_a_notice() {
    let catalogue = EventCatalogue::default();
    let executed = Executed {
        hook: hook(true, OnFailure::Block),
        result: HookResult::Skipped("`disableAllHooks` is set".into()),
    };
    let out = merge(catalogue.get("Stop").unwrap(), &[executed]);
    assert_eq!(out.decision, Decision::None);
    assert!(
        out.notices[0].message.contains("`disableAllHooks` is set")
            && out.notices[0].message.contains("cannot fail closed"),
        "{out:?}"
    );
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["hooks"][0]["required"], true);
}
