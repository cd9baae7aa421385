//! Faults: daemons (see faults/mod.rs). Clients that misbehave — never read their
//! answers, subscribe and vanish, exhaust the daemon's descriptors, send lines that are not
//! requests or are too long, or make a request panic — against `hookhost serve` and the
//! dispatch daemon. Each checks that the daemon stays bounded and everyone else is still
//! answered.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::dispatch_daemon::{
    dispatch, hook_parent, parent_hook_config, process_alive, start, with_daemon,
};
use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks};

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// CPU time of `pid` so far (user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of stat(5); the state (field 3) is the first after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// A command whose process may open at most `limit` descriptors.
fn with_fd_limit(mut cmd: std::process::Command, limit: u64) -> std::process::Command {
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rlimit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    cmd
}

fn stop_request(id: usize) -> String {
    json!({"id": id, "event": "Stop", "input": {"session_id": "never-reads"}}).to_string() + "\n"
}

#[test]
fn a_client_that_never_reads_its_answers_is_no_longer_read() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env);
    let before = rss_kib(daemon.pid());
    let stream = UnixStream::connect(&daemon.socket).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    // 200,000 requests, never reading an answer: the daemon stops reading this
    // connection once its answers are queued, so the writes block and time out.
    let mut sent = 0;
    let mut writer = &stream;
    let batch: String = (0..100).map(stop_request).collect();
    while sent < 200_000 {
        if writer.write_all(batch.as_bytes()).is_err() {
            break;
        }
        sent += 100;
    }
    assert!(
        sent < 200_000,
        "the daemon read all 200,000 requests of a client that reads nothing"
    );
    let after = rss_kib(daemon.pid());
    assert!(
        after < before + 48 * 1024,
        "resident memory grew from {before} to {after} KiB"
    );
    // Everyone else is still served.
    let other = daemon.client().call("Stop", json!({"session_id": "other"}));
    assert_eq!(other["event"], "Stop", "{other}");
    // And the stalled client gets its answers once it reads.
    let mut reader = std::io::BufReader::new(&stream);
    for _ in 0..100 {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut reader, &mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["outcome"]["event"], "Stop", "{answer}");
    }
}

#[test]
fn subscriptions_of_closed_connections_are_dropped() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env);
    // Warm up, then measure: the first connections grow pools that stay.
    let subscribe_and_close = |connections: usize, tag: &str| {
        for c in 0..connections {
            let mut client = daemon.client();
            let lines: String = (0..50)
                .map(|n| {
                    json!({"id": n, "subscribe": format!("{tag}-{c}-{n}-{}", "s".repeat(200))})
                        .to_string()
                        + "\n"
                })
                .collect();
            client.stream.write_all(lines.as_bytes()).unwrap();
            for _ in 0..50 {
                assert!(client.read()["subscribed"].is_string());
            }
        }
    };
    subscribe_and_close(20, "warm");
    let before = rss_kib(daemon.pid());
    // 20,000 subscriptions on 400 connections that then close.
    subscribe_and_close(400, "gone");
    // A request after them: the daemon has seen every close.
    assert_eq!(daemon.client().call("Stop", json!({}))["event"], "Stop");
    let after = rss_kib(daemon.pid());
    assert!(
        after < before + 24 * 1024,
        "20,000 closed subscriptions kept {} KiB resident",
        after.saturating_sub(before)
    );
}

#[test]
fn more_subscriptions_than_a_connection_may_hold_are_refused() {
    let env = TestEnv::new();
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    let lines: String = (0..65)
        .map(|n| json!({"id": n, "subscribe": format!("s{n}")}).to_string() + "\n")
        .collect();
    client.stream.write_all(lines.as_bytes()).unwrap();
    let answers: Vec<Value> = (0..65).map(|_| client.read()).collect();
    assert!(answers[..64].iter().all(|a| a["subscribed"].is_string()));
    assert_eq!(answers[64]["id"], 64);
    assert!(
        answers[64]["error"]
            .as_str()
            .unwrap()
            .contains("at most 64 subscriptions"),
        "{}",
        answers[64]
    );
    assert_eq!(client.call("Stop", json!({}))["event"], "Stop");
}

/// Holds `n` connections to `socket` (as many as can be made).
fn hold_connections(socket: &std::path::Path, n: usize) -> Vec<UnixStream> {
    (0..n)
        .filter_map(|_| UnixStream::connect(socket).ok())
        .collect()
}

