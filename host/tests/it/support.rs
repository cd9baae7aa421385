//! Helpers of the wasm tests: one shared sandbox with its compile cache under the target
//! directory, hosts over a temporary project, direct plugin calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use hookhost::event::Invocation;
use hookhost::handlers::wasm::{PluginCall, PluginRun, WasmRuntime};
use hookhost::outcome::{HookReport, Outcome};
use hookhost::{EventCatalogue, HostBuilder};
use serde_json::{Value, json};

/// The sandbox shared by the tests of this binary (one engine; each plugin compiles once).
pub fn runtime() -> Arc<WasmRuntime> {
    static RUNTIME: OnceLock<Arc<WasmRuntime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| Arc::new(WasmRuntime::new(Some(cache_dir()))))
        .clone()
}

/// The compile cache of the tests.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("wasm-cache")
}

/// A wasm handler entry for a settings file.
pub fn wasm_hook(plugin: &str, extra: Value) -> Value {
    let mut hook = json!({"type": "wasm", "plugin": plugin});
    if let (Some(h), Some(e)) = (hook.as_object_mut(), extra.as_object()) {
        h.extend(e.clone());
    }
    hook
}

/// Settings with one matcher group on one event.
pub fn settings(event: &str, matcher: &str, hooks: Vec<Value>) -> Value {
    json!({"hooks": {event: [{"matcher": matcher, "hooks": hooks}]}})
}

/// Dispatches one event through a full host over `project`.
pub async fn dispatch(project: &Path, settings: &Value, event: &str, input: Value) -> Outcome {
    dispatch_on(&runtime(), project, settings, event, input).await
}

/// [`dispatch`] with the wasm runtime `runtime` (its own compile cache or observer).
pub async fn dispatch_on(
    runtime: &Arc<WasmRuntime>,
    project: &Path,
    settings: &Value,
    event: &str,
    input: Value,
) -> Outcome {
    let host = HostBuilder::new(project)
        .settings(settings.to_string())
        .wasm_runner(runtime.clone())
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "config errors: {:?}",
        host.policy().errors
    );
    host.dispatch(event, input).await.expect("dispatch")
}

/// The only hook report of an outcome.
pub fn only_report(outcome: &Outcome) -> &HookReport {
    assert_eq!(outcome.hooks.len(), 1, "{outcome:#?}");
    &outcome.hooks[0]
}

/// A Bash PreToolUse input.
pub fn bash(command: &str) -> Value {
    json!({"session_id": "s1", "cwd": "/tmp", "tool_name": "Bash", "tool_input": {"command": command}})
}

/// Runs one plugin call on the calling thread, as the one-shot CLI does.
pub fn run(call: &PluginCall, event: &str, input: Value, project: &Path) -> PluginRun {
    let spec = EventCatalogue::default()
        .get(event)
        .expect("known event")
        .clone();
    let invocation = Invocation::new(spec, input, project).expect("object input");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(runtime().call(call, &invocation))
}
