//! The Rust library API: building a host, in-process function hooks and custom events.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hookhost::config::schema::OnFailure;
use hookhost::event::{DecisionStyle, Exit2, MatcherSyntax, OutputKey};
use hookhost::outcome::{Decision, HookStatus};
use hookhost::policy::FunctionHook;
use hookhost::{EventSpec, HostBuilder};
use serde_json::{Value, json};

fn bash(command: &str) -> Value {
    json!({"session_id": "lib", "tool_name": "Bash", "tool_input": {"command": command}})
}

#[tokio::test]
async fn function_hooks_are_matched_and_merged_like_configured_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let host = HostBuilder::new(dir.path())
        .settings(r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "id": "ctx", "command": "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"additionalContext\": \"from command\"}}'"}
        ]}]}}"#)
        .function_hook(
            FunctionHook::new("PreToolUse", "no-force-push", move |input: Value| {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let command = input["tool_input"]["command"].as_str().unwrap_or("").to_string();
                    if command.contains("--force") {
                        return Ok(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                            "permissionDecision": "deny", "permissionDecisionReason": "no force-push",
                            "additionalContext": "from function"}}));
                    }
                    Ok(Value::Null)
                }
            })
            .matcher("Bash")
            .if_rule("Bash(git push *)"),
        )
        .build();

    let out = host
        .dispatch("PreToolUse", bash("git push --force origin main"))
        .await
        .unwrap();
    assert_eq!(out.decision, Decision::Deny);
    assert_eq!(out.reason.as_deref(), Some("no force-push"));
    assert_eq!(
        out.additional_context,
        ["from command", "from function"],
        "functions come last in config order"
    );
    let report = out.hooks.iter().find(|h| h.id == "no-force-push").unwrap();
    assert_eq!(
        (report.source.as_str(), report.kind.as_str()),
        ("embedded", "function")
    );

    let out = host.dispatch("PreToolUse", bash("ls")).await.unwrap();
    assert_eq!(out.decision, Decision::None);
    assert!(
        out.hooks.iter().all(|h| h.id != "no-force-push"),
        "the `if` rule filtered it out"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn function_hooks_are_limited_by_their_timeout_and_cannot_crash_the_host() {
    let dir = tempfile::tempdir().unwrap();
    // UserPromptSubmit: `onFailure` applies there (not on Stop, as in Claude Code).
    let host = HostBuilder::new(dir.path())
        .function_hook(
            FunctionHook::new("UserPromptSubmit", "slow", |_| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(Value::Null)
            })
            .timeout(Duration::from_millis(100))
            .on_failure(OnFailure::Block),
        )
        .function_hook(FunctionHook::new("UserPromptSubmit", "panics", |_| async {
            panic!("bug in the embedder")
        }))
        // A closure that panics before it returns its future.
        .function_hook(FunctionHook::new(
            "UserPromptSubmit",
            "panics-at-once",
            |_| -> std::future::Ready<Result<Value, String>> { panic!("bug before the future") },
        ))
        .function_hook(FunctionHook::new("UserPromptSubmit", "errs", |_| async {
            Err("no database".to_string())
        }))
        .function_hook(FunctionHook::new(
            "UserPromptSubmit",
            "bad-output",
            |_| async { Ok(json!({"decision": "maybe"})) },
        ))
        .build();
    let out = host
        .dispatch(
            "UserPromptSubmit",
            json!({"session_id": "s", "prompt": "p"}),
        )
        .await
        .unwrap();
    let status: Vec<(&str, HookStatus)> = out
        .hooks
        .iter()
        .map(|h| (h.id.as_str(), h.status))
        .collect();
    assert_eq!(
        status,
        [
            ("slow", HookStatus::Timeout),
            ("panics", HookStatus::Failed),
            ("panics-at-once", HookStatus::Failed),
            ("errs", HookStatus::Failed),
            ("bad-output", HookStatus::Failed)
        ]
    );
    assert_eq!(
        out.decision,
        Decision::Block,
        "onFailure: block on the timed-out hook"
    );
    let messages: Vec<&str> = out.notices.iter().map(|n| n.message.as_str()).collect();
    assert!(messages[0].contains("panicked"), "{messages:?}");
    assert!(messages[1].contains("panicked"), "{messages:?}");
    assert!(messages[2].contains("no database"), "{messages:?}");
    assert!(messages[3].contains("`decision`"), "{messages:?}");
}

