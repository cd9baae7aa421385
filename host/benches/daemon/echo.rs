//! The baseline of the daemon's throughput: a bare JSON-lines server on a unix socket
//! that does what any server of `hookhost serve`'s protocol must (read a line, parse it
//! as JSON, answer `{"id": …, "outcome": {…}}` on the same connection) and nothing else:
//! no policy, no hook, no audit line. Same runtime as the daemon (tokio, two worker
//! threads), same allocator (mimalloc, the bench's global allocator), in a process of
//! its own like the daemon. Hand-written on purpose: a framework's echo example would
//! measure the framework, not the floor of this protocol.

use std::path::Path;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::UnixStream;

/// The variable that makes the bench binary this server (its value: the socket path).
pub const ECHO_VAR: &str = "HOOKHOST_BENCH_ECHO_SOCKET";

/// Serves on `socket` until killed.
pub fn serve(socket: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the echo server's runtime");
    runtime.block_on(async {
        let listener = tokio::net::UnixListener::bind(socket).expect("bind the echo socket");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(connection(stream));
        }
    });
}

/// Answers one connection's lines in order; answers that are ready go out in one write.
async fn connection(stream: UnixStream) {
    let (reader, writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(8 << 10, reader);
    let mut writer = BufWriter::with_capacity(16 << 10, writer);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = match serde_json::from_slice::<Value>(&line) {
            Ok(request) => json!({
                "id": request["id"],
                "outcome": {"event": request["event"], "decision": "none"},
            }),
            Err(e) => json!({"id": null, "error": format!("bad request: {e}")}),
        };
        let mut text = serde_json::to_vec(&answer).expect("a JSON value serializes");
        text.push(b'\n');
        if writer.write_all(&text).await.is_err() {
            return;
        }
        // More whole lines already read: their answers go out in the same write.
        if !reader.buffer().contains(&b'\n') && writer.flush().await.is_err() {
            return;
        }
    }
}
