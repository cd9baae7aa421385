//! What a plugin holds on the host, accounted where the host hands it out:
//!
//! - **Descriptors** (files a plugin opens, and its preopened directories) come from one
//!   budget of the process ([`host_descriptors`], a quarter of the soft `RLIMIT_NOFILE`),
//!   shared by every hook; one hook (all its instances together, whatever plugin file it
//!   runs) holds at most a quarter of it ([`DescriptorShare`]), so a hook that hoards
//!   descriptors cannot starve its siblings (other hooks of the same plugin included),
//!   nor the command hooks and the host itself. The last quarter of the budget is kept
//!   for every hook's first [`HOOK_FLOOR`] descriptors (its preopened directories), so
//!   several hooks that each hoard their share cannot starve a sibling either.
//! - **Bytes** the host keeps for a resource (a directory listing, read in full when the
//!   stream is opened) are charged to the store's memory limit with its linear memory
//!   ([`super::state::Limiter::hold`]).
//! - **Every other entry** of a store's resource table (bodies, streams) may hold at
//!   most [`entry_bytes`] of its memory limit, and wasi-http's buffers are sized by it;
//!   the table holds at most the limit's worth of such entries. Outgoing bodies are also
//!   charged their write budget ([`super::held_bodies`]); incoming responses are charged
//!   by the bytes held for them, each connection's buffers and each body frame
//!   ([`super::held_responses`]); other streams are bounded by the entry size rather
//!   than charged by their fill (wasmtime-wasi-http 48 keeps what they buffer in private
//!   fields).
//!
//! The wrappers that take and give back live in [`super::hostcalls`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

/// The most host memory one entry of a store's resource table may hold, under a memory
/// limit of 16 MiB or more (`entry_bytes` for smaller limits): the table holds at most
/// the plugin's memory limit divided by this many entries
/// (`super::state::resource_table_cap`), so what a plugin's resources hold on the host
/// is bounded by its memory limit.
pub const RESOURCE_ENTRY_BYTES: usize = 64 * 1024;
/// The fewest entries a resource table gets, whatever the memory limit.
pub const MIN_RESOURCE_ENTRIES: usize = 256;
/// The least an entry may hold, whatever the limit: room for ordinary HTTP headers.
pub const MIN_ENTRY_BYTES: usize = 8 * 1024;
/// Host memory a pollable holds (its table entry and the boxed closure that makes its
/// future), charged in [`super::state::State::footprint`] instead of a whole entry.
pub const POLLABLE_BYTES: usize = 256;

/// The most host memory one resource-table entry may hold in a store whose memory limit
/// is `memory_bytes`: wasi-http's buffers follow it (the size limit of a `fields`, the
/// chunk an outgoing body's stream buffers, [`super::http_policy`]), so that the table's
/// cap times this stays within the memory limit (for limits of 2 MiB or more).
pub fn entry_bytes(memory_bytes: usize) -> usize {
    (memory_bytes / MIN_RESOURCE_ENTRIES).clamp(MIN_ENTRY_BYTES, RESOURCE_ENTRY_BYTES)
}
/// The fewest descriptors the budget of all plugins gets, whatever the fd limit.
const MIN_HOST_DESCRIPTORS: usize = 64;
/// The most descriptors the budget of all plugins gets.
const MAX_HOST_DESCRIPTORS: usize = 16_384;

/// Descriptors all plugins of this process may hold at once: a quarter of the soft
/// `RLIMIT_NOFILE`, within 64..=16,384 (read once per process).
pub fn host_descriptors() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let soft = crate::config::file::open_file_limit();
        usize::try_from(soft / 4)
            .unwrap_or(MAX_HOST_DESCRIPTORS)
            .clamp(MIN_HOST_DESCRIPTORS, MAX_HOST_DESCRIPTORS)
    })
}

/// Descriptors a hook may hold from the last quarter of the host's budget, which is kept
/// for them: its preopened directories and a few files ([`Descriptors`]).
const HOOK_FLOOR: usize = 16;

/// Descriptors one hook (all its instances together) may hold: a quarter of the host's
/// budget.
pub fn hook_descriptors(host: usize) -> usize {
    (host / 4).max(1)
}

/// Bytes charged per live wasi-http `fields` (by table rep; [`super::held_fields`]).
#[derive(Debug, Default)]
pub struct FieldBytes {
    pub(super) charged: HashMap<u32, usize>,
}

impl FieldBytes {
    /// Maps charged now (their bytes are in [`super::state::Limiter::held`]).
    pub fn count(&self) -> usize {
        self.charged.len()
    }
}

/// Bytes charged per wasi-http outgoing request or response (by table rep) whose body
/// was made ([`super::held_bodies`]).
#[derive(Debug, Default)]
pub struct BodyBytes {
    pub(super) requests: HashMap<u32, usize>,
    pub(super) responses: HashMap<u32, usize>,
}

#[derive(Debug, Default)]
struct Ledger {
    total: usize,
    per_hook: HashMap<Arc<str>, usize>,
}

/// The descriptor budget of the process, shared by every sandbox and store.
#[derive(Debug, Clone)]
pub struct Descriptors {
    ledger: Arc<Mutex<Ledger>>,
    max: usize,
}

/// Why a descriptor was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoDescriptor {
    /// All plugins together hold the host's budget.
    Host(usize),
    /// This hook holds its share.
    Hook(usize),
}

