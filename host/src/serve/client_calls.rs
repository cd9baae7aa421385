//! Requests hookhost sends back to the client that dispatched an event, while one of its
//! hooks runs: `{"id": "model-N", "model": {…}}` ([`super::client_model`]) and
//! `{"id": "mcp-N", "mcpCall": {…}}` ([`super::client_mcp`]). The client answers with a
//! line carrying the same `id` (`modelResult`, `mcpResult`), which the connection hands
//! to [`ClientCalls::deliver`]. The hook's timeout bounds the wait; a request whose hook
//! gave up is forgotten, and its late answer is refused. An answer is a request line of
//! the connection, so the connection's line cap bounds it before it is held.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Sends one line to the client; `false` when it is gone.
type Send = Box<dyn Fn(String) -> bool + std::marker::Send + Sync>;

/// One connection's requests to its client, in flight by id.
pub struct ClientCalls {
    send: Send,
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next: AtomicU64,
}

/// The kinds of request, each with its id prefix, request key and answer key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `{"id": "model-N", "model": …}`, answered by `modelResult`.
    Model,
    /// `{"id": "mcp-N", "mcpCall": …}`, answered by `mcpResult`.
    Mcp,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Model => "model-",
            Kind::Mcp => "mcp-",
        }
    }

    fn request_key(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Mcp => "mcpCall",
        }
    }

    fn answer_key(self) -> &'static str {
        match self {
            Kind::Model => "modelResult",
            Kind::Mcp => "mcpResult",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Model => "model",
            Kind::Mcp => "MCP",
        }
    }
}

impl ClientCalls {
    /// Requests written with `send`.
    pub fn new(send: impl Fn(String) -> bool + std::marker::Send + Sync + 'static) -> ClientCalls {
        ClientCalls {
            send: Box::new(send),
            pending: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }

    /// Sends a request of `kind` with `body` and waits for the client's answer (the
    /// caller's timeout bounds the wait; dropping this future forgets the request).
    /// `None`: the client is gone.
    pub async fn ask(&self, kind: Kind, body: Value) -> Option<Value> {
        let id = format!(
            "{}{}",
            kind.prefix(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.clone(), tx);
        let _forget = Forget(self, id.clone());
        let mut line = json!({"id": id});
        line[kind.request_key()] = body;
        if !(self.send)(line.to_string()) {
            return None;
        }
        rx.await.ok()
    }

    /// Hands an answer of `kind` to the request it answers.
    ///
    /// # Errors
    ///
    /// No request of that kind with that id is waiting (never sent, answered, or given
    /// up).
    pub fn deliver(&self, kind: Kind, id: &Value, result: Value) -> Result<(), String> {
        let key = id.as_str().filter(|k| k.starts_with(kind.prefix()));
        let waiting = key.and_then(|key| {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(key)
        });
        match waiting {
            Some(tx) => {
                let _ = tx.send(result);
                Ok(())
            }
            None => Err(format!(
                "bad request: no {} request {id} is waiting for a `{}`",
                kind.noun(),
                kind.answer_key()
            )),
        }
    }

    fn forget(&self, id: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

/// Forgets a request when its hook stops waiting (answered, timed out, cancelled).
struct Forget<'a>(&'a ClientCalls, String);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(&self.1);
    }
}
