//! One client connection: reading its request lines within the connection's bounds,
//! answering each request (a panic answered as its error), pushing its subscriptions'
//! async results, and writing the answers back as they finish.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::{FutureExt, StreamExt};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

#[cfg(debug_assertions)]
use super::DEBUG_PANIC_EVENT;
use super::protocol::{Frame, READ_BUFFER, Request, RequestLines, parse_request};
use super::{SHUTDOWN_WRITE_GRACE, Server};
use crate::outcome::Outcome;
use crate::text::panic_message;

/// The capacity an answer line is serialized into: an outcome with one hook's report
/// takes about 600 bytes.
const ANSWER_CAPACITY: usize = 1024;

/// An answer waiting to be written, with what it holds of its connection's bounds.
struct Queued {
    text: String,
    _slot: Option<OwnedSemaphorePermit>,
    _bytes: Option<OwnedSemaphorePermit>,
}

/// `n` permits of `semaphore` (at most all of them), without waiting when they are free.
async fn take(semaphore: &Arc<Semaphore>, n: usize, all: usize) -> OwnedSemaphorePermit {
    let n = n.clamp(1, all) as u32;
    match semaphore.clone().try_acquire_many_owned(n) {
        Ok(permit) => permit,
        Err(_) => semaphore
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("a connection's semaphores are never closed"),
    }
}

