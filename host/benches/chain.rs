//! Benchmark: the cost of a transform chain. Three wasm hooks that each rewrite the
//! input (the test plugin `hostile` in its `append` mode: `tool_input.command` += a
//! suffix), dispatched in process, once as a chain (`"chain": true`: one after another,
//! each given the input as rewritten before it, the rewrites composed and diffed into
//! `rewrites`) and once as a parallel group (all at once on the original input, one
//! rewrite wins), and as a plain `sequential` group for reference (one after another,
//! each on the original input). Prints a table with the ratios to the parallel group; the
//! target is a chain under 10% over the parallel group (issue 25). The modes alternate in
//! rounds so that load on a shared machine hits them alike. Each dispatch runs on the
//! calling thread (a current-thread runtime, as in the one-shot CLI), so besides the wall
//! time the table gives the thread's CPU time, which other work on the machine does not
//! inflate.
//!
//! Run with `cargo bench --workspace --bench chain` (the plugins are built by the
//! `hookhost-test-plugins` build script). `HOOKHOST_BENCH_N` scales the iteration count.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookhost::handlers::wasm::WasmRuntime;
use hookhost::outcome::{HookStatus, Outcome};
use hookhost::{Host, HostBuilder};
use serde_json::{Value, json};

const SUFFIXES: [&str; 3] = [" --one", " --two", " --three"];

fn main() {
    let scale: f64 = std::env::var("HOOKHOST_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    // Many short rounds, so that a burst of load elsewhere hits every mode alike.
    let rounds = 60;
    let per_round = ((50.0 * scale) as usize).max(5);
    let plugin = hookhost_test_plugins::plugins::HOSTILE;
    let project = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    let runtime = Arc::new(WasmRuntime::new(Some(cache.path().to_path_buf())));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let input = input_1kb();

    println!("hookhost transform chain benchmark");
    println!(
        "  input: PreToolUse Bash, {} bytes of JSON; three wasm hooks ({plugin}), each \
         appending to tool_input.command",
        input.to_string().len()
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  machine: {} cores, load average {} (other work on the machine inflates wall times)",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split(' ').take(3).collect::<Vec<_>>().join(" ")
    );
    println!();

    let chain = host(project.path(), &runtime, plugin, json!({"chain": true}));
    let parallel = host(project.path(), &runtime, plugin, json!({}));
    let sequential = host(
        project.path(),
        &runtime,
        plugin,
        json!({"sequential": true}),
    );
    // Warm up (loads and compiles the plugin) and check what each mode answers.
    for _ in 0..3 {
        let out = dispatch(&rt, &chain, &input);
        let command = out.updated_input.as_ref().expect("a rewrite")["command"]
            .as_str()
            .expect("a command")
            .to_string();
        assert!(command.ends_with(&SUFFIXES.concat()), "{command}");
        assert_eq!(out.rewrites.len(), 3, "{out:?}");
        let out = dispatch(&rt, &parallel, &input);
        let command = out.updated_input.as_ref().expect("a rewrite")["command"]
            .as_str()
            .expect("a command")
            .to_string();
        assert!(command.ends_with(SUFFIXES[0]), "{command}");
        assert_eq!(out.rewrites.len(), 1, "{out:?}");
    }

    let mut chained = Samples::default();
    let mut side_by_side = Samples::default();
    let mut one_by_one = Samples::default();
    for _ in 0..rounds {
        times(&rt, &chain, &input, per_round, &mut chained);
        times(&rt, &parallel, &input, per_round, &mut side_by_side);
        times(&rt, &sequential, &input, per_round, &mut one_by_one);
    }
    for samples in [&mut chained, &mut side_by_side, &mut one_by_one] {
        samples.wall.sort();
        samples.cpu.sort();
    }

    println!(
        "{:<42} {:>6} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9}",
        "in-process dispatch, three wasm hooks",
        "n",
        "wall p50",
        "wall p90",
        "wall p99",
        "vs par.",
        "CPU p50",
        "vs par."
    );
    let p50 = |samples: &[Duration]| percentile(samples, 0.5).as_secs_f64();
    let (wall_base, cpu_base) = (p50(&side_by_side.wall), p50(&side_by_side.cpu));
    for (name, samples) in [
        ("parallel group (one rewrite wins)", &side_by_side),
        ("sequential group (original input each)", &one_by_one),
        ("chain (three rewrites composed)", &chained),
    ] {
        println!(
            "{:<42} {:>6} {:>10} {:>10} {:>10} {:>8.2}× {:>10} {:>8.2}×",
            name,
            samples.wall.len(),
            fmt(percentile(&samples.wall, 0.5)),
            fmt(percentile(&samples.wall, 0.9)),
            fmt(percentile(&samples.wall, 0.99)),
            p50(&samples.wall) / wall_base,
            fmt(percentile(&samples.cpu, 0.5)),
            p50(&samples.cpu) / cpu_base,
        );
    }
    let wall = p50(&chained.wall) / wall_base;
    let cpu = p50(&chained.cpu) / cpu_base;
    println!();
    println!(
        "chain over parallel at p50: {:+.1}% wall, {:+.1}% CPU (target: under +10%: {})",
        (wall - 1.0) * 100.0,
        (cpu - 1.0) * 100.0,
        if wall.min(cpu) < 1.10 {
            "met"
        } else {
            "NOT met"
        }
    );
    println!(
        "chain over sequential at p50: {:+.1}% CPU (the hand-over: input copy and \
         re-serialisation per step, the patches of `rewrites`)",
        (p50(&chained.cpu) / p50(&one_by_one.cpu) - 1.0) * 100.0
    );
}

/// A host with the three appending hooks in one group with the group `options`.
fn host(project: &Path, runtime: &Arc<WasmRuntime>, plugin: &str, options: Value) -> Host {
    let hooks: Vec<Value> = SUFFIXES
        .iter()
        .enumerate()
        .map(|(i, suffix)| {
            json!({"type": "wasm", "id": format!("append-{i}"), "plugin": plugin,
                   "config": {"mode": "append", "arg": suffix}})
        })
        .collect();
    let mut group = options;
    group["matcher"] = json!("Bash");
    group["hooks"] = json!(hooks);
    let settings = json!({"hooks": {"PreToolUse": [group]}});
    let host = HostBuilder::new(project)
        .settings(settings.to_string())
        .wasm_runner(runtime.clone())
        .build();
    assert!(
        host.policy().errors.is_empty(),
        "{:?}",
        host.policy().errors
    );
    host
}

fn dispatch(rt: &tokio::runtime::Runtime, host: &Host, input: &Value) -> Outcome {
    let out = rt
        .block_on(host.dispatch("PreToolUse", input.clone()))
        .expect("dispatch");
    assert!(
        out.hooks.iter().all(|h| h.status == HookStatus::Ok),
        "{out:?}"
    );
    out
}

/// Wall and calling-thread CPU times of dispatches.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

fn times(rt: &tokio::runtime::Runtime, host: &Host, input: &Value, n: usize, into: &mut Samples) {
    for _ in 0..n {
        let input = input.clone();
        let (t, c) = (Instant::now(), thread_cpu_time());
        let outcome = rt
            .block_on(host.dispatch("PreToolUse", input))
            .expect("dispatch");
        into.wall.push(t.elapsed());
        into.cpu.push(thread_cpu_time().saturating_sub(c));
        std::hint::black_box(outcome);
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

/// A realistic PreToolUse input of about 1 KB (as in the `wasm` bench).
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
