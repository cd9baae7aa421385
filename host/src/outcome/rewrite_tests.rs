//! Rewrites in the merge: transform chains compose, chains compete with other rewrites by
//! priority then config order, `updatedPrompt` and `skip` merge like `updatedInput`, and
//! `rewrites` holds a JSON Patch per winning step that rebuilds the final input.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::config::schema::OnFailure;
use crate::config::{Origin, SourceKind};
use crate::event::EventCatalogue;
use crate::handlers::{Answer, HandlerRun, HookOutput, Usage, Verdict};
use crate::policy::{HandlerSpec, Hook, RunMode};

/// A hook at `order` with `priority`, in the chain that starts at `chain` if any.
fn hook(order: usize, priority: i64, chain: Option<usize>) -> Arc<Hook> {
    Arc::new(Hook {
        id: format!("h{order}"),
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
        on_failure: OnFailure::Continue,
        priority,
        mode: RunMode::Sync,
        status_message: None,
        skip: None,
        order,
        widens: Vec::new(),
        chain,
        required: false,
    })
}

/// `hook` answered `hookSpecificOutput: specific` on `event`.
fn said(event: &str, hook: Arc<Hook>, specific: Value) -> Executed {
    let output = HookOutput::from_json(json!({ "hookSpecificOutput": specific }), event).unwrap();
    Executed {
        hook,
        result: HookResult::Ran(Box::new(HandlerRun {
            verdict: Verdict::Answer(Answer {
                output,
                ..Answer::default()
            }),
            exit_code: Some(0),
            duration: Duration::from_millis(1),
            usage: Usage::default(),
            diagnostics: None,
        })),
    }
}

fn spec(event: &str) -> Arc<crate::event::EventSpec> {
    EventCatalogue::default().get(event).unwrap().clone()
}

fn input() -> Value {
    json!({"tool_name": "Bash", "tool_input": {"command": "a", "timeout": 5}, "prompt": "hello"})
}

fn command(cmd: &str) -> Value {
    json!({"updatedInput": {"command": cmd, "timeout": 5}})
}

/// Applies the outcome's patches in order to the input.
fn replayed(outcome: &Outcome) -> Value {
    let mut doc = input();
    for rewrite in &outcome.rewrites {
        json_patch::patch(&mut doc, &rewrite.patch).unwrap();
    }
    doc
}

#[test]
fn a_chain_composes_and_each_step_is_a_patch_of_what_its_hook_saw() {
    let executed = [
        said("PreToolUse", hook(0, 0, Some(0)), command("b")),
        said("PreToolUse", hook(1, 0, Some(0)), command("b | tee log")),
        said(
            "PreToolUse",
            hook(2, 0, Some(0)),
            json!({"additionalContext": "x"}),
        ),
        said(
            "PreToolUse",
            hook(3, 0, Some(0)),
            command("b | tee log; true"),
        ),
    ];
    let out = merge_event(&spec("PreToolUse"), &input(), &executed);
    assert_eq!(
        out.updated_input,
        Some(json!({"command": "b | tee log; true", "timeout": 5}))
    );
    assert_eq!(out.updated_input_by.as_deref(), Some("h3"));
    let hooks: Vec<&str> = out.rewrites.iter().map(|r| r.hook.as_str()).collect();
    assert_eq!(hooks, ["h0", "h1", "h3"], "{:#?}", out.rewrites);
    assert_eq!(
        serde_json::to_value(&out.rewrites[0].patch).unwrap(),
        json!([{"op": "replace", "path": "/tool_input/command", "value": "b"}])
    );
    assert_eq!(
        serde_json::to_value(&out.rewrites[1].patch).unwrap(),
        json!([{"op": "replace", "path": "/tool_input/command", "value": "b | tee log"}])
    );
    assert_eq!(
        replayed(&out)["tool_input"],
        *out.updated_input.as_ref().unwrap()
    );
}

