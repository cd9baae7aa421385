//! Benchmark: one PreToolUse hook with the same logic ("deny `rm -rf /`") as a wasm
//! plugin (fresh store per event), as an `sh` command hook and as a `python3` command
//! hook, dispatched in process through the same host, in one run; the sandbox call alone
//! with a fresh store and with a warm session instance, beside Extism's call of a reused
//! plugin instance running the same logic on the same input (the peer, issue 27); and
//! compiling a plugin vs loading it from the compile cache. Prints tables with ratios.
//!
//! Run with `cargo bench -p hookhost --bench wasm` (builds `plugins/deny-dangerous-bash`
//! for wasm32-wasip2 first). `HOOKHOST_BENCH_N` scales the iteration counts;
//! `HOOKHOST_BENCH_ONLY=wasm` runs only the wasm rows, `=warm` only the warm session
//! instance's sandbox calls (for profiling).
//!
//! The Extism peer is a separate program with its own workspace
//! (`benches/extism-peer/`: Extism 1.30 brings its own wasmtime), built by
//! `benches/extism-peer/run.sh`, which then runs this bench. When its binary and plugin
//! are there (under `benches/extism-peer/target`, or `HOOKHOST_EXTISM_PEER_TARGET`), this
//! bench starts it as a child process and times it in rounds interleaved with the
//! sandbox rows; without them the peer rows are left out, saying so.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookhost::config::schema::InstanceMode;
use hookhost::event::Invocation;
use hookhost::handlers::wasm::{
    CompileCache, PluginCall, WasmRuntime, engine_config, instance_pool_available,
};
use hookhost::outcome::{Decision, HookStatus};
use hookhost::{EventCatalogue, HostBuilder};
use serde_json::{Value, json};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let plugin = build_plugin(&root);
    let scale: f64 = std::env::var("HOOKHOST_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let n = |base: usize| ((base as f64 * scale) as usize).max(5);
    let input = input_1kb();
    let input_len = input.to_string().len();
    let project = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    let runtime = Arc::new(WasmRuntime::new(Some(cache.path().to_path_buf())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    println!("hookhost wasm benchmark");
    println!(
        "  input: PreToolUse Bash, {input_len} bytes of JSON; RUST_BACKTRACE={}",
        std::env::var("RUST_BACKTRACE").unwrap_or_else(|_| "unset".into())
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  machine: {} cores, load average {} (other work on the machine inflates wall times)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "  instances: {}",
        if instance_pool_available() {
            "from the pool (the kernel has PAGEMAP_SCAN)"
        } else {
            "allocated one by one (no PAGEMAP_SCAN)"
        }
    );
    println!(
        "  plugin: {} ({} bytes)",
        plugin.display(),
        std::fs::metadata(&plugin).map(|m| m.len()).unwrap_or(0)
    );
    println!();

    // The same logic three ways.
    let wasm_hook = json!({"type": "wasm", "plugin": plugin.to_str().unwrap()});
    let sh_hook = json!({"type": "command", "command": SH_HOOK});
    let python = if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let py_hook = json!({"type": "command", "command": python, "args": ["-c", PY_HOOK]});

    if only("warm") {
        sandbox_rows(&root, &runtime, &plugin, project.path(), &input, n(5000));
        return;
    }
    let mut rows = Vec::new();
    let wasm = dispatch_times(&rt, project.path(), &runtime, &wasm_hook, &input, n(5000));
    rows.push((
        "wasm hook, fresh store (dispatch)".to_string(),
        wasm.clone(),
    ));
    let sandbox = sandbox_rows(&root, &runtime, &plugin, project.path(), &input, n(5000));
    rows.push((
        "wasm hook, fresh store (sandbox call only)".to_string(),
        sandbox,
    ));
    if only("wasm") {
        // For profiling the wasm path alone.
        for (name, times) in &rows {
            println!("{name}: p50 {}", fmt(percentile(times, 0.5)));
        }
        return;
    }
    let sh = dispatch_times(&rt, project.path(), &runtime, &sh_hook, &input, n(300));
    rows.push(("command hook: sh -c".to_string(), sh.clone()));
    let py = dispatch_times(&rt, project.path(), &runtime, &py_hook, &input, n(40));
    rows.push((format!("command hook: {python} -c"), py.clone()));

    println!(
        "{:<44} {:>7} {:>10} {:>10} {:>10} {:>12}",
        "in-process dispatch of one PreToolUse hook", "n", "p50", "p90", "p99", "p50 vs wasm"
    );
    let wasm_p50 = percentile(&wasm, 0.5);
    for (name, times) in &rows {
        let p50 = percentile(times, 0.5);
        println!(
            "{:<44} {:>7} {:>10} {:>10} {:>10} {:>11.1}×",
            name,
            times.len(),
            fmt(p50),
            fmt(percentile(times, 0.9)),
            fmt(percentile(times, 0.99)),
            p50.as_secs_f64() / wasm_p50.as_secs_f64()
        );
    }
    println!();
    let sh_ratio = percentile(&sh, 0.5).as_secs_f64() / wasm_p50.as_secs_f64();
    println!(
        "targets: wasm p50 ≤ 50 µs: {} ({}); wasm ≥ 40× faster than sh: {} ({sh_ratio:.0}×)",
        if wasm_p50 <= Duration::from_micros(50) {
            "met"
        } else {
            "NOT met"
        },
        fmt(wasm_p50),
        if sh_ratio >= 40.0 { "met" } else { "NOT met" },
    );
    println!();

    // Compile vs cached load, each as the host does it: the plugin's digest (memoized by
    // file stamp after the first time), then the compile cache.
    let engine = wasmtime::Engine::new(&engine_config()).expect("engine");
    let read = || std::fs::read(&plugin).map_err(|e| e.to_string());
    let load_once = |cache: &CompileCache| {
        let file = std::fs::File::open(&plugin).expect("plugin");
        let meta = file.metadata().expect("plugin");
        let (digest, _) = cache
            .plugin_digest(&plugin, &file, &meta, u64::MAX)
            .expect("digest");
        let (_, status) = cache.load(&engine, read, &digest, "bench").expect("load");
        status
    };
    let mut compile = Vec::new();
    let mut load = Vec::new();
    for _ in 0..n(5) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = CompileCache::new(Some(dir.path().to_path_buf()), &engine);
        let t = Instant::now();
        load_once(&cache);
        compile.push(t.elapsed());
        for _ in 0..20 {
            let t = Instant::now();
            let status = load_once(&cache);
            load.push(t.elapsed());
            assert_eq!(status, hookhost::handlers::wasm::CacheStatus::Hit);
        }
    }
    compile.sort();
    load.sort();
    println!(
        "{:<44} {:>7} {:>10} {:>10}",
        "plugin load (deny-dangerous-bash)", "n", "p50", "p90"
    );
    println!(
        "{:<44} {:>7} {:>10} {:>10}",
        "compile (precompile_component + store)",
        compile.len(),
        fmt(percentile(&compile, 0.5)),
        fmt(percentile(&compile, 0.9))
    );
    println!(
        "{:<44} {:>7} {:>10} {:>10}",
        "cached (memoized digest + deserialize_file)",
        load.len(),
        fmt(percentile(&load, 0.5)),
        fmt(percentile(&load, 0.9))
    );
    println!(
        "cached load is {:.0}× faster than compiling",
        percentile(&compile, 0.5).as_secs_f64() / percentile(&load, 0.5).as_secs_f64()
    );
}

const SH_HOOK: &str = r#"input=$(cat); case "$input" in *'"rm -rf /'*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"rm -rf /"}}';; *) echo '{}';; esac"#;

const PY_HOOK: &str = r#"import sys, json
d = json.load(sys.stdin)
c = d.get("tool_input", {}).get("command", "")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "rm -rf /"}}) if "rm -rf /" in c else "{}")"#;

