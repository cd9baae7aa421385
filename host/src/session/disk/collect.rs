//! Collecting session directories: a session's directory goes once it holds nothing
//! (its Stop count back to 0, its queue taken, its jobs run: [`DiskStore::collect`]), when
//! the session ends (`SessionEnd`: [`DiskStore::end`], keeping only jobs not run yet), and
//! when no one touched it for [`SESSION_MAX_IDLE`] ([`DiskStore::sweep`], at most
//! [`SWEEP_MOST`] directories looked at per sweep, run at each session's end).
//!
//! The lock and sequence guarantees hold across a removal: a directory is removed only
//! by a process that holds its session's lock (`seq`) and the Stop count's lock
//! (`stop-blocks`), each taken without waiting (a session in use is left for later); and
//! every process that takes either lock checks, once it holds it, that the file it locked
//! is still the one at its path ([`still_linked`]), else opens it again. So no two
//! processes ever hold "the" lock of a session on two different files, and no count,
//! result or job is written into a directory already removed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::{DiskStore, SessionLock, read_count};
use crate::session::private::open_private_file;

/// How long a session's state is kept after its last change: a week.
pub const SESSION_MAX_IDLE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most session directories one sweep looks at (chosen at random among the store's
/// first `SWEEP_NAMES` entries, so that repeated sweeps reach them all).
pub const SWEEP_MOST: usize = 32;

/// The most directory entries one sweep reads.
const SWEEP_NAMES: usize = 1 << 16;

/// Whether `file` (opened and locked) is still the file at `path`: not removed (or
/// replaced) between its open and its lock.
pub(super) fn still_linked(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
        _ => false,
    }
}

/// What keeps a session's directory when it is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// Anything it holds: a Stop count above 0, a queued result, a job, an env file.
    Anything,
    /// Jobs not run yet (the session ended: its count, queue and env file go).
    Jobs,
    /// A change since `SystemTime` (the sweep's bound).
    ChangedSince(SystemTime),
}

