//! Attacks: grants (see attacks/mod.rs). A directory grant is checked when it is used,
//! not only when the config is built: a warm daemon that built its config while the
//! granted path did not exist must still refuse it once the path has become a symlink
//! out of the managed ceiling.

use std::path::Path;

use serde_json::{Value, json};

use crate::dispatch_daemon::{sockets, with_daemon};
use crate::support::{Run, TestEnv, hooks, wait_until};

/// `plugins/hostile-raw` (a hostile component built from the WIT without the SDK), built
/// for wasm32-wasip2 by the test-plugins artifacts crate.
pub fn hostile_raw() -> &'static Path {
    Path::new(hookhost_test_plugins::plugins::HOSTILE_RAW)
}

/// The raw plugin's report of one `PreToolUse` through the dispatch daemon.
fn open_through_daemon(env: &TestEnv) -> (Run, Value) {
    let input = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
    let run = env.run_with(
        with_daemon(env, 120).args(["dispatch", "PreToolUse"]),
        &input.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = run.json()["hooks"][0].clone();
    (run, report)
}

#[test]
fn a_grant_that_becomes_a_symlink_out_of_the_ceiling_is_refused_by_a_warm_daemon() {
    let env = TestEnv::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "TOP-SECRET").unwrap();
    env.managed(json!({"ceilings": {"dirs": [{"path": "${workspace}", "mode": "ro"}]}}));
    // The grant sits one directory down, in a directory that exists from the start: the
    // symlink planted later changes that directory, not the project directory (whose
    // change would make the daemon rebuild its config, and the build-time check refuse
    // the hook before the sandbox's check is reached).
    std::fs::create_dir(env.project.join("sub")).unwrap();
    let secret = env.project.join("sub/data/secret");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{
            "type": "wasm",
            "id": "reader",
            "plugin": hostile_raw(),
            "capabilities": {"dirs": [{"path": "${workspace}/sub/data", "mode": "ro"}]},
            "config": {"attack": "open", "arg": secret}
        }]),
    ));

    // A daemon rebuilds its config while its files changed less than a second ago (a
    // write in the same second could go unseen; `SourcesFingerprint::is_settled`): let
    // them settle, so the warm config is the one that is kept.
    std::thread::sleep(std::time::Duration::from_millis(1500));

    // The grant's path does not exist: the config is built (and passes the ceiling),
    // the hook is refused at instantiation, and the daemon starts and warms up.
    let (_, report) = open_through_daemon(&env);
    assert!(
        report["message"]
            .as_str()
            .unwrap()
            .contains("directory grant `${workspace}/sub/data` does not resolve to a directory"),
        "{report}"
    );
    wait_until("the dispatch daemon to listen", || {
        !sockets(&env).is_empty()
    });
    let (_, report) = open_through_daemon(&env);
    assert_eq!(report["status"], "failed", "{report}");

    // Now the path becomes a symlink out of the workspace. Nothing the config was built
    // from changed (the session and daemon files created in the data directory beside
    // the trust store are no change of it), so the warm daemon keeps its config and the
    // sandbox refuses the grant when the instance is made, naming the grant and the
    // ceiling; nothing outside the ceiling is read.
    std::os::unix::fs::symlink(outside.path(), env.project.join("sub/data")).unwrap();
    let (run, report) = open_through_daemon(&env);
    let message = report["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("directory grant `${workspace}/sub/data` (ro) resolves to")
            && message.contains("above the managed ceiling `ceilings.dirs`: `${workspace}` (ro)"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("TOP-SECRET"), "{}", run.stdout);
    assert_eq!(sockets(&env).len(), 1, "answered by the warm daemon");

    // A real directory inside the workspace is granted as before.
    std::fs::remove_file(env.project.join("sub/data")).unwrap();
    std::fs::create_dir(env.project.join("sub/data")).unwrap();
    std::fs::write(&secret, "inside").unwrap();
    let (run, report) = open_through_daemon(&env);
    assert_eq!(report["status"], "ok", "{report}");
    assert!(
        run.json()["additionalContext"][0]
            .as_str()
            .unwrap()
            .starts_with("open ok"),
        "{}",
        run.stdout
    );
    for socket in sockets(&env) {
        let _ = std::fs::remove_file(socket);
    }
}