/// A realistic PreToolUse input of about 1 KB that no hook denies.
fn input_1kb() -> Value {
    let padding = "x".repeat(640);
    json!({
        "session_id": "bench-2b8f6a1e-5c3d-4e7f-9a0b-1c2d3e4f5a6b",
        "transcript_path": "/home/user/.claude/projects/-home-user-project/2b8f6a1e.jsonl",
        "cwd": "/home/user/project",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": format!("cargo test --workspace -- --nocapture # {padding}"), "description": "Run the test suite"},
        "tool_use_id": "toolu_01ABCDEFGHIJKLMNOPQRSTUV"
    })
}

fn dispatch_times(
    rt: &tokio::runtime::Runtime,
    project: &Path,
    runtime: &Arc<WasmRuntime>,
    hook: &Value,
    input: &Value,
    n: usize,
) -> Vec<Duration> {
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}});
    let host = HostBuilder::new(project)
        .settings(settings.to_string())
        .wasm_runner(runtime.clone())
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    // Warm up (loads the plugin) and check that the hook answers as expected.
    for _ in 0..3 {
        let outcome = rt
            .block_on(host.dispatch("PreToolUse", input.clone()))
            .expect("dispatch");
        assert_eq!(outcome.decision, Decision::None, "{outcome:?}");
        assert_eq!(outcome.hooks[0].status, HookStatus::Ok, "{outcome:?}");
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let input = input.clone();
        let t = Instant::now();
        let outcome = rt
            .block_on(host.dispatch("PreToolUse", input))
            .expect("dispatch");
        times.push(t.elapsed());
        std::hint::black_box(outcome);
    }
    times.sort();
    times
}