#[tokio::test]
async fn custom_events_are_dispatched_with_their_attributes() {
    const CONTEXT: &[OutputKey] = &[OutputKey::typed("additionalContext")];
    let dir = tempfile::tempdir().unwrap();
    let deploy = EventSpec {
        name: Cow::Borrowed("BeforeDeploy"),
        matcher_field: Some(Cow::Borrowed("environment")),
        matcher_syntax: MatcherSyntax::Standard,
        exit2: Exit2::Blocks,
        decision: DecisionStyle::Block,
        specific_outputs: Cow::Borrowed(CONTEXT),
        honours_continue: true,
        plain_stdout_is_context: false,
        tool_event: false,
        env_file: false,
        matcher_tests_basename: false,
        caps_consecutive_blocks: false,
        ends_block_loop: false,
        ends_session: false,
        default_timeout: Duration::from_secs(5),
    };
    let host = HostBuilder::new(dir.path())
        .register_event(deploy)
        .settings(
            r#"{"hooks": {"BeforeDeploy": [{"matcher": "production", "hooks": [
            {"type": "command", "command": "echo 'freeze until Monday' >&2; exit 2"}
        ]}]}}"#,
        )
        .build();
    let out = host
        .dispatch(
            "BeforeDeploy",
            json!({"session_id": "d", "environment": "production"}),
        )
        .await
        .unwrap();
    assert_eq!(out.decision, Decision::Block);
    assert_eq!(out.reason.as_deref(), Some("freeze until Monday"));
    let out = host
        .dispatch(
            "BeforeDeploy",
            json!({"session_id": "d", "environment": "staging"}),
        )
        .await
        .unwrap();
    assert!(out.hooks.is_empty());
    assert!(
        host.dispatch("AfterDeploy", json!({})).await.is_err(),
        "unregistered events are refused"
    );
}

#[tokio::test]
async fn an_invalid_function_hook_is_a_policy_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let host = HostBuilder::new(dir.path())
        .function_hook(FunctionHook::new("NoSuchEvent", "x", |_| async {
            Ok(Value::Null)
        }))
        .function_hook(
            FunctionHook::new("PreToolUse", "y", |_| async { Ok(Value::Null) }).matcher("Bash("),
        )
        .build();
    let errors: Vec<String> = host
        .policy()
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        errors[0].contains("function hook `x`: unknown event `NoSuchEvent`"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("invalid matcher regex `Bash(`"),
        "{errors:?}"
    );
}

/// The embedder's own model answers prompt hooks (no key, no endpoint): it gets the
/// prompt with the input JSON and the verdict schema, and its token counts reach the
/// report.
#[tokio::test]
async fn an_embedders_model_client_answers_prompt_hooks() {
    use hookhost::handlers::model::{ModelClient, ModelError, ModelReply, ModelRequest};

    struct Judge(std::sync::Mutex<Vec<ModelRequest>>);
    impl ModelClient for Judge {
        fn complete<'a>(
            &'a self,
            request: &'a ModelRequest,
        ) -> futures_util::future::BoxFuture<'a, Result<ModelReply, ModelError>> {
            self.0.lock().unwrap().push(request.clone());
            let ok = !request.prompt.contains("--force");
            Box::pin(async move {
                Ok(ModelReply {
                    text: json!({"ok": ok, "reason": "no force-push", "impossible": false})
                        .to_string(),
                    input_tokens: 3,
                    output_tokens: 2,
                    tool_calls: Vec::new(),
                    stop_reason: None,
                })
            })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let judge = Arc::new(Judge(std::sync::Mutex::default()));
    let host = HostBuilder::new(dir.path())
        .settings(
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "prompt", "id": "judge", "prompt": "Judge $ARGUMENTS", "continueOnBlock": true}
            ]}]}}"#,
        )
        .model_client(judge.clone())
        .build();
    let out = host
        .dispatch("PreToolUse", bash("git push --force"))
        .await
        .unwrap();
    assert_eq!(out.decision, Decision::Deny, "{out:?}");
    assert_eq!(out.reason.as_deref(), Some("no force-push"));
    assert_eq!(out.hooks[0].tokens, Some(5));
    let out = host
        .dispatch("PreToolUse", bash("git status"))
        .await
        .unwrap();
    assert_eq!(out.decision, Decision::None, "{out:?}");
    let asked = judge.0.lock().unwrap();
    assert_eq!(asked.len(), 2);
    assert!(
        asked[0].prompt.starts_with("Judge {"),
        "{}",
        asked[0].prompt
    );
    assert_eq!(asked[0].model, None, "the embedder's own default model");
    assert_eq!(asked[0].schema.as_ref().unwrap()["required"][0], "ok");
}

