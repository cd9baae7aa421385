//! Crash points (issue 24, beyond the examples): each process that answers a hook or
//! records a decision — a one-shot `hookhost dispatch`, the dispatch daemon, `hookhost
//! serve` and an async hook's `run-async` runner — is killed with SIGKILL at random points
//! while it works under load, then started again. Every answer is judged the way Claude
//! Code judges it under the settings `hookhost install --claude` writes; afterwards:
//!
//! - no dangerous command was allowed;
//! - no audit line is glued to another (a line cut short by a kill is its own line);
//! - every answer that arrived has its line in the audit log.
//!
//! A SIGKILL almost never lands inside the single `write` of a (small) audit line, so
//! at each kill the test also leaves what such a kill leaves: half a line, written under
//! the log's lock by a writer that then dies. The next line must start on a line of its
//! own.
//!
//! The points are random. The seed is printed (and named in every failure);
//! `HOOKHOST_CRASH_SEED=N` replays a run's points. Every wait is bounded; nothing is timed.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::dispatch_daemon::{daemon_pid, process_alive, sockets, with_daemon};
use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks, wait_until};

/// A small deterministic generator (xorshift64*): the kill points of a run follow from
/// its seed alone.
struct Points {
    state: u64,
    /// The seed, for failure messages.
    seed: u64,
}

