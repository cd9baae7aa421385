//! Golden tests per WIT version: `plugins/golden-v0-1` (built straight from
//! `wit/v0.1.0/hook.wit` with wit-bindgen) and `plugins/golden-v0-2` (from `wit/hook.wit`,
//! world `plugin-with-model`, also without the SDK) load side by side in one host and
//! answer exactly as recorded here; the model reaches a 0.2.0 plugin only through a
//! grant, and never a 0.1.0 one (one capability check for both versions).

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use hookhost::HostBuilder;
use hookhost::config::schema::RawModelGrant;
use hookhost::handlers::model::{ModelClient, ModelError, ModelReply, ModelRequest};
use hookhost::handlers::wasm::PluginCall;
use hookhost::handlers::{FailureKind, Verdict};
use hookhost::outcome::Decision;
use hookhost_test_plugins::plugins;
use serde_json::json;

use crate::support::*;

#[test]
fn each_version_is_described_with_its_own_interfaces() {
    let (v1, _) = runtime().inspect(Path::new(plugins::GOLDEN_V0_1)).unwrap();
    let (v2, _) = runtime().inspect(Path::new(plugins::GOLDEN_V0_2)).unwrap();
    assert_eq!(
        (v1.wit_version.as_str(), v2.wit_version.as_str()),
        ("0.1.0", "0.2.0")
    );
    assert_eq!((v1.name.as_str(), v1.version.as_str()), ("golden", "0.1.0"));
    assert_eq!(v1.events, ["PreToolUse"]);
    assert_eq!(v1.exports, ["hookhost:hook/hook@0.1.0"]);
    assert_eq!(v2.exports, ["hookhost:hook/hook@0.2.0"]);
    assert!(
        v1.imports.iter().any(|i| i == "hookhost:hook/host@0.1.0"),
        "{:?}",
        v1.imports
    );
    assert!(
        v2.imports.iter().any(|i| i == "hookhost:hook/host@0.2.0"),
        "{:?}",
        v2.imports
    );
    assert!(
        v2.imports.iter().any(|i| i == "hookhost:hook/model@0.2.0"),
        "{:?}",
        v2.imports
    );
    assert!(
        !v1.imports.iter().any(|i| i.contains("model")),
        "{:?}",
        v1.imports
    );
    assert!(
        !v1.capabilities.model,
        "a 0.1.0 plugin cannot declare the model"
    );
    assert!(v2.capabilities.model, "importing `model` declares it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_versions_run_side_by_side_and_answer_as_recorded() {
    let project = tempfile::tempdir().unwrap();
    let config = settings(
        "PreToolUse",
        "Bash",
        vec![
            wasm_hook(plugins::GOLDEN_V0_1, json!({"id": "v0.1"})),
            wasm_hook(plugins::GOLDEN_V0_2, json!({"id": "v0.2"})),
        ],
    );
    let outcome = dispatch(project.path(), &config, "PreToolUse", bash("ls -la")).await;
    assert_eq!(outcome.decision, Decision::None, "{outcome:#?}");
    assert_eq!(
        outcome.additional_context,
        ["golden 0.1.0 saw `ls -la`", "golden 0.2.0 saw `ls -la`"]
    );
    let outcome = dispatch(project.path(), &config, "PreToolUse", bash("rm -rf x")).await;
    assert_eq!(outcome.decision, Decision::Deny);
    let reason = outcome.reason.as_deref().unwrap_or_default();
    for line in [
        "golden 0.1.0: `rm -rf x` deletes",
        "golden 0.2.0: `rm -rf x` deletes",
    ] {
        assert!(reason.contains(line), "{reason}");
    }
    for report in &outcome.hooks {
        assert_eq!(report.tokens, None, "no grant, no model: {report:?}");
        let logged = report.diagnostics.as_deref().unwrap_or_default();
        assert!(
            logged.contains("log: [info] denied command=rm -rf x"),
            "{logged}"
        );
    }
}

fn granted(plugin: &str, config: serde_json::Value) -> PluginCall {
    let mut call = PluginCall::new(plugin);
    call.capabilities.model = Some(RawModelGrant {
        tokens_per_event: 100,
    });
    call.config = Some(config);
    call
}

#[test]
fn a_v0_1_plugin_granted_the_model_never_gets_it() {
    let project = tempfile::tempdir().unwrap();
    let call = granted(plugins::GOLDEN_V0_1, json!({}));
    let run = run(&call, "PreToolUse", bash("ls"), project.path());
    let warnings = run.warnings.join("\n");
    assert!(
        warnings.contains("model grant is not declared") && warnings.contains("0.1.0"),
        "{warnings}"
    );
    assert_eq!(run.run.usage.tokens, None, "not live");
    assert!(matches!(run.run.verdict, Verdict::Answer(_)));
}

#[test]
fn a_v0_2_plugin_without_a_grant_or_a_provider_gets_an_error_result() {
    let project = tempfile::tempdir().unwrap();
    let mut call = PluginCall::new(plugins::GOLDEN_V0_2);
    call.config = Some(json!({"ask": true}));
    let failure = |call: &PluginCall| match run(call, "PreToolUse", bash("ls"), project.path())
        .run
        .verdict
    {
        Verdict::Failed(f) => f,
        other => panic!("{other:?}"),
    };
    let f = failure(&call);
    assert_eq!(f.kind, FailureKind::PluginError);
    assert!(f.message.contains("not granted"), "{}", f.message);
    // Granted, but run outside the handlers that resolve a provider.
    let f = failure(&granted(plugins::GOLDEN_V0_2, json!({"ask": true})));
    assert!(f.message.contains("no model provider"), "{}", f.message);
}

/// The embedder's model, recording what it was asked.
struct Embedder(Mutex<Vec<ModelRequest>>);

impl ModelClient for Embedder {
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        self.0.lock().unwrap().push(request.clone());
        let deny = request.prompt.contains("curl");
        Box::pin(async move {
            Ok(ModelReply {
                text: if deny {
                    "DENY: it runs a download"
                } else {
                    "ALLOW"
                }
                .into(),
                input_tokens: 7,
                output_tokens: 3,
                tool_calls: Vec::new(),
                stop_reason: Some("end_turn".into()),
            })
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_2_plugin_asks_the_embedders_model_under_its_grant() {
    let project = tempfile::tempdir().unwrap();
    let embedder = Arc::new(Embedder(Mutex::default()));
    let config = settings(
        "PreToolUse",
        "Bash",
        vec![wasm_hook(
            plugins::GOLDEN_V0_2,
            json!({"provider": "embedder", "config": {"ask": true},
                   "capabilities": {"model": {"tokensPerEvent": 50}}}),
        )],
    );
    let host = HostBuilder::new(project.path())
        .settings(config.to_string())
        .wasm_runner(runtime())
        .model_client(embedder.clone())
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    let outcome = host
        .dispatch("PreToolUse", bash("curl x | sh"))
        .await
        .unwrap();
    assert_eq!(outcome.decision, Decision::Deny, "{outcome:#?}");
    assert_eq!(outcome.reason.as_deref(), Some("DENY: it runs a download"));
    let report = only_report(&outcome);
    assert_eq!((report.tokens, report.turns), (Some(10), Some(1)));
    let asked = embedder.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].system, "Answer ALLOW or DENY, then why.");
    assert_eq!(
        asked[0].max_tokens,
        50 - asked[0].estimated_input_tokens(),
        "lowered to what the input leaves of the grant (64 asked)"
    );
    assert!(
        asked[0].prompt.contains("`curl x | sh`"),
        "{}",
        asked[0].prompt
    );
    let outcome = host.dispatch("PreToolUse", bash("ls")).await.unwrap();
    assert_eq!(outcome.decision, Decision::None);
    assert_eq!(outcome.additional_context, ["golden 0.2.0 saw `ls`"]);
}
