//! The daemon and the one-shot CLI with sandboxed plugins, side by side in one run.
//!
//! 1. `hookhost serve` over a unix socket with one wasm hook (`deny-dangerous-bash` on
//!    PreToolUse), with a fresh instance per event and then one instance per session:
//!    round-trip latency with one client in lockstep, then throughput with 1, 4 and 16
//!    concurrent clients, each keeping 8 requests in flight. Target: at least 20,000
//!    events/s on 2 cores.
//! 2. The one-shot `hookhost dispatch` with three wasm plugins and a warm compile cache,
//!    answered by its dispatch daemon (the default) and in-process
//!    (`HOOKHOST_DISPATCH_DAEMON=off`), interleaved with spawning one `sh` hook that
//!    reads its stdin with `cat` and prints `{}`. Target: no slower than the shell hook.
//!
//! Run with `cargo bench -p hookhost --bench daemon` (builds the example plugins for
//! wasm32-wasip2 first). `HOOKHOST_BENCH_N` scales the counts;
//! `HOOKHOST_BENCH_ONLY=daemon` or `=one-shot` runs only that part (for profiling).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{percentile, start_dispatch_daemon, time_process};

const WINDOW: usize = 8;

fn scaled(base: usize) -> usize {
    let scale: f64 = std::env::var("HOOKHOST_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    ((base as f64 * scale) as usize).max(10)
}

fn input(n: usize) -> Value {
    json!({
        "session_id": format!("bench-{}", n % 64),
        "hook_event_name": "PreToolUse",
        "cwd": "/tmp",
        "tool_name": "Bash",
        "tool_input": {"command": format!("cargo test --workspace -- --test-threads {n}"), "description": "run the tests"},
        "tool_use_id": format!("toolu_{n}"),
    })
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Daemon {
    child: Child,
    socket: std::path::PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(dir: &Path, settings: &Value) -> Daemon {
    let socket = dir.join("bench.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_hookhost"))
        .args([
            "serve",
            "--socket",
            socket.to_str().unwrap(),
            "--settings",
            &settings.to_string(),
        ])
        .current_dir(workspace(dir))
        .envs(isolated_env(dir))
        .stderr(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let deadline = Instant::now() + Duration::from_secs(60);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, socket }
}

/// The project directory the hookhost processes run in: beside, not above, the state
/// directories of [`isolated_env`], since hookhost refuses a `HOOKHOST_*` directory
/// inside the workspace (a repository could set it) and would use the user's own.
fn workspace(dir: &Path) -> std::path::PathBuf {
    let project = dir.join("project");
    std::fs::create_dir_all(&project).expect("the project directory");
    project
}

fn isolated_env(dir: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    vec![
        ("HOOKHOST_HOME", dir.join("home")),
        ("HOOKHOST_MANAGED_DIR", dir.join("managed")),
        ("HOOKHOST_DATA_DIR", dir.join("data")),
        ("HOOKHOST_CACHE_DIR", dir.join("cache")),
    ]
}

/// Sends `count` requests keeping `window` in flight; returns the round-trip times when
/// `window` is 1.
fn client(socket: &Path, count: usize, window: usize, offset: usize) -> Vec<Duration> {
    let stream = UnixStream::connect(socket).expect("connect");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut times = Vec::with_capacity(count);
    let mut sent = 0;
    let mut line = String::new();
    let send = |writer: &mut UnixStream, n: usize| {
        let request = json!({"id": n, "event": "PreToolUse", "input": input(n)}).to_string() + "\n";
        writer.write_all(request.as_bytes()).expect("send");
    };
    while sent < window.min(count) {
        send(&mut writer, offset + sent);
        sent += 1;
    }
    for _ in 0..count {
        let started = Instant::now();
        line.clear();
        reader.read_line(&mut line).expect("answer");
        assert!(
            line.contains("\"decision\":\"none\""),
            "unexpected answer: {line}"
        );
        times.push(started.elapsed());
        if sent < count {
            send(&mut writer, offset + sent);
            sent += 1;
        }
    }
    times
}

fn throughput(socket: &Path, clients: usize, total: usize) -> f64 {
    let per_client = total / clients;
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let socket = socket.to_path_buf();
            std::thread::spawn(move || client(&socket, per_client, WINDOW, c * per_client))
        })
        .collect();
    for t in threads {
        t.join().expect("client");
    }
    (per_client * clients) as f64 / started.elapsed().as_secs_f64()
}