impl Points {
    fn seeded(test: &str) -> Points {
        let seed = std::env::var("HOOKHOST_CRASH_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            })
            | 1;
        eprintln!("{test}: HOOKHOST_CRASH_SEED={seed}");
        Points { state: seed, seed }
    }

    /// `what` with the seed that replays it.
    fn named(&self, what: &str) -> String {
        format!("{what} (HOOKHOST_CRASH_SEED={})", self.seed)
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A duration in `0..max`.
    fn within(&mut self, max: Duration) -> Duration {
        let micros = max.as_micros().max(1) as u64;
        Duration::from_micros(self.next() % micros)
    }

    fn chance(&mut self, one_in: u64) -> bool {
        self.next().is_multiple_of(one_in)
    }
}

/// What Claude Code does with one answer of its command hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The tool call goes ahead.
    Allowed,
    /// The tool call is blocked (exit 2, a deny, or a failure under `onFailure: block`).
    Blocked,
}

/// The drop-in as `hookhost install --claude` writes it: whether its PreToolUse entry
/// says `"onFailure": "block"` (a hook that exits with anything but 0 or 2, or is killed,
/// then blocks instead of letting the tool run). No drop-in at all is not a block.
fn installed_on_failure_blocks(env: &TestEnv) -> bool {
    let settings = env.home.join("claude-settings.json");
    let run = env.run(
        &["install", "--claude", "--file", settings.to_str().unwrap()],
        "",
    );
    assert_eq!(run.code, 0, "install failed: {}", run.stderr);
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let entries = settings["hooks"]["PreToolUse"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let drop_ins: Vec<Value> = entries
        .iter()
        .flat_map(|group| group["hooks"].as_array().cloned().unwrap_or_default())
        .filter(|hook| {
            hook["command"]
                .as_str()
                .is_some_and(|c| c.contains("dispatch --format claude"))
        })
        .collect();
    assert!(
        !drop_ins.is_empty(),
        "install wrote no PreToolUse drop-in: {settings}"
    );
    drop_ins.iter().all(|hook| hook["onFailure"] == "block")
}

/// Claude Code's reading of a finished `hookhost dispatch --format claude`: `code` is
/// `None` when the process was killed by a signal.
fn claude_reads(code: Option<i32>, stdout: &str, on_failure_blocks: bool) -> Verdict {
    match code {
        Some(2) => Verdict::Blocked,
        Some(0) => {
            let answer: Value = serde_json::from_str(stdout).unwrap_or(Value::Null);
            let denied = answer["hookSpecificOutput"]["permissionDecision"] == "deny"
                || answer["decision"] == "block"
                || answer["continue"] == false;
            if denied {
                Verdict::Blocked
            } else {
                Verdict::Allowed
            }
        }
        // A non-blocking error, unless the drop-in says `onFailure: block`.
        _ if on_failure_blocks => Verdict::Blocked,
        _ => Verdict::Allowed,
    }
}

/// The guard under test (a command hook refusing `rm -rf /`) and an async hook whose
/// runner the tests kill.
fn guarded(env: &TestEnv) {
    guarded_as(env, 0);
}

/// [`guarded`], version `version`: the same guard whose command differs by a comment, so
/// that each version is a new last good version for the store to write.
fn guarded_as(env: &TestEnv, version: usize) {
    let guard = env.script(
        "guard.sh",
        r#"input=$(cat); case "$input" in *'rm -rf /'*) echo "dangerous: refused" >&2; exit 2;; esac; echo '{}'"#,
    );
    let mut config = hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": format!("{guard} # version {version}")}]),
    );
    config["hooks"]["PostToolUse"] = json!([{"matcher": "Bash", "hooks": [
        {"type": "command", "async": true, "command": "sleep 0.02; echo '{\"systemMessage\": \"checked\"}'"}
    ]}]);
    env.project_hooks(config);
}

/// Request `n`: dangerous or not, tagged so its audit line can be found.
fn request(n: usize, dangerous: bool) -> (String, Value) {
    let tag = format!("crash-point-{n}");
    let command = if dangerous {
        format!("rm -rf / # {tag}")
    } else {
        format!("ls # {tag}")
    };
    let mut input = bash_input(&command);
    input["session_id"] = json!(format!("crash-{}", n % 4));
    input["hook_event_name"] = json!("PreToolUse");
    (tag, input)
}

/// What the audit log shows after the crashes: lines that parse, lines cut short by a
/// kill, and lines with more than one record in them (glued: the failure).
struct Log {
    entries: Vec<Value>,
    cut_short: usize,
    glued: Vec<String>,
}

fn read_log(env: &TestEnv) -> Log {
    let text = std::fs::read(env.data.join("audit.jsonl")).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let mut log = Log {
        entries: Vec::new(),
        cut_short: 0,
        glued: Vec::new(),
    };
    for line in text.lines().filter(|l| !l.is_empty()) {
        // A record starts `{"seq":` (the chain's lines) or `{"time":` (a torn one here).
        let records = line.matches("{\"seq\":").count() + line.matches("{\"time\":").count();
        if records > 1 {
            log.glued.push(line.chars().take(300).collect());
        } else if let Ok(entry) = serde_json::from_str::<Value>(line) {
            log.entries.push(entry);
        } else {
            log.cut_short += 1;
        }
    }
    log
}

/// Whether the log holds the PreToolUse line of the request tagged `tag`.
fn logged(log: &Log, tag: &str) -> bool {
    log.entries.iter().any(|e| {
        e["event"] == "PreToolUse"
            && e["async"] != true
            && e["toolInput"]["command"]
                .as_str()
                .is_some_and(|c| c.ends_with(tag))
    })
}

/// The answers one scenario saw, and what it did to the processes and the log.
#[derive(Default)]
struct Seen {
    /// (tag, dangerous, verdict) for every answer a caller received.
    answers: Vec<(String, bool, Verdict)>,
    /// Processes killed (a SIGKILL sent to a live `hookhost`).
    kills: usize,
    /// Half lines left in the log ([`tear`]).
    tears: usize,
}

/// Checks the three promises over what a scenario saw and the log it left.
fn check(env: &TestEnv, what: &str, seen: &Seen) {
    let allowed: Vec<_> = seen
        .answers
        .iter()
        .filter(|(_, dangerous, verdict)| *dangerous && *verdict == Verdict::Allowed)
        .map(|(tag, ..)| tag.clone())
        .collect();
    assert!(
        allowed.is_empty(),
        "{what}: dangerous commands were allowed: {allowed:?}"
    );
    let log = read_log(env);
    assert!(
        log.glued.is_empty(),
        "{what}: audit lines glued together: {:?}",
        log.glued
    );
    assert!(
        log.cut_short <= seen.kills + seen.tears,
        "{what}: {} lines do not parse, more than the {} processes killed and {} lines torn",
        log.cut_short,
        seen.kills,
        seen.tears
    );
    // An answer that arrived came from a process that wrote its line first.
    let unlogged: Vec<_> = seen
        .answers
        .iter()
        .filter(|(tag, ..)| !logged(&log, tag))
        .map(|(tag, ..)| tag.clone())
        .collect();
    assert!(
        unlogged.is_empty(),
        "{what}: answers without an audit line: {unlogged:?}"
    );
    assert!(
        seen.answers.iter().any(|(_, d, _)| *d) && seen.kills > 0 && seen.tears > 0,
        "{what}: {} answers, {} kills, {} torn lines: the scenario tested nothing",
        seen.answers.len(),
        seen.kills,
        seen.tears
    );
    eprintln!(
        "{what}: {} answers ({} dangerous), {} kills, {} torn lines, {} log lines",
        seen.answers.len(),
        seen.answers.iter().filter(|(_, d, _)| *d).count(),
        seen.kills,
        seen.tears,
        log.entries.len()
    );
}

/// SIGKILL to `pid` if it is a live `hookhost` (never a process that reused a dead
/// daemon's pid); whether it was sent.
fn kill(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if !String::from_utf8_lossy(&cmdline).contains("hookhost") {
        return false;
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) == 0 }
}

