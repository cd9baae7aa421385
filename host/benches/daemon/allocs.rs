//! Allocations per `serve` event, counted: the daemon's own code
//! ([`hookhost::serve::Server`]) in this process, served over an in-memory stream in
//! lockstep, with the bench's allocator counting while [`COUNTING`] is on (off
//! everywhere else: the baseline server, which is this binary too, never pays for it).
//! The client's requests are made before counting starts and its answers read into one
//! buffer, so what is counted is the server's work: parsing the line, the dispatch (the
//! wasm call included), the merge, the audit line and the answer.

use std::alloc::{GlobalAlloc, Layout};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use hookhost::HostBuilder;
use hookhost::serve::{HostFactory, Server};

/// mimalloc (as the daemon), counting allocations while [`COUNTING`] is on.
pub struct Counting;

/// Whether allocations are counted now.
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

fn count(size: usize) {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to mimalloc unchanged; counting touches no memory of
// the blocks.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract is mimalloc's.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as above.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Allocations (and bytes) per event of a server over `settings`, in lockstep, after a
/// warm-up: `(allocations, bytes)`.
pub fn per_event(dir: &Path, settings: &Value, events: usize) -> (f64, f64) {
    let project = crate::workspace(dir);
    let settings = settings.to_string();
    let audit = dir.join("allocs-audit.jsonl");
    let sessions_dir = dir.join("allocs-sessions");
    let factory: HostFactory = Arc::new(move |project, sessions, gate| {
        gate.apply(
            HostBuilder::new(project)
                .settings(settings.clone())
                .audit_log(&audit),
        )
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
        let lines: Vec<Vec<u8>> = (0..events + 200)
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
            assert!(
                answer.windows(17).any(|w| w == b"\"decision\":\"none\""),
                "unexpected answer: {}",
                String::from_utf8_lossy(&answer)
            );
        };
        for line in &lines[..200] {
            exchange(line).await;
        }
        let (allocations, bytes) = (
            ALLOCATIONS.load(Ordering::Relaxed),
            BYTES.load(Ordering::Relaxed),
        );
        COUNTING.store(true, Ordering::Relaxed);
        for line in &lines[200..] {
            exchange(line).await;
        }
        COUNTING.store(false, Ordering::Relaxed);
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations;
        let bytes = BYTES.load(Ordering::Relaxed) - bytes;
        drop(client_writer);
        drop(answers);
        served.await.expect("the connection");
        (
            allocations as f64 / events as f64,
            bytes as f64 / events as f64,
        )
    })
}
