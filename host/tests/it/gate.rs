//! The reload gate's plugin load (`hookhost::gate`, `WasmRuntime::load_for_hook`): a
//! plugin is loaded at reload as its hook's first event would load it, `describe` under
//! the hook's own limits, so a plugin whose `describe` fails there is refused at reload
//! and the file's last good version stays in force.

use std::sync::Arc;

use hookhost::handlers::wasm::WasmRuntime;
use hookhost::{HostBuilder, WorkspaceTrust};
use serde_json::json;

use crate::support::{bash, settings, wasm_hook};

/// The guard: denies `rm -rf`.
fn guard() -> serde_json::Value {
    settings(
        "PreToolUse",
        "Bash",
        vec![json!({"type": "command", "id": "guard",
            "command": "case \"$(cat)\" in *'rm -rf'*) echo no >&2; exit 2;; esac"})],
    )
}

#[test]
fn a_plugin_whose_describe_fails_under_the_hooks_limits_is_refused_at_reload() {
    let project = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let file = project.path().join("hooks.json");
    std::fs::write(&file, guard().to_string()).unwrap();
    let wasm = Arc::new(WasmRuntime::new(Some(cache.path().to_path_buf())));
    let build = |gate: hookhost::gate::Gate<'_>| {
        Ok(gate
            .apply(
                HostBuilder::new(project.path())
                    .settings(file.display().to_string())
                    .workspace_trust(WorkspaceTrust::Explicit),
            )
            .build())
    };
    let first = hookhost::gate::reload(project.path(), None, &wasm, build).unwrap();
    // `describe` spins: under the hook's 1,000,000 units of fuel it runs out at once
    // (under `plugin inspect`'s limits it would run for seconds and still fail).
    let plugin = crate::raw::component(crate::raw::Raw::DescribeSpins, project.path());
    let broken = settings(
        "PreToolUse",
        "Bash",
        vec![wasm_hook(
            plugin.to_str().unwrap(),
            json!({"id": "spins", "timeout": 60, "limits": {"fuel": 1_000_000}}),
        )],
    );
    std::fs::write(&file, broken.to_string()).unwrap();
    let second = hookhost::gate::reload(project.path(), Some(&first.host), &wasm, build).unwrap();
    let notices = second.host.policy().notices.join("\n");
    assert!(
        notices.contains("stays in force")
            && notices.contains("hook `spins`")
            && notices.contains("`describe` failed"),
        "{notices}"
    );
    let outcome = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(second.host.dispatch("PreToolUse", bash("rm -rf /")))
        .unwrap();
    assert_eq!(
        outcome.decision,
        hookhost::outcome::Decision::Deny,
        "{outcome:#?}"
    );
}