/// The sandbox call alone (`WasmRuntime::call`, as `hookhost plugin test` makes it): with
/// a fresh store per call and with the hook's session instance, and the Extism peer when
/// it is built, timed in interleaved rounds. Prints their table (wall and on-CPU time of
/// the calling thread, and the ratios to Extism); returns the fresh-store wall times.
fn sandbox_rows(
    root: &Path,
    runtime: &WasmRuntime,
    plugin: &Path,
    project: &Path,
    input: &Value,
    n: usize,
) -> Vec<Duration> {
    let fresh = PluginCall {
        label: "bench".into(),
        ..PluginCall::new(plugin)
    };
    let warm = PluginCall {
        label: "bench-session".into(),
        instance: InstanceMode::Session,
        ..PluginCall::new(plugin)
    };
    let spec = EventCatalogue::default()
        .get("PreToolUse")
        .expect("event")
        .clone();
    let invocation = Invocation::new(spec, input.clone(), project).expect("invocation");
    // The call runs on this thread, as it does in the one-shot CLI.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // Warm up both (the session instance is made here) and check the answer.
    for call in [&fresh, &warm] {
        for _ in 0..3 {
            let run = rt.block_on(runtime.call(call, &invocation));
            assert_eq!(run.output_json, Some(json!({})), "{run:?}");
        }
    }
    if only("warm") {
        let mut warm_s = Samples::default();
        sandbox_batch(&rt, runtime, &warm, &invocation, n, &mut warm_s);
        warm_s.sort();
        println!(
            "warm session instance: p50 {}",
            fmt(percentile(&warm_s.wall, 0.5))
        );
        return warm_s.wall;
    }
    let mut peer = Peer::start(root, &input.to_string());
    let rounds = 40;
    let per_round = (n / rounds).max(5);
    let (mut fresh_s, mut warm_s, mut peer_s) = (Samples::default(), Samples::default(), None);
    for _ in 0..rounds {
        sandbox_batch(&rt, runtime, &fresh, &invocation, per_round, &mut fresh_s);
        sandbox_batch(&rt, runtime, &warm, &invocation, per_round, &mut warm_s);
        if let Some(peer) = &mut peer {
            peer.batch(per_round, peer_s.get_or_insert_with(Samples::default));
        }
    }
    if let Some(s) = peer_s.as_mut() {
        s.sort();
    }
    let peer_row = peer_s.as_mut();
    fresh_s.sort();
    warm_s.sort();
    println!(
        "{:<48} {:>6} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9}",
        "sandbox call only, interleaved rounds",
        "n",
        "wall p50",
        "wall p90",
        "wall p99",
        "vs Extism",
        "CPU p50",
        "vs Extism"
    );
    let p50 = |d: &[Duration]| percentile(d, 0.5).as_secs_f64();
    let base = peer_row.as_ref().map(|s| (p50(&s.wall), p50(&s.cpu)));
    let mut table: Vec<(&str, &Samples)> = vec![
        ("hookhost, fresh store per call", &fresh_s),
        ("hookhost, warm session instance", &warm_s),
    ];
    if let Some(s) = &peer_row {
        table.push(("Extism 1.30, reused plugin instance (peer)", s));
    }
    for (name, samples) in &table {
        let ratio =
            |x: f64, b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.2}×", x / b));
        println!(
            "{:<48} {:>6} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9}",
            name,
            samples.wall.len(),
            fmt(percentile(&samples.wall, 0.5)),
            fmt(percentile(&samples.wall, 0.9)),
            fmt(percentile(&samples.wall, 0.99)),
            ratio(p50(&samples.wall), base.map(|b| b.0)),
            fmt(percentile(&samples.cpu, 0.5)),
            ratio(p50(&samples.cpu), base.map(|b| b.1)),
        );
    }
    match base {
        Some((wall, cpu)) => {
            let verdict = |r: f64, t: f64| if r <= t { "met" } else { "NOT met" };
            let (w, c) = (p50(&warm_s.wall) / wall, p50(&warm_s.cpu) / cpu);
            let (fw, fc) = (p50(&fresh_s.wall) / wall, p50(&fresh_s.cpu) / cpu);
            println!(
                "targets (issue 27, p50 vs Extism's reused instance): warm ≤ 0.5×: {} \
                 (wall {w:.2}×, CPU {c:.2}×); fresh store ≤ 1.0×: {} (wall {fw:.2}×, CPU {fc:.2}×)",
                verdict(w.min(c), 0.5),
                verdict(fw.min(fc), 1.0),
            );
        }
        None => println!(
            "(no Extism peer: build it with benches/extism-peer/run.sh, which runs this bench)"
        ),
    }
    println!();
    fresh_s.wall
}

