//! The daemon and the one-shot CLI with sandboxed plugins, side by side in one run.
//!
//! 1. `hookhost serve` over a unix socket with one wasm hook (`deny-dangerous-bash` on
//!    PreToolUse, audit log on), with a fresh instance per event and with one instance
//!    per session, beside its baseline: a bare JSON-lines server on a unix socket that
//!    parses each line and answers `{id, outcome}` (`daemon/echo.rs`, same runtime and
//!    allocator, a process of its own). Round-trip latency with one lockstep client,
//!    then throughput with 1, 4 and 16 lockstep clients and with 8 requests in flight
//!    per client, the three servers interleaved round by round so that they share the
//!    machine's noise. Targets (issue 27): at least 50% of the baseline's events/s with a
//!    fresh instance per event and 70% with one per session, at 1, 4 and 16 lockstep
//!    clients. Then the allocations per `serve` event, counted in process
//!    (`daemon/allocs.rs`; `HOOKHOST_BENCH_ONLY=allocs` runs only this count).
//! 2. The one-shot `hookhost dispatch` with three wasm plugins and a warm compile cache,
//!    answered by its dispatch daemon (the default) and in-process
//!    (`HOOKHOST_DISPATCH_DAEMON=off`), and the same call through the small client
//!    `hookhost-dispatch` (the same daemon), interleaved with spawning one `sh` hook that
//!    reads its stdin with `cat` and prints `{}`, and with the floors of a forwarded call:
//!    spawning `true`, and the socket round trip alone. Targets (issue 27): the daemon
//!    no slower than the shell hook; the small client at most 0.70x of it.
//! 3. The audit chain's cost (`daemon/audit_cost.rs`, issue 29): a `serve` event in
//!    process with the audit log on (chained) and off, and one audit line appended with
//!    the chain and without it; target: the chain under 5% of a `serve` event
//!    (`HOOKHOST_BENCH_ONLY=audit` runs only this part).
//! 4. The `if` filter's cost (`daemon/if_cost.rs`, issue 27): a `serve` event in process
//!    with one wasm hook, without and with a Bash `if` rule its lines match, and the shell
//!    analysis of four shapes of command line beside parsing their tool input as JSON
//!    (`HOOKHOST_BENCH_ONLY=if` runs only this part).
//! 5. Only with `HOOKHOST_BENCH_ONLY=before-after` and `HOOKHOST_BENCH_BEFORE=PATH`
//!    (and `HOOKHOST_BENCH_BEFORE_PLUGINS=DIR`, the older build's plugins when its WIT
//!    differs; `HOOKHOST_BENCH_AFTER`, `HOOKHOST_BENCH_AFTER_PLUGINS`: another build in
//!    this one's place): this build beside an older `hookhost`, interleaved
//!    (`daemon/before_after.rs`, issue 23: no p50 more than 5% slower).
//! 6. Only with `HOOKHOST_BENCH_ONLY=soak`: 256 lockstep clients for 60 s
//!    (`HOOKHOST_BENCH_SOAK_SECS`) against one daemon; every answer must arrive exactly
//!    once, and the daemon's memory is reported (`daemon/soak.rs`).
//!
//! Run with `cargo bench -p hookhost --bench daemon` (builds the example plugins for
//! wasm32-wasip2 first). `HOOKHOST_BENCH_N` scales the counts, `HOOKHOST_BENCH_ROUNDS`
//! sets the interleaved rounds (default 3); `HOOKHOST_BENCH_ONLY=daemon` or `=one-shot`
//! runs only that part (for profiling), `=soak` only the soak run.

#[path = "daemon/allocs.rs"]
mod allocs;
#[path = "daemon/audit_cost.rs"]
mod audit_cost;
#[path = "daemon/before_after.rs"]
mod before_after;
mod common;
#[path = "daemon/echo.rs"]
mod echo;
#[path = "daemon/if_cost.rs"]
mod if_cost;
#[path = "daemon/soak.rs"]
mod soak;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{percentile, start_dispatch_daemon, time_process};