impl std::fmt::Display for NoDescriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoDescriptor::Host(max) => write!(
                f,
                "descriptor budget of {max} for all plugins of this process reached"
            ),
            NoDescriptor::Hook(max) => write!(
                f,
                "descriptor limit of {max} per hook reached (a quarter of the host's budget \
                 of {} descriptors)",
                max * 4
            ),
        }
    }
}

impl std::error::Error for NoDescriptor {}

impl Descriptors {
    /// The process's budget ([`host_descriptors`]).
    pub fn shared() -> Descriptors {
        static SHARED: OnceLock<Descriptors> = OnceLock::new();
        SHARED
            .get_or_init(|| Descriptors::with_max(host_descriptors()))
            .clone()
    }

    /// A budget of `max` descriptors (tests).
    pub fn with_max(max: usize) -> Descriptors {
        Descriptors {
            ledger: Arc::default(),
            max,
        }
    }

    /// Descriptors held now by all plugins.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    fn take(&self, hook: &Arc<str>, n: usize) -> Result<(), NoDescriptor> {
        if n == 0 {
            return Ok(());
        }
        let mut ledger = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let share = hook_descriptors(self.max);
        let of_hook = ledger.per_hook.get(hook).copied().unwrap_or(0);
        if of_hook + n > share {
            return Err(NoDescriptor::Hook(share));
        }
        // Past its first few, a hook may fill the budget only up to its last quarter:
        // that quarter is kept for the first few of every other hook, so hooks that each
        // hoard their share (four kept session instances of one plugin) cannot leave a
        // sibling without the descriptor of its preopened directory.
        let limit = if of_hook + n > HOOK_FLOOR.min(share) {
            self.max - self.max / 4
        } else {
            self.max
        };
        if ledger.total + n > limit {
            return Err(NoDescriptor::Host(self.max));
        }
        ledger.total += n;
        *ledger.per_hook.entry(hook.clone()).or_default() += n;
        Ok(())
    }

    fn give(&self, hook: &Arc<str>, n: usize) {
        if n == 0 {
            return;
        }
        let mut ledger = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        ledger.total = ledger.total.saturating_sub(n);
        if let Some(held) = ledger.per_hook.get_mut(hook) {
            *held = held.saturating_sub(n);
            if *held == 0 {
                ledger.per_hook.remove(hook);
            }
        }
    }
}

/// The descriptors one store holds, given back when it drops (and one by one as the
/// plugin drops what it opened).
#[derive(Debug)]
pub struct DescriptorShare {
    budget: Descriptors,
    /// The hook whose share it is (its label).
    hook: Arc<str>,
    /// Preopened directories, held for the store's life.
    preopens: usize,
    /// Resource handles (table reps) of the descriptors the plugin opened.
    opened: HashSet<u32>,
}

impl DescriptorShare {
    /// A store's share of `budget` for the hook `hook`, holding its `preopens`
    /// directories.
    pub fn new(
        budget: Descriptors,
        hook: Arc<str>,
        preopens: usize,
    ) -> Result<DescriptorShare, NoDescriptor> {
        budget.take(&hook, preopens)?;
        Ok(DescriptorShare {
            budget,
            hook,
            preopens,
            opened: HashSet::new(),
        })
    }

    /// Takes one descriptor for an open about to happen.
    pub fn take(&mut self) -> Result<(), NoDescriptor> {
        self.budget.take(&self.hook, 1)
    }

    /// Records that the descriptor taken is the resource `rep`.
    pub fn opened(&mut self, rep: u32) {
        self.opened.insert(rep);
    }

    /// Gives back a descriptor taken for an open that failed.
    pub fn untake(&mut self) {
        self.budget.give(&self.hook, 1);
    }

    /// The resource `rep` was dropped: gives back its descriptor if the plugin opened it.
    pub fn closed(&mut self, rep: u32) {
        if self.opened.remove(&rep) {
            self.budget.give(&self.hook, 1);
        }
    }

    /// Descriptors this store holds.
    pub fn held(&self) -> usize {
        self.preopens + self.opened.len()
    }
}

impl Drop for DescriptorShare {
    fn drop(&mut self) {
        self.budget.give(&self.hook, self.held());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hook_holds_a_quarter_and_all_hooks_the_budget() {
        let budget = Descriptors::with_max(8);
        let [a, b, c, d, e]: [Arc<str>; 5] = ["a", "b", "c", "d", "e"].map(Arc::from);
        let mut share = DescriptorShare::new(budget.clone(), a.clone(), 1).unwrap();
        share.take().unwrap();
        share.opened(7);
        assert_eq!(share.take(), Err(NoDescriptor::Hook(2)));
        // A second store of the same hook shares its quarter.
        assert!(DescriptorShare::new(budget.clone(), a, 1).is_err());
        let _others: Vec<_> = [b, c, d]
            .into_iter()
            .map(|p| DescriptorShare::new(budget.clone(), p, 2).unwrap())
            .collect();
        assert_eq!(budget.held(), 8);
        assert_eq!(
            DescriptorShare::new(budget.clone(), e.clone(), 1).unwrap_err(),
            NoDescriptor::Host(8)
        );
        // Closing what it did not open gives nothing back; closing what it did, one.
        share.closed(3);
        assert_eq!(budget.held(), 8);
        share.closed(7);
        assert_eq!(budget.held(), 7);
        drop(share);
        assert_eq!(budget.held(), 6);
        assert!(DescriptorShare::new(budget.clone(), e, 2).is_ok());
    }
}
