//! Config sources, precedence, dedup, `disableAllHooks`, errors and `hookhost validate`
//! and `hookhost hooks`.

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hook_fields, hooks};

fn marker(id: &str) -> Value {
    json!({"type": "command", "id": id, "command": format!("echo {id} >> order.txt")})
}

fn sources(out: &Value) -> Vec<String> {
    hook_fields(out, "source", "status")
}

#[test]
fn every_source_appends_in_precedence_order() {
    let env = TestEnv::new();
    env.managed(hooks("PreToolUse", "*", json!([marker("m")])));
    std::fs::create_dir_all(env.managed.join("managed.d")).unwrap();
    std::fs::write(
        env.managed.join("managed.d/10-extra.json"),
        hooks("PreToolUse", "*", json!([marker("m2")])).to_string(),
    )
    .unwrap();
    env.local_hooks(hooks("PreToolUse", "*", json!([marker("l")])));
    env.project_hooks(hooks("PreToolUse", "*", json!([marker("p")])));
    env.user_hooks(hooks("PreToolUse", "*", json!([marker("u")])));
    let settings_file = env.write(
        "extra-settings.json",
        &hooks("PreToolUse", "*", json!([marker("c1")])).to_string(),
    );
    let inline = hooks("PreToolUse", "*", json!([marker("c2")])).to_string();
    let run = env.run(
        &[
            "dispatch",
            "PreToolUse",
            "--settings",
            settings_file.to_str().unwrap(),
            "--settings",
            &inline,
        ],
        &bash_input("ls").to_string(),
    );
    let ids: Vec<String> = run.json()["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["m", "m2", "c1", "c2", "l", "p", "u"]);
    let out = run.json();
    assert_eq!(
        sources(&out),
        [
            "managed:ok",
            "managed:ok",
            "cli:ok",
            "cli:ok",
            "local:ok",
            "project:ok",
            "user:ok"
        ]
    );
}

#[test]
fn identical_handlers_from_several_files_run_once() {
    let env = TestEnv::new();
    let same = json!({"type": "command", "command": "echo ran >> count.txt"});
    env.project_hooks(hooks("PreToolUse", "Bash", json!([same.clone()])));
    env.user_hooks(hooks("PreToolUse", "Bash", json!([same])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(sources(&out), ["project:ok", "user:skipped"]);
    assert!(
        out["hooks"][1]["message"]
            .as_str()
            .unwrap()
            .contains("identical to hook `project:PreToolUse[0][0]`")
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("count.txt")).unwrap(),
        "ran\n"
    );
}

#[test]
fn disable_all_hooks_follows_claude_code() {
    let env = TestEnv::new();
    env.managed(hooks("PreToolUse", "*", json!([marker("m")])));
    env.project_hooks(
        json!({"disableAllHooks": false, "hooks": {"PreToolUse": [{"hooks": [marker("p")]}]}}),
    );
    env.user_hooks(
        json!({"disableAllHooks": true, "hooks": {"PreToolUse": [{"hooks": [marker("u")]}]}}),
    );
    // project false outranks user true
    assert_eq!(
        sources(&env.dispatch("PreToolUse", bash_input("ls"))),
        ["managed:ok", "project:ok", "user:ok"]
    );

    // --settings true outranks project false; managed hooks keep running
    let run = env.run(
        &[
            "dispatch",
            "PreToolUse",
            "--settings",
            r#"{"disableAllHooks": true}"#,
        ],
        &bash_input("ls").to_string(),
    );
    assert_eq!(
        sources(&run.json()),
        ["managed:ok", "project:skipped", "user:skipped"]
    );

    // managed true disables everything, managed included
    env.managed(
        json!({"disableAllHooks": true, "hooks": {"PreToolUse": [{"hooks": [marker("m")]}]}}),
    );
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(
        sources(&out),
        ["managed:skipped", "project:skipped", "user:skipped"]
    );
    assert!(
        out["hooks"][0]["message"]
            .as_str()
            .unwrap()
            .contains("managed policy")
    );
}

#[test]
fn allow_managed_hooks_only_skips_the_rest_with_a_reason() {
    let env = TestEnv::new();
    env.managed(
        json!({"allowManagedHooksOnly": true, "hooks": {"PreToolUse": [{"hooks": [marker("m")]}]}}),
    );
    env.project_hooks(json!({"allowManagedHooksOnly": false, "hooks": {"PreToolUse": [{"hooks": [marker("p")]}]}}));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(sources(&out), ["managed:ok", "project:skipped"]);
    assert!(
        out["hooks"][1]["message"]
            .as_str()
            .unwrap()
            .contains("allowManagedHooksOnly")
    );
    let run = env.run(&["validate"], "");
    assert!(
        run.stderr
            .contains("only managed policy can set `allowManagedHooksOnly`"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_broken_source_is_reported_and_the_others_still_run() {
    let env = TestEnv::new();
    env.write(".hookhost/hooks.json", "{\"hooks\": {\"PreToolUse\": [ }");
    env.user_hooks(hooks("PreToolUse", "*", json!([marker("u")])));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(sources(&out), ["user:ok"]);
    let notice = out["notices"][0]["message"].as_str().unwrap();
    assert!(
        notice.contains(".hookhost/hooks.json") && notice.contains("invalid JSON at line 1"),
        "{notice}"
    );
}

#[test]
fn validate_lists_every_error_with_file_and_path() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {
        "PreToolUse": [
            {"matcher": "Bash(", "hooks": [{"type": "command", "command": "true"}]},
            {"hooks": [{"type": "command", "url": "http://x"}]},
            {"hooks": [{"type": "http"}]},
            {"hooks": [{"type": "command", "command": "true", "timeout": -1}]}
        ],
        "PreToolUze": [{"hooks": []}]
    }}));
    env.user_hooks(
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "comand": "true"}]}]}}),
    );
    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1, "{}", run.stdout);
    let project = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    let user = env.home.join("hooks.json").display().to_string();
    for expected in [
        format!("error: {project}: $.hooks.PreToolUse[0].matcher: invalid matcher regex `Bash(`"),
        format!(
            "error: {project}: $.hooks.PreToolUse[1].hooks[0]: `url` is not a field of a command hook"
        ),
        format!(
            "error: {project}: $.hooks.PreToolUse[2].hooks[0]: hooks of type `http` need `url`"
        ),
        format!(
            "error: {project}: $.hooks.PreToolUse[3].hooks[0]: `timeout` must be between 0 and 86400 seconds"
        ),
        format!("warning: {project}: $.hooks.PreToolUze: unknown event `PreToolUze`"),
        format!("error: {user}: $.hooks.Stop[0].hooks[0].comand: unknown field `comand`"),
    ] {
        assert!(
            run.stderr.contains(&expected),
            "missing `{expected}` in:\n{}",
            run.stderr
        );
    }
    assert!(run.stdout.contains("5 errors"), "{}", run.stdout);

    let clean = TestEnv::new();
    clean.project_hooks(hooks("Stop", "", json!([marker("s")])));
    let run = clean.run(&["validate"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("ok: 1 hooks"), "{}", run.stdout);
}

