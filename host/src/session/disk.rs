//! [`DiskStore`]: the one session store, a directory of private files shared by every
//! host of a data directory under a lock per session.
//!
//! The layout of a session (`<dir>/<key>`, `<key>` = [`session_key`] of its id):
//!
//! - `stop-blocks`: the count of consecutive Stop blocks, rewritten in place under an
//!   exclusive lock on the file itself;
//! - `seq`: the session's lock and the last sequence number given to a queued result;
//!   taken (exclusive `flock`) to queue a result, to drop the oldest, to empty the queue
//!   and to issue or consume a job;
//! - `async/<seq>.json`: the queued results, named by their sequence number (20 digits,
//!   so the name order is the queue order); never by a clock or a file time;
//! - `jobs/<id>`: the jobs issued to detached runners and not run yet (the sha256 of the
//!   job's bytes), removed by the runner that runs the job.
//!
//! A session's directory goes once it holds nothing, when the session ends, or after a
//! week untouched, under both locks (see [`collect`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::private::{StoreAction, StoreError, open_private_file, private_dir, write_atomically};
use super::{AsyncResult, MAX_QUEUED_RESULTS, MAX_RESULTS_PER_TAKE, SessionStore, session_key};

mod collect;
use collect::still_linked;
pub use collect::{SESSION_MAX_IDLE, SWEEP_MOST};

/// The length of a job id: 32 lowercase hex digits (128 random bits).
pub const JOB_ID_LEN: usize = 32;

/// The largest state file read back (an async result holds capped texts).
const STATE_FILE_CAP: u64 = 4 << 20;

/// Session state in a directory (see the module's documentation for the layout).
/// Directories are private (0700), files 0600; a symlink or another user's file is
/// refused, not followed.
#[derive(Debug, Clone)]
pub struct DiskStore {
    dir: PathBuf,
    /// The temporary directory of a store of its own ([`DiskStore::of_its_own`]),
    /// removed when the last clone is dropped.
    _own: Option<Arc<tempfile::TempDir>>,
}

impl super::sealed::Sealed for DiskStore {}

/// The exclusive lock of one session (its `seq` file), released when dropped.
struct SessionLock {
    file: File,
    path: PathBuf,
}

impl SessionLock {
    /// The next sequence number of the session: one more than the last given, and than
    /// the last of the results waiting in `queue`. A counter file corrupted (junk, cut
    /// short: read as 0) or driven to `u64::MAX` never gives a number at or below a
    /// waiting result's, which would put a new result before older ones or over one.
    fn next_seq(&mut self, queue: &Path) -> Result<u64, StoreError> {
        let last = queued(queue)
            .iter()
            .filter(|((seq, name), _)| *name == format!("{seq:020}.json"))
            .map(|((seq, _), _)| *seq)
            .max()
            .unwrap_or(0);
        let next = read_count(&mut self.file)
            .max(last)
            .checked_add(1)
            .or_else(|| last.checked_add(1))
            .ok_or_else(|| {
                StoreError::refused(queue, "its sequence numbers are used up".to_string())
            })?;
        write_count(&self.file, &self.path, next)?;
        Ok(next)
    }
}

