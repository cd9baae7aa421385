//! Helpers shared by the benchmarks: timing a process the way an agent runs a hook, and
//! percentiles.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Spawns `command`, writes `stdin`, reads its output to the end and waits: the cost of
/// one command hook as an agent pays it.
pub fn time_process(command: &mut Command, stdin: &str) -> Duration {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    let output = child.wait_with_output().expect("wait");
    assert!(output.status.success(), "benchmark command failed");
    started.elapsed()
}

/// The `p` percentile (0..=1) of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs `dispatch` (a `hookhost dispatch` command with its dispatch daemon on)
/// until its daemon listens in `data_dir`: the first call starts it in the background.
pub fn start_dispatch_daemon(data_dir: &Path, mut dispatch: impl FnMut() -> Duration) {
    let listening = || {
        std::fs::read_dir(data_dir.join("daemons"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "sock"))
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    dispatch();
    while !listening() {
        assert!(
            Instant::now() < deadline,
            "the dispatch daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    dispatch(); // the daemon's first answer loads what it caches
}