/// The embedder's model runs agent hooks too: it is offered the tools, its calls run
/// against the workspace, the results come back in `turns`, and its verdict tool call
/// decides.
#[tokio::test]
async fn an_embedders_model_client_runs_agent_hooks_with_tools() {
    use hookhost::handlers::model::{
        ModelClient, ModelError, ModelReply, ModelRequest, ToolCall, Turn,
    };

    struct Verifier;
    impl ModelClient for Verifier {
        fn complete<'a>(
            &'a self,
            request: &'a ModelRequest,
        ) -> futures_util::future::BoxFuture<'a, Result<ModelReply, ModelError>> {
            let read = request.turns.iter().find_map(|turn| match turn {
                Turn::ToolResults { results } => Some(results[0].content.clone()),
                _ => None,
            });
            let call = match read {
                None => ToolCall {
                    id: "1".into(),
                    name: "Read".into(),
                    input: json!({"file_path": "RULES.txt"}),
                },
                Some(text) => ToolCall {
                    id: "2".into(),
                    name: "hook_verdict".into(),
                    input: json!({"ok": false, "reason": format!("RULES.txt:{}", text.trim()),
                                  "impossible": false}),
                },
            };
            assert!(request.tools.iter().any(|t| t.name == "Grep"));
            Box::pin(async move {
                Ok(ModelReply {
                    text: String::new(),
                    input_tokens: 3,
                    output_tokens: 2,
                    tool_calls: vec![call],
                    stop_reason: None,
                })
            })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("RULES.txt"), "no pushes on Friday\n").unwrap();
    let host = HostBuilder::new(dir.path())
        .settings(
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "agent", "id": "verifier", "prompt": "Check $ARGUMENTS"}
            ]}]}}"#,
        )
        .model_client(Arc::new(Verifier))
        .build();
    let out = host.dispatch("PreToolUse", bash("git push")).await.unwrap();
    assert_eq!(out.decision, Decision::Deny, "{out:?}");
    let reason = out.reason.as_deref().unwrap();
    assert!(reason.contains("no pushes on Friday"), "{reason}");
    assert_eq!(out.hooks[0].tokens, Some(10));
    assert_eq!(out.hooks[0].turns, Some(2));
}

