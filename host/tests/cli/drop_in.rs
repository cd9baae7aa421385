//! hookhost as the single command hook of a Claude Code `settings.json`: an emulated
//! Claude Code reads the settings, runs the configured command with recorded inputs on
//! stdin, and gets exactly the stdout, stderr and exit code it expects.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{TestEnv, hooks};

/// The drop-in: one command hook for every event, fanning out to `.hookhost/hooks.json`.
fn claude_settings(hookhost: &str) -> Value {
    let hook = json!([{"matcher": "*", "hooks": [{"type": "command", "command": format!("{hookhost} dispatch --format claude"), "timeout": 30}]}]);
    let events = [
        "PreToolUse",
        "PermissionRequest",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
    ];
    json!({"hooks": events.iter().map(|e| (e.to_string(), hook.clone())).collect::<serde_json::Map<_, _>>()})
}

/// What Claude Code does with a command hook: `sh -c` in the project, input on stdin.
fn run_like_claude_code(env: &TestEnv, command: &str, input: &Value) -> (i32, String, String) {
    let mut sh = Command::new("sh");
    sh.args(["-c", command])
        .current_dir(&env.project)
        .env("CLAUDE_PROJECT_DIR", &env.project)
        .env("HOOKHOST_HOME", &env.home)
        .env("HOOKHOST_MANAGED_DIR", &env.managed)
        .env("HOOKHOST_DATA_DIR", &env.data);
    let run = env.run_with(&mut sh, &input.to_string());
    (run.code, run.stdout, run.stderr)
}

#[test]
fn recorded_claude_code_inputs_get_the_outputs_claude_code_expects() {
    let env = TestEnv::new();
    let project = env.project.display().to_string();
    env.write(
        ".hookhost/hooks.json",
        include_str!("../fixtures/claude/hooks.json"),
    );
    env.write(
        ".claude/settings.json",
        &claude_settings(env!("CARGO_BIN_EXE_hookhost")).to_string(),
    );
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(env.project.join(".claude/settings.json")).unwrap(),
    )
    .unwrap();
    // The user trusts the repository's hooks once, as they would before using them.
    let trusted = env.run(&["trust", &project], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    let cases: Vec<Value> = serde_json::from_str(
        &include_str!("../fixtures/claude/cases.json").replace("$PROJECT", &project),
    )
    .unwrap();
    assert_eq!(cases.len(), 9);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let event = case["input"]["hook_event_name"].as_str().unwrap();
        let command = settings["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap();
        let (code, stdout, stderr) = run_like_claude_code(&env, command, &case["input"]);
        assert_eq!(
            code,
            case["exit"].as_i64().unwrap() as i32,
            "{name}: exit code; stderr {stderr}"
        );
        assert_eq!(stderr, case["stderr"].as_str().unwrap(), "{name}: stderr");
        match &case["stdout"] {
            Value::String(s) => assert_eq!(stdout, *s, "{name}: stdout"),
            expected => {
                assert!(
                    stdout.ends_with('\n') && stdout.lines().count() == 1,
                    "{name}: one JSON line, got {stdout:?}"
                );
                let got: Value = serde_json::from_str(&stdout)
                    .unwrap_or_else(|e| panic!("{name}: {e}: {stdout}"));
                assert_eq!(&got, expected, "{name}: stdout");
            }
        }
    }
    // After the tests passed, Stop goes through.
    std::fs::write(env.project.join(".tests-passed"), "").unwrap();
    let stop = json!({"session_id": "abc123", "hook_event_name": "Stop", "stop_hook_active": true, "cwd": project});
    let command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap();
    assert_eq!(
        run_like_claude_code(&env, command, &stop),
        (0, String::new(), String::new())
    );
}

/// The drop-in as Claude Code runs it, in-process: `sh -c` in `cwd`, with
/// `CLAUDE_PROJECT_DIR` when given, judged by the trust store.
fn drop_in(
    env: &TestEnv,
    cwd: &std::path::Path,
    project_var: Option<&std::path::Path>,
    input: &Value,
) -> crate::support::Run {
    let mut sh = env.untrusted_command();
    sh.current_dir(cwd).args(["dispatch", "--format", "claude"]);
    match project_var {
        Some(dir) => sh.env("CLAUDE_PROJECT_DIR", dir),
        None => sh.env_remove("CLAUDE_PROJECT_DIR"),
    };
    sh.env_remove("HOOKHOST_PROJECT_DIR");
    env.run_with(&mut sh, &input.to_string())
}