/// Whether `HOOKHOST_BENCH_ONLY` asks for `mode` alone (for profiling).
fn only(mode: &str) -> bool {
    std::env::var("HOOKHOST_BENCH_ONLY").is_ok_and(|only| only == mode)
}

/// Wall and calling-thread CPU times.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Samples {
    fn sort(&mut self) {
        self.wall.sort();
        self.cpu.sort();
    }
}

fn sandbox_batch(
    rt: &tokio::runtime::Runtime,
    runtime: &WasmRuntime,
    call: &PluginCall,
    invocation: &Invocation,
    n: usize,
    into: &mut Samples,
) {
    for _ in 0..n {
        let (t, c) = (Instant::now(), thread_cpu_time());
        let run = rt.block_on(runtime.call(call, invocation));
        into.wall.push(t.elapsed());
        into.cpu.push(thread_cpu_time().saturating_sub(c));
        std::hint::black_box(run);
    }
}

/// The Extism peer (`benches/extism-peer`), running as a child process: the same deny
/// logic as an Extism plugin, one reused instance, timed by itself in batches.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Peer {
    /// Starts the peer on `input` if it has been built, and checks that it answers as the
    /// hookhost plugin does (no opinion).
    fn start(root: &Path, input: &str) -> Option<Peer> {
        let target = std::env::var_os("HOOKHOST_EXTISM_PEER_TARGET")
            .map_or_else(|| root.join("benches/extism-peer/target"), PathBuf::from);
        let binary = target.join("release/extism-peer");
        let plugin = target.join("wasm32-unknown-unknown/release/extism_deny_dangerous_bash.wasm");
        if !binary.is_file() || !plugin.is_file() {
            return None;
        }
        let mut child = Command::new(&binary)
            .arg(&plugin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the Extism peer starts");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        writeln!(stdin, "{input}").expect("the peer reads");
        let mut answer = String::new();
        stdout.read_line(&mut answer).expect("the peer answers");
        assert_eq!(
            answer.trim(),
            "{}",
            "the Extism plugin must not deny this input"
        );
        println!(
            "  peer: {} on {} ({} bytes)",
            binary.display(),
            plugin.display(),
            std::fs::metadata(&plugin).map(|m| m.len()).unwrap_or(0)
        );
        Some(Peer {
            child,
            stdin,
            stdout,
        })
    }

    fn batch(&mut self, n: usize, into: &mut Samples) {
        writeln!(self.stdin, "{n}").expect("the peer reads");
        for times in [&mut into.wall, &mut into.cpu] {
            let mut line = String::new();
            self.stdout.read_line(&mut line).expect("the peer answers");
            times.extend(
                line.split_whitespace()
                    .map(|t| Duration::from_nanos(t.parse().expect("nanoseconds"))),
            );
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.2} ms", us / 1000.0)
    }
}

/// Builds `plugins/deny-dangerous-bash` for wasm32-wasip2 into `target/bench-plugins`.
fn build_plugin(root: &Path) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("bench-plugins");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target=wasm32-wasip2",
            "-p",
            "deny-dangerous-bash",
            "--manifest-path",
        ])
        .arg(root.join("plugins/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .status()
        .expect("cargo");
    assert!(
        status.success(),
        "building the plugin failed (is wasm32-wasip2 installed?)"
    );
    target.join("wasm32-wasip2/release/deny_dangerous_bash.wasm")
}
