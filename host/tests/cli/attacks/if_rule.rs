//! Attacks on the `if` filter: a guard with `if: "Bash(git push *)"` must run whenever the
//! command line runs `git push`, however it is wrapped, quoted or nested. Each attack is
//! first run in a real bash with a stub `git` that records its arguments (so the table only
//! holds commands that really push), then dispatched; and each command the filter skips is
//! run in bash too, to show it really does not push.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::support::{TestEnv, bash_input, hooks, run_bounded};

/// Lines that run `git push` in bash.
const PUSHES: &[&str] = &[
    "git push origin main",
    "true && git push",
    "false || git push",
    "echo x | git push",
    "{ git push; }",
    "(git push)",
    "bash -c 'git push'",
    "sh -c \"git push\"",
    "dash -c 'git push'",
    "/bin/sh -c 'git push'",
    "env bash -c 'git push'",
    "env -i PATH=\"$PATH\" git push",
    "command git push",
    "exec git push",
    "nohup git push >/dev/null 2>&1",
    "echo x | xargs sh -c 'git push'",
    "echo push | xargs git",
    "time git push",
    "time -- git push",
    "time -p -- git push",
    "exec -a name git push",
    "command -- git push",
    "timeout 5 git push",
    "nice -n 1 git push",
    "eval 'git push'",
    "eval git push",
    "if true; then git push; fi",
    "while true; do git push; break; done",
    "for i in 1; do git push; done",
    "case x in x) git push;; esac",
    "f() { git push; }; f",
    "echo $(git push)",
    "echo \"$(git push)\"",
    "echo `git push`",
    "cat <(git push)",
    "cat <<EOF\n$(git push)\nEOF",
    "cat <<EOF\n'$(git push)'\nEOF",
    "bash <<EOF\ngit push\nEOF",
    "bash <<< 'git push'",
    "echo 'git push' | sh",
    "g'i't push",
    "\"git\" push",
    "\\git push",
    "$'\\x67it' push",
    "$'\\147it' push",
    "git p\"us\"h",
    "git $'push'",
    "git \\\npush",
    "# comment\ngit push",
    "VAR=x git push",
    "A=1 B=2 git push",
    "GIT_TEST=1 /bin/sh -c 'eval \"git push\"'",
    "bash -c \"sh -c 'eval \\\"git push\\\"'\"",
    "cmd=git; $cmd push",
    "x=push; git $x",
    "git $(echo push)",
    "$(echo git) push",
    "{git,push}",
    "trap 'git push' EXIT",
    "x='a[$(git push)]'; echo $((x))",
    "y=$(printf 'a[$(%s push)]' git); echo $((y)) >/dev/null",
    "x='$(git push)'; echo ${x@P}",
    "find . -maxdepth 0 -exec git push \\;",
    "git push 2>&1 | cat",
    // Numbers past brush-parser's integer types (it panicked on them): bash reads an
    // over-long I/O number as a word, and leaves a tilde it cannot expand alone.
    "git push 2147483648>/dev/null",
    "git push 99999999999999999999<&0",
    "git push ~99999999999999999999999",
    "git push ~+18446744073709551616/x",
    "! git push",
    "coproc git push; wait",
    "python3 -c 'import subprocess; subprocess.run([\"git\", \"push\"])'",
    // Runners the filter has never heard of (the stub `anyrunner` skips its options and
    // runs the rest, as `uv run`, `bundle exec` or `op run --` do), and known ones.
    "anyrunner git push",
    "anyrunner -q --mode=fast run git push origin main",
    "anyrunner exec -- git push",
    "env git push",
    "nice -n 1 git push",
    "timeout 5 git push",
    "echo push | xargs git",
];

/// Lines that do not run `git push` in bash, which the filter skips.
const SKIPS: &[&str] = &[
    "git status",
    "git pushx",
    "echo git push",
    "ls -la",
    "cat /dev/null | grep push",
    "echo hello > out.txt",
    "for f in a b; do echo \"$f\"; done",
    "[ -f x ] && echo ok",
    "export PATH=$PATH:/x; echo done",
    "bash -c 'git status'",
    "git log | head -5",
];