#[test]
fn a_chain_competes_as_one_rewrite_by_its_highest_priority_then_its_first_hook() {
    // A parallel hook first in config order, then a chain: equal priorities → the
    // parallel hook wins and only its rewrite is listed.
    let parallel = || said("PreToolUse", hook(0, 0, None), command("p"));
    let chain = |priority: i64| {
        [
            said("PreToolUse", hook(1, 0, Some(1)), command("c1")),
            said("PreToolUse", hook(2, priority, Some(1)), command("c2")),
        ]
    };
    let mut executed = vec![parallel()];
    executed.extend(chain(0));
    let out = merge_event(&spec("PreToolUse"), &input(), &executed);
    assert_eq!(out.updated_input_by.as_deref(), Some("h0"));
    assert_eq!(out.rewrites.len(), 1);
    assert_eq!(replayed(&out)["tool_input"]["command"], "p");
    // One hook of the chain has a higher priority: the whole chain wins, composed.
    let mut executed = vec![parallel()];
    executed.extend(chain(5));
    let out = merge_event(&spec("PreToolUse"), &input(), &executed);
    assert_eq!(out.updated_input_by.as_deref(), Some("h2"));
    let hooks: Vec<&str> = out.rewrites.iter().map(|r| r.hook.as_str()).collect();
    assert_eq!(hooks, ["h1", "h2"]);
    assert_eq!(replayed(&out)["tool_input"]["command"], "c2");
    // Without a chain, the same hooks do not compose: the priority 5 hook alone wins.
    let executed = [
        parallel(),
        said("PreToolUse", hook(1, 0, None), command("c1")),
        said("PreToolUse", hook(2, 5, None), command("c2")),
    ];
    let out = merge_event(&spec("PreToolUse"), &input(), &executed);
    assert_eq!(out.rewrites.len(), 1);
    assert_eq!(out.rewrites[0].hook, "h2");
    assert_eq!(
        serde_json::to_value(&out.rewrites[0].patch).unwrap(),
        json!([{"op": "replace", "path": "/tool_input/command", "value": "c2"}])
    );
}

#[test]
fn updated_prompt_merges_by_priority_then_config_order() {
    let prompt = |order: usize, priority: i64, text: &str| {
        said(
            "UserPromptSubmit",
            hook(order, priority, None),
            json!({"updatedPrompt": text}),
        )
    };
    let out = merge_event(
        &spec("UserPromptSubmit"),
        &input(),
        &[prompt(0, 0, "first"), prompt(1, 0, "second")],
    );
    assert_eq!(out.updated_prompt.as_deref(), Some("first"));
    let out = merge_event(
        &spec("UserPromptSubmit"),
        &input(),
        &[prompt(0, 0, "first"), prompt(1, 1, "second")],
    );
    assert_eq!(out.updated_prompt.as_deref(), Some("second"));
    assert_eq!(out.rewrites.len(), 1);
    assert_eq!(out.rewrites[0].field, "updatedPrompt");
    assert_eq!(
        serde_json::to_value(&out.rewrites[0].patch).unwrap(),
        json!([{"op": "replace", "path": "/prompt", "value": "second"}])
    );
    // Not a string: ignored, with a notice naming the hook.
    let out = merge_event(
        &spec("UserPromptSubmit"),
        &input(),
        &[said(
            "UserPromptSubmit",
            hook(0, 0, None),
            json!({"updatedPrompt": 3}),
        )],
    );
    assert_eq!(out.updated_prompt, None);
    assert!(
        out.notices
            .iter()
            .any(|n| n.hook == "h0" && n.message.contains("`updatedPrompt` must be a string")),
        "{:?}",
        out.notices
    );
    // Only UserPromptSubmit honours it.
    let out = merge_event(
        &spec("PreToolUse"),
        &input(),
        &[said(
            "PreToolUse",
            hook(0, 0, None),
            json!({"updatedPrompt": "x"}),
        )],
    );
    assert_eq!(out.updated_prompt, None);
    assert!(out.rewrites.is_empty());
}

