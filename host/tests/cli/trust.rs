//! Workspace trust: untrusted project and local hooks are skipped with a notice that says
//! how to trust; `hookhost trust` / `untrust` / `trust --status`; any change to a hook
//! file, a referenced plugin or a symlink target untrusts again; explicit trust for one
//! run; managed pre-trust and `forbidWorkspaceTrust`; project files cannot widen their own
//! trust or add managed settings.

use serde_json::{Value, json};

use crate::support::{Run, TestEnv, bash_input, hook_fields, hooks};

fn marker(id: &str) -> Value {
    json!({"type": "command", "id": id, "command": format!("echo {id} >> ran.txt")})
}

fn ran(env: &TestEnv) -> String {
    let text = std::fs::read_to_string(env.project.join("ran.txt")).unwrap_or_default();
    let _ = std::fs::remove_file(env.project.join("ran.txt"));
    // Hooks run in parallel: compare in sorted order.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn statuses(out: &Value) -> Vec<String> {
    hook_fields(out, "id", "status")
}

fn message<'a>(out: &'a Value, id: &str) -> &'a str {
    out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id)
        .and_then(|h| h["message"].as_str())
        .unwrap_or_default()
}

/// `hookhost dispatch PreToolUse` judged by the trust store.
fn dispatch(env: &TestEnv) -> Value {
    let run = env.run_untrusted(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

fn trust(env: &TestEnv, args: &[&str]) -> Run {
    let mut all = vec!["trust"];
    all.extend_from_slice(args);
    env.run_untrusted(&all, "")
}

fn three_sources(env: &TestEnv) {
    env.project_hooks(hooks("PreToolUse", "*", json!([marker("p")])));
    env.local_hooks(hooks("PreToolUse", "*", json!([marker("l")])));
    env.user_hooks(hooks("PreToolUse", "*", json!([marker("u")])));
}

#[test]
fn untrusted_project_and_local_hooks_are_skipped_with_how_to_trust() {
    let env = TestEnv::new();
    three_sources(&env);
    let out = dispatch(&env);
    assert_eq!(statuses(&out), ["l:skipped", "p:skipped", "u:ok"]);
    let dir = env.project.display().to_string();
    for id in ["l", "p"] {
        let m = message(&out, id);
        assert!(
            m.contains(&format!("workspace `{dir}` is not trusted"))
                && m.contains(&format!("hookhost trust {dir}"))
                && m.contains("--trust-workspace"),
            "{m}"
        );
    }
    assert_eq!(ran(&env), "u\n");

    // `hookhost hooks` says the same.
    let run = env.run_untrusted(&["hooks", "--json"], "");
    let lines: Value = serde_json::from_str(&run.stdout).unwrap();
    let p = lines
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "p")
        .unwrap();
    assert_eq!(p["runs"], false);
    assert!(p["whyNot"].as_str().unwrap().contains("not trusted"));
}

#[test]
fn trust_untrust_and_status() {
    let env = TestEnv::new();
    three_sources(&env);
    let status = trust(&env, &["--status", "--json"]);
    assert_eq!(status.json()["state"], "untrusted", "{}", status.stdout);

    let run = trust(&env, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("echo p >> ran.txt"),
        "lists what will run: {}",
        run.stdout
    );
    assert!(env.data.join("trust.json").is_file());
    assert_eq!(statuses(&dispatch(&env)), ["l:ok", "p:ok", "u:ok"]);
    assert_eq!(ran(&env), "l\np\nu\n");
    let status = trust(&env, &["--status", "--json"]).json();
    assert_eq!(
        (status["state"].as_str(), status["trustedBy"].as_str()),
        (Some("trusted"), Some("user"))
    );

    // The store is keyed by the canonical path: trusting from elsewhere, by a path with
    // `.` in it, is the same workspace.
    let dotted = format!("{}/./", env.project.display());
    let run = env.run_with(
        env.untrusted_command()
            .args(["trust", "--status", "--json", &dotted])
            .current_dir(&env.home),
        "",
    );
    assert_eq!(run.json()["state"], "trusted");

    let run = env.run_untrusted(&["untrust"], "");
    assert!(run.stdout.contains("untrusted"), "{}", run.stdout);
    assert_eq!(
        statuses(&dispatch(&env)),
        ["l:skipped", "p:skipped", "u:ok"]
    );
    let run = env.run_untrusted(&["untrust"], "");
    assert!(run.stdout.contains("was not trusted"), "{}", run.stdout);
}

#[test]
fn a_changed_hook_file_untrusts_until_trusted_again() {
    let env = TestEnv::new();
    three_sources(&env);
    assert_eq!(trust(&env, &[]).code, 0);
    env.project_hooks(hooks("PreToolUse", "*", json!([marker("p"), marker("p2")])));
    let out = dispatch(&env);
    assert_eq!(
        statuses(&out),
        ["l:skipped", "p:skipped", "p2:skipped", "u:ok"]
    );
    let m = message(&out, "p2");
    assert!(
        m.contains("changed since it was trusted")
            && m.contains("`.hookhost/hooks.json` was modified")
            && m.contains("hookhost trust"),
        "{m}"
    );
    let status = trust(&env, &["--status", "--json"]).json();
    assert_eq!(status["state"], "changed");
    assert_eq!(
        status["changes"],
        json!(["`.hookhost/hooks.json` was modified"])
    );

    // A new local file, or a removed one, is a change too.
    assert_eq!(trust(&env, &[]).code, 0);
    std::fs::remove_file(env.project.join(".hookhost/hooks.local.json")).unwrap();
    let out = dispatch(&env);
    assert!(
        message(&out, "p").contains("`.hookhost/hooks.local.json` was removed"),
        "{out}"
    );

    assert_eq!(trust(&env, &[]).code, 0);
    assert_eq!(statuses(&dispatch(&env)), ["p:ok", "p2:ok", "u:ok"]);
}

#[test]
fn a_plugin_whose_bytes_change_after_trust_untrusts_the_workspace() {
    let env = TestEnv::new();
    env.write(".hookhost/plugins/gate.wasm", "version one");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([marker("p"), {"type": "wasm", "id": "gate", "plugin": "plugins/gate.wasm"}]),
    ));
    assert_eq!(trust(&env, &[]).code, 0);
    let out = dispatch(&env);
    assert_eq!(statuses(&out)[0], "p:ok");
    assert_eq!(ran(&env), "p\n");

    env.write(".hookhost/plugins/gate.wasm", "version two");
    let out = dispatch(&env);
    assert_eq!(statuses(&out), ["p:skipped", "gate:skipped"]);
    let m = message(&out, "gate");
    assert!(
        m.contains("`.hookhost/plugins/gate.wasm` was modified"),
        "{m}"
    );
    assert!(ran(&env).is_empty());

    // Back to the trusted bytes: trusted again without asking.
    env.write(".hookhost/plugins/gate.wasm", "version one");
    assert_eq!(statuses(&dispatch(&env))[0], "p:ok");
}