/// A PreToolUse of `rm -rf /` in session `session`, from `cwd`.
fn rm_rf(session: &str, cwd: &std::path::Path) -> Value {
    json!({"session_id": session, "hook_event_name": "PreToolUse", "tool_name": "Bash",
           "tool_input": {"command": "rm -rf /"}, "cwd": cwd.display().to_string()})
}

/// The repository's one hook: deny `rm -rf`.
fn deny_rm(env: &TestEnv) {
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo 'no rm' >&2; exit 2"}]),
    ));
}

fn system_message(run: &crate::support::Run) -> String {
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()["systemMessage"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Issue 17.1 (a): an untrusted workspace used to give exit 0 and nothing at all, with
/// the dangerous command allowed. The agent now shows why, once per session.
#[test]
fn an_untrusted_workspace_says_its_hooks_do_not_run_once_per_session() {
    let env = TestEnv::new();
    deny_rm(&env);
    let project = env.project.display().to_string();
    let first = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s1", &env.project),
    );
    assert_eq!(
        system_message(&first),
        format!(
            "hookhost: 1 project hook is not running: this workspace is not trusted — run `hookhost trust` in {project}"
        )
    );
    assert_eq!(first.stderr, "");
    // Not on every event of the session …
    let again = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s1", &env.project),
    );
    assert_eq!(
        (again.code, again.stdout.as_str(), again.stderr.as_str()),
        (0, "", "")
    );
    // … but in every new one.
    let other = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s2", &env.project),
    );
    assert!(
        system_message(&other).contains("is not trusted"),
        "{}",
        other.stdout
    );
    // After `hookhost trust` the hook runs and blocks.
    assert_eq!(env.run(&["trust", &project], "").code, 0);
    let trusted = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s2", &env.project),
    );
    assert_eq!((trusted.code, trusted.stderr.as_str()), (2, "no rm\n"));
}

/// Issue 17.1 (b): editing your own hooks untrusts the workspace; the agent says what
/// changed, and says it again in the same session when the reason changes.
#[test]
fn edited_hooks_say_what_changed_and_again_when_that_changes() {
    let env = TestEnv::new();
    deny_rm(&env);
    let project = env.project.display().to_string();
    assert_eq!(env.run(&["trust", &project], "").code, 0);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo 'no rm, edited' >&2; exit 2"}]),
    ));
    let run = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s1", &env.project),
    );
    assert_eq!(
        system_message(&run),
        format!(
            "hookhost: 1 project hook is not running: this workspace changed since you trusted it: \
             `.hookhost/hooks.json` was modified — review the changes, then run `hookhost trust` in {project}"
        )
    );
    let quiet = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s1", &env.project),
    );
    assert_eq!(quiet.stdout, "");
    env.local_hooks(hooks(
        "Stop",
        "",
        json!([{"type": "command", "command": "true"}]),
    ));
    let changed = drop_in(
        &env,
        &env.project,
        Some(&env.project),
        &rm_rf("s1", &env.project),
    );
    let message = system_message(&changed);
    assert!(
        message.starts_with("hookhost: 2 project hooks are not running"),
        "{message}"
    );
    assert!(
        message.contains("`.hookhost/hooks.local.json` was added"),
        "{message}"
    );
}