fn is_empty_dir(path: &Path) -> bool {
    match std::fs::read_dir(path) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The last change of a session's directory: its own time and its entries' (a file
/// written, a result queued or taken, a job issued or consumed).
fn last_change(dir: &Path) -> Option<SystemTime> {
    let last = std::fs::symlink_metadata(dir).ok()?.modified().ok()?;
    Some(last_change_of(dir, &["seq", "stop-blocks", "async", "jobs", "env"]).max(last))
}

/// The last change of the entries `names` of a session's directory.
fn last_change_of(dir: &Path, names: &[&str]) -> SystemTime {
    let mut last = SystemTime::UNIX_EPOCH;
    for name in names {
        if let Ok(time) = std::fs::symlink_metadata(dir.join(name)).and_then(|m| m.modified()) {
            last = last.max(time);
        }
    }
    last
}

impl DiskStore {
    /// Removes the session's directory if it holds nothing, unless it is in use.
    pub(super) fn collect(&self, session: &str) {
        let dir = self.session_dir(session);
        if dir.is_dir() {
            self.remove_if(&dir, None, Keep::Anything);
        }
    }

    /// [`DiskStore::collect`], by a holder of the session's lock.
    pub(super) fn collect_locked(&self, lock: &SessionLock) {
        if let Some(dir) = lock.path.parent() {
            self.remove_if(dir, Some(lock), Keep::Anything);
        }
    }

    /// The session ended: its directory goes, unless jobs of its async hooks are still
    /// to run (then its Stop count, queue and env file go; the last job run takes the
    /// rest). Then a sweep of sessions idle for [`SESSION_MAX_IDLE`].
    pub fn end(&self, session: &str) {
        let dir = self.session_dir(session);
        if dir.is_dir() && !self.remove_if(&dir, None, Keep::Jobs) {
            // Jobs wait (or the session is in use): what no one will read goes now (a
            // count's updater that opened it before finds it removed and opens it again).
            let _ = std::fs::remove_dir_all(dir.join("async"));
            let _ = std::fs::remove_file(dir.join("env"));
            let _ = std::fs::remove_file(dir.join("stop-blocks"));
        }
        self.sweep(SESSION_MAX_IDLE, SWEEP_MOST);
    }

    /// Removes the directories of sessions not changed for `idle`, looking at no more
    /// than `most` of them (at random); a session in use is left. Returns how many went.
    pub fn sweep(&self, idle: Duration, most: usize) -> usize {
        let Some(bound) = SystemTime::now().checked_sub(idle) else {
            return 0;
        };
        let Ok(entries) = std::fs::read_dir(self.dir()) else {
            return 0;
        };
        // A reservoir sample of the session directories' names (64 hex digits).
        let mut picked: Vec<PathBuf> = Vec::new();
        let mut seen = 0usize;
        for entry in entries.flatten().take(SWEEP_NAMES) {
            let name = entry.file_name();
            let is_key = name.len() == 64
                && name
                    .as_encoded_bytes()
                    .iter()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
            if !is_key {
                continue;
            }
            seen += 1;
            if picked.len() < most {
                picked.push(entry.path());
            } else {
                let slot = random_below(seen);
                if slot < most {
                    picked[slot] = entry.path();
                }
            }
        }
        picked
            .iter()
            .filter(|dir| last_change(dir).is_some_and(|t| t < bound))
            .filter(|dir| self.remove_if(dir, None, Keep::ChangedSince(bound)))
            .count()
    }

    /// Removes the session directory `dir` unless `keep` says not to, holding the
    /// session's lock (`held`, or taken here without waiting) and the Stop count's lock
    /// (taken without waiting). Whether it went.
    fn remove_if(&self, dir: &Path, held: Option<&SessionLock>, keep: Keep) -> bool {
        let taken;
        // Whether `seq` is this sweep's own (created to be locked): its time is no
        // activity of the session's.
        let mut own_seq = false;
        let lock = match held {
            Some(lock) => lock,
            None => {
                let path = dir.join("seq");
                own_seq = std::fs::symlink_metadata(&path).is_err();
                let Ok(Some(file)) = open_private_file(&path, true) else {
                    return false;
                };
                if file.try_lock().is_err() || !still_linked(&file, &path) {
                    return false;
                }
                taken = SessionLock { file, path };
                &taken
            }
        };
        let count_path = dir.join("stop-blocks");
        let mut count = match open_private_file(&count_path, false) {
            Ok(None) => None,
            Ok(Some(file)) => {
                if file.try_lock().is_err() {
                    return false;
                }
                Some(file)
            }
            Err(_) => return false,
        };
        let kept = match keep {
            Keep::Anything => {
                count.as_mut().is_some_and(|f| read_count(f) != 0)
                    || !is_empty_dir(&dir.join("async"))
                    || !is_empty_dir(&dir.join("jobs"))
                    || std::fs::symlink_metadata(dir.join("env")).is_ok()
            }
            Keep::Jobs => !is_empty_dir(&dir.join("jobs")),
            Keep::ChangedSince(bound) => {
                let names: &[&str] = if own_seq {
                    &["stop-blocks", "async", "jobs", "env"]
                } else {
                    &["seq", "stop-blocks", "async", "jobs", "env"]
                };
                last_change_of(dir, names) >= bound
            }
        };
        if kept {
            return false;
        }
        let removed = std::fs::remove_dir_all(dir).is_ok();
        drop(count);
        let _ = lock;
        removed
    }
}

/// A random number below `n` (0 when the system has no randomness: the sweep then looks
/// at the first names, as it would without the sample).
fn random_below(n: usize) -> usize {
    let mut bytes = [0u8; 8];
    if getrandom::getrandom(&mut bytes).is_err() || n == 0 {
        return 0;
    }
    (u64::from_le_bytes(bytes) % n as u64) as usize
}

#[cfg(test)]
#[path = "collect_tests.rs"]
mod tests;
