//! Benchmark: the cost of a transform chain. Three wasm hooks that each rewrite the
//! input (the test plugin `hostile` in its `append` mode: `tool_input.command` += a
//! suffix), dispatched in process, once as a chain (`"chain": true`: one after another,
//! each given the input as rewritten before it, the rewrites composed and diffed into
//! `rewrites`) and once as a parallel group (all at once on the original input, one
//! rewrite wins). Prints a table with the ratio chain / parallel; the target is a chain
//! under 10% over the parallel group (issue 25). Both modes alternate in rounds so that
//! load on a shared machine hits them alike.
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
    let rounds = 10;
    let per_round = ((300.0 * scale) as usize).max(5);
    let plugin = hookhost_test_plugins::plugins::HOSTILE;
    let project = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    let runtime = Arc::new(WasmRuntime::new(Some(cache.path().to_path_buf())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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

    let chain = host(project.path(), &runtime, plugin, true);
    let parallel = host(project.path(), &runtime, plugin, false);
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

    let mut chained = Vec::new();
    let mut side_by_side = Vec::new();
    for _ in 0..rounds {
        chained.extend(times(&rt, &chain, &input, per_round));
        side_by_side.extend(times(&rt, &parallel, &input, per_round));
    }
    chained.sort();
    side_by_side.sort();

    println!(
        "{:<44} {:>7} {:>10} {:>10} {:>10} {:>14}",
        "in-process dispatch, three wasm hooks", "n", "p50", "p90", "p99", "p50 vs parallel"
    );
    let base = percentile(&side_by_side, 0.5).as_secs_f64();
    for (name, samples) in [
        ("parallel group (one rewrite wins)", &side_by_side),
        ("chain (three rewrites composed)", &chained),
    ] {
        println!(
            "{:<44} {:>7} {:>10} {:>10} {:>10} {:>13.2}×",
            name,
            samples.len(),
            fmt(percentile(samples, 0.5)),
            fmt(percentile(samples, 0.9)),
            fmt(percentile(samples, 0.99)),
            percentile(samples, 0.5).as_secs_f64() / base
        );
    }
    let ratio = percentile(&chained, 0.5).as_secs_f64() / base;
    println!();
    println!(
        "chain over parallel: {:+.1}% at p50 (target: under +10%: {})",
        (ratio - 1.0) * 100.0,
        if ratio < 1.10 { "met" } else { "NOT met" }
    );
    println!(
        "(the parallel group's wasm calls share the dispatching thread, one fiber each, so \
         on this runtime they take turns much as the chain's do; the difference is mostly \
         the chain's per-step input copy, re-serialisation and patch)"
    );
}

/// A host with the three appending hooks in one group, chained or in parallel.
fn host(project: &Path, runtime: &Arc<WasmRuntime>, plugin: &str, chain: bool) -> Host {
    let hooks: Vec<Value> = SUFFIXES
        .iter()
        .enumerate()
        .map(|(i, suffix)| {
            json!({"type": "wasm", "id": format!("append-{i}"), "plugin": plugin,
                   "config": {"mode": "append", "arg": suffix}})
        })
        .collect();
    let settings =
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "chain": chain, "hooks": hooks}]}});
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

fn times(rt: &tokio::runtime::Runtime, host: &Host, input: &Value, n: usize) -> Vec<Duration> {
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
    times
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