/// A stub `git` that appends its arguments to `log`.
fn stub_bin(dir: &Path, log: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let git = bin.join("git");
    std::fs::write(
        &git,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A runner no list names: drops option words and the words `run`/`exec`, runs the rest.
    let runner = bin.join("anyrunner");
    std::fs::write(
        &runner,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do case \"$1\" in -*|run|exec) shift;; *) break;; esac; done\nexec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Whether `command`, run by bash with the stub first on PATH, runs `git push`.
/// A project whose one hook, a guard that denies, runs when the line may `git push`.
fn push_guarded() -> TestEnv {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo guard ran >&2; exit 2", "if": "Bash(git push *)"}]),
    ));
    env
}

/// Whether the outcome is the guard's own deny, not a dispatch that failed (which blocks
/// too).
fn guard_denied(out: &serde_json::Value) -> bool {
    out["decision"] == "deny"
        && out["hooks"]
            .as_array()
            .is_some_and(|hooks| hooks.iter().any(|h| h["status"] == "blocked"))
}

fn bash_pushes(command: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("git.log");
    let bin = stub_bin(dir.path(), &log);
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let status = Command::new("timeout")
        .args(["10", "bash", "-c", command])
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", &path)
        .env("HOME", dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let _ = status;
    std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().next() == Some("push"))
}

#[test]
fn every_way_of_running_git_push_runs_the_guard() {
    let env = push_guarded();
    let mut failures = Vec::new();
    for &command in PUSHES {
        assert!(
            bash_pushes(command),
            "the table is wrong: bash does not push on {command:?}"
        );
        if !guard_denied(&env.dispatch("PreToolUse", bash_input(command))) {
            failures.push(command);
        }
    }
    assert!(
        failures.is_empty(),
        "the guard was skipped on {failures:#?}"
    );
    for &command in SKIPS {
        assert!(
            !bash_pushes(command),
            "the table is wrong: bash pushes on {command:?}"
        );
        let out = env.dispatch("PreToolUse", bash_input(command));
        assert_eq!(
            out["decision"], "none",
            "{command:?} should skip the guard: {out}"
        );
    }
}

/// Lines that tripped the shell parser (brush-parser 0.4): its time doubles per level of an
/// unterminated compound command, 3,000 `coproc`s overflowed the stack (an abort, so no
/// answer: the agent goes on without the guard), and numbers past its integer types panicked
/// it, also behind a backslash-newline. Each must answer at once with the guard's own deny
/// (the line is unknown, or read with `git push` in it, so the hook runs); the last two were
/// tokenizer panics (here-document tags inside expansions), now read as unterminated
/// expansions; `<<'' ` looped the tokenizer without end. None prints an internal error.
#[test]
fn lines_that_trip_the_shell_parser_run_the_guard_at_once() {
    let env = push_guarded();
    let lines = [
        format!("{}git push", "( ".repeat(40)),
        format!("{}git push", "case a in a) ".repeat(40)),
        format!(
            "{}git push{}",
            "case a in a) ".repeat(24),
            ";; esac)".repeat(24)
        ),
        format!("{}git push", "coproc ".repeat(3000)),
        "git push 2147483648\\\n>f".to_string(),
        "echo ${x<<E}${y\nE\n".to_string(),
        "echo $(cat<<E)$(\nE\n".to_string(),
        // An empty here-document tag at the end looped the tokenizer, memory growing
        // until the host was killed (helper-56).
        "git push <<'' ".to_string(),
    ];
    for line in &lines {
        let shown = &line[..line.len().min(40)];
        let run = run_bounded(
            env.command().args(["dispatch", "PreToolUse"]),
            &bash_input(line).to_string(),
            std::time::Duration::from_secs(60),
        )
        .unwrap_or_else(|| panic!("{shown:?}: the dispatch hung"));
        assert_eq!(run.code, 0, "{shown:?}: {}", run.stderr);
        let out = run.json();
        assert!(guard_denied(&out), "{shown:?}: {out}");
        assert!(
            !run.stderr.contains("internal error"),
            "{shown:?}: {}",
            run.stderr
        );
    }
}

/// The same rule through the daemon: one parse per event, the same answers.
#[test]
fn the_daemon_filters_like_the_one_shot_cli() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "exit 2", "if": "Bash(rm *)"}]),
    ));
    let requests: String = ["sudo rm -rf /", "ls", "bash -c 'r\\m x'", "echo rm"]
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "{}\n",
                json!({"id": i, "event": "PreToolUse", "input": bash_input(c)})
            )
        })
        .collect();
    let run = env.run(&["serve", "--stdio"], &requests);
    let mut decisions = vec![String::new(); 4];
    for line in run.stdout.lines() {
        let answer: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(id) = answer["id"].as_u64() {
            decisions[id as usize] = answer["outcome"]["decision"].as_str().unwrap().to_string();
        }
    }
    assert_eq!(
        decisions,
        ["deny", "none", "deny", "none"],
        "{}",
        run.stderr
    );
}

/// The password database's home directory of this user (what `$HOME` falls back to).
fn password_home() -> std::path::PathBuf {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() }.to_string();
    let out = Command::new("getent")
        .args(["passwd", &uid])
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    line.trim_end()
        .split(':')
        .nth(5)
        .unwrap_or_else(|| panic!("no home directory in `{line}`"))
        .into()
}

/// A guard on `~/.ssh` is anchored at the home directory config read, never at an odd
/// `$HOME` the matcher would meet on its own: an empty or unset `$HOME` falls back to the
/// password database (the guard runs on an edit there), and a set `$HOME` is the anchor.
#[test]
fn a_home_guard_holds_with_an_empty_or_unset_home() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Edit",
        json!([{"type": "command", "command": "echo guard ran >&2; exit 2", "if": "Edit(~/.ssh/**)"}]),
    ));
    let edit = |path: &Path, home: Option<&str>| {
        let input = json!({
            "session_id": "s1",
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"},
            "tool_use_id": "t1"
        });
        let mut cmd = env.command();
        cmd.args(["dispatch", "PreToolUse"]);
        match home {
            Some(home) => cmd.env("HOME", home),
            None => cmd.env_remove("HOME"),
        };
        let run = env.run_with(&mut cmd, &input.to_string());
        assert_eq!(run.code, 0, "dispatch failed: {}", run.stderr);
        run.json()["decision"].as_str().unwrap().to_string()
    };
    let key = password_home().join(".ssh/id_ed25519");
    assert_eq!(edit(&key, Some("")), "deny", "empty HOME");
    assert_eq!(edit(&key, None), "deny", "unset HOME");
    let elsewhere = env.home.join("h");
    let shown = elsewhere.to_str().unwrap();
    assert_eq!(edit(&elsewhere.join(".ssh/k"), Some(shown)), "deny");
    assert_eq!(edit(&elsewhere.join(".sshx/k"), Some(shown)), "none");
}
