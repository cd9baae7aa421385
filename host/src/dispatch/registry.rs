//! The runtime hook registry: hooks an embedder (or a daemon client) registers while
//! events are being dispatched, each admitted by policy first ([`crate::Host::register`],
//! [`crate::policy::Policy::admit`]), for every session or for one.
//!
//! Reads are lock-free: a dispatch loads the current [`Snapshot`] once (`arc-swap`) and
//! selects from it, so it sees one consistent set of registered hooks from start to end,
//! whatever is registered or unregistered meanwhile. Writers take a mutex among
//! themselves, copy the map (bounded: [`MAX_REGISTERED`]), and publish the copy; no
//! writer waits for a dispatch and no dispatch for a writer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde_json::Value;

use crate::handlers::Invocation;
use crate::policy::{Group, Hook};

/// The most hooks registered on one host (every session together).
pub const MAX_REGISTERED: usize = 256;
/// The most hooks registered for one session (or for every session: the `None` scope).
pub const MAX_REGISTERED_PER_SESSION: usize = 32;
/// The most bytes one registration may take (as JSON): what the registry keeps of it
/// (the registration, to admit it again on a reload, and its built hook) is bounded by
/// this times [`MAX_REGISTERED`], whatever a client sends (a daemon reads lines of up
/// to 16 MiB).
pub const MAX_REGISTRATION_BYTES: usize = 64 << 10;
/// Registered hooks are numbered after every configured one: their `order` (config
/// order, the merge's tie-break) starts here.
pub const FIRST_ORDER: usize = 1 << 32;

/// The id of a registered hook: what [`crate::Host::unregister`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HookId(pub u64);

impl std::fmt::Display for HookId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "registered:{}", self.0)
    }
}

/// One registered hook.
#[derive(Debug)]
pub struct Registered {
    /// Its id.
    pub id: HookId,
    /// The session it is for (`None`: every session).
    pub session: Option<String>,
    /// Its event.
    pub event: String,
    /// Its admitted group (one hook).
    pub group: Group,
    /// The registration as given: admitted again when the host's policy is rebuilt.
    pub source: Value,
}

/// The registered hooks at one moment, in registration order.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    entries: BTreeMap<HookId, Arc<Registered>>,
}

impl Snapshot {
    /// Every registered hook, in registration order.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<Registered>> {
        self.entries.values()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The groups that apply to `invocation`: its event, its session or every session.
    pub fn groups_for<'a>(&'a self, invocation: &'a Invocation) -> impl Iterator<Item = &'a Group> {
        self.entries
            .values()
            .filter(move |r| {
                r.event == invocation.spec.name
                    && r.session
                        .as_deref()
                        .is_none_or(|s| s == invocation.session_id)
            })
            .map(|r| &r.group)
    }
}

/// Why a registration was not kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryFull {
    /// [`MAX_REGISTERED`] hooks are registered.
    #[error(
        "{MAX_REGISTERED} hooks are registered on this host, the most it keeps; unregister one first"
    )]
    Host,
    /// [`MAX_REGISTERED_PER_SESSION`] hooks are registered for the session.
    #[error(
        "{MAX_REGISTERED_PER_SESSION} hooks are registered for this session, the most it keeps; unregister one first"
    )]
    Session,
    /// The registration is over [`MAX_REGISTRATION_BYTES`].
    #[error(
        "a registration of {0} bytes is over the {MAX_REGISTRATION_BYTES} bytes the registry keeps of one"
    )]
    TooLarge(usize),
}

/// The registry of one host (shared by the hosts rebuilt from it).
#[derive(Debug, Default)]
pub struct Registry {
    current: ArcSwap<Snapshot>,
    /// Writers one at a time; the next id.
    writer: Mutex<u64>,
}

impl Registry {
    /// The registered hooks now: lock-free, one load.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Adds a hook that `admit` builds for its id, within the bounds.
    ///
    /// # Errors
    ///
    /// The bounds ([`RegistryFull`], as text), or `admit`'s refusal.
    pub fn insert<E: From<RegistryFull>>(
        &self,
        session: Option<String>,
        source: Value,
        admit: impl FnOnce(HookId) -> Result<(String, Group), E>,
    ) -> Result<HookId, E> {
        // Measured before anything is admitted or kept (a writer that counts, no copy).
        let size = json_size(&source);
        if size > MAX_REGISTRATION_BYTES {
            return Err(RegistryFull::TooLarge(size).into());
        }
        let mut next = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.current.load();
        if now.len() >= MAX_REGISTERED {
            return Err(RegistryFull::Host.into());
        }
        if now.entries().filter(|r| r.session == session).count() >= MAX_REGISTERED_PER_SESSION {
            return Err(RegistryFull::Session.into());
        }
        let id = HookId(*next + 1);
        let (event, group) = admit(id)?;
        *next += 1;
        let mut copy = Snapshot::clone(&now);
        copy.entries.insert(
            id,
            Arc::new(Registered {
                id,
                session,
                event,
                group,
                source,
            }),
        );
        self.current.store(Arc::new(copy));
        Ok(id)
    }

    /// Removes a hook; whether it was there.
    pub fn remove(&self, id: HookId) -> bool {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.current.load();
        if !now.entries.contains_key(&id) {
            return false;
        }
        let mut copy = Snapshot::clone(&now);
        copy.entries.remove(&id);
        self.current.store(Arc::new(copy));
        true
    }

    /// Removes every hook registered for `session` (its end); how many.
    pub fn remove_session(&self, session: &str) -> usize {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.current.load();
        let mut copy = Snapshot::clone(&now);
        copy.entries
            .retain(|_, r| r.session.as_deref() != Some(session));
        let removed = now.len() - copy.len();
        if removed > 0 {
            self.current.store(Arc::new(copy));
        }
        removed
    }

    /// Admits every hook again (the policy was rebuilt): `admit` gives the new group, or
    /// `None` when the new policy refuses it, and then it is removed. Returns the ids
    /// removed.
    pub fn readmit(&self, mut admit: impl FnMut(&Registered) -> Option<Group>) -> Vec<HookId> {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.current.load();
        let mut copy = Snapshot::default();
        let mut removed = Vec::new();
        for (id, entry) in &now.entries {
            match admit(entry) {
                Some(group) => {
                    copy.entries.insert(
                        *id,
                        Arc::new(Registered {
                            id: *id,
                            session: entry.session.clone(),
                            event: entry.event.clone(),
                            group,
                            source: entry.source.clone(),
                        }),
                    );
                }
                None => removed.push(*id),
            }
        }
        self.current.store(Arc::new(copy));
        removed
    }
}

/// The length of `value` as compact JSON, counted without holding the text.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// The hooks of `group` that apply to `invocation` (its matcher and each hook's `if`):
/// the one selection rule of configured and registered groups alike.
pub(super) fn selected_hooks(group: &Group, invocation: &Invocation) -> Option<Vec<Arc<Hook>>> {
    let spec = &invocation.spec;
    if !crate::matcher::group_applies(&group.matcher, spec, &invocation.input) {
        return None;
    }
    Some(
        group
            .hooks
            .iter()
            .filter(|hook| group.chain || super::if_matches(hook, invocation))
            .cloned()
            .collect(),
    )
}