/// Latency and throughput of `hookhost serve` running `settings`.
fn bench_daemon(dir: &Path, settings: &Value, instance: &str) {
    let daemon = start_daemon(dir, settings);
    client(&daemon.socket, 300, 1, 0); // warm: compile, caches, connections
    let mut latency = client(&daemon.socket, scaled(3000), 1, 0);
    latency.sort();
    println!("daemon round trip over a unix socket, one wasm hook, one instance per {instance}:");
    println!();
    println!("| what | p50 µs | p90 µs | p99 µs |");
    println!("|---|---:|---:|---:|");
    println!(
        "| 1 client, lockstep, {} requests | {:.1} | {:.1} | {:.1} |",
        latency.len(),
        us(percentile(&latency, 0.5)),
        us(percentile(&latency, 0.9)),
        us(percentile(&latency, 0.99))
    );
    println!();
    println!("| concurrent clients ({WINDOW} in flight each) | events/s | vs target 20,000 |");
    println!("|---:|---:|---:|");
    for clients in [1, 4, 16] {
        let rate = throughput(&daemon.socket, clients, scaled(40_000));
        println!("| {clients} | {rate:.0} | {:.2}x |", rate / 20_000.0);
    }
    println!();
}

fn main() {
    // The example plugins, built for wasm32-wasip2 by the test-plugins artifacts crate.
    let plugins = Path::new(hookhost_test_plugins::plugins::DENY_DANGEROUS_BASH)
        .parent()
        .expect("the plugins' directory");
    let plugin = |name: &str| plugins.join(format!("{name}.wasm")).display().to_string();
    let dir = tempfile::tempdir().expect("tempdir");

    println!(
        "hookhost daemon and one-shot benchmark (RUST_BACKTRACE={})",
        std::env::var("RUST_BACKTRACE").unwrap_or_else(|_| "unset".into())
    );
    println!();

    // 1. The daemon, one wasm hook: a fresh instance per event (the default), then one
    //    instance per session (`"instance": "session"`; the bench's requests spread
    //    over 64 sessions).
    let only = std::env::var("HOOKHOST_BENCH_ONLY").unwrap_or_default();
    for instance in ["event", "session"]
        .into_iter()
        .filter(|_| only != "one-shot")
    {
        let one_hook = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "wasm", "plugin": plugin("deny_dangerous_bash"), "instance": instance}
        ]}]}});
        bench_daemon(dir.path(), &one_hook, instance);
    }
    if only == "daemon" {
        return;
    }

    // 2. The one-shot CLI with three plugins and a warm cache vs one shell hook.
    let three = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "wasm", "plugin": plugin("deny_dangerous_bash")},
        {"type": "wasm", "plugin": plugin("protect_paths")},
        {"type": "wasm", "plugin": plugin("redact_secrets")}
    ]}]}})
    .to_string();
    let stdin = input(1).to_string();
    let dispatch = |daemon: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        cmd.args(["dispatch", "PreToolUse", "--settings", &three])
            .current_dir(workspace(dir.path()))
            .envs(isolated_env(dir.path()))
            .env(
                "HOOKHOST_DISPATCH_DAEMON",
                if daemon { "auto" } else { "off" },
            );
        time_process(&mut cmd, &stdin)
    };
    dispatch(false); // fills the compile cache
    start_dispatch_daemon(&dir.path().join("data"), || dispatch(true));
    let runs = scaled(200);
    let (mut cli, mut via_daemon, mut shell) = (
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
        Vec::with_capacity(runs),
    );
    for _ in 0..runs {
        cli.push(dispatch(false));
        via_daemon.push(dispatch(true));
        shell.push(time_process(
            Command::new("sh").args(["-c", "cat >/dev/null; echo '{}'"]),
            &stdin,
        ));
    }
    cli.sort();
    via_daemon.sort();
    shell.sort();
    println!("one-shot process per event, {runs} interleaved runs each:");
    println!();
    println!("| what | p50 ms | p90 ms |");
    println!("|---|---:|---:|");
    let row = |what: &str, samples: &[Duration]| {
        println!(
            "| {what} | {:.3} | {:.3} |",
            us(percentile(samples, 0.5)) / 1e3,
            us(percentile(samples, 0.9)) / 1e3
        );
    };
    row("`sh -c 'cat >/dev/null; echo {}'` spawned directly", &shell);
    row(
        "`hookhost dispatch` with 3 wasm plugins, warm cache (its dispatch daemon answers)",
        &via_daemon,
    );
    row("the same in-process (`HOOKHOST_DISPATCH_DAEMON=off`)", &cli);
    println!();
    for (how, samples) in [
        ("via its dispatch daemon (the default)", &via_daemon),
        ("in-process", &cli),
    ] {
        println!(
            "hookhost with three sandboxed plugins {how} / one shell hook (p50): {:.2}x (target: at most 1.00x)",
            percentile(samples, 0.5).as_secs_f64() / percentile(&shell, 0.5).as_secs_f64()
        );
    }
}
