//! A config that stops loading never disarms the guards of a warm daemon: with a guard in
//! the user's settings file and a daemon warm (`hookhost serve`, then the dispatch
//! daemon), the file is rewritten broken in each way a file can break (invalid JSON, a
//! wrong type, a hook that cannot be built, unreadable, a FIFO, a symlink to
//! `/dev/zero`); every dangerous command is still denied, each outcome says which file is
//! broken, why, and that its previous version is in force, and once the file is fixed
//! the new version is. In a one-shot run there is no previous version: the broken file's
//! hooks are skipped and the notice says so.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::dispatch_daemon::sockets;
use crate::support::{
    TestEnv, as_nobody, bash_input, cap_memory, chown_tree, hooks, run_bounded, wait_until,
};

/// The guard: denies `rm -rf` (exit 2), says which version it is otherwise.
fn guard(version: &str) -> Value {
    hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard",
            "command": format!("input=$(cat); case \"$input\" in *'rm -rf'*) echo 'no rm -rf ({version})' >&2; exit 2;; esac; echo '{{\"systemMessage\": \"{version}\"}}'")}]),
    )
}

const DANGEROUS: [&str; 5] = [
    "rm -rf /",
    "rm -rf ~",
    "cd / && rm -rf *",
    "sudo rm -rf /var",
    "echo x; rm -rf .git",
];

type Break = fn(&Path);

/// Each way the settings file breaks, and the words of its error.
fn breakages() -> Vec<(&'static str, Break, &'static str)> {
    vec![
        (
            "invalid JSON",
            |p| std::fs::write(p, "{\"hooks\": ").unwrap(),
            "invalid JSON",
        ),
        (
            "a wrong type",
            |p| std::fs::write(p, r#"{"hooks": {"PreToolUse": {"matcher": "Bash"}}}"#).unwrap(),
            "expected a sequence",
        ),
        (
            "a hook that cannot be built",
            |p| {
                std::fs::write(
                    p,
                    r#"{"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": [{"type": "command", "command": "true"}]}]}}"#,
                )
                .unwrap()
            },
            "$.hooks.PreToolUse[0].matcher",
        ),
        (
            "a FIFO",
            |p| {
                let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            },
            "a FIFO",
        ),
        (
            "a symlink to /dev/zero",
            |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            "a character device",
        ),
        (
            "a directory",
            |p| std::fs::create_dir(p).unwrap(),
            "a directory",
        ),
    ]
}

/// Replaces `path` (a file, FIFO, symlink or directory) by what `breakage` makes.
fn rewrite(path: &Path, breakage: Break) {
    let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir(path));
    breakage(path);
}

/// Writes the good guard of `version` in place of whatever is at `path`.
fn fix(path: &Path, version: &str) {
    let _ = std::fs::remove_file(path).or_else(|_| std::fs::remove_dir(path));
    std::fs::write(path, guard(version).to_string()).unwrap();
}

/// Checks an outcome served while `file` is broken: denied, with the notice.
fn still_guarded(out: &Value, file: &Path, words: &str, what: &str) {
    assert_eq!(out["decision"], "deny", "{what}: {out}");
    let notices = out["notices"].to_string();
    assert!(
        notices.contains(&file.display().to_string())
            && notices.contains(words)
            && notices.contains("previous version of this file")
            && notices.contains("stays in force"),
        "{what}: {notices}"
    );
}

fn previous_in_force(out: &Value) -> bool {
    out["notices"].to_string().contains("stays in force")
}