/// An env grant attacked with the values a hostile environment can hold: an empty value
/// reaches the plugin as empty, terminal controls reach it unchanged (they are escaped
/// only where a person sees them), a value that is not UTF-8 cannot be a WASI string and
/// is left out with a warning naming the grant, and a variable that is set but not
/// granted never reaches the plugin. `hostile-raw` lists every variable it can see.
#[test]
fn env_grants_pass_odd_values_unchanged_and_name_what_they_leave_out() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{
            "type": "wasm",
            "id": "env-reader",
            "plugin": hostile_raw(),
            "capabilities": {"env": ["HOSTILE_ENV"]},
            "config": {"attack": "env"}
        }]),
    ));
    let input = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
    let seen = |value: Option<&OsStr>| -> (String, Run) {
        let mut cmd = env.command();
        cmd.env("HOSTILE_SECRET", "not-granted");
        match value {
            Some(value) => cmd.env("HOSTILE_ENV", value),
            None => cmd.env_remove("HOSTILE_ENV"),
        };
        let run = env.run_with(cmd.args(["dispatch", "PreToolUse"]), &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        let context = run.json()["additionalContext"][0]
            .as_str()
            .unwrap_or_else(|| panic!("no context: {}", run.stdout))
            .to_string();
        (context, run)
    };
    let warning = "env grant `HOSTILE_ENV`: its value is not UTF-8; not passed";
    for value in ["", "\u{1b}[31mred\r\n\u{202e}", "a=b"] {
        let (context, run) = seen(Some(OsStr::new(value)));
        assert_eq!(context, format!("env {:?}", [("HOSTILE_ENV", value)]));
        assert!(!run.stdout.contains(warning), "{}", run.stdout);
    }
    let (context, run) = seen(Some(OsStr::from_bytes(b"caf\xe9")));
    assert_eq!(context, "env []");
    assert!(run.stdout.contains(warning), "{}", run.stdout);
    let (context, run) = seen(None);
    assert_eq!(context, "env []");
    assert!(!run.stdout.contains(warning), "{}", run.stdout);
}

/// The known attack on host-owned places: a plugin granted read-write `${home}/.config`
/// wrote hookhost's own user config (`~/.config/hookhost/hooks.json`), and the next event
/// ran a command of its choosing. The grant is refused when the config is built, naming
/// the grant and the place, so the plugin never runs and the user config is untouched;
/// a symlink in the project to the same directory is refused the same way.
#[test]
fn a_grant_of_the_home_config_directory_is_refused_and_the_user_config_is_untouched() {
    let env = TestEnv::new();
    let home = env.home.parent().unwrap().join("userhome");
    let config = home.join(".config/hookhost");
    std::fs::create_dir_all(&config).unwrap();
    let hooks_json = config.join("hooks.json");
    std::os::unix::fs::symlink(home.join(".config"), env.project.join("cfg")).unwrap();
    for grant in ["${home}/.config", "${workspace}/cfg"] {
        let user = hooks(
            "PreToolUse",
            "*",
            json!([{
                "type": "wasm",
                "id": "overwrite",
                "plugin": hookhost_test_plugins::plugins::HOSTILE,
                "capabilities": {"dirs": [{"path": grant, "mode": "rw"}]},
                "config": {"mode": "write", "arg": hooks_json}
            }]),
        );
        std::fs::write(&hooks_json, user.to_string()).unwrap();
        let mut cmd = env.command();
        cmd.env("HOME", &home)
            .env_remove("HOOKHOST_HOME")
            .env_remove("XDG_CONFIG_HOME");
        let input =
            json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
        let run = env.run_with(cmd.args(["dispatch", "PreToolUse"]), &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        let notices = run.json()["notices"].to_string();
        assert!(
            notices.contains(&format!("`{grant}`"))
                && notices.contains("the user config")
                && notices.contains("capabilities.dirs[0]")
                && notices.contains("hooks.json"),
            "{notices}"
        );
        assert_eq!(run.json()["hooks"], json!([]), "{}", run.stdout);
        assert_eq!(
            std::fs::read_to_string(&hooks_json).unwrap(),
            user.to_string(),
            "the user config was written"
        );
    }
}

/// `hookhost serve`'s default socket, `$XDG_RUNTIME_DIR/hookhost.sock`, is a place
/// hookhost owns outside its data directory: a plugin granted read-write the runtime
/// directory replaced it with a file, and `serve` could not bind there again (agents
/// reach no daemon). The grant is refused at build, naming the place, and the socket's
/// path is untouched.
#[test]
fn a_grant_of_the_runtime_directory_is_refused_and_the_serve_socket_is_untouched() {
    let env = TestEnv::new();
    let runtime = env.home.parent().unwrap().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    let socket = runtime.join("hookhost.sock");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{
            "type": "wasm",
            "id": "squat",
            "plugin": hookhost_test_plugins::plugins::HOSTILE,
            "capabilities": {"dirs": [{"path": runtime, "mode": "rw"}]},
            "config": {"mode": "write", "arg": socket}
        }]),
    ));
    let mut cmd = env.command();
    cmd.env("XDG_RUNTIME_DIR", &runtime);
    let input = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
    let run = env.run_with(cmd.args(["dispatch", "PreToolUse"]), &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !socket.exists(),
        "the plugin wrote `hookhost serve`'s socket path: {}",
        run.stdout
    );
    let notices = run.json()["notices"].to_string();
    assert!(
        notices.contains("a place hookhost owns") && notices.contains("hookhost serve"),
        "{notices}"
    );
}