/// What a writer killed in the middle of its line leaves in the log: the first part of a
/// line, without its newline, written under the log's lock (released by the death).
/// At least `{"time":` of it, so that a line glued to it shows two records.
fn tear(env: &TestEnv, points: &mut Points) {
    let whole = r#"{"time":"2026-01-01T00:00:00Z","event":"PreToolUse","note":"killed mid-line"}"#;
    let cut = 10 + points.next() as usize % (whole.len() - 11);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(env.data.join("audit.jsonl"))
        .unwrap();
    log.lock().unwrap();
    // Like every writer, it starts its line on a line of its own.
    let size = log.metadata().unwrap().len();
    let mut last = [0u8];
    let fresh = size == 0 || (log.read_exact_at(&mut last, size - 1).is_ok() && last[0] == b'\n');
    let start = if fresh { "" } else { "\n" };
    (&log)
        .write_all(format!("{start}{}", &whole[..cut]).as_bytes())
        .unwrap();
}

/// Starts `cmd` with `input` on its stdin (closed after).
fn start(mut cmd: Command, input: &Value) -> Child {
    let mut child = cmd
        .args(["dispatch", "--format", "claude"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input.to_string().as_bytes());
    drop(stdin);
    child
}

/// A finished caller: exit code (None: killed) and stdout. Bounded: a caller that has
/// not ended within 60 s is killed and the test fails (a wedged host).
fn finish(mut child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a `hookhost dispatch` did not end within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its answer is one line: it is in the pipe.
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// One-shot dispatches (no daemon) killed at random points of their work. A killed
/// caller is an answer too: Claude Code sees its hook die.
#[test]
fn one_shot_dispatches_killed_at_random_points() {
    let env = TestEnv::new();
    guarded(&env);
    let blocks = installed_on_failure_blocks(&env);
    let mut points = Points::seeded("one_shot_dispatches_killed_at_random_points");
    let what = points.named("one-shot");
    // How long one dispatch takes here, so the kills land inside the work.
    let started = Instant::now();
    let (code, _) = finish(start(env.command(), &request(0, true).1));
    assert_eq!(code, Some(2), "the guard blocks before any crash");
    let span = started.elapsed() * 3;

    let mut seen = Seen::default();
    for round in 0..6 {
        // A new version each round: the dispatches killed include ones writing it to the
        // last good store (`host/stored_good.rs`).
        guarded_as(&env, round + 1);
        let mut pending: Vec<_> = (0..8)
            .map(|i| {
                let n = 1 + round * 8 + i;
                let dangerous = points.chance(2) || i == 0;
                let (tag, input) = request(n, dangerous);
                (
                    tag,
                    dangerous,
                    start(env.command(), &input),
                    points.within(span),
                )
            })
            .collect();
        let begun = Instant::now();
        pending.sort_by_key(|c| c.3);
        let torn_after = points.next() as usize % pending.len();
        let mut finished = Vec::new();
        for (i, (tag, dangerous, child, at)) in pending.into_iter().enumerate() {
            if let Some(wait) = at.checked_sub(begun.elapsed()) {
                std::thread::sleep(wait);
            }
            if kill(child.id()) {
                seen.kills += 1;
            }
            if i == torn_after {
                tear(&env, &mut points);
                seen.tears += 1;
            }
            finished.push((tag, dangerous, child));
        }
        for (tag, dangerous, child) in finished {
            let (code, stdout) = finish(child);
            let verdict = claude_reads(code, &stdout, blocks);
            // A process killed before it answered gave the agent no answer it could
            // log; only the ones that finished are checked against the log.
            if code.is_some() {
                seen.answers.push((tag, dangerous, verdict));
            } else if dangerous {
                assert_eq!(
                    verdict,
                    Verdict::Blocked,
                    "{what}: a killed guard lets `{tag}` run: install's PreToolUse entry needs onFailure: block"
                );
            }
        }
    }
    // Calls after the crashes: the log takes lines and the guard still holds.
    for n in 100..104 {
        let (tag, input) = request(n, true);
        let (code, stdout) = finish(start(env.command(), &input));
        assert_eq!(code, Some(2), "{what}: after the crashes: {stdout}");
        seen.answers
            .push((tag, true, claude_reads(code, &stdout, blocks)));
    }
    // The file broken after the crashes: whatever version the killed writers left in
    // the last good store is a whole one, and it still guards.
    env.write(".hookhost/hooks.json", "{\"hooks\": {");
    for n in 104..108 {
        let (tag, input) = request(n, true);
        let (code, stdout) = finish(start(env.command(), &input));
        assert_eq!(
            code,
            Some(2),
            "{what}: a broken file after crashes in the store's writes: {stdout}"
        );
        seen.answers
            .push((tag, true, claude_reads(code, &stdout, blocks)));
    }
    check(&env, &what, &seen);
}

/// The pid of the live dispatch daemon of `env` other than `old`, once it has one.
fn live_daemon(env: &TestEnv, old: Option<u32>) -> u32 {
    let mut pid = None;
    wait_until("a (new) dispatch daemon", || {
        pid = sockets(env)
            .first()
            .map(|socket| daemon_pid(socket))
            .filter(|p| Some(*p) != old && process_alive(*p));
        pid.is_some()
    });
    pid.expect("waited for above")
}

/// The dispatch daemon killed while callers wait on it; the next calls start another.
#[test]
fn the_dispatch_daemon_killed_at_random_points() {
    let env = TestEnv::new();
    guarded(&env);
    let blocks = installed_on_failure_blocks(&env);
    let mut points = Points::seeded("the_dispatch_daemon_killed_at_random_points");
    let what = points.named("dispatch daemon");
    let (code, _) = finish(start(with_daemon(&env, 60), &request(0, true).1));
    assert_eq!(code, Some(2), "the guard blocks before any crash");

    let mut seen = Seen::default();
    let mut old = None;
    for round in 0..6 {
        // The call before this round (or the first) started a daemon: kill that one.
        let pid = live_daemon(&env, old);
        old = Some(pid);
        let callers: Vec<_> = (0..12)
            .map(|i| {
                let n = 1 + round * 12 + i;
                let dangerous = points.chance(2) || i == 0;
                let (tag, input) = request(n, dangerous);
                (tag, dangerous, start(with_daemon(&env, 60), &input))
            })
            .collect();
        std::thread::sleep(points.within(Duration::from_millis(40)));
        if kill(pid) {
            seen.kills += 1;
        }
        tear(&env, &mut points);
        seen.tears += 1;
        for (tag, dangerous, child) in callers {
            let (code, stdout) = finish(child);
            seen.answers
                .push((tag, dangerous, claude_reads(code, &stdout, blocks)));
        }
        // The next call finds the socket dead (if no caller of this round already
        // started another daemon) and starts a new daemon.
        let (tag, input) = request(500 + round, true);
        let (code, stdout) = finish(start(with_daemon(&env, 60), &input));
        assert_eq!(
            code,
            Some(2),
            "{what}: round {round}: the guard holds after the crash"
        );
        seen.answers
            .push((tag, true, claude_reads(code, &stdout, blocks)));
    }
    // The last daemon is not left running for its idle minute.
    kill(live_daemon(&env, old));
    check(&env, &what, &seen);
}

/// `hookhost serve` killed under four clients' load and started again on its socket;
/// a connection that loses its daemon has no answer (the client retries elsewhere),
/// never an allow.
#[test]
fn serve_killed_at_random_points() {
    let env = TestEnv::new();
    guarded(&env);
    let mut points = Points::seeded("serve_killed_at_random_points");
    let what = points.named("serve");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let socket = env.data.join("crash.sock");
    let mut next = 1;
    for _round in 0..5 {
        let mut daemon = Daemon::start_at(socket.clone(), env.command());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let socket = socket.clone();
                let seen = seen.clone();
                let stop = stop.clone();
                let first = next + c * 10_000;
                std::thread::spawn(move || serve_client(&socket, first, &seen, &stop))
            })
            .collect();
        next += 40_000;
        std::thread::sleep(Duration::from_millis(20) + points.within(Duration::from_millis(200)));
        let killed = kill(daemon.pid());
        tear(&env, &mut points);
        let _ = daemon.child.wait();
        {
            let mut seen = seen.lock().unwrap();
            seen.kills += usize::from(killed);
            seen.tears += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for client in clients {
            client.join().unwrap();
        }
    }
    // Started once more: the guard holds and the log takes lines.
    let daemon = Daemon::start_at(socket.clone(), env.command());
    let (tag, input) = request(999_999, true);
    let mut client = daemon.client();
    let outcome = client.call("PreToolUse", input);
    assert_eq!(outcome["decision"], "deny", "{what}: {outcome}");
    let mut seen = std::mem::take(&mut *seen.lock().unwrap());
    seen.answers.push((tag, true, Verdict::Blocked));
    drop(daemon);
    check(&env, &what, &seen);
}

/// One client of `serve`: requests in lockstep until the daemon dies or `stop`.
fn serve_client(
    socket: &std::path::Path,
    first: usize,
    seen: &Mutex<Seen>,
    stop: &std::sync::atomic::AtomicBool,
) {
    let Ok(stream) = UnixStream::connect(socket) else {
        return;
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for n in first.. {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let dangerous = n % 3 != 1;
        let (tag, input) = request(n, dangerous);
        let line = json!({"id": n, "event": "PreToolUse", "input": input}).to_string();
        if writer.write_all(format!("{line}\n").as_bytes()).is_err() {
            return;
        }
        let mut answer = String::new();
        match reader.read_line(&mut answer) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer: Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("serve answered a torn line ({e}): {answer:?}"));
        assert_eq!(answer["id"], n, "{answer}");
        let verdict = if answer["outcome"]["decision"] == "deny" {
            Verdict::Blocked
        } else if answer.get("error").is_some() {
            // An error line is no answer (the client's agent does not go ahead on it);
            // shown, for a run that finds one.
            eprintln!("serve answered an error: {answer}");
            continue;
        } else {
            Verdict::Allowed
        };
        seen.lock().unwrap().answers.push((tag, dangerous, verdict));
    }
}

/// The `run-async` runners of async hooks killed while they run: the log stays whole
/// and the guard's lines are all there.
#[test]
fn async_runners_killed_at_random_points() {
    let env = TestEnv::new();
    guarded(&env);
    let blocks = installed_on_failure_blocks(&env);
    let mut points = Points::seeded("async_runners_killed_at_random_points");
    let what = points.named("run-async");
    let mut seen = Seen::default();
    for n in 1..=24 {
        let (_, mut input) = request(n, false);
        input["hook_event_name"] = json!("PostToolUse");
        input["tool_response"] = json!({"stdout": "", "exit_code": 0});
        let run = env.run(&["dispatch", "PostToolUse"], &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        std::thread::sleep(points.within(Duration::from_millis(30)));
        for pid in runners(&env) {
            if kill(pid) {
                seen.kills += 1;
            }
        }
        if n % 6 == 0 || points.chance(3) {
            tear(&env, &mut points);
            seen.tears += 1;
        }
        let (tag, pre) = request(n + 1000, true);
        let run = env.run(&["dispatch", "--format", "claude"], &pre.to_string());
        seen.answers
            .push((tag, true, claude_reads(Some(run.code), &run.stdout, blocks)));
    }
    wait_until("the runners that were not killed to finish", || {
        runners(&env).is_empty()
    });
    check(&env, &what, &seen);
}

/// The pids of the `run-async` runners working for this test's data directory.
fn runners(env: &TestEnv) -> Vec<u32> {
    let data = env.data.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("run-async")
                && String::from_utf8_lossy(&environ).contains(&data)
        })
        .collect()
}
