//! No client can lock the others out of a daemon (`hookhost::serve::slots`): one process
//! that opens more idle connections than the daemon serves gets its share and a clear
//! refusal for the rest, while another client is still answered (`hookhost serve` and the
//! dispatch daemon); idle connections are closed after `HOOKHOST_CONNECTION_IDLE_SECS`;
//! and under a low `RLIMIT_NOFILE` a flood of connections leaves `serve` answering, its
//! hooks still able to start.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::dispatch_daemon::sockets;
use crate::support::{TestEnv, bash_input, hooks, run_bounded, wait_until};

/// More connections than any daemon serves by default (256).
const FLOOD: usize = 300;

/// A guard that denies `rm -rf` with a command hook (it needs descriptors to start).
fn guard(env: &TestEnv) {
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard",
            "command": "input=$(cat); case \"$input\" in *'rm -rf'*) echo 'no rm -rf' >&2; exit 2;; esac; exit 0"}]),
    ));
}

/// `hookhost serve --socket` in `env`, with `adjust` applied to its command.
struct Serve {
    child: Child,
    socket: PathBuf,
}

impl Serve {
    fn start(env: &TestEnv, adjust: impl FnOnce(&mut Command)) -> Serve {
        let socket = env.data.join("serve.sock");
        let mut cmd = env.command();
        cmd.args(["serve", "--socket"])
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        adjust(&mut cmd);
        let child = cmd.spawn().unwrap();
        wait_until("serve to listen", || UnixStream::connect(&socket).is_ok());
        Serve { child, socket }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request to `serve` from another process (perl, in `perl-base`), bounded: its
/// answer line, or `None` when it got none within 60 s.
fn probe(socket: &Path, request: &Value) -> Option<String> {
    let script = r#"
        use IO::Socket::UNIX;
        my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "connect: $!";
        print $s "$ARGV[1]\n";
        my $line = <$s>;
        print $line if defined $line;
    "#;
    let mut cmd = Command::new("perl");
    cmd.args(["-e", script])
        .arg(socket)
        .arg(request.to_string());
    let run = run_bounded(&mut cmd, "", Duration::from_secs(60))?;
    Some(run.stdout)
}

fn rm_rf() -> Value {
    json!({"id": "probe", "event": "PreToolUse", "input": bash_input("rm -rf /")})
}

/// What the daemon said on each of `streams` without waiting: a refusal line (then the end
/// of the connection), or nothing (the connection is being served).
fn refusals(streams: &mut [UnixStream]) -> (usize, Vec<String>) {
    let mut served = 0;
    let mut refused = Vec::new();
    for stream in streams {
        stream.set_nonblocking(true).unwrap();
        let mut bytes = Vec::new();
        match stream.read_to_end(&mut bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && bytes.is_empty() => {
                served += 1;
            }
            _ => refused.push(String::from_utf8_lossy(&bytes).into_owned()),
        }
    }
    (served, refused)
}

#[test]
fn serve_one_client_with_every_connection_does_not_lock_another_out() {
    let env = TestEnv::new();
    guard(&env);
    let serve = Serve::start(&env, |_| {});
    let mut mine: Vec<UnixStream> = (0..FLOOD)
        .map(|_| UnixStream::connect(&serve.socket).unwrap())
        .collect();
    // Another process: answered, its hook run.
    let answer = probe(&serve.socket, &rm_rf()).expect("the second client is answered");
    let answer: Value = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(answer["outcome"]["decision"], "deny", "{answer}");
    // This process got its share, and a clear refusal for the rest.
    let (served, refused) = refusals(&mut mine);
    assert!(
        (1..FLOOD / 2).contains(&served),
        "{served} of {FLOOD} served"
    );
    let me = std::process::id();
    for line in &refused {
        assert!(
            line.contains(&format!("too many connections from process {me}")),
            "{line}"
        );
    }
    assert_eq!(served + refused.len(), FLOOD);
}

#[test]
fn serve_closes_idle_connections_with_an_error_line() {
    let env = TestEnv::new();
    guard(&env);
    let serve = Serve::start(&env, |cmd| {
        cmd.env("HOOKHOST_CONNECTION_IDLE_SECS", "1");
    });
    let stream = UnixStream::connect(&serve.socket).unwrap();
    // A hang guard, not a measurement: the daemon closes it after 1 s.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut lines = BufReader::new(stream);
    // A request first: a connection in use is not idle while it waits for its answer.
    writeln!(writer, "{}", rm_rf()).unwrap();
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    assert!(line.contains("\"deny\""), "{line}");
    line.clear();
    lines
        .read_line(&mut line)
        .expect("closed before the hang guard");
    let closed: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert!(
        closed["error"]
            .as_str()
            .is_some_and(|e| e.contains("idle for 1 s")),
        "{closed}"
    );
    line.clear();
    assert_eq!(
        lines.read_line(&mut line).unwrap(),
        0,
        "then the end: {line}"
    );
}

/// `RLIMIT_NOFILE` of 64 for the process `cmd` starts.
fn low_descriptor_limit(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn serve_at_a_low_descriptor_limit_keeps_answering_a_flood() {
    let env = TestEnv::new();
    guard(&env);
    let serve = Serve::start(&env, low_descriptor_limit);
    // The flood, from a thread: with no room left in the daemon, a connect would wait in
    // the backlog for good, and the probe below is what must not.
    let socket = serve.socket.clone();
    let flood = std::thread::spawn(move || {
        (0..FLOOD)
            .map(|_| UnixStream::connect(&socket))
            .collect::<Vec<_>>()
    });
    for round in 0..3 {
        let answer = probe(&serve.socket, &rm_rf())
            .unwrap_or_else(|| panic!("round {round}: no answer under the flood"));
        let answer: Value =
            serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
        assert_eq!(
            answer["outcome"]["decision"], "deny",
            "round {round}: {answer}"
        );
    }
    let held = flood.join().unwrap();
    assert_eq!(held.len(), FLOOD);
    let answer = probe(&serve.socket, &rm_rf()).expect("answered after the flood");
    assert!(answer.contains("\"deny\""), "{answer}");
}

/// A dispatch through the daemon whose connections idle out after `idle` seconds.
fn daemon_command(env: &TestEnv, idle: &str) -> Command {
    let mut cmd = env.command();
    cmd.env_remove("HOOKHOST_DISPATCH_DAEMON")
        .env("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS", "120")
        .env("HOOKHOST_CONNECTION_IDLE_SECS", idle);
    cmd
}

fn start_daemon(env: &TestEnv, idle: &str) -> PathBuf {
    let run = env.run_with(
        daemon_command(env, idle).args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    wait_until("the dispatch daemon to listen", || !sockets(env).is_empty());
    sockets(env).remove(0)
}

#[test]
fn the_dispatch_daemon_answers_another_client_while_one_holds_every_connection() {
    let env = TestEnv::new();
    guard(&env);
    let socket = start_daemon(&env, "600");
    let mut mine: Vec<UnixStream> = (0..FLOOD)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let run = run_bounded(
        daemon_command(&env, "600").args(["dispatch", "PreToolUse"]),
        &bash_input("rm -rf /").to_string(),
        Duration::from_secs(60),
    )
    .expect("the second client is answered");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["decision"], "deny", "{}", run.stdout);
    // The refused connections of this process were told why (exit code 1 and a message
    // on the wire), the others are served until they idle out.
    let (served, refused) = refusals(&mut mine);
    assert!(served < FLOOD / 2, "{served} of {FLOOD} served");
    assert!(
        refused
            .iter()
            .all(|bytes| bytes.contains("too many connections from process")),
        "{:?}",
        refused.first()
    );
    for socket in sockets(&env) {
        let _ = std::fs::remove_file(socket);
    }
}

#[test]
fn the_dispatch_daemon_closes_a_connection_that_sends_nothing() {
    let env = TestEnv::new();
    guard(&env);
    let socket = start_daemon(&env, "1");
    let mut stream = UnixStream::connect(&socket).unwrap();
    // A hang guard, not a measurement: the daemon drops it after 1 s.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .expect("closed before the hang guard");
    assert!(bytes.is_empty(), "{bytes:?}");
    for socket in sockets(&env) {
        let _ = std::fs::remove_file(socket);
    }
}