/// The daemon allocates with mimalloc (`host/src/allocator.rs`); so do the baseline
/// server and the clients, in this binary (counting only for `allocs.rs`).
#[global_allocator]
static GLOBAL: allocs::Counting = allocs::Counting;

/// Requests in flight per client in the pipelined rows.
const WINDOW: usize = 8;
/// The share of the baseline's events/s the daemon must reach with lockstep clients:
/// with a fresh instance per event, and with one instance per session (issue 27).
const TARGET_FRESH: f64 = 0.50;
const TARGET_SESSION: f64 = 0.70;

fn scaled(base: usize) -> usize {
    let scale: f64 = std::env::var("HOOKHOST_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    ((base as f64 * scale) as usize).max(10)
}

/// The `cwd` of every input: the bench's project directory (set first thing in
/// `main`). Not `/tmp`: hookhost takes the input's `cwd` as the workspace and refuses
/// `HOOKHOST_*` directories inside it, so the processes would use the user's own.
static CWD: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn input(n: usize) -> Value {
    json!({
        "session_id": format!("bench-{}", n % 64),
        "hook_event_name": "PreToolUse",
        "cwd": CWD.get().map_or("/nonexistent", String::as_str),
        "tool_name": "Bash",
        "tool_input": {"command": format!("cargo test --workspace -- --test-threads {n}"), "description": "run the tests"},
        "tool_use_id": format!("toolu_{n}"),
    })
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A server process on a unix socket: `hookhost serve` or the baseline.
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

/// Spawns `command`, a server that will listen on `socket`, and waits until it does.
fn spawn_server(mut command: Command, socket: std::path::PathBuf) -> Daemon {
    let _ = std::fs::remove_file(&socket);
    let child = command
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let deadline = Instant::now() + Duration::from_secs(60);
    while UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "the server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, socket }
}

fn start_daemon(dir: &Path, settings: &Value, name: &str) -> Daemon {
    let socket = dir.join(format!("{name}.sock"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookhost"));
    command
        .args([
            "serve",
            "--socket",
            socket.to_str().unwrap(),
            "--settings",
            &settings.to_string(),
        ])
        .current_dir(workspace(dir))
        .envs(isolated_env(dir));
    spawn_server(command, socket)
}

/// The baseline: this binary again, as the bare server of `echo.rs`.
fn start_echo(dir: &Path) -> Daemon {
    let socket = dir.join("echo.sock");
    let mut command = Command::new(std::env::current_exe().expect("the bench binary"));
    command.env(echo::ECHO_VAR, &socket);
    spawn_server(command, socket)
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

/// Events/s of `clients` clients, each keeping `window` requests in flight.
fn throughput(socket: &Path, clients: usize, total: usize, window: usize) -> f64 {
    let per_client = total / clients;
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let socket = socket.to_path_buf();
            std::thread::spawn(move || client(&socket, per_client, window, c * per_client))
        })
        .collect();
    for t in threads {
        t.join().expect("client");
    }
    (per_client * clients) as f64 / started.elapsed().as_secs_f64()
}

fn rounds() -> usize {
    std::env::var("HOOKHOST_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3usize)
        .max(1)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Latency and throughput of the baseline and of `hookhost serve` with a fresh instance
/// per event and with one per session, interleaved.
fn bench_daemons(servers: &[(&str, &Daemon)]) {
    println!("round trip over a unix socket, 1 client, lockstep:");
    println!();
    println!("| server | requests | p50 µs | p90 µs | p99 µs |");
    println!("|---|---:|---:|---:|---:|");
    for (name, daemon) in servers {
        client(&daemon.socket, 300, 1, 0); // warm: compile, caches, connections
        let mut latency = client(&daemon.socket, scaled(3000), 1, 0);
        latency.sort();
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |",
            latency.len(),
            us(percentile(&latency, 0.5)),
            us(percentile(&latency, 0.9)),
            us(percentile(&latency, 0.99))
        );
    }
    println!();
    let rounds = rounds();
    for (window, what) in [(1, "lockstep"), (WINDOW, "8 requests in flight each")] {
        // rates[client count][server] over the rounds
        let counts = [1, 4, 16];
        let mut rates = vec![vec![Vec::new(); servers.len()]; counts.len()];
        for _ in 0..rounds {
            for (c, clients) in counts.iter().enumerate() {
                for (s, (_, daemon)) in servers.iter().enumerate() {
                    let total = scaled(if window == 1 { 12_000 } else { 40_000 });
                    rates[c][s].push(throughput(&daemon.socket, *clients, total, window));
                }
            }
        }
        println!(
            "throughput, events/s, clients {what} (median of {rounds} interleaved rounds; \
             each ratio is the median of the rounds' ratios to the baseline):"
        );
        println!();
        let header: Vec<String> = servers.iter().map(|(n, _)| format!("{n} |")).collect();
        println!("| clients | {}", header.join(" "));
        println!("|---:|{}", "---:|".repeat(servers.len()));
        for (c, clients) in counts.iter().enumerate() {
            let base = &rates[c][0];
            let cells: Vec<String> = (0..servers.len())
                .map(|s| {
                    let rate = median(&mut rates[c][s].clone());
                    if s == 0 {
                        return format!("{rate:.0}");
                    }
                    let mut ratios: Vec<f64> =
                        rates[c][s].iter().zip(base).map(|(r, b)| r / b).collect();
                    format!("{rate:.0} ({:.0}%)", 100.0 * median(&mut ratios))
                })
                .collect();
            println!("| {clients} | {} |", cells.join(" | "));
        }
        println!();
        if window == 1 {
            for (s, target) in [(1, TARGET_FRESH), (2, TARGET_SESSION)] {
                let Some((name, _)) = servers.get(s) else {
                    continue;
                };
                let ratios: Vec<f64> = (0..counts.len())
                    .map(|c| {
                        let mut r: Vec<f64> = rates[c][s]
                            .iter()
                            .zip(&rates[c][0])
                            .map(|(r, b)| r / b)
                            .collect();
                        median(&mut r)
                    })
                    .collect();
                let shown: Vec<String> = ratios
                    .iter()
                    .map(|r| format!("{:.0}%", 100.0 * r))
                    .collect();
                let met = ratios.iter().all(|r| *r >= target);
                println!(
                    "{name} / baseline at 1, 4, 16 lockstep clients: {} (target: at least \
                     {:.0}% each: {})",
                    shown.join(", "),
                    100.0 * target,
                    if met { "met" } else { "NOT MET" }
                );
            }
            println!();
        }
    }
}

fn main() {
    // This binary is also the baseline server and the soak's client processes.
    if let Some(socket) = std::env::var_os(echo::ECHO_VAR) {
        echo::serve(Path::new(&socket));
        return;
    }
    if let Some(socket) = std::env::var_os(soak::CLIENT_VAR) {
        soak::client_process(Path::new(&socket));
        return;
    }
    // The example plugins, built for wasm32-wasip2 by the test-plugins artifacts crate.
    let plugins = Path::new(hookhost_test_plugins::plugins::DENY_DANGEROUS_BASH)
        .parent()
        .expect("the plugins' directory");
    let plugin = |name: &str| plugins.join(format!("{name}.wasm")).display().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let _ = CWD.set(workspace(dir.path()).display().to_string());
    // The in-process server of `allocs.rs` uses the same state directories as the
    // daemons, never the user's own.
    for (name, value) in isolated_env(dir.path()) {
        // SAFETY: no other thread of this process runs yet.
        unsafe { std::env::set_var(name, value) };
    }

    println!(
        "hookhost daemon and one-shot benchmark (RUST_BACKTRACE={})",
        std::env::var("RUST_BACKTRACE").unwrap_or_else(|_| "unset".into())
    );
    println!();

    // 1. The daemon, one wasm hook: a fresh instance per event (the default), and one
    //    instance per session (`"instance": "session"`; the bench's requests spread
    //    over 64 sessions), beside the bare server.
    let only = std::env::var("HOOKHOST_BENCH_ONLY").unwrap_or_default();
    let one_hook = |instance: &str| {
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "wasm", "plugin": plugin("deny_dangerous_bash"), "instance": instance}
        ]}]}})
    };
    let three = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "wasm", "plugin": plugin("deny_dangerous_bash")},
        {"type": "wasm", "plugin": plugin("protect_paths")},
        {"type": "wasm", "plugin": plugin("redact_secrets")}
    ]}]}})
    .to_string();
    if only == "before-after" {
        let before = std::env::var_os("HOOKHOST_BENCH_BEFORE")
            .expect("HOOKHOST_BENCH_BEFORE: the older `hookhost` to compare with");
        // Each build's plugins, built against its own WIT (else these).
        let of = |var: &str, settings: String| match std::env::var(var) {
            Ok(other) => settings.replace(&plugins.display().to_string(), &other),
            Err(_) => settings,
        };
        let (before_plugins, after_plugins) = (
            "HOOKHOST_BENCH_BEFORE_PLUGINS",
            "HOOKHOST_BENCH_AFTER_PLUGINS",
        );
        before_after::report(
            dir.path(),
            Path::new(&before),
            [
                &of(before_plugins, one_hook("event").to_string()),
                &of(after_plugins, one_hook("event").to_string()),
            ],
            [
                &of(before_plugins, three.clone()),
                &of(after_plugins, three.clone()),
            ],
        );
        return;
    }
    if only == "soak" {
        let daemon = start_daemon(dir.path(), &one_hook("event"), "soak");
        client(&daemon.socket, 300, 1, 0); // warm
        soak::run(&daemon.socket, daemon.child.id(), 256);
        return;
    }
    if only.is_empty() || only == "daemon" {
        let echo = start_echo(dir.path());
        let fresh = start_daemon(dir.path(), &one_hook("event"), "event");
        let session = start_daemon(dir.path(), &one_hook("session"), "session");
        bench_daemons(&[
            ("bare JSON-lines server (baseline)", &echo),
            ("serve, fresh instance per event", &fresh),
            ("serve, one instance per session", &session),
        ]);
    }
    if only.is_empty() || only == "daemon" || only == "allocs" {
        println!("allocations per `serve` event (in process, lockstep, after a warm-up):");
        println!();
        println!("| instance | allocations | bytes allocated |");
        println!("|---|---:|---:|");
        for instance in ["event", "session"] {
            let (count, bytes) = allocs::per_event(dir.path(), &one_hook(instance), scaled(2000));
            println!("| {instance} | {count:.1} | {bytes:.0} |");
        }
        println!();
    }
    if only.is_empty() || only == "daemon" || only == "audit" {
        audit_cost::report(dir.path(), &one_hook("event"), scaled(2000), rounds());
    }
    if only.is_empty() || only == "daemon" || only == "if" {
        let plugin = plugin("deny_dangerous_bash");
        if_cost::report(dir.path(), &plugin, scaled(2000), rounds());
    }
    if only == "daemon" || only == "audit" || only == "if" || only == "allocs" {
        return;
    }

    // 2. The one-shot CLI with three plugins and a warm cache vs one shell hook.
    let stdin = input(1).to_string();
    let dispatch_with = |program: &str, args: &[&str], daemon: bool| {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .args(["PreToolUse", "--settings", &three])
            .current_dir(workspace(dir.path()))
            .envs(isolated_env(dir.path()))
            .env(
                "HOOKHOST_DISPATCH_DAEMON",
                if daemon { "auto" } else { "off" },
            );
        time_process(&mut cmd, &stdin)
    };
    let dispatch =
        |daemon: bool| dispatch_with(env!("CARGO_BIN_EXE_hookhost"), &["dispatch"], daemon);
    // The small client (`hookhost-dispatch`): the same call, the same daemon.
    let small_client = || dispatch_with(env!("CARGO_BIN_EXE_hookhost-dispatch"), &[], true);
    dispatch(false); // fills the compile cache
    start_dispatch_daemon(&dir.path().join("data"), || dispatch(true));
    small_client();
    let daemons: Vec<_> = std::fs::read_dir(dir.path().join("data/daemons"))
        .expect("the daemons' directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    assert_eq!(
        daemons.len(),
        1,
        "the small client shares hookhost's daemon"
    );
    let socket = &daemons[0];
    let runs = scaled(200);
    let mut samples: [Vec<Duration>; 6] = Default::default();
    for _ in 0..runs {
        samples[0].push(dispatch(false));
        samples[1].push(dispatch(true));
        samples[2].push(small_client());
        samples[3].push(time_process(
            Command::new("sh").args(["-c", "cat >/dev/null; echo '{}'"]),
            &stdin,
        ));
        // The floors: starting a small program (`true`, nothing read or written) and
        // the socket round trip alone (connect, the request, the whole answer).
        samples[4].push(time_exec(&mut Command::new("true")));
        samples[5].push(round_trip(socket, stdin.as_bytes()));
    }
    for s in &mut samples {
        s.sort();
    }
    let [cli, via_daemon, small, shell, exec_floor, socket_floor] = &samples;
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
    row("`sh -c 'cat >/dev/null; echo {}'` spawned directly", shell);
    row(
        "`hookhost-dispatch` (the small client) with 3 wasm plugins, warm cache, its dispatch daemon answers",
        small,
    );
    row(
        "`hookhost dispatch` with 3 wasm plugins, warm cache (its dispatch daemon answers)",
        via_daemon,
    );
    row("the same in-process (`HOOKHOST_DISPATCH_DAEMON=off`)", cli);
    row("floor: spawning `true` (no stdin, no output)", exec_floor);
    row(
        "floor: the socket round trip alone, in this process",
        socket_floor,
    );
    println!();
    let p50 = |samples: &[Duration]| percentile(samples, 0.5).as_secs_f64();
    for (how, samples) in [
        (
            "the small client `hookhost-dispatch` via the dispatch daemon",
            small,
        ),
        (
            "`hookhost dispatch` via its dispatch daemon (the default)",
            via_daemon,
        ),
        ("`hookhost dispatch` in-process", cli),
    ] {
        println!(
            "{how} with three sandboxed plugins / one shell hook (p50): {:.2}x (target for the small client: at most 0.70x)",
            p50(samples) / p50(shell)
        );
    }
    let floor = p50(exec_floor) + p50(socket_floor);
    println!(
        "the small client / its floor (spawning `true` + the socket round trip, p50 {:.3} ms): {:.2}x, {:.3} ms above it",
        floor * 1e3,
        p50(small) / floor,
        (p50(small) - floor) * 1e3
    );
}

/// How long `command` takes to start and exit, its stdin and stdout `/dev/null`.
fn time_exec(command: &mut Command) -> Duration {
    let started = Instant::now();
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("spawn");
    assert!(status.success(), "benchmark command failed");
    started.elapsed()
}

/// One request to the dispatch daemon at `socket`, as a client sends it (the lengths of
/// the input and of the trace context as u32 little-endian, the input, no trace
/// context), and its whole answer read: the socket round trip a forwarded call cannot do
/// without.
fn round_trip(socket: &Path, input: &[u8]) -> Duration {
    use std::io::Read;
    let started = Instant::now();
    let mut stream = UnixStream::connect(socket).expect("connect to the dispatch daemon");
    let mut request = (input.len() as u32).to_le_bytes().to_vec();
    request.extend_from_slice(&0u32.to_le_bytes());
    request.extend_from_slice(input);
    stream.write_all(&request).expect("send the request");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read the answer");
    assert_eq!(answer.first(), Some(&0), "the daemon answered exit 0");
    started.elapsed()
}