impl Server {
    /// Answers one request; returns the answer line.
    async fn answer(&self, request: &mut Request) -> String {
        if request.register.is_some() || request.unregister.is_some() {
            return self.answer_registry(request);
        }
        let Some(event) = request.event.as_deref() else {
            return json!({"id": request.id, "error": "bad request: `event` is required"})
                .to_string();
        };
        #[cfg(debug_assertions)]
        if event == DEBUG_PANIC_EVENT {
            panic!("a request for `{DEBUG_PANIC_EVENT}` (debug builds only)");
        }
        let (host, notice) = match self.project_host(request.project.take(), true) {
            Ok(found) => found,
            Err(message) => return json!({"id": request.id, "error": message}).to_string(),
        };
        match host
            .dispatch(event, request.input.take().unwrap_or_else(|| json!({})))
            .await
        {
            Ok(mut outcome) => {
                if let Some(notice) = notice {
                    outcome.host_notice(notice);
                }
                /// `{"id": …, "outcome": …}`, serialized without an intermediate `Value`.
                #[derive(Serialize)]
                struct Answer<'a> {
                    id: &'a Value,
                    outcome: &'a Outcome,
                }
                // Sized for a usual answer, so that it is written without regrowing.
                let mut text = Vec::with_capacity(ANSWER_CAPACITY);
                match serde_json::to_writer(
                    &mut text,
                    &Answer {
                        id: &request.id,
                        outcome: &outcome,
                    },
                ) {
                    // serde_json writes UTF-8 only.
                    Ok(()) => String::from_utf8(text).expect("JSON is UTF-8"),
                    Err(e) => json!({"id": request.id, "error": format!("cannot encode the outcome: {e}")})
                        .to_string(),
                }
            }
            Err(e) => json!({"id": request.id, "error": e.to_string()}).to_string(),
        }
    }

    /// [`Server::answer`], with a panic answered as an error of this request: the
    /// connection and every other request carry on.
    async fn answer_caught(&self, request: &mut Request) -> String {
        match AssertUnwindSafe(self.answer(request)).catch_unwind().await {
            Ok(answer) => answer,
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                tracing::error!("a request panicked: {message}");
                json!({"id": request.id, "error": format!(
                    "internal error: the request panicked ({message}); the daemon serves on"
                )})
                .to_string()
            }
        }
    }

    /// Serves one connection until it closes or the server shuts down. With
    /// `finish_on_eof`, the end of input waits for in-flight requests (stdio); otherwise it
    /// cancels them (a socket client that went away).
    pub async fn serve_connection<R, W>(self: Arc<Self>, reader: R, writer: W, finish_on_eof: bool)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let limits = self.limits;
        // Unbounded as a channel, bounded by the permits each queued answer holds.
        let (out, outgoing) = mpsc::unbounded_channel::<Queued>();
        let writer_task = tokio::spawn(write_answers(writer, outgoing, self.shutdown.clone()));
        // Requests back to the client: its model (prompt and agent hooks whose provider
        // is `embedder`) and the MCP servers it names.
        let client_calls = Arc::new(super::client_calls::ClientCalls::new({
            let out = out.clone();
            move |text| {
                let queued = Queued {
                    text,
                    _slot: None,
                    _bytes: None,
                };
                out.send(queued).is_ok()
            }
        }));
        let mut lines =
            FramedRead::with_capacity(reader, RequestLines::new(limits.line), READ_BUFFER);
        let slots = Arc::new(Semaphore::new(limits.in_flight));
        let bytes = Arc::new(Semaphore::new(limits.pending_bytes));
        let mut requests = JoinSet::new();
        let mut subscriptions = JoinSet::new();
        // An answer the reading loop makes itself (errors, acks, pushes): small, so it
        // holds a slot but no bytes.
        let small = |text: String, slot| Queued {
            text,
            _slot: Some(slot),
            _bytes: None,
        };
        // Socket connections are closed when idle ([`super::Limits::idle`]); stdio is one
        // client, whose end of input ends the daemon.
        let idle = !finish_on_eof;
        let mut closed_idle = false;
        let eof = loop {
            // A slot for whatever the next line is answered with. When the client
            // leaves its answers unread and every slot is taken, reading stops here.
            let slot = tokio::select! {
                biased;
                slot = take(&slots, 1, limits.in_flight) => slot,
                _ = self.shutdown.cancelled() => break false,
            };
            let next = tokio::select! {
                _ = self.shutdown.cancelled() => break false,
                next = lines.next() => next,
                () = tokio::time::sleep(limits.idle), if idle => {
                    // Idle only with nothing in flight and no subscription.
                    while requests.try_join_next().is_some() {}
                    if !requests.is_empty() || !subscriptions.is_empty() {
                        continue;
                    }
                    let message = format!(
                        "connection closed: idle for {} s (HOOKHOST_CONNECTION_IDLE_SECS); \
                         connect again to send more",
                        limits.idle.as_secs_f64()
                    );
                    let _ = out.send(small(json!({"id": null, "error": message}).to_string(), slot));
                    closed_idle = true;
                    break true;
                }
            };
            let line = match next {
                None | Some(Err(_)) => break true,
                Some(Ok(Frame::TooLong)) => {
                    let message = format!(
                        "bad request: line longer than {} bytes (skipped to its end)",
                        limits.line
                    );
                    let _ = out.send(small(
                        json!({"id": null, "error": message}).to_string(),
                        slot,
                    ));
                    continue;
                }
                Some(Ok(Frame::Line(line))) => line,
            };
            if line.first() != Some(&b'{') && line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // The line's bytes count until its answer exists.
            let held = tokio::select! {
                biased;
                held = take(&bytes, line.len(), limits.pending_bytes) => held,
                _ = self.shutdown.cancelled() => break false,
            };
            let mut request = match parse_request(&line) {
                Ok(request) => request,
                Err(bad) => {
                    let _ = out.send(small(bad.answer(), slot));
                    continue;
                }
            };
            drop(line);
            use super::client_calls::Kind;
            let answered = match (request.model_result.take(), request.mcp_result.take()) {
                (Some(result), _) => Some((Kind::Model, result)),
                (None, Some(result)) => Some((Kind::Mcp, result)),
                (None, None) => None,
            };
            if let Some((kind, result)) = answered {
                drop(held);
                if let Err(message) = client_calls.deliver(kind, &request.id, result) {
                    let _ = out.send(small(
                        json!({"id": request.id, "error": message}).to_string(),
                        slot,
                    ));
                }
                continue;
            }
            if let Some(session) = request.subscribe.take() {
                drop(held);
                if subscriptions.len() >= limits.subscriptions {
                    let message = format!(
                        "bad request: at most {} subscriptions per connection",
                        limits.subscriptions
                    );
                    let _ = out.send(small(
                        json!({"id": request.id, "error": message}).to_string(),
                        slot,
                    ));
                    continue;
                }
                let mut subscription = self.sessions.subscribe(&session);
                let ack = json!({"id": request.id, "subscribed": session}).to_string();
                let _ = out.send(small(ack, slot));
                let (out, slots) = (out.clone(), slots.clone());
                subscriptions.spawn(async move {
                    while let Some(result) = subscription.recv().await {
                        // Waits while the client leaves its answers unread; meanwhile
                        // the subscription's own queue is bounded.
                        let slot = take(&slots, 1, limits.in_flight).await;
                        let push = json!({"session": session, "async": result}).to_string();
                        if out.send(small(push, slot)).is_err() {
                            break;
                        }
                    }
                });
                continue;
            }
            let (server, out, bytes) = (self.clone(), out.clone(), bytes.clone());
            let caller: Arc<dyn crate::handlers::model::ModelClient> = client_calls.clone();
            let servers = request.mcp_servers.take().unwrap_or_default();
            let caller_mcp: Option<Arc<dyn crate::handlers::mcp::McpProvider>> =
                (!servers.is_empty()).then(|| {
                    Arc::new(super::client_mcp::ClientMcp::new(
                        client_calls.clone(),
                        servers,
                    )) as _
                });
            requests.spawn(async move {
                let answer = async {
                    match caller_mcp {
                        Some(mcp) => {
                            crate::handlers::mcp::with_caller_mcp(
                                mcp,
                                server.answer_caught(&mut request),
                            )
                            .await
                        }
                        None => server.answer_caught(&mut request).await,
                    }
                };
                let text = crate::handlers::model::with_caller_model(caller, answer).await;
                drop(request);
                drop(held);
                let held = take(&bytes, text.len(), limits.pending_bytes).await;
                let _ = out.send(Queued {
                    text,
                    _slot: Some(slot),
                    _bytes: Some(held),
                });
            });
            // Reap answered requests so a long connection does not accumulate them.
            while requests.try_join_next().is_some() {}
        };
        if eof && !finish_on_eof {
            // The client is gone: cancel its requests; dropping their futures kills their
            // processes.
            requests.shutdown().await;
        } else {
            // Shutdown, or the end of stdin: answer what was asked.
            while requests.join_next().await.is_some() {}
        }
        subscriptions.shutdown().await;
        // Its sender goes with it, so that the writer sees the end.
        drop(client_calls);
        drop(out);
        if closed_idle {
            // A client that neither writes nor reads does not keep its slot through an
            // answer it never takes.
            let mut writer_task = writer_task;
            if tokio::time::timeout(limits.idle, &mut writer_task)
                .await
                .is_err()
            {
                writer_task.abort();
            }
        } else {
            let _ = writer_task.await;
        }
    }
}