#[test]
fn a_claude_code_settings_file_is_a_valid_source() {
    let env = TestEnv::new();
    let settings = json!({
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "permissions": {"allow": ["Bash(npm run lint)"], "deny": ["Read(./.env)"]},
        "env": {"FOO": "bar"},
        "model": "claude-sonnet",
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "echo blocked >&2; exit 2", "timeout": 30},
            {"type": "agent", "prompt": "is this safe? $ARGUMENTS"}
        ]}]}
    });
    let file = env.write(".claude/settings.json", &settings.to_string());
    // The agent hook runs: without a key it fails, open (tests/cli/agent.rs runs them).
    let mut cmd = env.command();
    cmd.args([
        "dispatch",
        "PreToolUse",
        "--settings",
        file.to_str().unwrap(),
    ])
    .env_remove("ANTHROPIC_API_KEY")
    .env_remove("ANTHROPIC_BASE_URL");
    let run = env.run_with(&mut cmd, &bash_input("ls").to_string());
    let out = run.json();
    assert_eq!(out["decision"], "deny");
    assert_eq!(out["hooks"][1]["type"], "agent", "{out}");
    assert_eq!(out["hooks"][1]["status"], "failed", "{out}");
    assert!(
        out["hooks"][1]["message"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY"),
        "{out}"
    );
}