/// CPU ticks `pid` uses over `secs` seconds of doing nothing useful.
fn idle_ticks(pid: u32, secs: u64) -> u64 {
    let start = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(secs));
    cpu_ticks(pid) - start
}

#[test]
fn serve_at_its_descriptor_limit_does_not_spin() {
    let env = TestEnv::new();
    let daemon = Daemon::start_with(&env, with_fd_limit(env.command(), 64));
    // More connections than the daemon has descriptors: the rest wait in the backlog
    // and `accept` fails with EMFILE.
    let held = hold_connections(&daemon.socket, 100);
    assert!(held.len() >= 90, "only {} connections", held.len());
    std::thread::sleep(Duration::from_millis(300));
    let ticks = idle_ticks(daemon.pid(), 3);
    // A busy loop burns up to 300 ticks (100 a second) in 3 s; a backoff next to none.
    assert!(ticks < 30, "{ticks} ticks of CPU in 3 idle seconds");
    drop(held);
    // Descriptors back: the daemon accepts again.
    let mut answered = Value::Null;
    crate::support::wait_until("the daemon to accept again", || {
        let Ok(stream) = UnixStream::connect(&daemon.socket) else {
            return false;
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut client = crate::serve::Client {
            reader: std::io::BufReader::new(stream.try_clone().unwrap()),
            stream,
        };
        client.send(&json!({"id": "again", "event": "Stop", "input": {}}).to_string());
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut client.reader, &mut line).is_err() {
            return false;
        }
        answered = serde_json::from_str(&line).unwrap_or(Value::Null);
        answered["id"] == "again"
    });
    assert_eq!(answered["outcome"]["event"], "Stop", "{answered}");
}

#[test]
fn the_dispatch_daemon_at_its_descriptor_limit_does_not_spin() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config());
    // The daemon keeps the limits of the call that starts it.
    let (socket, daemon) = start(
        &env,
        || with_fd_limit(with_daemon(&env, 120), 64),
        &["PreToolUse"],
    );
    let held = hold_connections(&socket, 100);
    assert!(held.len() >= 90, "only {} connections", held.len());
    std::thread::sleep(Duration::from_millis(300));
    let ticks = idle_ticks(daemon, 3);
    assert!(ticks < 30, "{ticks} ticks of CPU in 3 idle seconds");
    drop(held);
    let run = dispatch(
        &env,
        with_daemon(&env, 120),
        &["PreToolUse"],
        &bash_input("ls"),
    );
    assert_eq!(hook_parent(&run), daemon, "answered by the daemon again");
}

fn slow_hook(env: &TestEnv) {
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "sleep 0.5; echo slow >&2; exit 2"}]),
    ));
}

#[test]
fn invalid_lines_are_answered_and_in_flight_requests_are_not_lost() {
    let env = TestEnv::new();
    slow_hook(&env);
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    for n in 0..3 {
        client.request(json!(n), "PreToolUse", bash_input("ls"));
    }
    // Not UTF-8, a truncated object, a NUL and control bytes, an array, then a request.
    client.stream.write_all(b"\xff\xfe\n").unwrap();
    client
        .stream
        .write_all(b"{\"id\": 7, \"event\": \"Pre\n")
        .unwrap();
    client.stream.write_all(b"\x00\x1b[31m\r\n").unwrap();
    client.stream.write_all(b"[1, 2]\n").unwrap();
    client
        .stream
        .write_all("{\"id\": \"\u{fffd}\u{202e}\", \"event\": 5}\n".as_bytes())
        .unwrap();
    client.request(json!("after"), "PreToolUse", bash_input("ls"));
    let answers: Vec<Value> = (0..9).map(|_| client.read()).collect();
    let errors: Vec<&Value> = answers.iter().filter(|a| a["error"].is_string()).collect();
    assert_eq!(errors.len(), 5, "{answers:?}");
    assert!(
        errors
            .iter()
            .all(|e| e["error"].as_str().unwrap().starts_with("bad request: ")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e["id"] == "\u{fffd}\u{202e}"),
        "the id of a JSON line is kept: {errors:?}"
    );
    let mut answered: Vec<String> = answers
        .iter()
        .filter(|a| a["outcome"]["decision"] == "deny")
        .map(|a| a["id"].to_string())
        .collect();
    answered.sort();
    assert_eq!(answered, ["\"after\"", "0", "1", "2"], "{answers:?}");
}

