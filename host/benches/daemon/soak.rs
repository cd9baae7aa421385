//! The soak run (`HOOKHOST_BENCH_ONLY=soak`): 256 clients, each on its own connection in
//! lockstep, against one `hookhost serve` for 60 s (`HOOKHOST_BENCH_SOAK_SECS`), while
//! the daemon's resident memory is sampled twice a second. Every answer must arrive
//! exactly once: a client sends its next request only after the answer to the last one,
//! so a lost answer stalls it (its read times out), a duplicate or a misrouted answer
//! shows up as the wrong id, and a duplicate of the last one is caught by a final read.
//! Any of these fails the run; the memory figures are reported (first quarter against
//! last quarter), not asserted, since a bench prints numbers and the tests assert.
//!
//! A daemon serves one client process at most a quarter of its connections
//! (`serve::slots`), so the clients run in processes of 64: the bench binary started
//! again with [`CLIENT_VAR`] set.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The variable that makes the bench binary a soak client process: `SOCKET`.
pub const CLIENT_VAR: &str = "HOOKHOST_BENCH_SOAK_CLIENT";
const THREADS_VAR: &str = "HOOKHOST_BENCH_SOAK_THREADS";
const SECS_VAR: &str = "HOOKHOST_BENCH_SOAK_SECS";
const TAG_VAR: &str = "HOOKHOST_BENCH_SOAK_TAG";
/// Connections one client process may hold: a quarter of the daemon's default 256.
const PER_PROCESS: usize = 64;
/// How long a client waits for one answer before it counts it as lost.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// What one client saw.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    sent: u64,
    answered: u64,
    /// Answers with another request's id, errors, or answers that are not the hook's.
    wrong: u64,
    /// Requests whose answer never came.
    lost: u64,
    /// Lines after the last answer (a duplicate of it).
    extra: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.sent += other.sent;
        self.answered += other.answered;
        self.wrong += other.wrong;
        self.lost += other.lost;
        self.extra += other.extra;
    }
}

/// One lockstep connection until `until`.
fn one_client(socket: &Path, tag: &str, until: Instant) -> (Tally, Option<String>) {
    let mut tally = Tally::default();
    let mut first_wrong = None;
    let stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            tally.lost += 1;
            return (tally, Some(format!("connect: {e}")));
        }
    };
    stream.set_read_timeout(Some(ANSWER_WAIT)).expect("timeout");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut n = 0u64;
    while Instant::now() < until {
        let id = format!("{tag}-{n}");
        let request = json!({"id": id, "event": "PreToolUse", "input": crate::input(n as usize)})
            .to_string()
            + "\n";
        if writer.write_all(request.as_bytes()).is_err() {
            tally.lost += 1;
            first_wrong.get_or_insert_with(|| "the daemon closed the connection".to_string());
            break;
        }
        tally.sent += 1;
        n += 1;
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => {
                tally.lost += 1;
                first_wrong.get_or_insert_with(|| format!("no answer to {id}"));
                break;
            }
            Ok(_) => {}
        }
        let answer: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if answer["id"] == id.as_str() && answer["outcome"]["decision"] == "none" {
            tally.answered += 1;
        } else {
            tally.wrong += 1;
            first_wrong.get_or_insert_with(|| format!("to {id}: {}", line.trim_end()));
        }
    }
    // Anything more is a duplicate (or an answer to nothing).
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    line.clear();
    if matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
        tally.extra += 1;
        first_wrong.get_or_insert_with(|| format!("after the last answer: {}", line.trim_end()));
    }
    (tally, first_wrong)
}

/// The client process: [`THREADS_VAR`] connections until [`SECS_VAR`] have passed;
/// prints its tally as one line.
pub fn client_process(socket: &Path) {
    let var = |name: &str| std::env::var(name).expect(name);
    let threads: usize = var(THREADS_VAR).parse().expect("threads");
    let secs: f64 = var(SECS_VAR).parse().expect("secs");
    let tag = var(TAG_VAR);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (socket, tag) = (socket.to_path_buf(), format!("{tag}-{t}"));
            std::thread::spawn(move || one_client(&socket, &tag, until))
        })
        .collect();
    let mut tally = Tally::default();
    let mut first_wrong = None;
    for h in handles {
        let (t, wrong) = h.join().expect("a soak client");
        tally.add(t);
        first_wrong = first_wrong.or(wrong);
    }
    println!(
        "soak {} {} {} {} {} {}",
        tally.sent,
        tally.answered,
        tally.wrong,
        tally.lost,
        tally.extra,
        first_wrong.unwrap_or_default().replace('\n', " ")
    );
}

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn median(samples: &[u64]) -> u64 {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len() / 2).copied().unwrap_or(0)
}