/// Issue 17.1 (c): from a subdirectory of the project the drop-in finds the project by
/// `CLAUDE_PROJECT_DIR`, by the input's `cwd` (Codex sets no variable) or by walking up
/// from the working directory.
#[test]
fn the_project_is_found_from_a_subdirectory() {
    let env = TestEnv::new();
    deny_rm(&env);
    let project = env.project.display().to_string();
    assert_eq!(env.run(&["trust", &project], "").code, 0);
    let deep = env.project.join("src/module");
    std::fs::create_dir_all(&deep).unwrap();
    // Not `HOOKHOST_HOME` itself: a path variable inside the working directory is refused.
    let elsewhere = env.home.parent().unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // Claude Code: the variable, from anywhere.
    let run = drop_in(
        &env,
        &elsewhere,
        Some(&env.project),
        &rm_rf("s1", &elsewhere),
    );
    assert_eq!(
        (run.code, run.stderr.as_str()),
        (2, "no rm\n"),
        "CLAUDE_PROJECT_DIR"
    );
    // Codex: no variable, the session's cwd in the input.
    let run = drop_in(&env, &elsewhere, None, &rm_rf("s1", &deep));
    assert_eq!((run.code, run.stderr.as_str()), (2, "no rm\n"), "input cwd");
    // Neither: the working directory, walking up to the `.hookhost/`.
    let mut input = rm_rf("s1", &deep);
    input.as_object_mut().unwrap().remove("cwd");
    let run = drop_in(&env, &deep, None, &input);
    assert_eq!(
        (run.code, run.stderr.as_str()),
        (2, "no rm\n"),
        "working directory"
    );
    // `hookhost trust` from the subdirectory trusts the project, not the subdirectory.
    let status = env.run_with(
        env.untrusted_command()
            .current_dir(&deep)
            .args(["trust", "--status"]),
        "",
    );
    assert!(
        status
            .stdout
            .starts_with(&format!("{project}: trusted since ")),
        "{}",
        status.stdout
    );
}

/// A `.hookhost/` above the starting directory that another user owns (one planted in
/// `/tmp`) does not become the project.
#[test]
fn another_users_hookhost_dir_higher_up_is_not_the_project() {
    if !crate::skip::is_root_or_skip(
        "another_users_hookhost_dir_higher_up_is_not_the_project",
        "chown to a second uid",
    ) {
        return;
    }
    let env = TestEnv::new();
    deny_rm(&env);
    let project = env.project.display().to_string();
    assert_eq!(env.run(&["trust", &project], "").code, 0);
    let deep = env.project.join("work");
    std::fs::create_dir_all(&deep).unwrap();
    let run = drop_in(&env, &deep, None, &rm_rf("s1", &deep));
    assert_eq!(run.code, 2, "owned by the user (root): found");
    std::os::unix::fs::chown(env.project.join(".hookhost"), Some(65534), Some(65534)).unwrap();
    let run = drop_in(&env, &deep, None, &rm_rf("s1", &deep));
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
}

/// The dispatch daemon answers the same: it finds the project from each request's input
/// and shares the once-per-session state with one-shot processes.
#[test]
fn the_dispatch_daemon_gives_the_same_answers() {
    let env = TestEnv::new();
    deny_rm(&env);
    // A user hook (it runs untrusted too) names the process that ran it (the parent of
    // its keeper).
    env.user_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "command": r#"printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","additionalContext":"parent %s"}}' $(awk '{print $4}' /proc/$PPID/stat)"#}]),
    ));
    // Not `HOOKHOST_HOME` itself: a path variable inside the working directory is refused.
    let neutral = env.home.parent().unwrap().join("neutral");
    std::fs::create_dir_all(&neutral).unwrap();
    let via_daemon = |input: &Value| {
        let mut cmd = env.untrusted_command();
        cmd.current_dir(&neutral)
            .env_remove("HOOKHOST_DISPATCH_DAEMON")
            .env("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS", "60")
            .env_remove("CLAUDE_PROJECT_DIR")
            .env_remove("HOOKHOST_PROJECT_DIR")
            .args(["dispatch", "--format", "claude"]);
        env.run_with(&mut cmd, &input.to_string())
    };
    let parent = |run: &crate::support::Run| -> u32 {
        let json = run.json();
        let context = json["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .to_string();
        context.trim_start_matches("parent ").parse().unwrap()
    };
    let sub = env.project.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let first = via_daemon(&rm_rf("s1", &sub));
    assert_eq!(parent(&first), first.pid, "the first call runs in-process");
    assert!(
        first.json()["systemMessage"]
            .as_str()
            .unwrap()
            .contains("is not trusted")
    );
    let sockets = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(env.data.join("daemons"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "sock"))
            .collect()
    };
    crate::support::wait_until("the dispatch daemon", || !sockets().is_empty());
    let second = via_daemon(&rm_rf("s1", &sub));
    assert_ne!(parent(&second), second.pid, "answered by the daemon");
    assert!(
        second.json().get("systemMessage").is_none(),
        "shown once per session: {}",
        second.stdout
    );
    let other = via_daemon(&rm_rf("s2", &sub));
    assert!(
        other.json()["systemMessage"]
            .as_str()
            .unwrap()
            .contains("is not trusted")
    );
    // Trusted: the daemon finds the project from the input's cwd, request by request.
    assert_eq!(
        env.run(&["trust", &env.project.display().to_string()], "")
            .code,
        0
    );
    let blocked = via_daemon(&rm_rf("s2", &sub));
    assert_eq!((blocked.code, blocked.stderr.as_str()), (2, "no rm\n"));
    let outside = via_daemon(&rm_rf("s2", &neutral));
    assert_eq!(outside.code, 0, "{}", outside.stderr);
    assert_ne!(parent(&outside), outside.pid, "answered by the daemon");
    for socket in sockets() {
        let _ = std::fs::remove_file(socket);
    }
}