#[test]
fn skip_answers_the_call_and_is_listed_as_the_tool_response() {
    let out = merge_event(
        &spec("PreToolUse"),
        &input(),
        &[
            said(
                "PreToolUse",
                hook(0, 0, None),
                json!({"skipResult": "orphan"}),
            ),
            said(
                "PreToolUse",
                hook(1, 0, None),
                json!({"skip": true, "skipResult": {"stdout": "cached"}}),
            ),
        ],
    );
    assert!(out.skip);
    assert_eq!(out.skip_result, Some(json!({"stdout": "cached"})));
    assert_eq!(out.rewrites.len(), 1);
    assert_eq!(
        serde_json::to_value(&out.rewrites[0].patch).unwrap(),
        json!([{"op": "add", "path": "/tool_response", "value": {"stdout": "cached"}}])
    );
    assert!(
        out.notices
            .iter()
            .any(|n| n.hook == "h0" && n.message.contains("without `skip: true`")),
        "{:?}",
        out.notices
    );
    assert!(out.hook_specific_output.is_empty(), "{out:?}");
    // `skip: false` and other events: nothing.
    let out = merge_event(
        &spec("PreToolUse"),
        &input(),
        &[said("PreToolUse", hook(0, 0, None), json!({"skip": false}))],
    );
    assert!(!out.skip);
    let out = merge_event(
        &spec("PostToolUse"),
        &input(),
        &[said("PostToolUse", hook(0, 0, None), json!({"skip": true}))],
    );
    assert!(!out.skip);
}

#[test]
fn claude_format_reports_what_claude_code_cannot_do_as_a_message() {
    let out = merge_event(
        &spec("UserPromptSubmit"),
        &input(),
        &[said(
            "UserPromptSubmit",
            hook(0, 0, None),
            json!({"updatedPrompt": "redacted"}),
        )],
    );
    let response = to_claude(&spec("UserPromptSubmit"), &out);
    let json: Value = serde_json::from_str(&response.stdout).unwrap();
    let message = json["systemMessage"].as_str().unwrap();
    assert!(
        message.contains("`h0`") && message.contains("`updatedPrompt`"),
        "{message}"
    );
    assert!(json.get("hookSpecificOutput").is_none(), "{json}");
    let out = merge_event(
        &spec("PreToolUse"),
        &input(),
        &[said(
            "PreToolUse",
            hook(0, 0, None),
            json!({"skip": true, "skipResult": "x"}),
        )],
    );
    let response = to_claude(&spec("PreToolUse"), &out);
    let json: Value = serde_json::from_str(&response.stdout).unwrap();
    assert!(
        json["systemMessage"].as_str().unwrap().contains("`skip`"),
        "{json}"
    );
    assert!(json.get("hookSpecificOutput").is_none(), "{json}");
}

#[test]
fn the_chain_hands_on_only_what_the_allow_list_admits() {
    let pre = spec("PreToolUse");
    let done = said("PreToolUse", hook(0, 0, Some(0)), command("b"));
    let next = step(&pre, &done, Some(&input())).input.unwrap();
    assert_eq!(next["tool_input"]["command"], "b");
    assert_eq!(next["prompt"], "hello", "the rest of the input stays");
    let done = said(
        "PreToolUse",
        hook(0, 0, Some(0)),
        json!({"updatedPrompt": "x", "additionalContext": "y"}),
    );
    assert_eq!(step(&pre, &done, Some(&input())).input, None);
    let done = said(
        "PreToolUse",
        hook(0, 0, Some(0)),
        json!({"skip": true, "skipResult": "cached"}),
    );
    assert_eq!(
        step(&pre, &done, Some(&input())).input.unwrap()["tool_response"],
        "cached"
    );
    let ups = spec("UserPromptSubmit");
    let done = said(
        "UserPromptSubmit",
        hook(0, 0, Some(0)),
        json!({"updatedPrompt": "hello, redacted"}),
    );
    assert_eq!(
        step(&ups, &done, Some(&input())).input.unwrap()["prompt"],
        "hello, redacted"
    );
}