/// Runs `clients` lockstep clients against the daemon at `socket` (process `pid`) for
/// [`SECS_VAR`] seconds (default 60), prints what they saw and the daemon's memory, and
/// fails when an answer was lost, duplicated or misrouted.
pub fn run(socket: &Path, pid: u32, clients: usize) {
    let secs: f64 = std::env::var(SECS_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60.0);
    let processes = clients.div_ceil(PER_PROCESS);
    let exe = std::env::current_exe().expect("the bench binary");
    let rss_before = rss_kib(pid);
    let started = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|p| {
            let threads = PER_PROCESS.min(clients - p * PER_PROCESS);
            Command::new(&exe)
                .env(CLIENT_VAR, socket)
                .env(THREADS_VAR, threads.to_string())
                .env(SECS_VAR, secs.to_string())
                .env(TAG_VAR, format!("p{p}"))
                .stdout(Stdio::piped())
                .spawn()
                .expect("a soak client process")
        })
        .collect();
    let mut samples = Vec::new();
    let mut children: Vec<_> = children.into_iter().map(Some).collect();
    let mut outputs = Vec::new();
    while children.iter().any(Option::is_some) {
        std::thread::sleep(Duration::from_millis(500));
        samples.push(rss_kib(pid));
        for slot in children.iter_mut() {
            if let Some(child) = slot
                && child.try_wait().expect("wait").is_some()
            {
                let child = slot.take().expect("a child");
                outputs.push(child.wait_with_output().expect("its output"));
            }
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let mut tally = Tally::default();
    let mut first_wrong = String::new();
    for out in &outputs {
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("soak "))
            .unwrap_or_else(|| panic!("a soak client printed no tally: {text}"));
        let fields: Vec<&str> = line.splitn(7, ' ').collect();
        let n = |i: usize| fields[i].parse::<u64>().expect("a count");
        tally.add(Tally {
            sent: n(1),
            answered: n(2),
            wrong: n(3),
            lost: n(4),
            extra: n(5),
        });
        if first_wrong.is_empty() {
            first_wrong = fields.get(6).unwrap_or(&"").to_string();
        }
    }
    let quarter = (samples.len() / 4).max(1);
    let early = median(&samples[..quarter.min(samples.len())]);
    let late = median(&samples[samples.len().saturating_sub(quarter)..]);
    let peak = samples.iter().copied().max().unwrap_or(0);
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "soak: {clients} lockstep clients ({processes} processes) for {secs:.0} s against one \
         `hookhost serve` (one wasm hook, fresh instance per event, audit on):"
    );
    println!();
    println!("| what | value |");
    println!("|---|---:|");
    println!("| requests sent | {} |", tally.sent);
    println!(
        "| answered exactly once, with their own id | {} |",
        tally.answered
    );
    println!("| wrong id or not the hook's answer | {} |", tally.wrong);
    println!(
        "| lost (no answer within {} s) | {} |",
        ANSWER_WAIT.as_secs(),
        tally.lost
    );
    println!("| extra lines after the last answer | {} |", tally.extra);
    println!("| events/s | {:.0} |", tally.answered as f64 / elapsed);
    println!("| daemon RSS before, MiB | {:.1} |", mib(rss_before));
    println!(
        "| daemon RSS, median of the first / last quarter, MiB | {:.1} / {:.1} |",
        mib(early),
        mib(late)
    );
    println!("| daemon RSS peak, MiB | {:.1} |", mib(peak));
    println!();
    let growth = late.saturating_sub(early);
    println!(
        "memory from the first to the last quarter: {:+.1} MiB ({})",
        (late as f64 - early as f64) / 1024.0,
        if growth <= early / 10 {
            "flat: within 10%"
        } else {
            "GROWING"
        }
    );
    assert!(
        tally.wrong == 0 && tally.lost == 0 && tally.extra == 0 && tally.answered == tally.sent,
        "not every answer arrived exactly once: {tally:?}; first: {first_wrong}"
    );
}