#[test]
fn a_symlinked_hook_file_swapped_after_trust_untrusts_the_workspace() {
    let env = TestEnv::new();
    let config = hooks("PreToolUse", "*", json!([marker("p")])).to_string();
    let a = env.write("configs/a.json", &config);
    let b = env.write("configs/b.json", &config); // identical content, other file
    std::fs::create_dir_all(env.project.join(".hookhost")).unwrap();
    let link = env.project.join(".hookhost/hooks.json");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    assert_eq!(trust(&env, &[]).code, 0);
    assert_eq!(statuses(&dispatch(&env)), ["p:ok"]);
    assert_eq!(ran(&env), "p\n");

    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&b, &link).unwrap();
    let out = dispatch(&env);
    assert_eq!(statuses(&out), ["p:skipped"]);
    let m = message(&out, "p");
    assert!(
        m.contains(&format!(
            "`.hookhost/hooks.json` now points to `{}` (was `{}`)",
            b.display(),
            a.display()
        )),
        "{m}"
    );
    assert!(ran(&env).is_empty());
}

#[test]
fn explicit_trust_is_per_run_and_never_implicit() {
    let env = TestEnv::new();
    three_sources(&env);
    let input = bash_input("ls").to_string();
    let run = env.run_untrusted(&["dispatch", "PreToolUse", "--trust-workspace"], &input);
    assert_eq!(statuses(&run.json()), ["l:ok", "p:ok", "u:ok"]);
    let run = env.run_with(
        env.untrusted_command()
            .args(["dispatch", "PreToolUse"])
            .env("HOOKHOST_TRUST_WORKSPACE", "1"),
        &input,
    );
    assert_eq!(statuses(&run.json()), ["l:ok", "p:ok", "u:ok"]);
    // Nothing was recorded: the next plain run is untrusted again, also with a
    // non-interactive stdin and other values of the variable.
    assert!(!env.data.join("trust.json").exists());
    for value in ["0", "true", "yes", ""] {
        let run = env.run_with(
            env.untrusted_command()
                .args(["dispatch", "PreToolUse"])
                .env("HOOKHOST_TRUST_WORKSPACE", value),
            &input,
        );
        assert_eq!(
            statuses(&run.json()),
            ["l:skipped", "p:skipped", "u:ok"],
            "{value:?}"
        );
    }
}

