//! The Claude Code drop-in keeps its promises, driven the way Claude Code drives
//! `hookhost dispatch --format claude` (its variables, the input JSON on stdin): a
//! SessionStart hook's exports reach Claude Code's own `CLAUDE_ENV_FILE`; a config error
//! reaches the user as a `systemMessage`; `hookhost trust` records trust where dispatch
//! reads it, and says where. (`claude_real.rs` proves the first with the real client.)

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{Run, TestEnv, bash_input, hooks};

/// `hookhost dispatch --format claude` as Claude Code runs it, with `CLAUDE_ENV_FILE` set
/// to `agent_file` when given.
fn claude_dispatch(env: &TestEnv, input: Value, agent_file: Option<&Path>) -> Run {
    let mut cmd = env.command();
    // Claude Code's config dir, beside HOOKHOST_HOME (hookhost's own user config is
    // refused): its env files are pinned to `<config dir>/session-env/<session>/`.
    cmd.args(["dispatch", "--format", "claude"])
        .env("CLAUDE_PROJECT_DIR", &env.project)
        .env(
            "CLAUDE_CONFIG_DIR",
            env.home.parent().unwrap().join("claude"),
        );
    match agent_file {
        Some(file) => cmd.env("CLAUDE_ENV_FILE", file),
        None => cmd.env_remove("CLAUDE_ENV_FILE"),
    };
    env.run_with(&mut cmd, &input.to_string())
}

fn session_start(env: &TestEnv, session: &str) -> Value {
    json!({"hook_event_name": "SessionStart", "session_id": session, "source": "startup",
           "cwd": env.project})
}

#[test]
fn a_session_start_hooks_exports_reach_claude_codes_env_file() {
    let env = TestEnv::new();
    env.user_hooks(hooks(
        "SessionStart",
        "",
        json!([
            {"type": "command", "command": "echo 'export FOO=from-hook' >> \"$CLAUDE_ENV_FILE\""},
            {"type": "command", "command": "echo 'export BAR=\"two words\"' >> \"$CLAUDE_ENV_FILE\""}
        ]),
    ));
    // Claude Code's layout: a directory per session, one file per hook, not yet there.
    // (Beside HOOKHOST_HOME, not in it: hookhost's own user config is refused.)
    let dir = env.home.parent().unwrap().join("claude/session-env/s1");
    std::fs::create_dir_all(&dir).unwrap();
    let agent = dir.join("sessionstart-hook-0.sh");
    let run = claude_dispatch(&env, session_start(&env, "s1"), Some(&agent));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let written = std::fs::read_to_string(&agent).expect("the agent's env file is written");
    assert!(written.contains("export FOO=from-hook\n"), "{written}");
    // What Claude Code does with it before a Bash command: source it.
    let shell = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(". '{}'; echo \"$FOO|$BAR\"", agent.display()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&shell.stdout),
        "from-hook|two words\n"
    );

    // The next event of the session hands on only what its own hooks wrote.
    let next = dir.join("sessionstart-hook-1.sh");
    let mut input = session_start(&env, "s1");
    input["source"] = json!("resume");
    env.user_hooks(hooks(
        "SessionStart",
        "",
        json!([{"type": "command", "command": "echo 'export BAZ=3' >> \"$CLAUDE_ENV_FILE\""}]),
    ));
    let run = claude_dispatch(&env, input, Some(&next));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&next).unwrap(), "export BAZ=3\n");
}

#[test]
fn the_agents_env_file_is_never_written_through_a_symlink() {
    let env = TestEnv::new();
    env.user_hooks(hooks(
        "SessionStart",
        "",
        json!([{"type": "command", "command": "echo 'export FOO=1' >> \"$CLAUDE_ENV_FILE\""}]),
    ));
    let outside = env.home.parent().unwrap().join("claude");
    std::fs::create_dir_all(outside.join("session-env/s2")).unwrap();
    let target = outside.join("bashrc");
    std::fs::write(&target, "").unwrap();
    let agent = outside.join("session-env/s2/sessionstart-hook-0.sh");
    std::os::unix::fs::symlink(&target, &agent).unwrap();
    let run = claude_dispatch(&env, session_start(&env, "s2"), Some(&agent));
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    assert!(
        run.stderr.contains("CLAUDE_ENV_FILE") && run.stderr.contains("symlink"),
        "the refusal is said: {}",
        run.stderr
    );
}

#[test]
fn a_config_error_in_a_trusted_project_reaches_the_user_once_per_session() {
    let env = TestEnv::new();
    // A typo (`comand`) removes the guard: the user must hear it, not only stderr.
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "comand": "exit 2"}]),
    ));
    let mut input = bash_input("rm -rf /");
    input["hook_event_name"] = json!("PreToolUse");
    input["session_id"] = json!("s3");
    let run = claude_dispatch(&env, input.clone(), None);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    let message = out["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("config error")
            && message.contains(".hookhost/hooks.json")
            && message.contains("PreToolUse[0]"),
        "names the file and the field: {out}"
    );
    // Once per session and text, as the untrusted-workspace notice.
    let again = claude_dispatch(&env, input.clone(), None);
    assert!(
        again.stdout.trim().is_empty() || again.json()["systemMessage"].is_null(),
        "{}",
        again.stdout
    );
    input["session_id"] = json!("s4");
    let other = claude_dispatch(&env, input, None).json();
    assert!(other["systemMessage"].as_str().is_some(), "{other}");
}

#[test]
fn trust_records_where_dispatch_reads_and_says_where() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "p", "command": "echo p >> ran.txt"}]),
    ));
    // A data directory the repository could have chosen: dispatch ignores it (it is
    // inside the workspace), so `hookhost trust`, run from elsewhere, must too.
    let planted = env.project.join("planted-data");
    let command = |cwd: &Path| {
        let mut cmd = env.untrusted_command();
        cmd.env("HOOKHOST_DATA_DIR", &planted)
            .env("HOME", &env.home)
            .env_remove("XDG_DATA_HOME")
            .current_dir(cwd);
        cmd
    };
    let project = env.project.display().to_string();
    // From a directory that is neither the project nor the home (the home must not be
    // inside a workspace, or it is refused too and the test would use the real one).
    let elsewhere = env.managed.clone();
    let run = env.run_with(command(&elsewhere).args(["trust", &project]), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let store = env.home.join(".local/share/hookhost/trust.json");
    assert!(
        run.stdout.contains(&env.home.display().to_string()),
        "never the real home: {}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains(&format!("recorded in {}", store.display())),
        "says where: {}",
        run.stdout
    );
    assert!(
        run.stderr.contains("HOOKHOST_DATA_DIR") && run.stderr.contains("is ignored"),
        "says which variable it did not follow: {}",
        run.stderr
    );
    assert!(store.is_file() && !planted.exists());
    // The dispatch Claude Code runs, from the project, reads that very store.
    let run = env.run_with(
        command(&env.project).args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["hooks"][0]["status"], "ok", "{}", run.stdout);
    let status = env.run_with(
        command(&elsewhere).args(["trust", "--status", &project]),
        "",
    );
    assert!(
        status
            .stdout
            .contains(&format!("trust store: {}", store.display())),
        "{}",
        status.stdout
    );
}