#[test]
fn hooks_lists_every_hook_with_its_state() {
    let env = TestEnv::new();
    env.project_hooks(
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "id": "guard", "command": "true"},
            {"type": "command", "id": "off", "command": "true", "enabled": false},
            {"type": "command", "id": "missing", "command": "/no/such/program", "args": []}
        ]}]}}),
    );
    env.user_hooks(hooks(
        "Stop",
        "",
        json!([{"type": "http", "id": "remote", "url": "http://127.0.0.1:9/x"}]),
    ));
    let run = env.run(&["hooks", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = run.json();
    let line = |id: &str| {
        lines
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(line("guard")["runs"], true);
    assert_eq!(line("guard")["source"], "project");
    assert_eq!(line("guard")["matcher"], "Bash");
    assert_eq!(line("off")["runs"], false);
    assert!(
        line("off")["whyNot"]
            .as_str()
            .unwrap()
            .contains("enabled: false")
    );
    assert!(
        line("missing")["whyNot"]
            .as_str()
            .unwrap()
            .contains("not found")
    );
    assert_eq!(line("remote")["type"], "http");
    assert_eq!(line("remote")["event"], "Stop");

    let table = env.run(&["hooks"], "");
    assert!(
        table.stdout.contains("skipped: disabled in config"),
        "{}",
        table.stdout
    );
}

#[test]
fn bad_input_is_an_error_that_never_blocks() {
    let env = TestEnv::new();
    // Input it cannot read is no answer: blocked (`claude_format.rs`); in the Outcome
    // format a host error.
    let run = env.run(&["dispatch", "PreToolUse"], "not json");
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("not valid JSON"));
    let run = env.run(&["dispatch", "NoSuchEvent"], "{}");
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("unknown event `NoSuchEvent`"));
    let run = env.run(&["dispatch", "Stop"], "[1, 2]");
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("must be a JSON object"));
}

/// Project discovery stops at a bind mount of the same file system (same `st_dev`, its
/// own mount id): run from inside a directory bind-mounted below a project, in a private
/// user and mount namespace (`unshare -rm`), the project is where the walk started, not
/// the `.hookhost/` above the mount. Without the mount, the same walk finds it.
#[test]
fn project_discovery_stops_at_a_bind_mount() {
    let test = "config::project_discovery_stops_at_a_bind_mount";
    let usable = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !usable {
        crate::skip::skipped(
            test,
            "`unshare -rm` (a user and mount namespace) is not available",
        );
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(env.project.join(".hookhost")).unwrap();
    let source = env.home.join("elsewhere");
    let mount_point = env.project.join("vendor/bound");
    let plain = env.project.join("vendor/plain/src");
    for dir in [source.join("src"), mount_point.clone(), plain.clone()] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let project_of = |wrap: &[&str], cwd: &std::path::Path| -> String {
        let mut cmd = std::process::Command::new(wrap[0]);
        crate::support::copy_env(&env.command(), &mut cmd);
        cmd.args(&wrap[1..])
            .arg(env!("CARGO_BIN_EXE_hookhost"))
            .args(["dispatch", "Stop"])
            .current_dir(cwd);
        let run = env.run_with(&mut cmd, "{}");
        assert_eq!(run.code, 0, "{}", run.stderr);
        let line = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
        let last: Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
        last["project"].as_str().unwrap().to_string()
    };
    // A plain subdirectory walks up to the project.
    assert_eq!(
        project_of(&["env"], &plain),
        env.project.display().to_string()
    );
    // Bind-mounted (the same file system): the walk stops at the mount point.
    let script = format!(
        "mount --bind '{}' '{}' && cd '{}' && exec \"$@\"",
        source.display(),
        mount_point.display(),
        mount_point.join("src").display()
    );
    let inside = project_of(&["unshare", "-rm", "sh", "-c", &script, "sh"], &env.project);
    assert_eq!(inside, mount_point.join("src").display().to_string());
}