#[test]
fn managed_policy_pre_trusts_or_forbids_trust() {
    let env = TestEnv::new();
    three_sources(&env);
    let parent = env.project.parent().unwrap().display().to_string();
    env.managed(json!({"trustedWorkspaces": [format!("{parent}/*")]}));
    assert_eq!(statuses(&dispatch(&env)), ["l:ok", "p:ok", "u:ok"]);
    let status = trust(&env, &["--status", "--json"]).json();
    assert_eq!(status["trustedBy"], "managed");

    env.managed(json!({"forbidWorkspaceTrust": true}));
    let run = trust(&env, &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("forbidWorkspaceTrust"),
        "{}",
        run.stderr
    );
    assert!(!env.data.join("trust.json").exists());
    let run = env.run_untrusted(
        &["dispatch", "PreToolUse", "--trust-workspace"],
        &bash_input("ls").to_string(),
    );
    let out = run.json();
    assert_eq!(statuses(&out), ["l:skipped", "p:skipped", "u:ok"]);
    assert!(
        message(&out, "p").contains("forbids trusting workspaces"),
        "{out}"
    );

    // A drop-in that pre-trusts this path wins over the ban on users trusting.
    std::fs::create_dir_all(env.managed.join("managed.d")).unwrap();
    std::fs::write(
        env.managed.join("managed.d/10-trust.json"),
        json!({"trustedWorkspaces": [env.project.display().to_string()]}).to_string(),
    )
    .unwrap();
    assert_eq!(statuses(&dispatch(&env)), ["l:ok", "p:ok", "u:ok"]);
}

#[test]
fn a_project_cannot_trust_itself_add_managed_settings_or_move_the_store() {
    let env = TestEnv::new();
    env.user_hooks(hooks("PreToolUse", "*", json!([marker("u")])));
    // Managed-only keys in a project file: each is a warning naming the file and key,
    // and has no effect (the workspace stays untrusted).
    env.project_hooks(json!({
        "trustedWorkspaces": ["/**"],
        "forbidWorkspaceTrust": false,
        "pluginAllowlist": [{"sha256": "00".repeat(32)}],
        "ceilings": {"fuel": 1},
        "allowManagedHooksOnly": true,
        "hooks": {"PreToolUse": [{"hooks": [marker("p")]}]}
    }));
    let out = dispatch(&env);
    assert_eq!(statuses(&out), ["p:skipped", "u:ok"]);
    let run = env.run_untrusted(&["validate", "--trust-workspace"], "");
    let project_file = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    for key in [
        "trustedWorkspaces",
        "forbidWorkspaceTrust",
        "pluginAllowlist",
        "ceilings",
        "allowManagedHooksOnly",
    ] {
        assert!(
            run.stderr.contains(&format!(
                "{project_file}: $.{key}: only managed policy can set `{key}`; ignored here"
            )),
            "{key}: {}",
            run.stderr
        );
    }

    // Keys that would move sources or the trust store are not settings at all: the file
    // is refused with its name and the key (its last good version, the one above with
    // the `p` marker, stays in force), and every other source still works.
    for key in [
        "HOOKHOST_MANAGED_DIR",
        "managedDir",
        "trustStore",
        "HOOKHOST_DATA_DIR",
        "env",
    ] {
        env.project_hooks(
            json!({key: "/tmp/elsewhere", "hooks": {"PreToolUse": [{"hooks": [marker("p")]}]}}),
        );
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        assert_eq!(statuses(&out), ["p:ok", "u:ok"], "{key}");
        let notices = out["notices"].to_string();
        assert!(
            notices.contains(&project_file)
                && notices.contains(&format!("unknown field `{key}`"))
                && notices.contains("stays in force"),
            "{key}: {notices}"
        );
    }
    // `p` ran only as its last good version, never in a version with a refused key.
    assert_eq!(ran(&env), format!("{}{}", "p\n".repeat(5), "u\n".repeat(6)));
}

#[test]
fn an_untrusted_workspace_cannot_turn_off_or_shadow_the_users_hooks() {
    let env = TestEnv::new();
    let same = marker("same");
    env.user_hooks(hooks("PreToolUse", "*", json!([same.clone()])));
    // `disableAllHooks` would turn off the user's hooks, and an identical handler would
    // make the user's copy skip as a duplicate of the (skipped) project one.
    env.project_hooks(json!({
        "disableAllHooks": true,
        "envAllowlist": ["*"],
        "hooks": {"PreToolUse": [{"hooks": [same]}]}
    }));
    let out = dispatch(&env);
    assert_eq!(statuses(&out), ["same:skipped", "same#2:ok"]);
    assert_eq!(ran(&env), "same\n");
    let run = env.run_untrusted(&["validate"], "");
    assert!(
        run.stderr
            .contains("the workspace is not trusted; the settings of this file are ignored"),
        "{}",
        run.stderr
    );
}
