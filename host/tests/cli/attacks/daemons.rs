//! Attacks: daemons (see attacks/mod.rs). Another local user against `hookhost serve`:
//! connecting while it starts, through a socket made reachable by mistake, through a
//! symlinked or pre-created socket path, a socket directory they own or may write to; and
//! a client naming projects the daemon was not told to trust.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks, wait_until};

/// The other user of these attacks.
const NOBODY: u32 = 65534;

/// Whether this process is root (so it can act as a second uid); prints the skip line
/// otherwise.
fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("SKIPPED: {test}: needs root to act as a second uid (setpriv)");
    false
}

/// A directory every user can reach (the test's own temporary dirs are private), made
/// writable by `mode`.
fn shared_dir(env: &TestEnv, name: &str, mode: u32) -> PathBuf {
    // The chain down to it must be traversable by the other user.
    let mut dir = env.data.clone();
    while let Some(parent) = dir.parent() {
        if parent == Path::new("/tmp") || parent == Path::new("/") {
            break;
        }
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        dir = parent.to_path_buf();
    }
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
    let shared = env.data.join(name);
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(mode)).unwrap();
    shared
}

/// Runs Python `code` with `args` as uid 65534; returns its stdout.
fn as_nobody(code: &str, args: &[&str]) -> std::process::Child {
    Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            code,
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv")
}

/// Connects to SOCKET in a loop for SECONDS, sends a request on each connection and
/// prints every line it was answered with, as JSON.
const CONNECT_LOOP: &str = r#"
import json, socket, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
end = time.time() + seconds
connected, answers = 0, []
while time.time() < end:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        connected += 1
        s.settimeout(2)
        s.sendall(b'{"id": "intruder", "event": "PreToolUse", "input": {"tool_name": "Bash"}}\n')
        data = s.recv(65536)
        if data:
            answers.append(data.decode("utf-8", "replace"))
    except OSError:
        pass  # no pause: the window being attacked is microseconds wide
    finally:
        s.close()
print(json.dumps({"connected": connected, "answers": answers}))
"#;

fn finished(child: std::process::Child) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A serve command whose umask lets anyone connect to what it creates.
fn with_open_umask(mut cmd: Command) -> Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: umask is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    cmd
}

#[test]
fn another_user_connecting_during_start_up_is_never_served() {
    if !root_or_skip("another_user_connecting_during_start_up_is_never_served") {
        return;
    }
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo served >&2; exit 2"}]),
    ));
    let dir = shared_dir(&env, "run", 0o755);
    let socket = dir.join("hookhost.sock");
    let attacker = as_nobody(CONNECT_LOOP, &[socket.to_str().unwrap(), "8"]);
    // Start-ups under the attacker's loop, with a umask that would leave the socket
    // open to everyone.
    for _ in 0..12 {
        let mut daemon = Daemon::start_at(socket.clone(), with_open_umask(env.command()));
        let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the socket's mode");
        daemon.terminate();
    }
    let seen = finished(attacker);
    assert_eq!(seen["answers"], json!([]), "{seen}");
}

#[test]
fn another_user_on_a_socket_opened_by_mistake_is_refused() {
    if !root_or_skip("another_user_on_a_socket_opened_by_mistake_is_refused") {
        return;
    }
    let env = TestEnv::new();
    let dir = shared_dir(&env, "run", 0o755);
    let socket = dir.join("hookhost.sock");
    let daemon = Daemon::start_at(socket.clone(), env.command());
    // The user loosens the socket; the daemon still serves only its own uid.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let seen = finished(as_nobody(CONNECT_LOOP, &[socket.to_str().unwrap(), "0.5"]));
    assert!(seen["connected"].as_u64().unwrap() > 0, "{seen}");
    let answers = seen["answers"].as_array().unwrap();
    assert!(!answers.is_empty(), "{seen}");
    for answer in answers {
        let answer: Value = serde_json::from_str(answer.as_str().unwrap().trim()).unwrap();
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("serves only its own user"),
            "{answer}"
        );
    }
    assert_eq!(
        daemon.client().call("Stop", json!({}))["event"],
        "Stop",
        "its own user is served"
    );
}