impl DiskStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> DiskStore {
        DiskStore {
            dir: dir.into(),
            _own: None,
        }
    }

    /// A store in a private temporary directory of its own, shared with no other host
    /// (a library host built without a data directory, tests).
    ///
    /// # Errors
    ///
    /// The temporary directory cannot be created.
    pub fn of_its_own() -> Result<DiskStore, StoreError> {
        let temp = crate::config::env::private_temp_base();
        let own = tempfile::Builder::new()
            .prefix("hookhost-sessions-")
            .tempdir_in(&temp)
            .map_err(StoreError::io(StoreAction::Create, &temp))?;
        Ok(DiskStore {
            dir: own.path().to_path_buf(),
            _own: Some(Arc::new(own)),
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory of one session.
    pub fn session_dir(&self, session: &str) -> PathBuf {
        self.dir.join(session_key(session))
    }

    /// Creates the store's and the session's directories, private to this user.
    ///
    /// # Errors
    ///
    /// A directory cannot be created, or one that exists is not this user's.
    pub fn create_session_dir(&self, session: &str) -> Result<PathBuf, StoreError> {
        private_dir(&self.dir)?;
        let dir = self.session_dir(session);
        private_dir(&dir)?;
        Ok(dir)
    }

    /// Takes the session's lock, creating the session's directory and lock file. A lock
    /// file removed (its directory collected) between its open and its lock is opened
    /// again ([`collect`]).
    fn lock(&self, session: &str) -> Result<SessionLock, StoreError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let path = self.create_session_dir(session)?.join("seq");
            let file = match open_private_file(&path, true) {
                Ok(file) => file.expect("created"),
                Err(StoreError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && tries < 4 =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            };
            lock_within(&file, &path)?;
            if still_linked(&file, &path) {
                return Ok(SessionLock { file, path });
            }
            if tries >= 4 {
                let why = "was removed each time it was locked".to_string();
                return Err(StoreError::refused(&path, why));
            }
        }
    }

    /// Queues `result` under the session's lock, as `async/<seq>.json`.
    fn try_push(&self, session: &str, result: &AsyncResult) -> Result<(), StoreError> {
        let mut lock = self.lock(session)?;
        let queue = self.session_dir(session).join("async");
        let seq = lock.next_seq(&queue)?;
        let bytes = serde_json::to_vec(result).expect("async results serialize");
        write_atomically(&queue.join(format!("{seq:020}.json")), &bytes)?;
        let queued = queued(&queue);
        if queued.len() > MAX_QUEUED_RESULTS {
            for (_, path) in &queued[..queued.len() - MAX_QUEUED_RESULTS] {
                let _ = std::fs::remove_file(path);
            }
            tracing::warn!(
                "more than {MAX_QUEUED_RESULTS} async results wait for a session; dropped \
                 the oldest {}",
                queued.len() - MAX_QUEUED_RESULTS
            );
        }
        drop(lock);
        Ok(())
    }

    /// Takes at most `most` queued results, oldest first. Without a queue (the common
    /// case) this is one failed `open` of the queue's directory, without the lock.
    pub fn take_at_most(&self, session: &str, most: usize) -> Vec<AsyncResult> {
        let dir = self.session_dir(session);
        // No directory, nothing queued (nor anything to warn of): one `lstat` on the path
        // of most events, whose sessions never queued anything.
        if std::fs::symlink_metadata(&dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Vec::new();
        }
        let queue = dir.join("async");
        // A session's directory or queue swapped for a symlink (to another session's)
        // is refused, not followed: its results are not this session's to take.
        let real_dir = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if !real_dir(&dir) || !real_dir(&queue) {
            if std::fs::symlink_metadata(&queue).is_ok() || dir.is_symlink() {
                tracing::warn!(
                    "{}: not a directory of this session's (a symlink?); its results are \
                     not taken",
                    queue.display()
                );
            }
            return Vec::new();
        }
        let names = queued(&queue);
        if names.is_empty() {
            return Vec::new();
        }
        let mut results = Vec::new();
        let mut left = names.len();
        for (_, path) in names {
            if results.len() == most {
                break; // the rest wait for the next event
            }
            let claimed = path.with_extension(format!("claimed-{}", std::process::id()));
            if std::fs::rename(&path, &claimed).is_err() {
                continue; // another dispatch took it
            }
            left -= 1;
            match crate::config::file::read_regular(&claimed, STATE_FILE_CAP) {
                Ok((bytes, _)) => match serde_json::from_slice(&bytes) {
                    Ok(result) => results.push(result),
                    Err(e) => tracing::warn!("{}: not an async result: {e}", claimed.display()),
                },
                Err(e) => tracing::warn!("{}: {e}", claimed.display()),
            }
            let _ = std::fs::remove_file(&claimed);
        }
        if left == 0 {
            // An empty queue goes, under the lock (no result is being queued into it),
            // so that the next event's look is one failed `open`. A result queued since
            // (or a claim not yet removed) keeps it: `rmdir` removes only empty ones.
            if let Ok(lock) = self.lock(session) {
                let _ = std::fs::remove_dir(&queue);
                self.collect_locked(&lock);
                drop(lock);
            }
        }
        results
    }

    /// The file that records the job `id`, if `id` is a job id.
    fn job_file(&self, session: &str, id: &str) -> Result<PathBuf, String> {
        let valid = id.len() == JOB_ID_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid {
            return Err(format!(
                "its id `{}` is not a job id ({JOB_ID_LEN} lowercase hex digits)",
                crate::text::escape(&id.chars().take(64).collect::<String>())
            ));
        }
        Ok(self.session_dir(session).join("jobs").join(id))
    }
}

/// The most records of jobs issued and not run one session keeps. A runner killed (or a
/// machine restarted) before it consumed its job leaves its record behind for good; past
/// this many, the oldest records go (their jobs, if a runner ever comes, run nothing: at
/// most once).
pub const MAX_PENDING_JOBS: usize = 256;

/// Makes room for one more record in `jobs` (under the session's lock): removes the
/// oldest (by modification time) past [`MAX_PENDING_JOBS`] - 1.
fn forget_oldest_jobs(jobs: &Path) {
    let Ok(entries) = std::fs::read_dir(jobs) else {
        return;
    };
    let mut records: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if records.len() < MAX_PENDING_JOBS {
        return;
    }
    records.sort();
    let extra = records.len() + 1 - MAX_PENDING_JOBS;
    for (_, path) in &records[..extra] {
        let _ = std::fs::remove_file(path);
    }
    tracing::warn!(
        "{}: more than {MAX_PENDING_JOBS} async jobs issued and never run; forgot the \
         oldest {extra}",
        jobs.display()
    );
}

/// The queued results in `queue`, oldest first: `<seq>.json` by sequence number (a name
/// from an older version, which is not a number, after them, by name).
fn queued(queue: &Path) -> Vec<((u64, String), PathBuf)> {
    let Ok(entries) = std::fs::read_dir(queue) else {
        return Vec::new();
    };
    let mut names: Vec<((u64, String), PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".json")?;
            let seq = stem.parse().unwrap_or(u64::MAX);
            Some(((seq, name.clone()), entry.path()))
        })
        .collect();
    names.sort();
    names
}