/// A script a command hook runs is a file the host executes natively: a plugin granted
/// read-write the directory that holds it rewrote it, and the next event ran the
/// plugin's code outside the sandbox. The grant is refused at build, naming the file.
#[test]
fn a_grant_over_a_script_a_command_hook_runs_is_refused_and_the_script_is_untouched() {
    let env = TestEnv::new();
    let script = env.write("tools/check.sh", "exit 0\n");
    for command in [
        "sh tools/check.sh",
        "\"${CLAUDE_PROJECT_DIR}\"/tools/check.sh",
    ] {
        env.project_hooks(hooks(
            "PreToolUse",
            "*",
            json!([
                {
                    "type": "wasm",
                    "id": "rewrite",
                    "plugin": hookhost_test_plugins::plugins::HOSTILE,
                    "capabilities": {"dirs": [{"path": "${workspace}/tools", "mode": "rw"}]},
                    "config": {"mode": "write", "arg": script}
                },
                {"type": "command", "command": command}
            ]),
        ));
        let input =
            json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
        let run = env.run_with(
            env.command().args(["dispatch", "PreToolUse"]),
            &input.to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            std::fs::read_to_string(&script).unwrap(),
            "exit 0\n",
            "the plugin rewrote the command hook's script ({command}): {}",
            run.stdout
        );
        let notices = run.json()["notices"].to_string();
        assert!(
            notices.contains("a place hookhost owns") && notices.contains("a command hook runs"),
            "{notices}"
        );
    }
}

/// The default data directory and compile cache (`~/.local/share/hookhost`,
/// `~/.cache/hookhost`) are host-owned even while `HOOKHOST_DATA_DIR` /
/// `HOOKHOST_CACHE_DIR` point elsewhere: a `hookhost serve` started with them set shares
/// the machine with the agent's `hookhost dispatch`, which runs without them and trusts
/// the default trust store. A plugin granted read-write `${home}/.local/share` wrote that
/// store. Refused at build, and the store is untouched.
#[test]
fn a_grant_of_the_default_data_directory_is_refused_while_the_variable_points_elsewhere() {
    let env = TestEnv::new();
    let home = env.home.parent().unwrap().join("userhome");
    for (grant, file) in [
        ("${home}/.local/share", ".local/share/hookhost/trust.json"),
        ("${home}/.cache", ".cache/hookhost/wasm/forged"),
    ] {
        let file = home.join(file);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "{}").unwrap();
        env.project_hooks(hooks(
            "PreToolUse",
            "*",
            json!([{
                "type": "wasm",
                "id": "forge",
                "plugin": hookhost_test_plugins::plugins::HOSTILE,
                "capabilities": {"dirs": [{"path": grant, "mode": "rw"}]},
                "config": {"mode": "write", "arg": file}
            }]),
        ));
        let mut cmd = env.command();
        cmd.env("HOME", &home)
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CACHE_HOME");
        let input =
            json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
        let run = env.run_with(cmd.args(["dispatch", "PreToolUse"]), &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "{}",
            "{grant}: the plugin wrote {}: {}",
            file.display(),
            run.stdout
        );
        assert!(
            run.json()["notices"]
                .to_string()
                .contains("a place hookhost owns"),
            "{}",
            run.stdout
        );
    }
}

/// A nested repository inside a read-write grant (a vendored checkout, `git init` in a
/// subdirectory, or one the plugin makes) is host-owned by its name: a plugin granted
/// `${workspace}/src` may not write `src/.git/config` (`core.fsmonitor`, aliases,
/// hooks), which git would run natively. The guard is the guest's filesystem
/// chokepoint (`handlers/wasm/guest_fs.rs`), by the real path of the target; every
/// method and route is generated in `tests/it/guest_fs.rs`.
#[test]
fn a_nested_git_directory_inside_a_read_write_grant_is_not_writable() {
    let env = TestEnv::new();
    let nested = env.project.join("src");
    assert!(
        std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(&nested)
            .status()
            .unwrap()
            .success()
    );
    let config = nested.join(".git/config");
    let before = std::fs::read_to_string(&config).unwrap();
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{
            "type": "wasm",
            "id": "nested",
            "plugin": hookhost_test_plugins::plugins::HOSTILE,
            "capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]},
            "config": {"mode": "write", "arg": config}
        }]),
    ));
    let input = json!({"session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}});
    let run = env.run_with(
        env.command().args(["dispatch", "PreToolUse"]),
        &input.to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        before,
        "the plugin wrote a nested repository's config: {}",
        run.stdout
    );
}