/// `serve --socket PATH` in `env`: its exit code and stderr, within 20 s.
fn serve_refused(env: &TestEnv, socket: &Path) -> (i32, String) {
    let mut child = env
        .command()
        .args(["serve", "--socket", socket.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut status = None;
    wait_until("serve to give up", || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status.unwrap().code().unwrap_or(-1), stderr)
}

#[test]
fn a_path_that_is_not_a_stale_socket_is_never_replaced() {
    let env = TestEnv::new();
    // A regular file, a symlink to the user's file, a directory, a FIFO.
    let precious = env.data.join("precious.txt");
    std::fs::write(&precious, "keep me").unwrap();
    let file = env.data.join("file.sock");
    std::fs::write(&file, "not a socket").unwrap();
    let link = env.data.join("link.sock");
    std::os::unix::fs::symlink(&precious, &link).unwrap();
    let dangling = env.data.join("dangling.sock");
    std::os::unix::fs::symlink(env.data.join("nowhere"), &dangling).unwrap();
    let dir = env.data.join("dir.sock");
    std::fs::create_dir(&dir).unwrap();
    let fifo = env.data.join("fifo.sock");
    let fifo_c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo_c.as_ptr(), 0o600) }, 0);
    for (path, kind) in [
        (&file, "a regular file"),
        (&link, "a symlink"),
        (&dangling, "a symlink"),
        (&dir, "a directory"),
        (&fifo, "a FIFO"),
    ] {
        let (code, stderr) = serve_refused(&env, path);
        assert_eq!(code, 1, "{}: {stderr}", path.display());
        assert!(
            stderr.contains(&format!("exists and is {kind}, not a socket")),
            "{}: {stderr}",
            path.display()
        );
        assert!(!stderr.contains("serving on"), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a socket");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        !env.data.join("nowhere").exists(),
        "nothing created through the link"
    );
}

#[test]
fn a_socket_directory_another_user_controls_is_refused() {
    if !root_or_skip("a_socket_directory_another_user_controls_is_refused") {
        return;
    }
    let env = TestEnv::new();
    let theirs = shared_dir(&env, "theirs", 0o755);
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let (code, stderr) = serve_refused(&env, &theirs.join("hookhost.sock"));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    // Writable by everyone without the sticky bit: anyone could swap the socket.
    let open = shared_dir(&env, "open", 0o777);
    let (code, stderr) = serve_refused(&env, &open.join("hookhost.sock"));
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("no sticky bit"), "{stderr}");
    assert!(!open.join("hookhost.sock").exists());
}

/// Binds a socket at ARGV[1] as the other user, listening when ARGV[2] is `listen`, then
/// prints `ready` and waits for its stdin to close.
const SQUAT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
if sys.argv[2] == "listen":
    s.listen(8)
print("ready", flush=True)
sys.stdin.read()
"#;

#[test]
fn a_socket_path_squatted_in_a_sticky_shared_dir_is_refused() {
    if !root_or_skip("a_socket_path_squatted_in_a_sticky_shared_dir_is_refused") {
        return;
    }
    let env = TestEnv::new();
    // Like /tmp: everyone may create files, the sticky bit keeps each user's own.
    let tmp = shared_dir(&env, "tmp", 0o1777);
    for mode in ["listen", "stale"] {
        let path = tmp.join(format!("{mode}.sock"));
        let mut squatter = Command::new("setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "/usr/bin/python3",
                "-c",
                SQUAT,
                path.to_str().unwrap(),
                mode,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(squatter.stdout.as_mut().unwrap()),
            &mut ready,
        )
        .unwrap();
        assert_eq!(ready.trim(), "ready");
        let (code, stderr) = serve_refused(&env, &path);
        assert_eq!(code, 1, "{mode}: {stderr}");
        assert!(
            stderr.contains("the socket belongs to uid 65534"),
            "{mode}: {stderr}"
        );
        drop(squatter.stdin.take());
        squatter.wait().unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::symlink_metadata(&path).unwrap().uid(),
            NOBODY,
            "the squatter's socket is left as it was"
        );
    }
    // A path nobody took: served, in the same directory.
    let mut daemon = Daemon::start_at(tmp.join("mine.sock"), env.command());
    assert_eq!(daemon.client().call("Stop", json!({}))["event"], "Stop");
    assert_eq!(daemon.terminate(), 0);
    assert!(
        !tmp.join("mine.sock").exists(),
        "its socket is removed at exit"
    );
    std::thread::sleep(Duration::from_millis(10));
}

#[test]
fn trust_given_to_the_daemons_project_is_not_lent_to_others() {
    let env = TestEnv::new();
    let deny = hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo no >&2; exit 2"}]),
    );
    env.project_hooks(deny.clone());
    // Another repository, with hooks of its own, that no one trusted.
    let other = env.data.join("other-repo");
    std::fs::create_dir_all(other.join(".hookhost")).unwrap();
    std::fs::write(other.join(".hookhost/hooks.json"), deny.to_string()).unwrap();
    for trust in ["flag", "env"] {
        let mut serve = env.untrusted_command();
        let mut extra = vec![];
        match trust {
            "flag" => extra.push("--trust-workspace"),
            _ => {
                serve.env("HOOKHOST_TRUST_WORKSPACE", "1");
            }
        }
        let daemon = Daemon::start_serving(env.data.join(format!("{trust}.sock")), serve, &extra);
        let mut client = daemon.client();
        assert_eq!(
            client.call("PreToolUse", bash_input("ls"))["decision"],
            "deny",
            "{trust}: the daemon's own project is trusted"
        );
        client.send(
            &json!({"id": "other", "event": "PreToolUse", "input": bash_input("ls"), "project": other})
                .to_string(),
        );
        let answer = client.read();
        assert_eq!(answer["outcome"]["decision"], "none", "{trust}: {answer}");
        assert_eq!(
            answer["outcome"]["hooks"][0]["status"], "skipped",
            "{trust}: {answer}"
        );
    }
}

