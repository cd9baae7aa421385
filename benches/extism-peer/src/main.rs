//! The Extism side of the `wasm` benchmark's peer row (issue 27): loads the plugin built
//! from `plugin/` (the deny logic of `plugins/deny-dangerous-bash`, compiled from the same
//! file), and times calls of one reused plugin instance, the way an Extism embedder runs
//! it, under the limits hookhost arms for every call: fuel and a wall-clock timeout.
//!
//! `extism-peer PLUGIN` reads its input from stdin: the first line is the event JSON,
//! answered with one line, the plugin's answer to it; each further line is a count `n`,
//! answered with two lines of `n` numbers each (space separated): the wall time of each
//! call and the calling thread's CPU time during it, in nanoseconds. The hookhost bench
//! drives it this way, in rounds interleaved with its own, so that load on the machine
//! hits both alike.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use extism::{Manifest, PluginBuilder, Wasm};

/// Fuel per call, as hookhost's default (`DEFAULT_FUEL`).
const FUEL: u64 = 100_000_000;

fn main() {
    let plugin = std::env::args()
        .nth(1)
        .expect("usage: extism-peer PLUGIN.wasm");
    // Read here: Extism's own file loading is a feature left out of this build.
    let bytes = std::fs::read(&plugin).expect("the plugin file");
    let manifest = Manifest::new([Wasm::data(bytes)]).with_timeout(Duration::from_secs(10));
    let mut plugin = PluginBuilder::new(manifest)
        .with_wasi(false)
        .with_fuel_limit(FUEL)
        .build()
        .expect("the Extism plugin loads");
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let input = lines.next().expect("an input line").expect("stdin");
    // The bench checks that the answer is what the hookhost plugin answers.
    let answer: String = plugin.call("handle", input.as_str()).expect("a call");
    let mut out = std::io::stdout().lock();
    writeln!(out, "{answer}").expect("stdout");
    out.flush().expect("stdout");
    for line in lines {
        let line = line.expect("stdin");
        let n: usize = line.trim().parse().expect("a count");
        let (mut wall, mut cpu) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let (t, c) = (Instant::now(), thread_cpu_time());
            let answer: &str = plugin.call("handle", input.as_str()).expect("a call");
            wall.push(t.elapsed());
            cpu.push(thread_cpu_time().saturating_sub(c));
            std::hint::black_box(answer);
        }
        for times in [wall, cpu] {
            let text: Vec<String> = times.iter().map(|t| t.as_nanos().to_string()).collect();
            writeln!(out, "{}", text.join(" ")).expect("stdout");
        }
        out.flush().expect("stdout");
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
