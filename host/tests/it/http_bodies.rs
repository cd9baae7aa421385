//! Incoming HTTP responses of a wasm plugin are held on the host by bytes, charged to
//! the plugin's memory limit (`handlers/wasm/held_responses.rs`): hyper's read buffer
//! and the chunks a response stream hands the guest follow the limit, and a response
//! that does not fit beside the plugin's linear memory is refused with an error the
//! plugin reads and a report naming the limit. The plugin is the raw hostile component
//! (wit-bindgen straight from the WIT, no SDK); the peers send bodies that never end.

use hookhost::outcome::HookStatus;
use serde_json::json;

use crate::hostile::{raw, raw_still_serves};
use crate::support::*;

use crate::hostile::stalling::endless_server;

/// The bytes one resource-table entry may hold under a 4 MiB limit (limit / 256):
/// hyper's read buffer, and so every chunk, is at most this.
const ENTRY_BYTES_AT_4_MIB: usize = 16 * 1024;

fn largest_chunk(context: &str) -> usize {
    context
        .split("largest chunk ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no largest chunk in {context}"))
}

/// Endless bodies, chunked and under a `Content-Length`, read by eight held responses:
/// no chunk the guest gets is larger than what one resource-table entry may hold under
/// the limit (wasmtime's own sender reads up to about 400 KiB at a time, whatever the
/// limit), and the host keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_of_endless_bodies_follow_the_memory_limit() {
    let project = tempfile::tempdir().unwrap();
    for chunked in [true, false] {
        let port = endless_server(chunked);
        let extra = json!({"timeout": 20, "limits": {"memoryMb": 4},
            "capabilities": {"http": [format!("http://127.0.0.1:{port}")]}});
        let url = format!("http://127.0.0.1:{port}/x");
        let outcome = raw(project.path(), "http-hold", &url, 8, extra).await;
        assert_eq!(only_report(&outcome).status, HookStatus::Ok, "{outcome:#?}");
        let context = outcome.additional_context.join("");
        assert!(context.contains("held 8 responses"), "{context}");
        let largest = largest_chunk(&context);
        assert!(
            (1..=ENTRY_BYTES_AT_4_MIB).contains(&largest),
            "chunked={chunked}: a chunk of {largest} bytes: {context}"
        );
    }
    raw_still_serves(project.path()).await;
}

/// A plugin that has grown its linear memory to its limit has no room left for a
/// connection's buffers: its requests are refused at once, the plugin reads an error,
/// and the report names the target and the memory limit; the hook itself still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_with_no_room_beside_linear_memory_is_refused_naming_the_limit() {
    let project = tempfile::tempdir().unwrap();
    let port = endless_server(true);
    let url = format!("http://127.0.0.1:{port}/x");
    // `config` given whole, to add `grow`: the requests are made first (their header
    // maps and bodies are charged), then linear memory grows to the limit.
    let extra = json!({"timeout": 20, "limits": {"memoryMb": 4},
        "capabilities": {"http": [format!("http://127.0.0.1:{port}")]},
        "config": {"attack": "http-hold", "arg": url, "n": 8, "grow": true}});
    let outcome = raw(project.path(), "http-hold", &url, 8, extra).await;
    let report = only_report(&outcome);
    assert_eq!(report.status, HookStatus::Ok, "{outcome:#?}");
    let context = outcome.additional_context.join("");
    let refused = context
        .matches("memory limit of 4194304 bytes reached")
        .count();
    assert!(refused >= 1, "{context}");
    let diagnostics = report.diagnostics.clone().unwrap_or_default();
    assert_eq!(
        diagnostics
            .matches(&format!(
                "http: request to http://127.0.0.1:{port} refused: memory limit of 4194304 bytes (4 MiB) reached"
            ))
            .count(),
        refused,
        "{diagnostics}"
    );
    raw_still_serves(project.path()).await;
}

/// A loopback server answering a chunked body of five bytes followed by `trailer_bytes`
/// of trailers (one field per KiB), after `header_bytes` of headers likewise. Returns
/// its port.
fn trailers_server(header_bytes: usize, trailer_bytes: usize) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let mut answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n".to_vec();
            for i in 0..header_bytes / 1024 {
                answer.extend_from_slice(format!("x-h{i}: {}\r\n", "v".repeat(1000)).as_bytes());
            }
            answer.extend_from_slice(b"\r\n5\r\nhello\r\n0\r\n");
            for i in 0..trailer_bytes / 1024 {
                answer.extend_from_slice(format!("x-t{i}: {}\r\n", "v".repeat(1000)).as_bytes());
            }
            answer.extend_from_slice(b"\r\n");
            let _ = stream.write_all(&answer);
        }
    });
    port
}

/// Headers and trailers: a few KiB of each arrive as usual; a megabyte of trailers is
/// cut off by hyper's trailer limit (16 KiB), and a megabyte of headers by the read
/// buffer that follows the memory limit (16 KiB under 4 MiB), each with an error the
/// plugin reads, not buffered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_are_bounded() {
    let project = tempfile::tempdir().unwrap();
    for (headers, trailers, expected) in [
        (4 * 1024, 8 * 1024, "http read 5 bytes"),
        (0, 1 << 20, "http read error after 5 bytes"),
        (1 << 20, 0, "http error: "),
    ] {
        let port = trailers_server(headers, trailers);
        let extra = json!({"timeout": 20, "limits": {"memoryMb": 4},
            "capabilities": {"http": [format!("http://127.0.0.1:{port}")]}});
        let url = format!("http://127.0.0.1:{port}/x");
        let outcome = raw(project.path(), "http-read", &url, 0, extra).await;
        assert_eq!(only_report(&outcome).status, HookStatus::Ok, "{outcome:#?}");
        let context = outcome.additional_context.join("");
        assert!(
            context.contains(expected),
            "{headers} {trailers}: {context}"
        );
    }
    raw_still_serves(project.path()).await;
}

/// `https` goes through the same sender (TLS with the webpki roots, charged for TLS's
/// buffers): a peer that answers a TLS hello with plain HTTP is a TLS error the plugin
/// reads, and the host keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_peer_that_does_not_speak_tls_is_an_error_the_plugin_reads() {
    let project = tempfile::tempdir().unwrap();
    let port = endless_server(false);
    let extra = json!({"timeout": 20, "limits": {"memoryMb": 4},
        "capabilities": {"http": [format!("https://127.0.0.1:{port}")]}});
    let url = format!("https://127.0.0.1:{port}/x");
    let outcome = raw(project.path(), "http-read", &url, 0, extra).await;
    assert_eq!(only_report(&outcome).status, HookStatus::Ok, "{outcome:#?}");
    let context = outcome.additional_context.join("");
    assert!(
        context.starts_with("http error: ErrorCode::Tls"),
        "{context}"
    );
    raw_still_serves(project.path()).await;
}