/// `hookhost install`/`uninstall` with `HOME` (and nothing else) pointing into the test.
fn install(env: &TestEnv, args: &[&str]) -> crate::support::Run {
    let mut cmd = env.command();
    cmd.env("HOME", &env.home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .args(args);
    env.run_with(&mut cmd, "")
}

/// Claude Code's own formatting (`JSON.stringify(settings, null, 2)`), other keys and a
/// hook of the user's.
const CLAUDE_SETTINGS: &str = "{\n  \"permissions\": {\n    \"allow\": [\n      \"Bash(git status)\"\n    ]\n  },\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"Bash\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"~/bin/guard.sh\"\n          }\n        ]\n      }\n    ]\n  },\n  \"model\": \"opus\",\n  \"zUnknown\": {\n    \"b\": 1,\n    \"a\": [\n      1.5,\n      null\n    ]\n  }\n}\n";

#[test]
fn install_merges_the_drop_in_and_uninstall_removes_exactly_it() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let settings = env.home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, CLAUDE_SETTINGS).unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o640)).unwrap();

    let dry = install(&env, &["install", "--claude", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.contains("+            \"command\": \""),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("(dry run: nothing written)"));
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), CLAUDE_SETTINGS);

    let run = install(&env, &["install", "--claude"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&settings).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["permissions", "hooks", "model", "zUnknown"],
        "key order kept"
    );
    assert_eq!(
        value["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
        "~/bin/guard.sh"
    );
    let ours = value["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_string();
    // `hookhost-dispatch` sits beside this `hookhost` (cargo builds both) and answers: the
    // drop-in runs the small client, by its path (it is not on the PATH).
    assert!(
        ours.ends_with("/hookhost-dispatch --format claude"),
        "{ours}"
    );
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PermissionRequest",
        "PreSkillShellCommand",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
    ] {
        assert_eq!(
            value["hooks"][event][0]["hooks"][0]["command"],
            ours.as_str(),
            "{event}"
        );
    }
    let mode = std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640, "the file keeps its mode");
    let backup = env.home.join(".claude/settings.json.hookhost-backup");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), CLAUDE_SETTINGS);
    // No temporary file left behind.
    let names: Vec<String> = std::fs::read_dir(settings.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // Idempotent: nothing changes the second time.
    let again = install(&env, &["install", "--claude"]);
    assert!(again.stdout.contains("nothing changed"), "{}", again.stdout);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), text);

    // The drop-in works as written: Claude Code runs the command for a repository's hook.
    deny_rm(&env);
    assert_eq!(
        env.run(&["trust", &env.project.display().to_string()], "")
            .code,
        0
    );
    let (code, _, stderr) = run_like_claude_code(&env, &ours, &rm_rf("s1", &env.project));
    assert_eq!((code, stderr.as_str()), (2, "no rm\n"));

    let removed = install(&env, &["uninstall", "--claude"]);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        CLAUDE_SETTINGS,
        "byte for byte"
    );
    let mode = std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
}

