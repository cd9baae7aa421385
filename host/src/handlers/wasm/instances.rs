//! Instances kept per [`SessionKey`] (hook, session, project, grants) for plugins with
//! `"instance": "session"`, and their eviction.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;

use super::bindings::{self, Plugin};
use super::grants::GrantCheck;
use super::limits::{Allowance, CallOutcome, Limits, Phase, finish, timeout_message};
use super::load::Loaded;
use super::session_key::Grants;
use super::state::State;
use super::{LoadError, PluginCall, Sandbox};
use crate::handlers::{FailureKind, Invocation};
use crate::policy::capability::Live;

/// Session instances kept at most; the least recently used goes first.
pub(super) const MAX_SESSION_INSTANCES: usize = 64;
/// Memory that the kept instances of one hook may hold together, counted by their whole
/// footprint (`State::footprint`: linear memory and host resources); beyond it the
/// hook's least recently used instances are dropped.
pub const MAX_SESSION_MEMORY_PER_HOOK: usize = 256 << 20;
/// Memory that all kept instances may hold together, counted as for one hook.
pub const MAX_SESSION_MEMORY: usize = 1 << 30;

/// A live instance kept for one (hook, session).
pub(super) struct SessionInstance {
    pub(super) store: Store<State>,
    pub(super) plugin: Plugin,
    pub(super) digest: String,
    pub(super) last_used: Instant,
}

/// Held across the call: a session's events reach its instance one at a time.
pub(super) type SessionSlot = Arc<tokio::sync::Mutex<Option<SessionInstance>>>;

pub(super) use super::session_key::SessionKey;

impl Sandbox {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_in_session(
        &self,
        call: &PluginCall,
        loaded: &Loaded,
        live: &Live,
        grants: &GrantCheck<'_>,
        allowance: &Allowance,
        event: &bindings::Event,
        invocation: &Invocation,
    ) -> Result<CallOutcome, LoadError> {
        let key = SessionKey::new(
            &call.label,
            &invocation.session_id,
            &invocation.project_dir,
            &Grants {
                digest: &loaded.info.sha256,
                live,
                ceilings: grants.ceilings,
                limits: &allowance.limits,
                prints: &loaded.prints,
            },
        );
        let slot = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            // An instance of this hook and session made under other grants never serves again.
            sessions.retain(|kept, _| !key.supersedes(kept));
            if !sessions.contains_key(&key) && sessions.len() >= MAX_SESSION_INSTANCES {
                evict_oldest(&mut sessions, |_| true);
            }
            sessions.entry(key.clone()).or_default().clone()
        };
        // The instance is taken out of its slot for the call: if the call's future is
        // dropped (its client went away), the instance goes with it instead of being
        // reused mid-call. The slot stays locked meanwhile, so a session's events reach
        // its instance one at a time; an event waits for it no longer than its own
        // deadline (the wait counts against its time, as a command hook's does).
        let Ok(mut guard) = tokio::time::timeout_at(allowance.event.deadline, slot.lock()).await
        else {
            return Err((
                FailureKind::Timeout,
                format!(
                    "{}, waiting for its session instance, busy with an earlier event of the session",
                    timeout_message(&allowance.limits)
                ),
            ));
        };
        let kept = guard
            .take()
            .filter(|instance| instance.digest == loaded.info.sha256);
        let mut instance = match kept {
            // A kept instance is armed afresh for this call.
            Some(mut instance) => {
                allowance
                    .arm(&mut instance.store)
                    .map_err(|e| (FailureKind::CannotStart, e))?;
                instance
            }
            // A new one is armed once, as in `run_fresh`: its start functions and its
            // first call share one budget of fuel and time.
            None => {
                let pre = loaded
                    .pre_for(self, !live.http.is_empty())
                    .map_err(|e| (FailureKind::CannotStart, e))?;
                let mut store = self.armed_store(loaded, live, grants, allowance)?;
                let deadline = store.data().http_policy.deadline;
                match Limits::bound(&self.ticker, deadline, pre.instantiate_async(&mut store)).await
                {
                    Ok(plugin) => SessionInstance {
                        store,
                        plugin,
                        digest: loaded.info.sha256.clone(),
                        last_used: Instant::now(),
                    },
                    Err(e) => {
                        drop(guard);
                        self.forget_session(&key);
                        return Ok(finish(
                            &mut store,
                            &allowance.limits,
                            Phase::Instantiate,
                            Err(e),
                        ));
                    }
                }
            }
        };
        instance.last_used = Instant::now();
        let deadline = instance.store.data().http_policy.deadline;
        let result = Limits::bound(
            &self.ticker,
            deadline,
            instance
                .plugin
                .hookhost_hook_hook()
                .call_handle(&mut instance.store, event),
        )
        .await;
        let trapped = result.is_err();
        let outcome = finish(&mut instance.store, &allowance.limits, Phase::Call, result);
        let ends = invocation.spec.ends_session;
        if trapped || ends {
            // A trapped instance is never used again; a session that ended has no use for it.
            drop(guard);
            self.forget_session(&key);
        } else {
            *guard = Some(instance);
            drop(guard);
            self.keep_within_memory(&key.0);
        }
        Ok(outcome)
    }

    pub(super) fn forget_session(&self, key: &SessionKey) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Drops the least recently used idle instances while the kept instances of `hook`
    /// (their footprints: linear memory and host resources) hold more than [`MAX_SESSION_MEMORY_PER_HOOK`], or all of them more than
    /// [`MAX_SESSION_MEMORY`].
    fn keep_within_memory(&self, hook: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let (mut of_hook, mut all) = (0usize, 0usize);
            for (key, slot) in sessions.iter() {
                // An instance in a call is not counted: it is not idle, and its call
                // puts it back (and checks again) when it ends.
                let Ok(mut guard) = slot.try_lock() else {
                    continue;
                };
                let held = guard.as_mut().map_or(0, |i| i.store.data_mut().footprint());
                all += held;
                if key.0 == hook {
                    of_hook += held;
                }
            }
            if of_hook > MAX_SESSION_MEMORY_PER_HOOK {
                if !evict_oldest(&mut sessions, |key| key.0 == hook) {
                    return;
                }
            } else if all > MAX_SESSION_MEMORY {
                if !evict_oldest(&mut sessions, |_| true) {
                    return;
                }
            } else {
                return;
            }
        }
    }
}

/// Drops the least recently used idle instance whose key `matches`; whether one was.
pub(super) fn evict_oldest(
    sessions: &mut HashMap<SessionKey, SessionSlot>,
    matches: impl Fn(&SessionKey) -> bool,
) -> bool {
    let oldest = sessions
        .iter()
        .filter(|(k, _)| matches(k))
        .filter_map(|(k, slot)| {
            let guard = slot.try_lock().ok()?;
            Some((k.clone(), guard.as_ref().map(|i| i.last_used)))
        })
        .min_by_key(|(_, used)| *used)
        .map(|(k, _)| k);
    match oldest {
        Some(key) => sessions.remove(&key).is_some(),
        None => false,
    }
}