/// Writes answers as they come, batching those that are ready into one write. Gives up
/// when the client is gone, or when, after shutdown, it has not taken an answer within
/// [`SHUTDOWN_WRITE_GRACE`].
async fn write_answers<W: AsyncWrite + Unpin>(
    writer: W,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    shutdown: CancellationToken,
) {
    let mut writer = BufWriter::with_capacity(16 << 10, writer);
    let give_up = || async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_WRITE_GRACE).await;
    };
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(answer) = next {
            let written = tokio::select! {
                biased;
                written = async {
                    writer.write_all(answer.text.as_bytes()).await?;
                    writer.write_all(b"\n").await
                } => written.is_ok(),
                _ = give_up() => false,
            };
            if !written {
                return;
            }
            drop(answer);
            next = queue.try_recv().ok();
        }
        let flushed = tokio::select! {
            biased;
            flushed = writer.flush() => flushed.is_ok(),
            _ = give_up() => false,
        };
        if !flushed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostBuilder;
    use crate::policy::FunctionHook;
    use crate::serve::{HostFactory, Limits};
    use std::path::Path;
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A server over a host with one function hook on PreToolUse that sleeps 200 ms and
    /// one on PostToolUse that panics while it is called; the factory itself panics for
    /// the project `/boom`.
    fn server(limits: Limits) -> Arc<Server> {
        let factory: HostFactory = Arc::new(|dir, sessions, _gate| {
            assert!(dir != Path::new("/boom"), "the factory panics for /boom");
            HostBuilder::new(dir)
                .function_hook(FunctionHook::new("PreToolUse", "slow", |_| async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    Ok(json!({"decision": "block", "reason": "slow"}))
                }))
                .function_hook(FunctionHook::new(
                    "PostToolUse",
                    "boom",
                    |_| -> std::future::Ready<Result<Value, String>> { panic!("boom") },
                ))
                .session_store(sessions)
                .build()
        });
        Server::with_limits(std::env::temp_dir(), factory, limits)
    }

    /// Sends `lines` on a fresh connection and reads `answers` answers.
    async fn exchange(server: &Arc<Server>, lines: &str, answers: usize) -> Vec<Value> {
        let (client, daemon) = tokio::io::duplex(1 << 16);
        let (reader, writer) = tokio::io::split(daemon);
        let served = tokio::spawn(server.clone().serve_connection(reader, writer, true));
        let (client_reader, mut client_writer) = tokio::io::split(client);
        client_writer.write_all(lines.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(client_reader).lines();
        let mut out = Vec::new();
        for _ in 0..answers {
            let line = lines.next_line().await.unwrap().expect("an answer");
            out.push(serde_json::from_str(&line).unwrap());
        }
        // Both halves: the daemon sees the end of input once the whole stream is gone.
        drop((lines, client_writer));
        served.await.unwrap();
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_is_the_answer_of_its_own_request_only() {
        let server = server(Limits::default());
        let lines = [
            json!({"id": "slow", "event": "PreToolUse", "input": {"tool_name": "Bash"}}),
            json!({"id": "factory", "event": "Stop", "project": "/boom"}),
            json!({"id": "hook", "event": "PostToolUse", "input": {"tool_name": "Bash"}}),
            json!({"id": "after", "event": "Stop"}),
        ]
        .iter()
        .map(|l| l.to_string() + "\n")
        .collect::<String>();
        let answers = exchange(&server, &lines, 4).await;
        let by_id = |id: &str| answers.iter().find(|a| a["id"] == id).unwrap().clone();
        assert_eq!(by_id("slow")["outcome"]["decision"], "deny", "{answers:?}");
        let factory = by_id("factory");
        assert!(
            factory["error"]
                .as_str()
                .unwrap()
                .contains("the request panicked (the factory panics for /boom)"),
            "{factory}"
        );
        // The hook's panic is either the hook's failure or the request's error; never
        // a lost answer.
        let hook = by_id("hook");
        assert!(
            hook["outcome"].is_object() || hook["error"].is_string(),
            "{hook}"
        );
        assert_eq!(by_id("after")["outcome"]["event"], "Stop");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_is_not_read() {
        let server = server(Limits {
            in_flight: 4,
            ..Limits::default()
        });
        let (client, daemon) = tokio::io::duplex(1024);
        let (reader, writer) = tokio::io::split(daemon);
        let served = tokio::spawn(server.clone().serve_connection(reader, writer, false));
        let (client_reader, mut client_writer) = tokio::io::split(client);
        let request = json!({"id": 1, "event": "Stop"}).to_string() + "\n";
        // Nothing is read: after the in-flight slots, the pipe's 1 KiB and the
        // daemon's read buffer, writing blocks.
        let mut sent = 0;
        while sent < 10_000 {
            let write = client_writer.write_all(request.as_bytes());
            if tokio::time::timeout(Duration::from_secs(2), write)
                .await
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        assert!(sent < 1000, "{sent} requests were read");
        // Reading frees the slots, and what was sent is answered.
        let mut lines = BufReader::new(client_reader).lines();
        for _ in 0..sent {
            let answer: Value =
                serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            assert_eq!(answer["outcome"]["event"], "Stop");
        }
        drop((lines, client_writer));
        served.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_connection_takes_its_subscriptions_with_it() {
        let server = server(Limits::default());
        let lines: String = (0..50)
            .map(|n| json!({"id": n, "subscribe": format!("s{n}")}).to_string() + "\n")
            .collect();
        let answers = exchange(&server, &lines, 50).await;
        assert!(answers.iter().all(|a| a["subscribed"].is_string()));
        assert_eq!(server.sessions().subscriptions(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn naming_ever_new_projects_keeps_a_bounded_table() {
        let server = server(Limits {
            projects: 4,
            ..Limits::default()
        });
        let dirs = tempfile::tempdir().unwrap();
        let lines: String = (0..20)
            .map(|n| {
                let project = dirs.path().join(n.to_string());
                json!({"id": n, "event": "Stop", "project": project}).to_string() + "\n"
            })
            .collect();
        let relative =
            json!({"id": "rel", "event": "Stop", "project": "x/../y"}).to_string() + "\n";
        let answers = exchange(&server, &(lines + &relative), 21).await;
        assert!(answers.iter().filter(|a| a["outcome"].is_object()).count() == 20);
        let rel = answers.iter().find(|a| a["id"] == "rel").unwrap();
        assert!(
            rel["error"].as_str().unwrap().contains("absolute path"),
            "{rel}"
        );
        assert!(server.projects.lock().unwrap().len() <= 4);
    }
}