#[test]
fn install_for_codex_writes_its_hooks_json() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let codex = env.home.join("codex-home");
    // No `codex` on this PATH to ask for the trust hashes (agents_real.rs has one).
    let mut cmd = env.command();
    cmd.env("HOME", &env.home)
        .env("CODEX_HOME", &codex)
        .env("PATH", "/usr/bin:/bin")
        .args(["install", "--codex"]);
    let run = env.run_with(&mut cmd, "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("no `codex` on the PATH")
            && run.stdout.contains("type `/hooks`")
            && run.stdout.contains("hooks.json:pre_tool_use:0:0"),
        "{}",
        run.stdout
    );
    // Until Codex trusts the drop-in, `validate` says it does not run.
    let mut cmd = env.command();
    cmd.env("HOME", &env.home)
        .env("CODEX_HOME", &codex)
        .args(["validate"]);
    let run = env.run_with(&mut cmd, "");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("Codex does not run hookhost's PreToolUse hook yet"),
        "{said}"
    );
    let file = codex.join("hooks.json");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let events: Vec<&String> = value["hooks"].as_object().unwrap().keys().collect();
    assert_eq!(
        events,
        [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "Stop"
        ]
    );
    // A new file: private (settings can hold tokens).
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The project's file, with `--project`.
    let run = install(
        &env,
        &[
            "install",
            "--codex",
            "--project",
            &env.project.display().to_string(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(env.project.join(".codex/hooks.json").is_file());
}

/// Files hookhost must not rewrite: it refuses, names why, and leaves them as they are.
#[test]
fn install_refuses_what_it_cannot_round_trip_or_should_not_write_through() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let dir = env.project.join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = dir.join("settings.json");
    let project = env.project.display().to_string();
    let refused = |setup: &dyn Fn(), why: &str| {
        let _ = std::fs::remove_file(&settings);
        setup();
        let before = std::fs::symlink_metadata(&settings)
            .ok()
            .map(|m| (m.len(), m.file_type()));
        let started = std::time::Instant::now();
        let run = install(&env, &["install", "--claude", "--project", &project]);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{why}: it waited"
        );
        assert_eq!(run.code, 1, "{why}: {}", run.stdout);
        assert!(run.stderr.contains(why), "{why}: {}", run.stderr);
        let after = std::fs::symlink_metadata(&settings)
            .ok()
            .map(|m| (m.len(), m.file_type()));
        assert_eq!(before, after, "{why}: the file was changed");
        assert!(!dir.join("settings.json.hookhost-backup").exists(), "{why}");
    };
    let settings_ref = &settings;
    let write = |bytes: &'static [u8]| move || std::fs::write(settings_ref, bytes).unwrap();
    refused(
        &write(b"{\n  // my comment\n  \"model\": \"opus\"\n}\n"),
        "is not plain JSON",
    );
    refused(&write(b"{\"model\": \"opus\",}"), "is not plain JSON");
    refused(
        &write(b"{\"model\": \"a\", \"model\": \"b\"}"),
        "duplicate key `model`",
    );
    refused(&write(b"{\"model\": \"caf\xe9\"}"), "is not UTF-8 text");
    refused(&write(b"\xef\xbb\xbf{}"), "byte-order mark");
    refused(
        &write(b"{\"n\": 123456789012345678901234567890}"),
        "cannot be written back exactly",
    );
    refused(&write(b"[]"), "is not a JSON object");
    refused(&write(b"{\"hooks\": []}"), "`hooks` is not an object");
    refused(
        &|| {
            let mut huge = b"{\"pad\": \"".to_vec();
            huge.resize(5 << 20, b'x');
            huge.extend_from_slice(b"\"}");
            std::fs::write(&settings, huge).unwrap();
        },
        "above the cap",
    );
    refused(
        &|| {
            let path = std::ffi::CString::new(settings.as_os_str().as_bytes()).unwrap();
            // SAFETY: a valid C string; mkfifo has no other preconditions.
            assert_eq!(unsafe { libc_mkfifo(path.as_ptr(), 0o600) }, 0);
        },
        "it is a FIFO",
    );
    let user_settings = env.home.join("user-settings.json");
    std::fs::write(&user_settings, "{}").unwrap();
    refused(
        &|| std::os::unix::fs::symlink(&user_settings, &settings).unwrap(),
        "is a symlink (to",
    );
    assert_eq!(std::fs::read_to_string(&user_settings).unwrap(), "{}");
    // A repository's `.claude/` pointing at the user's settings directory.
    std::fs::remove_file(&settings).unwrap();
    std::fs::remove_dir(&dir).unwrap();
    let users_claude = env.home.join("dot-claude");
    std::fs::create_dir_all(&users_claude).unwrap();
    std::os::unix::fs::symlink(&users_claude, &dir).unwrap();
    let run = install(&env, &["install", "--claude", "--project", &project]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("is a symlink; hookhost does not write a project's settings through it"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_dir(&users_claude).unwrap().count(), 0);
}

unsafe extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

/// `hookhost install` writes the small client only where it sits beside the running
/// `hookhost`, is a regular executable file no one else can write, and answers; else
/// `hookhost dispatch`. Either form already there is the drop-in (install adds nothing),
/// and uninstall removes both.
#[test]
fn install_writes_the_small_client_only_where_it_answers_and_knows_both_forms() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let alone = env.home.join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let hookhost = alone.join("hookhost");
    std::fs::copy(env!("CARGO_BIN_EXE_hookhost"), &hookhost).unwrap();
    let client = alone.join("hookhost-dispatch");
    let settings = env.home.join("settings.json");
    let file = settings.to_str().unwrap();
    let run = |program: &Path, verb: &str| {
        let mut cmd = Command::new(program);
        crate::support::copy_env(&env.command(), &mut cmd);
        cmd.current_dir(&env.project)
            .env("PATH", "/usr/bin:/bin")
            .args([verb, "--claude", "--file", file]);
        let run = env.run_with(&mut cmd, "");
        assert_eq!(run.code, 0, "{verb}: {}", run.stderr);
        run
    };
    let installed = || {
        let value: Value =
            serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
        value["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let plain = format!("{} dispatch --format claude", hookhost.display());
    let small = format!("{} --format claude", client.display());

    // No client beside it: `hookhost dispatch`.
    run(&hookhost, "install");
    assert_eq!(installed(), plain);
    run(&hookhost, "uninstall");
    // One that does not answer (exits 0, prints nothing), or that others can write: not
    // written.
    std::fs::write(&client, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    run(&hookhost, "install");
    assert_eq!(installed(), plain, "a client that does not answer");
    run(&hookhost, "uninstall");
    std::fs::copy(CLIENT, &client).unwrap();
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o777)).unwrap();
    run(&hookhost, "install");
    assert_eq!(installed(), plain, "a client others can write");
    run(&hookhost, "uninstall");
    // The real one, this user's: the small client.
    std::fs::set_permissions(&client, std::fs::Permissions::from_mode(0o755)).unwrap();
    run(&hookhost, "install");
    assert_eq!(installed(), small);
    let with_client = std::fs::read_to_string(&settings).unwrap();

    // Idempotent across forms: a `hookhost` without a client beside it finds the small
    // client's drop-in and adds nothing, and the other way round.
    let other = run(Path::new(env!("CARGO_BIN_EXE_hookhost")), "install");
    assert!(other.stdout.contains("nothing changed"), "{}", other.stdout);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), with_client);
    let plain_file = with_client.replace(&small, &plain);
    std::fs::write(&settings, &plain_file).unwrap();
    let again = run(&hookhost, "install");
    assert!(again.stdout.contains("nothing changed"), "{}", again.stdout);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), plain_file);

    // Uninstall removes both forms, plain names too.
    let mixed: Value = serde_json::json!({"hooks": {
        "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": small}]}],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": plain}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "hookhost-dispatch --format claude"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": "hookhost dispatch --format claude"}]}]
    }, "model": "opus"});
    std::fs::write(&settings, mixed.to_string()).unwrap();
    let removed = run(&hookhost, "uninstall");
    assert!(
        removed.stdout.contains("removed the hookhost drop-in"),
        "{}",
        removed.stdout
    );
    let left: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(left, serde_json::json!({"model": "opus"}));
}

const CLIENT: &str = env!("CARGO_BIN_EXE_hookhost-dispatch");
