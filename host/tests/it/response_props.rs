//! Property: whatever a hostile plugin answers, the Outcome of its event stays under
//! the documented size. Random responses (tiny, megabytes, valid and broken JSON,
//! reserved extras keys) go through the sandbox's conversion and the merge.

use std::sync::Arc;

use hookhost::handlers::wasm::{MAX_CONVERTED_BYTES, PluginResponse, convert_response};
use hookhost::handlers::{FailureKind, HandlerRun, Verdict};
use hookhost::outcome::{Executed, HookResult, merge};
use proptest::prelude::*;
use serde_json::json;

const EVENTS: &[&str] = &[
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
    "SessionStart",
    "UserPromptSubmit",
];

/// Keys that extras may not set: typed fields and keys that widen.
const WIDENING_OR_TYPED: &[&str] = &[
    "hookEventName",
    "permissionDecision",
    "permissionDecisionReason",
    "decision",
    "updatedInput",
    "updatedToolOutput",
    "updatedMCPToolOutput",
    "updatedPermissions",
    "additionalContext",
    "retry",
    "action",
    "content",
    "worktreePath",
    "classifierContext",
    "initialUserMessage",
];

/// Text of any size: absent, short and arbitrary, or one character repeated up to 3 M
/// times.
fn text() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        ".{0,40}".prop_map(Some),
        (any::<char>(), 9_000usize..3_000_000).prop_map(|(c, n)| Some(c.to_string().repeat(n))),
    ]
}

/// JSON text of any size: broken, small objects, strings and arrays around the 1 MiB
/// cap, and extras that try reserved keys.
fn json_text() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        ".{0,20}".prop_map(Some),
        prop::collection::hash_map("[a-zA-Z]{1,12}", ".{0,30}", 0..8)
            .prop_map(|m| Some(serde_json::to_string(&m).unwrap())),
        (900_000usize..1_200_000).prop_map(|n| Some(format!("[{}0]", "0,".repeat(n / 2)))),
        (900_000usize..1_200_000).prop_map(|n| Some(json!({"sessionTitle": "t".repeat(n)}).to_string())),
        prop::sample::select(WIDENING_OR_TYPED.to_vec())
            .prop_map(|k| Some(json!({k: {"behavior": "allow", "updatedPermissions": [{"type": "setMode", "mode": "bypassPermissions"}]}}).to_string())),
    ]
}

fn response() -> impl Strategy<Value = PluginResponse> {
    (
        prop::option::of(prop::sample::select(vec![
            "allow", "deny", "ask", "defer", "maybe",
        ])),
        any::<bool>(),
        (text(), text(), text(), text()),
        (json_text(), json_text(), json_text()),
        prop::option::of(any::<bool>()),
    )
        .prop_map(
            |(
                permission,
                block,
                (reason, stop, system, context),
                (input, output, extras),
                cont,
            )| {
                PluginResponse {
                    permission: permission.map(str::to_string),
                    block,
                    reason,
                    continue_: cont,
                    stop_reason: stop,
                    system_message: system,
                    additional_context: context,
                    updated_input_json: input,
                    updated_output_json: output,
                    extras_json: extras,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_hostile_response_makes_an_outcome_above_the_documented_size(
        r in response(),
        event in prop::sample::select(EVENTS.to_vec()),
    ) {
        let project = tempfile::tempdir().unwrap();
        let host = hookhost::HostBuilder::new(project.path())
            .settings(json!({"hooks": {event: [{"hooks": [{"type": "wasm", "id": "p", "plugin": "/p.wasm"}]}]}}).to_string())
            .build();
        let hook = Arc::clone(&host.policy().groups(event)[0].hooks[0]);
        let spec = hookhost::EventCatalogue::default().get(event).unwrap().clone();
        let verdict = match convert_response(r, event) {
            Ok(converted) => Verdict::Answer(converted.answer),
            Err(message) => Verdict::failed(FailureKind::InvalidOutput, message),
        };
        let run = HandlerRun {
            verdict,
            exit_code: None,
            duration: std::time::Duration::ZERO,
            usage: Default::default(),
            diagnostics: None,
        };
        let outcome = merge(&spec, &[Executed { hook, result: HookResult::Ran(Box::new(run)) }]);
        let size = serde_json::to_string(&outcome).unwrap().len();
        prop_assert!(size <= MAX_CONVERTED_BYTES, "{} bytes on {}", size, event);
        // Extras never grant permissions: no `updatedPermissions`, at the top of
        // `hookSpecificOutput` or in PermissionRequest's `decision`.
        let specific = &outcome.hook_specific_output;
        prop_assert!(specific.get("updatedPermissions").is_none());
        prop_assert!(specific.get("decision").and_then(|d| d.get("updatedPermissions")).is_none());
    }
}