/// How long a host waits for a session's lock. Its holders keep it for a read and a
/// write; one that keeps it longer is stopped (`SIGSTOP`) or hung, and must not make every
/// host's dispatch of the session wait with it.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Takes the exclusive lock of `file`, waiting at most [`LOCK_WAIT`]; past it, an error
/// naming the file (the Stop cap then lets the block stand; a result or job is not
/// recorded).
fn lock_within(file: &File, path: &Path) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::refused(
                    path,
                    format!(
                        "is locked by another process for more than {} s (stopped or hung?)",
                        LOCK_WAIT.as_secs()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(StoreError::io(StoreAction::Lock, path)(e));
            }
        }
    }
}

/// Reads the count of a locked counter file (anything unreadable counts as 0).
fn read_count(file: &mut File) -> u64 {
    use std::io::Seek;
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(32).read_to_string(&mut text);
    // Only the 20 digits [`write_count`] writes over in place: digits past them (a file
    // longer than any count this store writes) would be read as a far larger count.
    let written = text.get(..text.len().min(20)).unwrap_or("");
    written.trim().parse().unwrap_or(0)
}

/// Replaces the content of a locked counter file with `count`, as 20 digits written
/// over the old ones in place (every `u64` fits; an older, shorter count is covered
/// whole). Never truncated: ext4 flushes a file truncated to zero and rewritten when it
/// is closed (`auto_da_alloc`), which made each Stop block cost milliseconds.
fn write_count(file: &File, path: &Path, count: u64) -> Result<(), StoreError> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(format!("{count:020}").as_bytes(), 0)
        .map_err(StoreError::io(StoreAction::Write, path))
}

impl SessionStore for DiskStore {
    fn stop_blocks(&self, session: &str) -> u32 {
        let path = self.session_dir(session).join("stop-blocks");
        match open_private_file(&path, false) {
            Ok(Some(mut file)) => {
                let _lock = file.lock_shared();
                u32::try_from(read_count(&mut file)).unwrap_or(u32::MAX)
            }
            _ => 0,
        }
    }

