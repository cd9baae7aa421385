//! What `hookhost dispatch` adds on top of the hook it runs.
//!
//! Side by side, interleaved to share the machine's noise: (a) spawning a `sh` command
//! hook directly, the way an agent runs a hook, (b) spawning `hookhost dispatch`
//! configured with that same single `sh` hook, in-process
//! (`HOOKHOST_DISPATCH_DAEMON=off`), and (c) the same `hookhost dispatch` answered by
//! its warm dispatch daemon (the default). The median difference to (a) is hookhost's
//! own cost (its process start, config loading, dispatch and merge). Target: under 1 ms.
//!
//! The agent adapters (`--format gemini` and the others) beside the Claude-format path:
//! (d) `hookhost dispatch --format claude` and (e) `--format gemini` with Gemini CLI's
//! input of the same call, both in-process; and, measured in-process, one adapter's
//! translation in and out (`hookhost::agents::to_canonical` + `render`) beside Claude
//! Code's rendering (`hookhost::outcome::to_claude`), as a share of the one-shot
//! dispatch. Target: the adapter under 2% of a one-shot dispatch.
//!
//! Run with `cargo bench -p hookhost --bench dispatch_overhead`; `HOOKHOST_BENCH_RUNS`
//! sets the number of runs (default 300).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{percentile, start_dispatch_daemon, time_process};

const HOOK: &str = "cat >/dev/null; echo '{}'";

fn input() -> String {
    serde_json::json!({
        "session_id": "bench",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "cargo test --workspace", "description": "run the tests"},
        "tool_use_id": "toolu_bench",
    })
    .to_string()
}

/// The same call as Gemini CLI 0.61 sends it.
fn gemini_input() -> String {
    serde_json::json!({
        "session_id": "bench",
        "transcript_path": "/tmp/t.json",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-01T00:00:00Z",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "cargo test --workspace", "description": "run the tests"},
    })
    .to_string()
}

/// The mean time of one call of `f`, over `n` calls.
fn per_call(n: u32, mut f: impl FnMut()) -> Duration {
    let started = std::time::Instant::now();
    for _ in 0..n {
        f();
    }
    started.elapsed() / n
}

/// The adapter's translation in and out, and Claude Code's rendering, per event.
fn translation_costs() -> (Duration, Duration) {
    use hookhost::agents::{Agent, render, to_canonical};
    let input: serde_json::Value = serde_json::from_str(&gemini_input()).unwrap();
    let catalogue = hookhost::EventCatalogue::default();
    let spec = catalogue.get("PreToolUse").unwrap().clone();
    let mut outcome = hookhost::Outcome::empty("PreToolUse");
    outcome.decision = hookhost::outcome::Decision::Deny;
    outcome.reason = Some("writes to a raw disk device".into());
    let n = 20_000;
    let adapter = per_call(n, || {
        let canonical = to_canonical(Agent::Gemini, None, input.clone()).unwrap();
        let answer = render(Agent::Gemini, canonical.event, &canonical.call, &outcome);
        std::hint::black_box(answer);
    });
    let claude = per_call(n, || {
        let parsed = input.clone();
        let answer = hookhost::outcome::to_claude(&spec, &outcome);
        std::hint::black_box((parsed, answer));
    });
    (adapter, claude)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let runs: usize = std::env::var("HOOKHOST_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": HOOK}]}]}});
    let input = input();
    // The project is beside the state directories, not above them: hookhost refuses a
    // `HOOKHOST_*` directory inside the workspace (a repository could set it).
    let project = dir.path().join("project");
    std::fs::create_dir(&project).expect("the project directory");
    // `hookhost dispatch ARGS --settings …` in-process, with the bench's own state.
    let dispatch = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookhost"));
        cmd.arg("dispatch")
            .args(args)
            .args(["--settings", &settings.to_string()])
            .current_dir(&project)
            .env("HOOKHOST_HOME", dir.path().join("home"))
            .env("HOOKHOST_MANAGED_DIR", dir.path().join("managed"))
            .env("HOOKHOST_DATA_DIR", dir.path().join("data"))
            .env("HOOKHOST_DISPATCH_DAEMON", "off");
        cmd
    };
    let hookhost = || dispatch(&["PreToolUse"]);
    let via_daemon = || {
        let mut cmd = hookhost();
        cmd.env("HOOKHOST_DISPATCH_DAEMON", "auto");
        time_process(&mut cmd, &input)
    };
    start_dispatch_daemon(&dir.path().join("data"), via_daemon);
    let gemini_input = gemini_input();
    // The event comes from the input (`hook_event_name`): Claude Code's `PreToolUse`,
    // Gemini CLI's `BeforeTool`.
    let formatted = |format: &str| dispatch(&["--format", format]);
    let mut direct = Vec::with_capacity(runs);
    let mut hosted = Vec::with_capacity(runs);
    let mut daemon = Vec::with_capacity(runs);
    let mut claude = Vec::with_capacity(runs);
    let mut gemini = Vec::with_capacity(runs);
    for _ in 0..runs {
        claude.push(time_process(&mut formatted("claude"), &input));
        gemini.push(time_process(&mut formatted("gemini"), &gemini_input));
        direct.push(time_process(
            Command::new("sh").args(["-c", HOOK]).current_dir(&project),
            &input,
        ));
        hosted.push(time_process(&mut hookhost(), &input));
        daemon.push(via_daemon());
    }
    direct.sort();
    hosted.sort();
    daemon.sort();
    claude.sort();
    gemini.sort();
    let d50 = percentile(&direct, 0.5);
    println!(
        "hookhost dispatch overhead, {runs} interleaved runs each (RUST_BACKTRACE={})",
        std::env::var("RUST_BACKTRACE").unwrap_or_default()
    );
    println!();
    println!("| what | p50 ms | p90 ms | p99 ms |");
    println!("|---|---:|---:|---:|");
    for (name, samples) in [
        ("sh hook spawned directly", &direct),
        ("hookhost dispatch + the same sh hook, in-process", &hosted),
        (
            "the same, answered by its dispatch daemon (the default)",
            &daemon,
        ),
        ("--format claude, in-process", &claude),
        ("--format gemini (Gemini CLI's input), in-process", &gemini),
    ] {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 0.9)),
            ms(percentile(samples, 0.99))
        );
    }
    println!();
    for (name, samples) in [
        ("in-process", &hosted),
        ("via its dispatch daemon", &daemon),
    ] {
        let p50 = percentile(samples, 0.5);
        println!(
            "median overhead of hookhost dispatch {name}: {:.3} ms ({:.2}x the direct spawn); target < 1 ms",
            ms(p50.saturating_sub(d50)),
            p50.as_secs_f64() / d50.as_secs_f64()
        );
    }
    let (adapter, rendering) = translation_costs();
    let one_shot = percentile(&claude, 0.5);
    println!();
    println!(
        "adapter (Gemini in and out) per event: {:.2} µs; Claude Code's rendering: {:.2} µs; \
         the adapter is {:.3}% of a one-shot dispatch ({:.3} ms); target < 2%",
        adapter.as_secs_f64() * 1e6,
        rendering.as_secs_f64() * 1e6,
        100.0 * adapter.as_secs_f64() / one_shot.as_secs_f64(),
        ms(one_shot)
    );
}
