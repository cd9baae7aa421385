//! The audit chain's cost (issue 29: under 5% of a `serve` event). The chain cannot be
//! switched off, so two comparisons, interleaved round by round:
//!
//! 1. a `serve` event (the daemon's own code in this process, one wasm hook, lockstep
//!    over an in-memory stream) with the audit log on (chained) and off;
//! 2. one audit line: [`AuditLog::append`] (serialize, lock the log and the chain's
//!    record, take the head, SHA-256, write, rewrite the record) beside the append as it
//!    was before the chain (serialize, `stat` the path, lock, `fstat`, write, `fstat`),
//!    coded here on the same line.
//!
//! The chain's share is (chained − plain append) / (serve event with audit on).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use hookhost::HostBuilder;
use hookhost::audit::AuditLog;
use hookhost::serve::{HostFactory, Server};

/// Microseconds per lockstep `serve` event over `settings`, after a warm-up, with the
/// audit log at `audit` (or none).
pub(super) fn serve_event(
    dir: &Path,
    settings: &Value,
    events: usize,
    audit: Option<PathBuf>,
) -> f64 {
    let project = crate::workspace(dir);
    let settings = settings.to_string();
    let sessions_dir = dir.join("audit-cost-sessions");
    let factory: HostFactory = Arc::new(move |project, sessions, gate| {
        let mut builder = HostBuilder::new(project).settings(settings.clone());
        if let Some(audit) = &audit {
            builder = builder.audit_log(audit);
        }
        gate.apply(builder)
            .session_store(sessions)
            .session_files(&sessions_dir)
            .async_launcher(hookhost::AsyncLauncher::InProcess)
            .build()
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let server = Server::new(project, factory);
        let (client, daemon) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(daemon);
        let served = tokio::spawn(server.serve_connection(reader, writer, true));
        let (client_reader, mut client_writer) = tokio::io::split(client);
        let mut answers = BufReader::new(client_reader);
        let lines: Vec<Vec<u8>> = (0..events + 100)
            .map(|n| {
                let line = json!({"id": n, "event": "PreToolUse", "input": crate::input(n)});
                (line.to_string() + "\n").into_bytes()
            })
            .collect();
        let mut answer = Vec::with_capacity(64 << 10);
        let mut exchange = async |line: &[u8]| {
            client_writer.write_all(line).await.expect("send");
            answer.clear();
            answers
                .read_until(b'\n', &mut answer)
                .await
                .expect("answer");
        };
        for line in &lines[..100] {
            exchange(line).await;
        }
        let started = Instant::now();
        for line in &lines[100..] {
            exchange(line).await;
        }
        let took = started.elapsed();
        drop(client_writer);
        drop(answers);
        served.await.expect("the connection");
        took.as_secs_f64() * 1e6 / events as f64
    })
}

/// A line of the size a `serve` event of this bench writes.
fn entry(n: usize) -> Value {
    json!({
        "time": "2026-12-02T21:00:00.000Z", "host": "bench", "user": "bench",
        "hookhostVersion": "0.1.0", "session": format!("session-{}", n % 64),
        "event": "PreToolUse", "project": "/tmp/bench/project", "toolName": "Bash",
        "toolInput": crate::input(n)["tool_input"].clone(), "decision": "none",
        "continue": true,
        "hooks": [{"id": "deny_dangerous_bash", "source": "cli", "type": "wasm",
                   "status": "ok", "durationMs": 0.05, "exitCode": null, "fuel": 1843,
                   "memoryBytes": 1114112, "message": null}]
    })
}

/// Microseconds per line: the chained append, and the append without the chain.
fn appends(dir: &Path, lines: usize, round: usize) -> (f64, f64) {
    let entries: Vec<Value> = (0..lines).map(entry).collect();
    let chained = AuditLog::new(dir.join(format!("chained-{round}.jsonl")))
        .with_key_file(dir.join("audit-cost.key"));
    let started = Instant::now();
    for entry in &entries {
        chained.append(entry).expect("append");
    }
    let chained_us = started.elapsed().as_secs_f64() * 1e6 / lines as f64;

    let path = dir.join(format!("plain-{round}.jsonl"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("the plain log");
    let started = Instant::now();
    for entry in &entries {
        plain_append(&path, &file, entry);
    }
    let plain_us = started.elapsed().as_secs_f64() * 1e6 / lines as f64;
    (chained_us, plain_us)
}

/// The append before the chain: serialize, `stat` the path (rotation), lock, `fstat`
/// (the torn-line check), one `write`, `fstat` (the file still has a name), unlock.
fn plain_append(path: &Path, file: &File, entry: &Value) {
    let mut line = Vec::with_capacity(512);
    serde_json::to_writer(&mut line, entry).expect("json");
    line.push(b'\n');
    let _ = std::fs::symlink_metadata(path).expect("stat");
    file.lock().expect("lock");
    let _ = file.metadata().expect("fstat");
    (&*file).write_all(&line).expect("write");
    let _ = file.metadata().expect("fstat");
    file.unlock().expect("unlock");
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs both comparisons for `rounds` rounds and prints them with the ratios.
pub fn report(dir: &Path, settings: &Value, events: usize, rounds: usize) {
    let (mut off, mut on, mut chained, mut plain) = (vec![], vec![], vec![], vec![]);
    for round in 0..rounds.max(1) {
        off.push(serve_event(dir, settings, events, None));
        let audit = dir.join(format!("audit-cost-{round}.jsonl"));
        on.push(serve_event(dir, settings, events, Some(audit)));
        let (c, p) = appends(dir, events, round);
        chained.push(c);
        plain.push(p);
    }
    let (off, on) = (median(&mut off), median(&mut on));
    let (chained, plain) = (median(&mut chained), median(&mut plain));
    let share = (chained - plain) / on;
    println!("the audit chain's cost (issue 29; in process, lockstep, median of {rounds} rounds):");
    println!();
    println!("| row | µs | ratio |");
    println!("|---|---:|---:|");
    println!("| `serve` event, audit off | {off:.2} | 1.00 |");
    println!(
        "| `serve` event, audit on (chained) | {on:.2} | {:.2} |",
        on / off
    );
    println!("| audit line, append without the chain | {plain:.2} | 1.00 |");
    println!(
        "| audit line, chained append | {chained:.2} | {:.2} |",
        chained / plain
    );
    println!();
    println!(
        "the chain per event: {:.2} µs = {:.1}% of a `serve` event with audit on (target: \
         under 5%: {})",
        chained - plain,
        100.0 * share,
        if share < 0.05 { "met" } else { "NOT MET" }
    );
    println!();
}