/// Binds a socket at ARGV[1] as the other user and answers one request the way a
/// dispatch daemon would, with a forged `PWNED` on stdout (exit code 0).
const FORGE_DISPATCH: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
c, _ = s.accept()
try:
    n = struct.unpack("<I", c.recv(4, socket.MSG_WAITALL))[0]
    c.recv(n, socket.MSG_WAITALL)
    out = b"PWNED"
    c.sendall(bytes([0]) + struct.pack("<II", len(out), 0) + out)
except Exception:
    pass
c.close()
"#;

/// The daemons' directory was once open to another user, who bound a socket at the path
/// of a caller's dispatch daemon; the user then made it private again. The caller must
/// not send its hook input there, nor print the forged answer: it dispatches in-process.
#[test]
fn a_dispatch_daemon_socket_bound_by_another_user_is_not_used() {
    use crate::dispatch_daemon::{
        hook_parent, ls_via_daemon, parent_hook_config, process_alive, start, with_daemon,
    };
    if !root_or_skip("a_dispatch_daemon_socket_bound_by_another_user_is_not_used") {
        return;
    }
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config());
    // A real daemon first, to learn the socket path of this command line; then it goes.
    let (socket, pid) = start(&env, || with_daemon(&env, 120), &["PreToolUse"]);
    std::fs::remove_file(&socket).unwrap();
    wait_until("the dispatch daemon to exit", || !process_alive(pid));

    let daemons = shared_dir(&env, "daemons", 0o777);
    let mut squatter = as_nobody(FORGE_DISPATCH, &[socket.to_str().unwrap()]);
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(squatter.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");
    std::fs::set_permissions(&daemons, std::fs::Permissions::from_mode(0o700)).unwrap();

    let run = ls_via_daemon(&env);
    assert!(!run.stdout.contains("PWNED"), "{}", run.stdout);
    assert_eq!(hook_parent(&run), run.pid, "dispatched in-process");
    let _ = squatter.kill();
    squatter.wait().unwrap();
}

/// Connects to the dispatch daemon's SOCKET, sends one request as a caller would (length,
/// then the hook input) and prints what came back before the connection closed, as JSON.
const DISPATCH_REQUEST: &str = r#"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = b'{"tool_name": "Bash", "tool_input": {"command": "ls"}}'
answer = b""
try:
    s.sendall(struct.pack("<I", len(body)) + body)
except OSError:
    pass  # refused before the request was whole: closed already
s.settimeout(60)
while True:
    try:
        data = s.recv(65536)
    except (ConnectionResetError, OSError):
        break
    if not data:
        break
    answer += data
print(json.dumps({"connected": True, "answer": answer.decode("utf-8", "replace")}))
"#;

/// The dispatch daemon's server checks the peer's uid (`SO_PEERCRED`) on every
/// connection, whatever the socket's mode: another uid, on a socket and directory opened
/// to everyone, is refused unanswered and the refusal is logged; its own user is served.
#[test]
fn a_dispatch_daemon_answers_only_its_own_uid() {
    use crate::dispatch_daemon::{
        hook_parent, ls_via_daemon, parent_hook_config, start, with_daemon,
    };
    if !root_or_skip("a_dispatch_daemon_answers_only_its_own_uid") {
        return;
    }
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config());
    let (socket, pid) = start(&env, || with_daemon(&env, 120), &["PreToolUse"]);
    let daemons = shared_dir(&env, "daemons", 0o777);
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();

    let seen = finished(as_nobody(DISPATCH_REQUEST, &[socket.to_str().unwrap()]));
    assert_eq!(seen["connected"], true, "{seen}");
    assert_eq!(seen["answer"], "", "another uid was answered: {seen}");
    let log = std::fs::read_to_string(socket.with_extension("log")).unwrap();
    assert!(
        log.contains(&format!("refused a connection from uid {NOBODY}")),
        "the refusal is not logged: {log}"
    );

    // Its own user is still served by the same daemon.
    std::fs::set_permissions(&daemons, std::fs::Permissions::from_mode(0o700)).unwrap();
    let run = ls_via_daemon(&env);
    assert_eq!(hook_parent(&run), pid, "served by the daemon");
    std::fs::remove_file(&socket).unwrap();
}
