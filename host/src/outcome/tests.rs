use super::*;
use crate::config::schema::OnFailure;
use crate::config::{Origin, SourceKind};
use crate::event::EventCatalogue;
use crate::handlers::{Answer, FailureKind, HandlerRun, Verdict};
use crate::handlers::{HookOutput, Usage};
use crate::policy::HandlerSpec;
use crate::policy::{Hook, RunMode};
use serde_json::json;
use std::time::Duration;

fn hook(id: &str, order: usize, priority: i64, on_failure: OnFailure) -> Arc<Hook> {
    Arc::new(Hook {
        id: id.into(),
        event: String::new(),
        origin: Origin {
            kind: SourceKind::Project,
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
        priority,
        mode: RunMode::Sync,
        status_message: None,
        skip: None,
        order,
        widens: Vec::new(),
        chain: None,
        required: false,
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

fn json_answer(value: serde_json::Value, event: &str) -> Verdict {
    Verdict::Answer(Answer {
        output: HookOutput::from_json(value, event).unwrap(),
        ..Answer::default()
    })
}

fn merged(event: &str, answers: Vec<(i64, Verdict)>) -> Outcome {
    let catalogue = EventCatalogue::default();
    let executed: Vec<Executed> = answers
        .into_iter()
        .enumerate()
        .map(|(i, (priority, verdict))| Executed {
            hook: hook(&format!("h{i}"), i, priority, OnFailure::Continue),
            result: ran(verdict),
        })
        .collect();
    merge(catalogue.get(event).unwrap(), &executed)
}

fn permission(decision: &str) -> Verdict {
    json_answer(
        json!({"hookSpecificOutput": {"permissionDecision": decision, "permissionDecisionReason": decision}}),
        "PreToolUse",
    )
}

#[test]
fn permission_merge_table() {
    let rows: &[(&[&str], Decision)] = &[
        (&[], Decision::None),
        (&["allow"], Decision::Allow),
        (&["allow", "ask"], Decision::Ask),
        (&["ask", "defer"], Decision::Defer),
        (&["defer", "deny", "allow"], Decision::Deny),
    ];
    for (decisions, expected) in rows {
        let out = merged(
            "PreToolUse",
            decisions.iter().map(|d| (0, permission(d))).collect(),
        );
        assert_eq!(out.decision, *expected, "{decisions:?}");
    }
    // deprecated top-level decision on PreToolUse
    assert_eq!(
        merged(
            "PreToolUse",
            vec![(0, json_answer(json!({"decision": "approve"}), "PreToolUse"))]
        )
        .decision,
        Decision::Allow
    );
    assert_eq!(
        merged(
            "PreToolUse",
            vec![(0, json_answer(json!({"decision": "block"}), "PreToolUse"))]
        )
        .decision,
        Decision::Deny
    );
}

#[test]
fn exit_2_per_event() {
    let blocking = || {
        Verdict::Answer(Answer {
            blocking_error: Some("stderr".into()),
            ..Answer::default()
        })
    };
    let rows: &[(&str, Decision, usize)] = &[
        ("PreToolUse", Decision::Deny, 0),
        ("Stop", Decision::Block, 0),
        ("UserPromptSubmit", Decision::Block, 0),
        ("TeammateIdle", Decision::Block, 0),
        ("SessionStart", Decision::None, 1),
        ("PermissionRequest", Decision::None, 0),
        ("Notification", Decision::None, 0),
    ];
    for &(event, decision, notices) in rows {
        let out = merged(event, vec![(0, blocking())]);
        assert_eq!(out.decision, decision, "{event}");
        assert_eq!(out.notices.len(), notices, "{event}");
    }
}

#[test]
fn rewrites_pick_priority_then_config_order() {
    let rewrite = |cmd: &str| {
        json_answer(
            json!({"hookSpecificOutput": {"updatedInput": {"command": cmd}}}),
            "PreToolUse",
        )
    };
    let out = merged(
        "PreToolUse",
        vec![
            (0, rewrite("a")),
            (5, rewrite("b")),
            (5, rewrite("c")),
            (1, rewrite("d")),
        ],
    );
    assert_eq!(out.updated_input, Some(json!({"command": "b"})));
    assert_eq!(out.updated_input_by.as_deref(), Some("h1"));
    // a field the event does not honour is ignored
    let out = merged(
        "Stop",
        vec![(
            0,
            json_answer(json!({"hookSpecificOutput": {"updatedInput": {}}}), "Stop"),
        )],
    );
    assert_eq!(out.updated_input, None);
}

#[test]
fn continue_false_contexts_and_messages() {
    let out = merged(
        "PostToolUse",
        vec![
            (
                0,
                json_answer(
                    json!({"hookSpecificOutput": {"additionalContext": "one"}, "systemMessage": "m1"}),
                    "PostToolUse",
                ),
            ),
            (
                0,
                json_answer(
                    json!({"continue": false, "stopReason": "halt", "decision": "block", "reason": "r"}),
                    "PostToolUse",
                ),
            ),
            (
                0,
                json_answer(
                    json!({"hookSpecificOutput": {"additionalContext": "two"}, "systemMessage": "m2"}),
                    "PostToolUse",
                ),
            ),
        ],
    );
    assert!(!out.continue_);
    assert_eq!(out.stop_reason.as_deref(), Some("halt"));
    assert_eq!(out.additional_context, ["one", "two"]);
    assert_eq!(out.system_messages, ["m1", "m2"]);
    assert_eq!(out.decision, Decision::Block);
    // events that discard `continue`
    let out = merged(
        "Notification",
        vec![(0, json_answer(json!({"continue": false}), "Notification"))],
    );
    assert!(out.continue_);
}

#[test]
fn failures_follow_on_failure_where_it_applies() {
    let catalogue = EventCatalogue::default();
    let failure = || ran(Verdict::failed(FailureKind::Timeout, "timed out after 1s"));
    // (event, onFailure, decision, continue, notice: None = no notice, Some(part))
    let ignored_block = "not blocking (onFailure: \"block\" is ignored on";
    for (event, on_failure, expected, continues, notice) in [
        (
            "PreToolUse",
            OnFailure::Continue,
            Decision::None,
            true,
            Some("timed out"),
        ),
        ("PreToolUse", OnFailure::Ignore, Decision::None, true, None),
        ("PreToolUse", OnFailure::Block, Decision::Deny, true, None),
        ("PreToolUse", OnFailure::Abort, Decision::None, false, None),
        // Claude Code ignores onFailure on these: a failing check must not trap the
        // agent in a loop. A notice says so.
        (
            "Stop",
            OnFailure::Block,
            Decision::None,
            true,
            Some(ignored_block),
        ),
        (
            "SubagentStop",
            OnFailure::Block,
            Decision::None,
            true,
            Some(ignored_block),
        ),
        (
            "TaskCompleted",
            OnFailure::Block,
            Decision::None,
            true,
            Some(ignored_block),
        ),
        (
            "TeammateIdle",
            OnFailure::Block,
            Decision::None,
            true,
            Some(ignored_block),
        ),
        ("Stop", OnFailure::Abort, Decision::None, false, None),
        ("Stop", OnFailure::Ignore, Decision::None, true, None),
        (
            "UserPromptSubmit",
            OnFailure::Block,
            Decision::Block,
            true,
            None,
        ),
        (
            "SessionStart",
            OnFailure::Block,
            Decision::None,
            true,
            Some("which cannot block"),
        ),
        (
            "Notification",
            OnFailure::Abort,
            Decision::None,
            true,
            Some("not aborting"),
        ),
    ] {
        let executed = [Executed {
            hook: hook("x", 0, 0, on_failure),
            result: failure(),
        }];
        let out = merge(catalogue.get(event).unwrap(), &executed);
        let case = format!("{event} {on_failure:?}");
        assert_eq!(out.decision, expected, "{case}");
        assert_eq!(out.continue_, continues, "{case}");
        assert_eq!(out.hooks[0].status, HookStatus::Timeout, "{case}");
        match notice {
            None => assert!(out.notices.is_empty(), "{case}: {:?}", out.notices),
            Some(part) => assert!(
                out.notices.len() == 1 && out.notices[0].message.contains(part),
                "{case}: {:?}",
                out.notices
            ),
        }
        if !continues {
            let reason = out.stop_reason.as_deref().unwrap_or_default();
            assert!(
                reason.contains("hook `x` failed") && reason.contains("abort"),
                "{reason}"
            );
        }
    }
}

#[test]
fn permission_request_keeps_the_winning_decision_object() {
    let decide = |behavior: &str| {
        json_answer(
            json!({"hookSpecificOutput": {"decision": {"behavior": behavior, "message": behavior}}}),
            "PermissionRequest",
        )
    };
    let out = merged(
        "PermissionRequest",
        vec![(9, decide("allow")), (0, decide("deny"))],
    );
    assert_eq!(out.decision, Decision::Deny);
    assert_eq!(out.hook_specific_output["decision"]["behavior"], "deny");
}

/// Whatever a handler puts in a failure message or a reason, the outcome carries at
/// most the cap of each, with the marker.
#[test]
fn every_text_is_capped_at_the_outcome() {
    let huge = "e".repeat(1 << 20);
    let out = merged(
        "Stop",
        vec![
            (0, Verdict::failed(FailureKind::ExitCode, huge.clone())),
            (
                0,
                json_answer(
                    json!({"decision": "block", "reason": huge, "systemMessage": huge,
                           "continue": false, "stopReason": huge}),
                    "Stop",
                ),
            ),
        ],
    );
    let texts = [
        out.notices[0].message.clone(),
        out.hooks[0].message.clone().unwrap(),
        out.hooks[1].message.clone().unwrap(),
        out.reason.clone().unwrap(),
        out.stop_reason.clone().unwrap(),
        out.system_messages[0].clone(),
    ];
    for text in texts {
        assert!(text.chars().count() <= 10_000, "{} characters", text.len());
        assert!(text.ends_with("characters truncated]"), "no marker");
    }
    let mut outcome = Outcome::empty("Stop");
    outcome.host_notice("n".repeat(20_000));
    outcome.additional_context.push("c".repeat(20_000));
    outcome.enforce_caps();
    for text in [&outcome.notices[0].message, &outcome.additional_context[0]] {
        assert_eq!(text.chars().count(), 10_000);
        assert!(text.ends_with("characters truncated]"));
    }
}

/// Texts each under the cap, but many of them: each list is bounded as a whole, with
/// one note, and bounding again changes nothing.
#[test]
fn the_whole_outcome_is_bounded() {
    let mut outcome = Outcome::empty("PostToolUse");
    let text = "é".repeat(9_000);
    for n in 0..100 {
        outcome.additional_context.push(text.clone());
        outcome.system_messages.push(text.clone());
        outcome.host_notice(text.clone());
        outcome.hooks.push(HookReport {
            id: format!("h{n}"),
            source: "project".into(),
            kind: "command".into(),
            status: HookStatus::Failed,
            required: false,
            exit_code: Some(1),
            duration_ms: None,
            fuel: None,
            memory_bytes: None,
            tokens: None,
            turns: None,
            failure: None,
            plugin: None,
            message: Some(text.clone()),
            diagnostics: Some(text.clone()),
        });
    }
    outcome
        .hook_specific_output
        .insert("sessionTitle".into(), Value::String("t".repeat(50_000)));
    outcome.enforce_caps();
    let chars = |list: &[String]| list.iter().map(|t| t.chars().count()).sum::<usize>();
    for list in [&outcome.additional_context, &outcome.system_messages] {
        assert!(chars(list) <= LIST_TEXT_CAP, "{}", chars(list));
        assert_eq!(list.len(), 12, "11 texts fit, then the note");
        assert!(list[11].starts_with("… [89 more entries (801000 characters) left out"));
    }
    let notices: Vec<String> = outcome.notices.iter().map(|n| n.message.clone()).collect();
    assert!(chars(&notices) <= LIST_TEXT_CAP);
    let hook_texts: usize = outcome
        .hooks
        .iter()
        .flat_map(|h| h.message.iter().chain(h.diagnostics.iter()))
        .map(|t| t.chars().count())
        .sum();
    assert!(
        hook_texts <= HOOK_TEXTS_CAP + 100 * SHORT_TEXT_CAP,
        "{hook_texts}"
    );
    assert_eq!(outcome.hooks.len(), 100, "every hook is still listed");
    assert_eq!(
        outcome.hooks[99].message.as_ref().unwrap().chars().count(),
        SHORT_TEXT_CAP
    );
    assert_eq!(
        outcome.hook_specific_output["sessionTitle"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        10_000
    );
    let again = {
        let mut again = outcome.clone();
        again.enforce_caps();
        again
    };
    assert_eq!(again, outcome, "bounding twice changes nothing");
}

#[test]
fn outcome_field_names_are_stable() {
    let value = serde_json::to_value(Outcome::empty("Stop")).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "event",
            "decision",
            "reason",
            "continue",
            "stopReason",
            "additionalContext",
            "systemMessages",
            "updatedInput",
            "updatedInputBy",
            "updatedToolOutput",
            "hookSpecificOutput",
            "notices",
            "hooks"
        ]
    );
}

/// An event hookhost could not dispatch: a block (deny) where `onFailure` applies, in
/// the event's own channel for Claude Code; a notice where it does not.
#[test]
fn an_unanswered_event_blocks_where_on_failure_applies() {
    let catalogue = EventCatalogue::default();
    for name in crate::event::built_in_names() {
        let spec = catalogue.get(name).unwrap();
        let out = unanswered(spec, "the daemon was lost");
        let response = to_claude(spec, &out);
        if spec.honours_on_failure() {
            assert!(out.decision.is_blocking(), "{name}");
            let denied_in_json = response.stdout.contains(r#""behavior":"deny""#)
                || response.stdout.contains(r#""permissionDecision":"deny""#)
                || response.stdout.contains(r#""decision":"block""#);
            assert!(
                response.exit_code == 2 || denied_in_json,
                "{name}: {response:?}"
            );
        } else {
            assert_eq!(out.decision, Decision::None, "{name}");
            assert_eq!(response.exit_code, 0, "{name}");
        }
    }
}

/// `defer` only where the event takes it, generated over every event with a permission
/// decision: elsewhere (PreModelSwitch) it reads as `ask`, with a notice, and never
/// reaches the answer as `defer`.
#[test]
fn defer_is_an_answer_only_where_the_event_takes_it() {
    let catalogue = EventCatalogue::default();
    let mut checked = 0;
    for name in catalogue.names() {
        let spec = catalogue.get(name).unwrap();
        if spec.decision != crate::event::DecisionStyle::Permission {
            continue;
        }
        checked += 1;
        let answer = json_answer(
            json!({"hookSpecificOutput": {"permissionDecision": "defer",
                                          "permissionDecisionReason": "later"}}),
            name,
        );
        let out = merged(name, vec![(0, answer)]);
        let expected = match (spec.refuses_only(), spec.takes_defer()) {
            (true, _) => Decision::Deny,
            (false, true) => Decision::Defer,
            (false, false) => Decision::Ask,
        };
        assert_eq!(out.decision, expected, "{name}");
        if !spec.takes_defer() {
            assert!(
                out.notices
                    .iter()
                    .any(|n| n.message.contains("read as \"ask\"")),
                "{name}: {:?}",
                out.notices
            );
        }
    }
    assert!(
        checked >= 3,
        "PreToolUse, PreModelSwitch, PreSkillShellCommand"
    );
}

/// The names telemetry, the demo and the audit view print are the ones the outcome and
/// the audit log serialise.
#[test]
fn names_are_the_serialised_ones() {
    use Decision as D;
    use HookStatus as S;
    for d in [D::None, D::Allow, D::Ask, D::Defer, D::Deny, D::Block] {
        assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
    }
    for s in [
        S::Ok,
        S::Blocked,
        S::Failed,
        S::Timeout,
        S::Skipped,
        S::Async,
    ] {
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
}
