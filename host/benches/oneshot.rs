//! One-shot `dispatch --format claude` with three wasm hooks answered by the dispatch
//! daemon, against one `sh` command hook, interleaved (A B A B … in one run, so that a
//! machine whose speed drifts moves both alike), with the floors of such a call beside
//! it (issue 27 item 3):
//!
//! - `sh -c 'cat >/dev/null; echo {}'`: the baseline, one shell hook;
//! - `hookhost-dispatch --format claude`: the small client of the daemon;
//! - `hookhost dispatch --format claude`: the same call through the big program;
//! - floor, process: `cat` (a dynamically linked C program that reads its stdin and
//!   writes it back): no hook an agent starts can cost much less;
//! - floor, round trip: this process speaking the daemon's wire protocol on its socket
//!   (the daemon's own work for the three hooks, and the socket), no process started.
//!
//! The client can at best cost the two floors together. Every figure is the median of
//! its runs, and each ratio is to the shell hook of the same run.
//!
//! Run with `cargo bench -p hookhost --bench oneshot` (builds the example plugins for
//! wasm32-wasip2 first); `HOOKHOST_BENCH_N` scales the number of runs (default 300 of
//! each).

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use common::{percentile, start_dispatch_daemon, time_process};

fn main() {
    let plugins = Path::new(hookhost_test_plugins::plugins::DENY_DANGEROUS_BASH)
        .parent()
        .expect("the plugins' directory");
    let plugin = |name: &str| plugins.join(format!("{name}.wasm")).display().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).expect("the project directory");
    let three = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "wasm", "plugin": plugin("deny_dangerous_bash")},
        {"type": "wasm", "plugin": plugin("protect_paths")},
        {"type": "wasm", "plugin": plugin("redact_secrets")}
    ]}]}})
    .to_string();
    let stdin = json!({
        "session_id": "bench",
        "hook_event_name": "PreToolUse",
        "cwd": project,
        "tool_name": "Bash",
        "tool_input": {"command": "ls -la src"}
    })
    .to_string();
    let args = ["--format", "claude", "--settings", &three];
    // Outside the workspace: hookhost refuses a `HOOKHOST_*` directory inside it.
    let setup = |cmd: &mut Command| {
        cmd.current_dir(&project)
            .env("HOOKHOST_HOME", dir.path().join("home"))
            .env("HOOKHOST_MANAGED_DIR", dir.path().join("managed"))
            .env("HOOKHOST_DATA_DIR", dir.path().join("data"))
            .env("HOOKHOST_CACHE_DIR", dir.path().join("cache"))
            .env_remove("HOOKHOST_DISPATCH_DAEMON");
    };
    let hookhost = |daemon: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        cmd.arg("dispatch").args(args);
        setup(&mut cmd);
        if !daemon {
            cmd.env("HOOKHOST_DISPATCH_DAEMON", "off");
        }
        time_process(&mut cmd, &stdin)
    };
    let client = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost-dispatch"));
        cmd.args(args);
        setup(&mut cmd);
        time_process(&mut cmd, &stdin)
    };
    hookhost(false); // fills the compile cache
    start_dispatch_daemon(&dir.path().join("data"), || hookhost(true));
    let socket = std::fs::read_dir(dir.path().join("data/daemons"))
        .expect("the daemons' directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the daemon's socket");
    let round_trip = || {
        let started = Instant::now();
        let mut stream = UnixStream::connect(&socket).expect("connect");
        let mut request = (stdin.len() as u32).to_le_bytes().to_vec();
        request.extend_from_slice(stdin.as_bytes());
        stream.write_all(&request).expect("send");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("answer");
        assert_eq!(answer.first(), Some(&0), "the daemon's answer: {answer:?}");
        started.elapsed()
    };
    client(); // the client is answered by the same daemon: no second one
    let runs = std::env::var("HOOKHOST_BENCH_N")
        .ok()
        .and_then(|n| n.parse::<f64>().ok())
        .map_or(300, |scale| ((300.0 * scale) as usize).max(5));
    let mut rows: [(&str, Vec<Duration>); 5] = Default::default();
    let names = [
        "`sh -c 'cat >/dev/null; echo {}'` (baseline)",
        "`hookhost-dispatch --format claude`, 3 wasm hooks via the daemon",
        "`hookhost dispatch --format claude`, 3 wasm hooks via the daemon",
        "floor: process start (`cat`)",
        "floor: round trip to the daemon, no process",
    ];
    for (row, name) in rows.iter_mut().zip(names) {
        row.0 = name;
    }
    for _ in 0..runs {
        rows[0].1.push(time_process(
            Command::new("sh").args(["-c", "cat >/dev/null; echo '{}'"]),
            &stdin,
        ));
        rows[1].1.push(client());
        rows[2].1.push(hookhost(true));
        rows[3]
            .1
            .push(time_process(&mut Command::new("cat"), &stdin));
        rows[4].1.push(round_trip());
    }
    for row in &mut rows {
        row.1.sort();
    }
    let p50 = |i: usize| percentile(&rows[i].1, 0.5).as_secs_f64();
    println!("one-shot dispatch, {runs} interleaved runs each:");
    println!();
    println!("| what | p50 ms | p90 ms | p50 / shell hook |");
    println!("|---|---:|---:|---:|");
    for (i, (name, samples)) in rows.iter().enumerate() {
        println!(
            "| {name} | {:.3} | {:.3} | {:.2}x |",
            p50(i) * 1e3,
            percentile(samples, 0.9).as_secs_f64() * 1e3,
            p50(i) / p50(0)
        );
    }
    println!();
    let floor = p50(3) + p50(4);
    println!(
        "hookhost-dispatch / one shell hook (p50): {:.2}x (target: at most 0.70x)",
        p50(1) / p50(0)
    );
    println!(
        "its floor (process start + round trip): {:.2}x of the shell hook; the client costs \
         {:.3} ms above it ({:.2}x the floor)",
        floor / p50(0),
        (p50(1) - floor) * 1e3,
        p50(1) / floor
    );
}