    fn update_stop_blocks(
        &self,
        session: &str,
        update: &mut dyn FnMut(u32) -> u32,
    ) -> Result<(), String> {
        let path = self.session_dir(session).join("stop-blocks");
        let what = |e: StoreError| format!("cannot record the Stop block count: {e}");
        let mut tries = 0;
        let mut file = loop {
            tries += 1;
            let file = match open_private_file(&path, false) {
                Ok(Some(file)) => file,
                // No file: the count is 0, and an update that keeps it 0 writes nothing
                // (a Stop that does not block, in a session that never blocked).
                Ok(None) if update(0) == 0 => return Ok(()),
                Ok(None) => {
                    self.create_session_dir(session).map_err(what)?;
                    match open_private_file(&path, true) {
                        Ok(file) => file.expect("created"),
                        Err(_) if tries < 4 => continue,
                        Err(e) => return Err(what(e)),
                    }
                }
                Err(e) => return Err(what(e)),
            };
            lock_within(&file, &path).map_err(what)?;
            // Removed with its directory between the open and the lock: open it again.
            if still_linked(&file, &path) {
                break file;
            }
            if tries >= 4 {
                let why = "was removed each time it was locked".to_string();
                return Err(what(StoreError::refused(&path, why)));
            }
        };
        let count = u32::try_from(read_count(&mut file)).unwrap_or(u32::MAX);
        let next = update(count);
        if next != count {
            write_count(&file, &path, next.into()).map_err(what)?;
        }
        // The lock is released when the file is closed; a count back to 0 leaves a
        // session that may hold nothing.
        drop(file);
        if next == 0 && count != 0 {
            self.collect(session);
        }
        Ok(())
    }

    fn push_async(&self, session: &str, result: AsyncResult) {
        if let Err(e) = self.try_push(session, &result) {
            tracing::warn!("cannot queue the async result of `{}`: {e}", result.hook);
        }
    }

    fn take_async(&self, session: &str) -> Vec<AsyncResult> {
        self.take_at_most(session, MAX_RESULTS_PER_TAKE)
    }

    fn issue_job(&self, session: &str, id: &str, digest: &str) -> Result<(), String> {
        let file = self.job_file(session, id)?;
        let what = |e: StoreError| format!("cannot record the async job: {e}");
        let lock = self.lock(session).map_err(what)?;
        forget_oldest_jobs(file.parent().expect("a job's record is in `jobs`"));
        write_atomically(&file, digest.as_bytes()).map_err(what)?;
        drop(lock);
        Ok(())
    }

    fn withdraw_job(&self, session: &str, id: &str) {
        if let Ok(file) = self.job_file(session, id) {
            let _ = std::fs::remove_file(file);
        }
    }

    fn end_session(&self, session: &str) {
        self.end(session);
    }

    fn consume_job(&self, session: &str, id: &str, digest: &str) -> Result<(), String> {
        let file = self.job_file(session, id)?;
        let lock = self
            .lock(session)
            .map_err(|e| format!("its record cannot be consumed: {e}"))?;
        let verdict = Self::consume_locked(&file, id, digest);
        let _ = std::fs::remove_dir(file.parent().expect("a job's record is in `jobs`"));
        self.collect_locked(&lock);
        drop(lock);
        verdict
    }
}

impl DiskStore {
    /// [`SessionStore::consume_job`] of the record `file`, under the session's lock.
    fn consume_locked(file: &Path, id: &str, digest: &str) -> Result<(), String> {
        let recorded = match open_private_file(file, false) {
            Ok(Some(mut opened)) => {
                let mut text = String::new();
                let _ = (&mut opened).take(128).read_to_string(&mut text);
                text
            }
            Ok(None) => {
                return Err(format!(
                    "the job `{id}` already ran, or no dispatch of this session issued it \
                     (a replayed or copied job runs nothing)"
                ));
            }
            Err(e) => return Err(format!("its record cannot be read: {e}")),
        };
        if recorded.trim() != digest {
            return Err(format!(
                "the job `{id}` is not the one its dispatch issued (its content changed)"
            ));
        }
        std::fs::remove_file(file)
            .map_err(|e| format!("its record `{}` cannot be consumed: {e}", file.display()))
    }
}