#[test]
fn a_line_over_the_cap_is_skipped_and_the_connection_goes_on() {
    let env = TestEnv::new();
    slow_hook(&env);
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.request(json!("before"), "PreToolUse", bash_input("ls"));
    // 17 MiB in one line, with what looks like a request at its end: it is skipped
    // whole, not read as a line of its own.
    let mut long = vec![b'x'; 17 << 20];
    long.extend_from_slice(b"{\"id\": \"tail\", \"event\": \"Stop\"}\n");
    client.stream.write_all(&long).unwrap();
    client.request(json!("after"), "PreToolUse", bash_input("ls"));
    let answers: Vec<Value> = (0..3).map(|_| client.read()).collect();
    let error = answers
        .iter()
        .find(|a| a["error"].is_string())
        .expect("an error");
    assert_eq!(error["id"], Value::Null);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("line longer than 16777216 bytes"),
        "{error}"
    );
    let mut ids: Vec<String> = answers
        .iter()
        .filter(|a| a["outcome"]["decision"] == "deny")
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["after", "before"], "{answers:?}");
    // The daemon gave the long line's buffer back.
    assert!(rss_kib(daemon.pid()) < 200 * 1024);
}

#[test]
fn a_panicking_request_is_answered_and_the_daemon_serves_on() {
    let env = TestEnv::new();
    slow_hook(&env);
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.request(json!("slow"), "PreToolUse", bash_input("ls"));
    client.request(json!("boom"), "hookhost-debug-panic", json!({}));
    let answers: Vec<Value> = (0..2).map(|_| client.read()).collect();
    let boom = answers
        .iter()
        .find(|a| a["id"] == "boom")
        .expect("answered");
    assert!(
        boom["error"]
            .as_str()
            .unwrap()
            .starts_with("internal error: the request panicked"),
        "{boom}"
    );
    let slow = answers
        .iter()
        .find(|a| a["id"] == "slow")
        .expect("answered");
    assert_eq!(slow["outcome"]["reason"], "slow", "{slow}");
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );
    assert_eq!(
        daemon.client().call("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );
}

#[test]
fn a_panicking_dispatch_is_answered_by_the_dispatch_daemon() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config());
    let (_, daemon) = start(&env, || with_daemon(&env, 120), &["PreToolUse"]);
    // Debug builds panic on this input, in the daemon only.
    let boom = dispatch(
        &env,
        with_daemon(&env, 120),
        &["PreToolUse"],
        &bash_input("hookhost-debug-panic"),
    );
    assert_eq!(boom.code, 1, "{}", boom.stderr);
    assert!(
        boom.stderr
            .starts_with("hookhost: error: internal error: the dispatch panicked"),
        "{}",
        boom.stderr
    );
    assert!(process_alive(daemon), "the daemon serves on");
    let run = dispatch(
        &env,
        with_daemon(&env, 120),
        &["PreToolUse"],
        &bash_input("ls"),
    );
    assert_eq!(hook_parent(&run), daemon, "answered by the same daemon");
}

#[test]
fn the_dispatch_daemon_does_not_take_a_claimed_length_on_trust() {
    let env = TestEnv::new();
    env.project_hooks(parent_hook_config());
    let (socket, daemon) = start(&env, || with_daemon(&env, 120), &["PreToolUse"]);
    let before = rss_kib(daemon);
    // Clients that claim 4 GiB, or 60 MiB and send ten bytes, then stall.
    let mut stalled = Vec::new();
    for claim in [u32::MAX, 60 << 20, 60 << 20] {
        let mut stream = UnixStream::connect(&socket).unwrap();
        // The daemon may close a refused claim before these bytes arrive.
        let _ = stream.write_all(&claim.to_le_bytes());
        let _ = stream.write_all(b"0123456789");
        stalled.push(stream);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(rss_kib(daemon) < before + 16 * 1024);
    // The 4 GiB claim is refused outright: the connection is closed (reset, since the
    // daemon left bytes unread) without an answer.
    let mut rest = Vec::new();
    stalled[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    match stalled[0].read_to_end(&mut rest) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("{other:?}: {rest:?}"),
    }
    let started = Instant::now();
    let run = dispatch(
        &env,
        with_daemon(&env, 120),
        &["PreToolUse"],
        &bash_input("ls"),
    );
    assert_eq!(hook_parent(&run), daemon);
    assert!(started.elapsed() < Duration::from_secs(30));
}
