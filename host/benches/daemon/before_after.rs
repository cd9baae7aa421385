//! Before and after, in one run (`HOOKHOST_BENCH_ONLY=before-after`, issue 23): this
//! build's `hookhost` beside an older one (`HOOKHOST_BENCH_BEFORE=/path/to/hookhost`, a
//! release build of the commit before the change), on the same machine, interleaved
//! round by round so that both meet the same noise:
//!
//! - the daemon: `hookhost serve` with one wasm hook (`deny-dangerous-bash`, a fresh
//!   instance per event, audit log on), round-trip latency with one lockstep client and
//!   events/s with four;
//! - the wasm path in a one-shot process: `hookhost dispatch` with three wasm plugins,
//!   warm compile cache, in-process (`HOOKHOST_DISPATCH_DAEMON=off`): the sandbox's
//!   instantiate, run and merge, with the process's start.
//!
//! Both binaries get the same settings, input and isolated state directories (one set
//! each). Target: no p50 more than 5% slower after than before.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::common::{percentile, time_process};
use super::{Daemon, client, input, isolated_env, median, rounds, scaled, throughput, us};

/// The most a p50 may grow from before to after.
const TARGET: f64 = 1.05;

/// One binary under test, with its own state directories.
struct Side {
    program: PathBuf,
    dir: PathBuf,
}

fn serve(side: &Side, settings: &Value) -> Daemon {
    let socket = side.dir.join("serve.sock");
    let mut command = Command::new(&side.program);
    command
        .args(["serve", "--socket", socket.to_str().expect("UTF-8 path")])
        .args(["--settings", &settings.to_string()])
        .current_dir(super::workspace(&side.dir))
        .envs(isolated_env(&side.dir));
    super::spawn_server(command, socket)
}

fn dispatch(side: &Side, settings: &str, stdin: &str) -> Duration {
    let mut command = Command::new(&side.program);
    command
        .args(["dispatch", "PreToolUse", "--settings", settings])
        .current_dir(super::workspace(&side.dir))
        .envs(isolated_env(&side.dir))
        .env("HOOKHOST_DISPATCH_DAEMON", "off");
    time_process(&mut command, stdin)
}

/// Runs the comparison; `before` is the older `hookhost`, `one_hook` and `three` the
/// settings of the daemon's and the one-shot's rows.
pub fn report(dir: &Path, before: &Path, one_hook: &Value, three: &str) {
    let sides = [
        Side {
            program: before.to_path_buf(),
            dir: dir.join("before"),
        },
        Side {
            program: PathBuf::from(env!("CARGO_BIN_EXE_hookhost")),
            dir: dir.join("after"),
        },
    ];
    for side in &sides {
        std::fs::create_dir_all(&side.dir).expect("the state directory");
    }
    println!(
        "before and after (issue 23): before = {}, after = this build",
        before.display()
    );
    println!();
    let daemons: Vec<Daemon> = sides.iter().map(|s| serve(s, one_hook)).collect();
    let stdin = input(1).to_string();
    for (side, daemon) in sides.iter().zip(&daemons) {
        client(&daemon.socket, 300, 1, 0); // warm: compile, caches, connections
        dispatch(side, three, &stdin); // fills the compile cache
    }
    // [side] samples over the interleaved rounds.
    let mut latency: [Vec<Duration>; 2] = Default::default();
    let mut rates: [Vec<f64>; 2] = Default::default();
    let mut oneshot: [Vec<Duration>; 2] = Default::default();
    let rounds = rounds().max(5);
    for _ in 0..rounds {
        for (s, daemon) in daemons.iter().enumerate() {
            latency[s].extend(client(&daemon.socket, scaled(1000), 1, 0));
            rates[s].push(throughput(&daemon.socket, 4, scaled(8000), 1));
        }
        for _ in 0..scaled(40) {
            for (s, side) in sides.iter().enumerate() {
                oneshot[s].push(dispatch(side, three, &stdin));
            }
        }
    }
    for samples in latency.iter_mut().chain(oneshot.iter_mut()) {
        samples.sort();
    }
    let p50 = |samples: &[Duration]| us(percentile(samples, 0.5));
    let rows = [
        (
            "serve, 1 lockstep client: round trip p50 µs",
            p50(&latency[0]),
            p50(&latency[1]),
        ),
        (
            "serve, 4 lockstep clients: µs per event (1 / events/s)",
            1e6 / median(&mut rates[0].clone()),
            1e6 / median(&mut rates[1].clone()),
        ),
        (
            "one-shot `hookhost dispatch`, 3 wasm plugins, in-process: p50 µs",
            p50(&oneshot[0]),
            p50(&oneshot[1]),
        ),
    ];
    println!("| what | before | after | after / before |");
    println!("|---|---:|---:|---:|");
    let mut met = true;
    for (what, before, after) in rows {
        let ratio = after / before;
        met &= ratio <= TARGET;
        println!("| {what} | {before:.1} | {after:.1} | {ratio:.3}x |");
    }
    println!();
    println!(
        "after over before, {rounds} interleaved rounds (target: no p50 more than 5% slower: {})",
        if met { "met" } else { "NOT met" }
    );
    println!();
}
