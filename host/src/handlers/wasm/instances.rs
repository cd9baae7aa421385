//! Instances kept per (hook, session) for plugins with `"instance": "session"`, and
//! their eviction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use super::bindings::{self, Plugin};
use super::limits::{CallOutcome, Limits, finish};
use super::load::Loaded;
use super::state::State;
use super::{PluginCall, Sandbox};
use crate::handlers::Invocation;
use crate::policy::capability::Live;

/// Session instances kept at most; the least recently used goes first.
pub(super) const MAX_SESSION_INSTANCES: usize = 64;

/// A live instance kept for one (hook, session).
pub(super) struct SessionInstance {
    pub(super) store: Store<State>,
    pub(super) plugin: Plugin,
    pub(super) digest: String,
    pub(super) last_used: Instant,
}

/// Held across the call: a session's events reach its instance one at a time.
pub(super) type SessionSlot = Arc<tokio::sync::Mutex<Option<SessionInstance>>>;

impl Sandbox {
    pub(super) async fn run_in_session(
        &self,
        call: &PluginCall,
        loaded: &Loaded,
        live: &Live,
        limits: &Limits,
        event: &bindings::Event,
        invocation: &Invocation,
    ) -> Result<CallOutcome, String> {
        let key = (call.label.clone(), invocation.session_id.clone());
        let slot = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            if !sessions.contains_key(&key) && sessions.len() >= MAX_SESSION_INSTANCES {
                evict_oldest(&mut sessions);
            }
            sessions.entry(key.clone()).or_default().clone()
        };
        // The instance is taken out of its slot for the call: if the call's future is
        // dropped (its client went away), the instance goes with it instead of being
        // reused mid-call. The slot stays locked meanwhile, so a session's events reach
        // its instance one at a time.
        let mut guard = slot.lock().await;
        let kept = guard
            .take()
            .filter(|instance| instance.digest == loaded.info.sha256);
        let mut instance = match kept {
            Some(instance) => instance,
            None => {
                let mut store = self.armed_store(loaded, live, limits)?;
                match loaded.pre.instantiate_async(&mut store).await {
                    Ok(plugin) => SessionInstance {
                        store,
                        plugin,
                        digest: loaded.info.sha256.clone(),
                        last_used: Instant::now(),
                    },
                    Err(e) => {
                        drop(guard);
                        self.forget_session(&key);
                        return Ok(finish(&mut store, limits, Err(e)));
                    }
                }
            }
        };
        instance.last_used = Instant::now();
        limits.arm(&mut instance.store)?;
        let result = instance
            .plugin
            .hookhost_hook_hook()
            .call_handle(&mut instance.store, event)
            .await;
        let trapped = result.is_err();
        let outcome = finish(&mut instance.store, limits, result);
        let ends = invocation.spec.name == "SessionEnd";
        if trapped || ends {
            // A trapped instance is never used again; a session that ended has no use for it.
            drop(guard);
            self.forget_session(&key);
        } else {
            *guard = Some(instance);
        }
        Ok(outcome)
    }

    pub(super) fn forget_session(&self, key: &(String, String)) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

pub(super) fn evict_oldest(sessions: &mut HashMap<(String, String), SessionSlot>) {
    let oldest = sessions
        .iter()
        .filter_map(|(k, slot)| {
            let guard = slot.try_lock().ok()?;
            Some((k.clone(), guard.as_ref().map(|i| i.last_used)))
        })
        .min_by_key(|(_, used)| *used)
        .map(|(k, _)| k);
    if let Some(key) = oldest {
        sessions.remove(&key);
    }
}
