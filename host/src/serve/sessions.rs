//! The daemon's session store: the shared [`DiskStore`] of the data directory (the
//! one-shot CLI, the dispatch daemon and every other `serve` on it count the same Stop
//! blocks and queue the same results), with subscriptions on top: an async result that
//! finishes in this daemon is pushed to the connections subscribed to its session, and
//! queued in the store only when none can take it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::SUBSCRIBER_QUEUE;
use crate::session::{AsyncResult, DiskStore, SessionStore};

/// Session state shared by every connection (and every host of the data directory),
/// which pushes async results to subscribers.
#[derive(Debug)]
pub struct SubscribingStore {
    inner: DiskStore,
    subscribers: Mutex<Subscribers>,
}

#[derive(Debug, Default)]
struct Subscribers {
    next_id: u64,
    by_session: HashMap<String, Vec<(u64, mpsc::Sender<AsyncResult>)>>,
}

/// One subscription to a session's async results; dropping it (its connection closed)
/// unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    store: Arc<SubscribingStore>,
    session: String,
    id: u64,
    results: mpsc::Receiver<AsyncResult>,
}

impl Subscription {
    /// The next async result of the session.
    pub async fn recv(&mut self) -> Option<AsyncResult> {
        self.results.recv().await
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut subscribers = self.store.lock();
        if let Some(list) = subscribers.by_session.get_mut(&self.session) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                subscribers.by_session.remove(&self.session);
            }
        }
    }
}

impl crate::session::sealed::Sealed for SubscribingStore {}

impl SubscribingStore {
    /// Subscriptions over `store`.
    pub fn new(store: DiskStore) -> SubscribingStore {
        SubscribingStore {
            inner: store,
            subscribers: Mutex::default(),
        }
    }

    /// The store under the subscriptions.
    pub fn store(&self) -> &DiskStore {
        &self.inner
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        self.subscribers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribes to `session`: what finished before is delivered at once.
    pub fn subscribe(self: &Arc<Self>, session: &str) -> Subscription {
        let (sender, results) = mpsc::channel(SUBSCRIBER_QUEUE);
        let mut subscribers = self.lock();
        let id = subscribers.next_id;
        subscribers.next_id += 1;
        // No more than the channel holds: the rest stay queued, in their order.
        for result in self.inner.take_at_most(session, SUBSCRIBER_QUEUE) {
            if let Err(full) = sender.try_send(result) {
                self.inner.push_async(session, full.into_inner());
            }
        }
        subscribers
            .by_session
            .entry(session.to_string())
            .or_default()
            .push((id, sender));
        Subscription {
            store: self.clone(),
            session: session.to_string(),
            id,
            results,
        }
    }

    /// How many subscriptions are live (for tests of their clean-up).
    pub fn subscriptions(&self) -> usize {
        self.lock().by_session.values().map(Vec::len).sum()
    }
}

impl SessionStore for SubscribingStore {
    fn stop_blocks(&self, session: &str) -> u32 {
        self.inner.stop_blocks(session)
    }
    fn set_stop_blocks(&self, session: &str, count: u32) {
        self.inner.set_stop_blocks(session, count)
    }
    fn update_stop_blocks(
        &self,
        session: &str,
        update: &mut dyn FnMut(u32) -> u32,
    ) -> Result<(), String> {
        self.inner.update_stop_blocks(session, update)
    }
    fn push_async(&self, session: &str, result: AsyncResult) {
        let subscribers = self.lock();
        let mut delivered = false;
        if let Some(list) = subscribers.by_session.get(session) {
            for (_, s) in list {
                delivered |= s.try_send(result.clone()).is_ok();
            }
        }
        drop(subscribers);
        if !delivered {
            self.inner.push_async(session, result);
        }
    }
    fn take_async(&self, session: &str) -> Vec<AsyncResult> {
        self.inner.take_async(session)
    }
    fn issue_job(&self, session: &str, id: &str, digest: &str) -> Result<(), String> {
        self.inner.issue_job(session, id, digest)
    }
    fn withdraw_job(&self, session: &str, id: &str) {
        self.inner.withdraw_job(session, id)
    }
    fn consume_job(&self, session: &str, id: &str, digest: &str) -> Result<(), String> {
        self.inner.consume_job(session, id, digest)
    }
    fn end_session(&self, session: &str) {
        self.inner.end_session(session)
    }
}
