//! Managed capability ceilings and handler-type restrictions: a grant one unit above a
//! ceiling refuses that hook at load, naming the grant and the ceiling, and nothing else
//! stops working.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hook_fields, hooks};

fn notices(out: &Value) -> String {
    out["notices"].to_string()
}

fn ids(out: &Value) -> Vec<String> {
    hook_fields(out, "id", "status")
}

fn wasm(id: &str, extra: Value) -> Value {
    let mut hook = json!({"type": "wasm", "id": id, "plugin": "plugins/none.wasm"});
    hook.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    hook
}

#[test]
fn a_grant_one_unit_above_a_ceiling_refuses_that_hook_naming_both() {
    let env = TestEnv::new();
    env.managed(json!({"ceilings": {
        "fuel": 100_000_000u64,
        "memoryBytes": (64u64 << 20) - 1,
        "timeout": 5,
        "env": ["HOOK_*"],
        "http": ["api.example.com"],
        "dirs": [{"path": "${workspace}/src", "mode": "ro"}]
    }}));
    let rows: &[(Value, &str)] = &[
        (
            json!({"limits": {"fuel": 100_000_001u64}}),
            "`limits.fuel` 100000001 is above the managed ceiling 100000000",
        ),
        (
            json!({"limits": {"memoryMb": 64}}),
            "`limits.memoryMb` 64 (67108864 bytes) is above the managed ceiling of 67108863 bytes",
        ),
        (
            json!({"timeout": 5.001}),
            "`timeout` 5.001 s is above the managed ceiling of 5 s",
        ),
        (
            json!({"capabilities": {"env": ["HOME"]}}),
            "`capabilities.env[0]` `HOME` is above the managed ceiling",
        ),
        (
            json!({"capabilities": {"http": ["*.example.com"]}}),
            "`capabilities.http[0]` `*.example.com` is above the managed ceiling",
        ),
        (
            json!({"capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]}}),
            "`capabilities.dirs[0]` `${workspace}/src` (rw) is above the managed ceiling",
        ),
    ];
    let project_file = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    for (grant, refusal) in rows {
        env.project_hooks(hooks(
            "PreToolUse",
            "*",
            json!([
                {"type": "command", "id": "still-runs", "command": "true"},
                wasm("over", grant.clone())
            ]),
        ));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        assert_eq!(ids(&out), ["still-runs:ok"], "{grant}");
        let n = notices(&out);
        assert!(
            n.contains(&format!("{project_file}: $.hooks.PreToolUse[0].hooks[1]: hook refused by managed policy: {refusal}")),
            "{grant}: {n}"
        );
    }
    // At the ceiling is fine (the hook loads; the missing plugin is another matter).
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([wasm("at", json!({"limits": {"fuel": 100_000_000u64, "memoryMb": 63}, "timeout": 5,
            "capabilities": {"env": ["HOOK_LEVEL"], "http": ["api.example.com"], "dirs": [{"path": "${workspace}/src/x"}]}}))]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(ids(&out), ["at:failed"]);
    assert!(!notices(&out).contains("managed policy"), "{out}");
}

/// `ceilings.timeout` caps command and HTTP hooks as it caps wasm hooks: a timeout above
/// it refuses the hook at load naming both, and a hook that leaves its timeout at the
/// default (600 s) runs with the ceiling as its deadline.
#[test]
fn the_time_ceiling_caps_command_and_http_hooks_too() {
    let env = TestEnv::new();
    env.managed(json!({"ceilings": {"timeout": 1}}));
    let project_file = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([
            {"type": "command", "id": "cmd-over", "command": "true", "timeout": 2},
            {"type": "http", "id": "http-over", "url": "http://127.0.0.1:9/h", "timeout": 1.5},
            {"type": "command", "id": "cmd-default", "command": "sleep 30"}
        ]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    let n = notices(&out);
    for (i, asked) in [(0, "2"), (1, "1.5")] {
        assert!(
            n.contains(&format!(
                "{project_file}: $.hooks.PreToolUse[0].hooks[{i}]: hook refused by managed policy: \
                 `timeout` {asked} s is above the managed ceiling of 1 s (`ceilings.timeout`)"
            )),
            "{i}: {n}"
        );
    }
    // The default was lowered to 1 s: `sleep 30` is stopped there, not after 600 s.
    assert_eq!(ids(&out), ["cmd-default:timeout"], "{out}");
    assert_eq!(
        out["hooks"][0]["message"],
        "timed out after 1s; SIGTERM sent to its process group; it ended within its killGrace (3s)",
        "{out}"
    );
}

#[test]
fn managed_hooks_are_not_capped_by_their_own_ceilings() {
    let env = TestEnv::new();
    env.managed(json!({
        "ceilings": {"fuel": 10},
        "hooks": {"Stop": [{"hooks": [wasm("admin", json!({"limits": {"fuel": 1000}}))]}]}
    }));
    let out = env.dispatch("Stop", json!({}));
    assert_eq!(ids(&out), ["admin:failed"]);
    assert!(!notices(&out).contains("ceiling"), "{out}");
}

#[test]
fn managed_policy_restricts_handler_types_per_source() {
    let env = TestEnv::new();
    env.managed(json!({"ceilings": {"handlerTypes": {"project": ["wasm"], "local": []}}}));
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "p-cmd", "command": "touch pwned"}]),
    ));
    env.local_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "http", "id": "l-http", "url": "http://127.0.0.1:9/"}]),
    ));
    env.user_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "u-cmd", "command": "true"}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(ids(&out), ["l-http:skipped", "p-cmd:skipped", "u-cmd:ok"]);
    let messages = out["hooks"].to_string();
    assert!(messages.contains("managed policy does not allow `command` hooks from project sources (`ceilings.handlerTypes.project`: wasm)"), "{messages}");
    assert!(
        messages.contains("`http` hooks from local sources (`ceilings.handlerTypes.local`: none)"),
        "{messages}"
    );
    assert!(!env.project.join("pwned").exists());
}

#[test]
fn malformed_managed_governance_is_reported_with_file_and_path() {
    let env = TestEnv::new();
    env.managed(json!({
        "pluginAllowlist": [{"sha256": "xyz"}, {"publicKey": "00"}, {}],
        "ceilings": {"http": ["ftp://x"], "timeout": -1}
    }));
    env.user_hooks(hooks(
        "Stop",
        "*",
        json!([{"type": "command", "id": "u", "command": "true"}]),
    ));
    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1);
    let managed = env.managed.join("managed.json").display().to_string();
    for want in [
        format!("{managed}: $.pluginAllowlist[0].sha256: `xyz` is not 64 hex digits"),
        format!("{managed}: $.pluginAllowlist[1].publicKey"),
        format!("{managed}: $.pluginAllowlist[2]: an entry names exactly one of"),
        format!("{managed}: $.ceilings.http[0]"),
        format!("{managed}: $.ceilings.timeout"),
    ] {
        assert!(run.stderr.contains(&want), "{want}\n{}", run.stderr);
    }
    // An invalid time ceiling is the strictest, for command hooks as for wasm hooks.
    let out = env.dispatch("Stop", json!({}));
    assert!(ids(&out).is_empty(), "{out}");
    assert!(
        notices(&out).contains("`ceilings.timeout` is invalid, so the strictest applies"),
        "{out}"
    );
}