/// `hookhost serve --stdio`, one request per line.
struct Serve {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl Serve {
    fn start(cmd: &mut Command) -> Serve {
        let mut child = cap_memory(cmd)
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Serve {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    fn call(&mut self, command: &str) -> Value {
        let request = json!({"id": 1, "event": "PreToolUse", "input": bash_input(command)});
        writeln!(self.input, "{request}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        answer["outcome"].clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the cycle (break each way, check, fix) against `call`, which dispatches one Bash
/// command through a warm daemon.
fn break_and_fix_while_warm(file: &Path, call: &mut dyn FnMut(&str) -> Value) {
    assert_eq!(call("rm -rf /")["decision"], "deny", "the guard is armed");
    for (n, (what, breakage, words)) in breakages().into_iter().enumerate() {
        rewrite(file, breakage);
        let mut out = Value::Null;
        wait_until(&format!("the daemon to see {what}"), || {
            out = call("rm -rf /");
            previous_in_force(&out)
        });
        still_guarded(&out, file, words, what);
        for command in DANGEROUS {
            still_guarded(&call(command), file, words, what);
        }
        // Fixed: the new version is in force, and the notice is gone.
        let version = format!("v{n}");
        fix(file, &version);
        wait_until(&format!("the daemon to see the fix of {what}"), || {
            call("ls")["systemMessages"].to_string().contains(&version)
        });
        let out = call("rm -rf /");
        assert_eq!(out["decision"], "deny", "{what} fixed: {out}");
        assert!(!previous_in_force(&out), "{what} fixed: {out}");
    }
}

#[test]
fn hookhost_serve_keeps_its_guard_while_the_settings_file_is_broken() {
    let env = TestEnv::new();
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    let mut serve = Serve::start(&mut env.command());
    break_and_fix_while_warm(&file, &mut |command| serve.call(command));
}

#[test]
fn the_dispatch_daemon_keeps_its_guard_while_the_settings_file_is_broken() {
    let env = TestEnv::new();
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    let dispatch = |command: &str| -> Value {
        let mut cmd = env.command();
        cmd.env_remove("HOOKHOST_DISPATCH_DAEMON")
            .env("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS", "120");
        let run = env.run_with(
            cap_memory(&mut cmd).args(["dispatch", "PreToolUse"]),
            &bash_input(command).to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.json()
    };
    dispatch("ls");
    wait_until("the dispatch daemon to listen", || {
        !sockets(&env).is_empty()
    });
    break_and_fix_while_warm(&file, &mut |command| dispatch(command));
    // Stop the daemon: it exits within a second of its socket's removal.
    for socket in sockets(&env) {
        std::fs::remove_file(socket).unwrap();
    }
}

/// One dispatch daemon serves every project its callers' inputs name (`cwd`): while the
/// user's file and a project's file are broken, requests that alternate between that
/// project and another keep both guards armed. Checked to fail when a request about
/// another project built its host without the previous one (the user's guard was
/// skipped there) and when a host forgot the files of projects it did not load (the
/// project's guard was skipped after the switch).
#[test]
fn the_dispatch_daemon_keeps_last_good_versions_across_projects() {
    let env = TestEnv::new();
    let user_file = env.home.join("hooks.json");
    fix(&user_file, "v-user");
    let project_file = env.project.join(".hookhost/hooks.json");
    std::fs::create_dir_all(project_file.parent().unwrap()).unwrap();
    let project_guard = hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "project-guard",
            "command": "input=$(cat); case \"$input\" in *'git push -f'*) echo 'no force push' >&2; exit 2;; esac; exit 0"}]),
    );
    std::fs::write(&project_file, project_guard.to_string()).unwrap();
    let other = env.project.parent().unwrap().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let dispatch = |cwd: &Path, command: &str| -> Value {
        let mut cmd = env.command();
        cmd.env_remove("HOOKHOST_DISPATCH_DAEMON")
            .env("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS", "120");
        let mut input = bash_input(command);
        input["cwd"] = json!(cwd);
        let run = env.run_with(
            cap_memory(&mut cmd).args(["dispatch", "PreToolUse"]),
            &input.to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.json()
    };
    dispatch(&env.project, "ls");
    wait_until("the dispatch daemon to listen", || {
        !sockets(&env).is_empty()
    });
    assert_eq!(dispatch(&env.project, "git push -f")["decision"], "deny");
    assert_eq!(dispatch(&other, "rm -rf /")["decision"], "deny");
    std::fs::write(&user_file, "{ broken").unwrap();
    std::fs::write(&project_file, "{ broken").unwrap();
    wait_until("the daemon to see the broken files", || {
        previous_in_force(&dispatch(&env.project, "ls"))
    });
    for round in 0..3 {
        let out = dispatch(&other, "rm -rf /");
        still_guarded(
            &out,
            &user_file,
            "invalid JSON",
            &format!("other, round {round}"),
        );
        let out = dispatch(&env.project, "git push -f");
        still_guarded(
            &out,
            &project_file,
            "invalid JSON",
            &format!("project, round {round}"),
        );
        let out = dispatch(&env.project, "rm -rf /");
        still_guarded(
            &out,
            &user_file,
            "invalid JSON",
            &format!("project, round {round}"),
        );
    }
    for socket in sockets(&env) {
        std::fs::remove_file(socket).unwrap();
    }
}

/// The file unreadable to the daemon's user (the daemon runs as uid 65534; the file is
/// made mode 000, which root could still read): the previous version stays in force.
#[test]
fn an_unreadable_settings_file_keeps_the_previous_version_in_force() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED: an_unreadable_settings_file_keeps_the_previous_version_in_force: a second uid (setpriv) needs root"
        );
        return;
    }
    let env = TestEnv::new();
    let root = env.project.parent().unwrap();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    for dir in [&env.project, &env.home, &env.data] {
        chown_tree(dir, 65534);
    }
    let mut serve = Serve::start(&mut as_nobody(&mut env.command()));
    assert_eq!(serve.call("rm -rf /")["decision"], "deny");
    std::fs::write(&file, guard("v-unreadable").to_string()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut out = Value::Null;
    wait_until("the daemon to see the unreadable file", || {
        out = serve.call("rm -rf /");
        previous_in_force(&out)
    });
    still_guarded(&out, &file, "Permission denied", "unreadable");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    wait_until("the daemon to read the file again", || {
        serve.call("ls")["systemMessages"]
            .to_string()
            .contains("v-unreadable")
    });
}

/// One-shot: no previous version, so the broken file's hooks are skipped and the notice
/// says so; the other files' hooks still run. (A broken managed file fails closed
/// instead: attacks/managed.rs.)
#[test]
fn a_one_shot_run_skips_the_hooks_of_a_broken_file_and_says_so() {
    let env = TestEnv::new();
    let file = env.home.join("hooks.json");
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "project", "command": "echo '{\"systemMessage\": \"project ran\"}'"}]),
    ));
    for (what, breakage, words) in breakages() {
        rewrite(&file, breakage);
        // Bounded: a FIFO blocked the one-shot run for good before the rule.
        let run = run_bounded(
            env.command().args(["dispatch", "PreToolUse"]),
            &bash_input("rm -rf /").to_string(),
            Duration::from_secs(30),
        )
        .unwrap_or_else(|| panic!("{what}: the one-shot dispatch hung"));
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        let out = run.json();
        assert_eq!(
            out["decision"], "none",
            "{what}: the broken guard did not run: {out}"
        );
        let notices = out["notices"].to_string();
        assert!(
            notices.contains("config error, hooks skipped")
                && notices.contains(&file.display().to_string())
                && notices.contains(words),
            "{what}: {notices}"
        );
        assert!(
            out["systemMessages"].to_string().contains("project ran"),
            "{what}"
        );
    }
}