#[test]
fn of_two_outputs_of_one_hook_the_first_it_said_stays() {
    let out = merge_event(
        &spec("PostToolUse"),
        &input(),
        &[said(
            "PostToolUse",
            hook(0, 0, None),
            json!({"updatedMCPToolOutput": "mcp", "updatedToolOutput": "tool"}),
        )],
    );
    assert_eq!(out.updated_tool_output, Some(json!("mcp")));
    // And the chain hands on the same.
    let done = said(
        "PostToolUse",
        hook(0, 0, Some(0)),
        json!({"updatedMCPToolOutput": "mcp", "updatedToolOutput": "tool"}),
    );
    let next = step(&spec("PostToolUse"), &done, Some(&input()))
        .input
        .unwrap();
    assert_eq!(next["tool_response"], "mcp");
    let keys: Vec<&String> = next.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tool_name", "tool_input", "prompt", "tool_response"]);
    assert_eq!(out.rewrites.len(), 1);
    assert_eq!(out.rewrites[0].field, "updatedMCPToolOutput");
}

/// A long chain of large rewrites: the outcome's patches stay within the budget; the steps
/// past it are listed with their hook and size, their patch left out.
#[test]
fn the_patches_of_an_outcome_are_bounded() {
    let big = |i: usize| command(&format!("{i}{}", "x".repeat(256 << 10)));
    let executed: Vec<Executed> = (0..40)
        .map(|i| said("PreToolUse", hook(i, 0, Some(0)), big(i)))
        .collect();
    let out = merge_event(&spec("PreToolUse"), &input(), &executed);
    assert_eq!(out.rewrites.len(), 40);
    let kept: usize = out
        .rewrites
        .iter()
        .map(|r| serde_json::to_string(&r.patch).unwrap().len())
        .sum();
    assert!(kept <= REWRITES_BUDGET, "{kept}");
    let left_out = out.rewrites.iter().filter(|r| r.omitted_bytes.is_some());
    assert!(left_out.count() >= 30);
    assert!(out.rewrites[0].omitted_bytes.is_none());
    assert!(out.rewrites[39].patch.0.is_empty());
    assert!(out.rewrites[39].omitted_bytes.unwrap() > 256 << 10);
    // The final rewrite itself is whole.
    assert!(
        out.updated_input.unwrap()["command"]
            .as_str()
            .unwrap()
            .starts_with("39x")
    );
}

/// A step's patch is made from the field's two values where they are: the same patch as
/// diffing two whole documents that hold the field, for every shape of change (added,
/// replaced, nested, arrays, keys with `/` and `~`, unchanged), and it rebuilds the new
/// input from the old.
#[test]
fn a_field_patch_is_the_diff_of_the_documents_that_hold_the_field() {
    let values = [
        None,
        Some(json!("a")),
        Some(json!(5)),
        Some(json!(null)),
        Some(json!({"command": "ls", "timeout": 5})),
        Some(json!({"command": "ls -la", "env": {"a/b": "1", "c~d": [1, 2]}})),
        Some(json!([1, {"x": 2}, 3])),
        Some(json!([1, {"x": 4}])),
    ];
    let doc = |value: &Option<Value>| {
        let mut input = json!({"tool_name": "Bash", "other": {"kept": true}});
        if let Some(value) = value {
            input["tool_input"] = value.clone();
        }
        input
    };
    for before in &values {
        for after in values.iter().flatten() {
            let patch = super::rewrite::field_patch("tool_input", before.as_ref(), after);
            let after_doc = doc(&Some(after.clone()));
            assert_eq!(
                patch,
                json_patch::diff(&doc(before), &after_doc),
                "{before:?} -> {after}"
            );
            let mut replayed = doc(before);
            json_patch::patch(&mut replayed, &patch).unwrap();
            assert_eq!(replayed, after_doc, "{before:?} -> {after}");
        }
    }
}