/// Function hooks of one chain (`FunctionHook::chain`) run in registration order, each
/// given the input as the ones before it rewrote it; a function hook outside the chain
/// gets the original input; a chain member with another matcher is an error.
#[tokio::test]
async fn function_hooks_chain_in_registration_order() {
    let dir = tempfile::tempdir().unwrap();
    let append = |suffix: &'static str| {
        move |input: Value| async move {
            let command = input["tool_input"]["command"].as_str().unwrap_or("");
            Ok(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "updatedInput": {"command": format!("{command}{suffix}")}}}))
        }
    };
    let host = HostBuilder::new(dir.path())
        .function_hook(FunctionHook::new("PreToolUse", "one", append(" 1")).chain("c"))
        .function_hook(FunctionHook::new("PreToolUse", "alone", append(" x")).priority(-1))
        .function_hook(FunctionHook::new("PreToolUse", "two", append(" 2")).chain("c"))
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    let out = host.dispatch("PreToolUse", bash("ls")).await.unwrap();
    assert_eq!(out.updated_input, Some(json!({"command": "ls 1 2"})));
    assert_eq!(out.updated_input_by.as_deref(), Some("two"));
    let steps: Vec<&str> = out.rewrites.iter().map(|r| r.hook.as_str()).collect();
    assert_eq!(steps, ["one", "two"]);

    let host = HostBuilder::new(dir.path())
        .function_hook(FunctionHook::new("PreToolUse", "one", append(" 1")).chain("c"))
        .function_hook(
            FunctionHook::new("PreToolUse", "two", append(" 2"))
                .chain("c")
                .matcher("Bash"),
        )
        .build();
    let errors = format!("{:?}", host.policy().errors);
    assert!(errors.contains("joins the chain `c`"), "{errors}");
}

/// The receipt's `input` is the digest of the input's compact JSON as the caller gave it,
/// whether it names its event (the digest is then of the very line the hooks get) or the
/// dispatch adds `hook_event_name` for the hooks.
#[tokio::test]
async fn the_receipt_names_the_digest_of_the_input_as_given() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let host = HostBuilder::new(dir.path()).build();
    let mut named = bash("ls");
    named["hook_event_name"] = json!("PreToolUse");
    for input in [bash("ls"), named] {
        let out = host.dispatch("PreToolUse", input.clone()).await.unwrap();
        let compact = serde_json::to_vec(&input).unwrap();
        assert_eq!(
            out.receipt.expect("every dispatch has a receipt").input,
            format!("sha256:{}", hex::encode(sha2::Sha256::digest(&compact))),
            "{input}"
        );
    }
}

/// Issue 29: a required function hook that fails denies (one that is not required lets
/// the call through), and every outcome carries a receipt: the input's digest (of the
/// bytes given to `dispatch_from`, else of the input's compact JSON), the policy's,
/// and each hook with its status.
#[tokio::test]
async fn a_required_function_hook_that_fails_denies_and_the_receipt_says_so() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let failing = |id: &str, required: bool| {
        FunctionHook::new("PreToolUse", id, |_: Value| async {
            Err::<Value, String>("the guard's backend is down".into())
        })
        .required(required)
    };
    for required in [true, false] {
        let host = HostBuilder::new(dir.path())
            .function_hook(failing("guard", required))
            .build();
        let input = bash("ls");
        let out = host.dispatch("PreToolUse", input.clone()).await.unwrap();
        let receipt = out.receipt.as_ref().expect("every dispatch has a receipt");
        assert_eq!(receipt.hooks[0].id, "guard");
        assert_eq!(receipt.hooks[0].status, HookStatus::Failed);
        assert_eq!(receipt.hooks[0].required, required);
        assert_eq!(receipt.decision, out.decision);
        let compact = serde_json::to_vec(&input).unwrap();
        assert_eq!(
            receipt.input,
            format!("sha256:{}", hex::encode(sha2::Sha256::digest(&compact)))
        );
        if !required {
            assert_eq!(out.decision, Decision::None, "{out:?}");
            continue;
        }
        assert_eq!(out.decision, Decision::Deny, "{out:?}");
        let reason = out.reason.as_deref().unwrap();
        assert!(
            reason.contains("required hook `guard` (embedded) gave no verdict")
                && reason.contains("the guard's backend is down"),
            "{reason}"
        );
        // The bytes as received, not the value re-serialized.
        let bytes = b"{ \"session_id\": \"lib\", \"tool_name\": \"Bash\", \"tool_input\": {\"command\": \"ls\"} }";
        let out = host
            .dispatch_from("PreToolUse", input, Some(bytes), None, None)
            .await
            .unwrap();
        assert_eq!(
            out.receipt.unwrap().input,
            format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
        );
    }
}
