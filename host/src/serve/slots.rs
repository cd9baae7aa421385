//! Connection slots, shared by `hookhost serve` and the dispatch daemon so that no client
//! can lock the others out: a cap that follows `RLIMIT_NOFILE` ([`connection_cap`]), a
//! share of it per client process ([`Slots::take`]), and an idle timeout
//! ([`idle_timeout`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a connection may stay idle (no request read, none in flight, no
/// subscription) before the daemon closes it: 60 s unless
/// [`IDLE_VAR`] says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(60);
/// `HOOKHOST_CONNECTION_IDLE_SECS`: the idle timeout of a daemon's connections, in seconds
/// (1 to [`MAX_IDLE_SECS`]).
pub const IDLE_VAR: &str = "HOOKHOST_CONNECTION_IDLE_SECS";
/// The longest idle timeout [`IDLE_VAR`] may set.
pub const MAX_IDLE_SECS: u64 = 86_400;
/// The share of the descriptor limit connections may take: one in this many. The rest is
/// for what requests need (a command hook's pipes and process, plugin files, the audit
/// log, config files) and for the runtime itself.
pub const DESCRIPTORS_PER_CONNECTION: u64 = 4;
/// The share of the slots one client process may hold: one in this many (at least one).
pub const CLIENT_SHARE: usize = 4;

/// The idle timeout: [`IDLE_VAR`] when it is a number from 1 to [`MAX_IDLE_SECS`], else
/// [`DEFAULT_IDLE`] (with a notice for a value that is refused).
pub fn idle_timeout() -> (Duration, Option<String>) {
    match crate::config::env::number(IDLE_VAR, 1, MAX_IDLE_SECS) {
        Ok(secs) => (secs.map_or(DEFAULT_IDLE, Duration::from_secs), None),
        Err(notice) => (DEFAULT_IDLE, Some(notice)),
    }
}

/// The number of connections a daemon serves at once: `wanted`, lowered to a quarter of
/// this process's `RLIMIT_NOFILE` soft limit ([`DESCRIPTORS_PER_CONNECTION`]), at least 1.
/// Read once, when the daemon starts listening.
pub fn connection_cap(wanted: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is valid for writes of its size.
    let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0;
    if !known || limit.rlim_cur == libc::RLIM_INFINITY {
        return wanted.max(1);
    }
    let room = usize::try_from(limit.rlim_cur / DESCRIPTORS_PER_CONNECTION).unwrap_or(usize::MAX);
    wanted.min(room).max(1)
}

/// Why a connection was refused: the line the client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot is taken.
    Full {
        /// The cap.
        cap: usize,
    },
    /// The client's process holds its whole share.
    Share {
        /// The client's process.
        pid: i32,
        /// Its share.
        share: usize,
        /// The cap.
        cap: usize,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Full { cap } => write!(
                f,
                "too many connections (at most {cap}; idle ones are closed after a while): \
                 try again"
            ),
            Refusal::Share { pid, share, cap } => write!(
                f,
                "too many connections from process {pid}: one client may hold {share} of \
                 the {cap} connections; close one, or send several requests on one"
            ),
        }
    }
}

/// The slots of a daemon: at most `cap` connections, at most `share` of them from one
/// client process (by its peer pid; a peer whose pid is unknown shares one account).
#[derive(Debug)]
pub struct Slots {
    cap: usize,
    share: usize,
    held: Mutex<(usize, HashMap<i32, usize>)>,
}

/// One connection's slot; dropping it gives the slot back.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    pid: i32,
}

impl Slots {
    /// Slots for `cap` connections (at least 1), each client process holding at most one
    /// [`CLIENT_SHARE`]th of them (at least 1).
    pub fn new(cap: usize) -> Arc<Slots> {
        let cap = cap.max(1);
        Arc::new(Slots {
            cap,
            share: (cap / CLIENT_SHARE).max(1),
            held: Mutex::default(),
        })
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A slot for a connection from process `pid` (`None`: unknown).
    ///
    /// # Errors
    ///
    /// Every slot is taken, or the process holds its share.
    pub fn take(self: &Arc<Self>, pid: Option<i32>) -> Result<Slot, Refusal> {
        let pid = pid.unwrap_or(0);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.0 >= self.cap {
            return Err(Refusal::Full { cap: self.cap });
        }
        let mine = held.1.entry(pid).or_insert(0);
        if *mine >= self.share {
            return Err(Refusal::Share {
                pid,
                share: self.share,
                cap: self.cap,
            });
        }
        *mine += 1;
        held.0 += 1;
        Ok(Slot {
            slots: self.clone(),
            pid,
        })
    }

    /// Connections held now.
    pub fn held(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|e| e.into_inner());
        held.0 -= 1;
        if let Some(mine) = held.1.get_mut(&self.pid) {
            *mine -= 1;
            if *mine == 0 {
                held.1.remove(&self.pid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_takes_its_share_and_the_others_still_get_in() {
        let slots = Slots::new(8);
        let mine: Vec<Slot> = (0..2).map(|_| slots.take(Some(1)).unwrap()).collect();
        assert_eq!(
            slots.take(Some(1)).unwrap_err(),
            Refusal::Share {
                pid: 1,
                share: 2,
                cap: 8
            }
        );
        let others: Vec<Slot> = (2..8).map(|pid| slots.take(Some(pid)).unwrap()).collect();
        assert_eq!(slots.take(Some(99)).unwrap_err(), Refusal::Full { cap: 8 });
        drop(mine);
        assert_eq!(slots.held(), 6);
        assert!(slots.take(Some(1)).is_ok());
        drop(others);
    }

    #[test]
    fn the_cap_follows_the_descriptor_limit() {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is valid for writes.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) },
            0
        );
        let quarter = (limit.rlim_cur / DESCRIPTORS_PER_CONNECTION) as usize;
        assert_eq!(connection_cap(usize::MAX), quarter.max(1));
        assert_eq!(connection_cap(1), 1);
        assert_eq!(connection_cap(0), 1);
    }
}
