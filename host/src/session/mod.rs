//! Per-session state that outlives one dispatch: the count of consecutive Stop blocks
//! (for the loop cap) and the results of async hooks waiting for the next outcome.
//!
//! The library and the daemon keep it in memory ([`MemoryStore`]); the one-shot CLI keeps
//! it on disk ([`DiskStore`]) so that consecutive `hookhost dispatch` processes of one
//! session share it. Either way the Stop count is updated read-modify-write under one
//! lock ([`SessionStore::update_stop_blocks`]): concurrent dispatches of a session never
//! lose a block.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod private;

pub use private::{
    PRIVATE_FILE_CAP, StoreAction, StoreError, open_private_file, private_dir, write_atomically,
};

/// The result of an async hook, delivered with a later outcome of its session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AsyncResult {
    /// The hook's id.
    pub hook: String,
    /// The event it ran for.
    pub event: String,
    /// Its `additionalContext` (and plain context).
    pub additional_context: Vec<String>,
    /// Its `systemMessage`.
    pub system_messages: Vec<String>,
    /// An `asyncRewake` hook's wake-up message (it exited 2).
    pub wake: Option<String>,
    /// Its failure, if it failed.
    pub error: Option<String>,
}

/// Where session state lives.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Consecutive Stop blocks so far.
    fn stop_blocks(&self, session: &str) -> u32;
    /// Replaces the count of consecutive Stop blocks with `update(count)`, atomically:
    /// no other update of the session's count runs between the read and the write, in
    /// this process or (for stores shared between processes) in another.
    ///
    /// # Errors
    ///
    /// The state cannot be read or written; the message names the file.
    fn update_stop_blocks(
        &self,
        session: &str,
        update: &mut dyn FnMut(u32) -> u32,
    ) -> Result<(), String>;
    /// Records the count of consecutive Stop blocks.
    fn set_stop_blocks(&self, session: &str, count: u32) {
        if let Err(e) = self.update_stop_blocks(session, &mut |_| count) {
            tracing::warn!("{e}");
        }
    }
    /// Queues an async result.
    fn push_async(&self, session: &str, result: AsyncResult);
    /// Takes every queued async result, oldest first.
    fn take_async(&self, session: &str) -> Vec<AsyncResult>;
}

/// The most async results queued for one session: a session that never dispatches
/// again (its agent went away) must not make a daemon hold its results forever. Past it,
/// the oldest are dropped (with a warning in the log).
pub const MAX_QUEUED_RESULTS: usize = 1024;

/// The most queued async results one outcome takes: the rest wait for the session's next
/// event, so that no outcome has to read (or carry) an unbounded queue.
pub const MAX_RESULTS_PER_TAKE: usize = 256;

/// Session state in memory. A session with nothing to remember (no Stop block in a row,
/// no queued result) holds no entry, so a long-lived daemon that sees many sessions does
/// not keep one per session id it ever saw.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, (u32, Vec<AsyncResult>)>>,
}

impl SessionStore for MemoryStore {
    fn stop_blocks(&self, session: &str) -> u32 {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session)
            .map_or(0, |s| s.0)
    }
    fn update_stop_blocks(
        &self,
        session: &str,
        update: &mut dyn FnMut(u32) -> u32,
    ) -> Result<(), String> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        match sessions.get_mut(session) {
            Some(state) => {
                state.0 = update(state.0);
                if state.0 == 0 && state.1.is_empty() {
                    sessions.remove(session);
                }
            }
            None => {
                let count = update(0);
                if count != 0 {
                    sessions.insert(session.to_string(), (count, Vec::new()));
                }
            }
        }
        Ok(())
    }
    fn push_async(&self, session: &str, result: AsyncResult) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let queue = &mut sessions.entry(session.to_string()).or_default().1;
        if queue.len() >= MAX_QUEUED_RESULTS {
            let dropped = queue.remove(0);
            tracing::warn!(
                "more than {MAX_QUEUED_RESULTS} async results wait for a session; dropped the \
                 oldest, of `{}`",
                dropped.hook
            );
        }
        queue.push(result);
    }
    fn take_async(&self, session: &str) -> Vec<AsyncResult> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = sessions.get_mut(session) else {
            return Vec::new();
        };
        let taken = if state.1.len() > MAX_RESULTS_PER_TAKE {
            state.1.drain(..MAX_RESULTS_PER_TAKE).collect()
        } else {
            std::mem::take(&mut state.1)
        };
        if state.0 == 0 && state.1.is_empty() {
            sessions.remove(session);
        }
        taken
    }
}

/// Session state in a directory: `<dir>/<key>/stop-blocks` and `<dir>/<key>/async/*.json`,
/// where `<key>` is [`session_key`] of the session id. Directories are private (0700),
/// files 0600. The Stop count is rewritten in place under an exclusive lock on its file;
/// async results are written through a temporary file and a rename, and readers claim a
/// result by renaming it first, so concurrent processes never deliver a result twice or
/// read half a file.
#[derive(Debug, Clone)]
pub struct DiskStore {
    dir: PathBuf,
}

/// The largest state file read back (an async result holds capped texts).
const STATE_FILE_CAP: u64 = 4 << 20;

impl DiskStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> DiskStore {
        DiskStore { dir: dir.into() }
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
}

/// The file name of a session's state: the sha256 of the id, in hex (64 characters).
///
/// The id comes from the agent's input and may be anything: empty, 200 characters long
/// (above a file system's name limit), `../x`, with `/` or NUL bytes. A fixed-length
/// digest is a valid name for every one of them, and distinct ids get distinct names.
pub fn session_key(session: &str) -> String {
    hex::encode(Sha256::digest(session.as_bytes()))
}

/// Creates the `CLAUDE_ENV_FILE` of a session (where SessionStart hooks export
/// variables, secrets included) if it does not exist: 0600, in the session's 0700
/// directory. An existing one is kept (hooks of one session append to it) but must be a
/// regular file of this user's, and is narrowed to 0600.
///
/// # Errors
///
/// The file or its directory cannot be made private; the message names it.
pub fn prepare_env_file(path: &Path) -> Result<(), StoreError> {
    if let Some(dir) = path.parent() {
        if let Some(store) = dir.parent() {
            private_dir(store)?;
        }
        private_dir(dir)?;
    }
    open_private_file(path, true).map(drop)
}

/// Reads the count of a locked `stop-blocks` file (anything unreadable counts as 0).
fn read_count(file: &mut File) -> u32 {
    let mut text = String::new();
    let _ = file.take(32).read_to_string(&mut text);
    text.trim().parse().unwrap_or(0)
}

impl SessionStore for DiskStore {
    fn stop_blocks(&self, session: &str) -> u32 {
        let path = self.session_dir(session).join("stop-blocks");
        match open_private_file(&path, false) {
            Ok(Some(mut file)) => {
                let _lock = file.lock_shared();
                read_count(&mut file)
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
        let mut file = match open_private_file(&path, false).map_err(what)? {
            Some(file) => file,
            // No file: the count is 0, and an update that keeps it 0 writes nothing
            // (a Stop that does not block, in a session that never blocked).
            None if update(0) == 0 => return Ok(()),
            None => {
                self.create_session_dir(session).map_err(what)?;
                open_private_file(&path, true)
                    .map_err(what)?
                    .expect("created")
            }
        };
        file.lock()
            .map_err(|e| what(StoreError::io(StoreAction::Lock, &path)(e)))?;
        let count = read_count(&mut file);
        let next = update(count);
        if next != count {
            use std::os::unix::fs::FileExt;
            file.set_len(0)
                .and_then(|()| file.write_all_at(next.to_string().as_bytes(), 0))
                .map_err(|e| what(StoreError::io(StoreAction::Write, &path)(e)))?;
        }
        // The lock is released when the file is closed.
        Ok(())
    }

    fn push_async(&self, session: &str, result: AsyncResult) {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "{nanos:020}-{}-{}.json",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let queued = self
            .create_session_dir(session)
            .map(|dir| dir.join("async").join(name))
            .and_then(|path| {
                let bytes = serde_json::to_vec(&result).expect("async results serialize");
                write_atomically(&path, &bytes)
            });
        if let Err(e) = queued {
            tracing::warn!("cannot queue the async result of `{}`: {e}", result.hook);
        }
    }

    fn take_async(&self, session: &str) -> Vec<AsyncResult> {
        let dir = self.session_dir(session).join("async");
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        names.sort();
        let mut results = Vec::new();
        for path in names {
            if results.len() == MAX_RESULTS_PER_TAKE {
                break; // the rest wait for the next event
            }
            let claimed = path.with_extension(format!("claimed-{}", std::process::id()));
            if std::fs::rename(&path, &claimed).is_err() {
                continue; // another dispatch took it
            }
            match crate::config::file::read_regular(&claimed, STATE_FILE_CAP) {
                Ok((bytes, _)) => match serde_json::from_slice(&bytes) {
                    Ok(result) => results.push(result),
                    Err(e) => tracing::warn!("{}: not an async result: {e}", claimed.display()),
                },
                Err(e) => tracing::warn!("{}: {e}", claimed.display()),
            }
            let _ = std::fs::remove_file(&claimed);
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn result(hook: &str) -> AsyncResult {
        AsyncResult {
            hook: hook.into(),
            event: "PostToolUse".into(),
            additional_context: vec![format!("from {hook}")],
            system_messages: vec![],
            wake: None,
            error: None,
        }
    }

    fn exercise(store: &dyn SessionStore) {
        assert_eq!(store.stop_blocks("s1"), 0);
        store.set_stop_blocks("s1", 3);
        assert_eq!(store.stop_blocks("s1"), 3);
        assert_eq!(store.stop_blocks("s2"), 0);
        store.push_async("s1", result("a"));
        store.push_async("s1", result("b"));
        assert_eq!(store.take_async("s2"), vec![]);
        let taken: Vec<String> = store.take_async("s1").into_iter().map(|r| r.hook).collect();
        assert_eq!(taken, ["a", "b"]);
        assert!(store.take_async("s1").is_empty());
    }

    #[test]
    fn memory_store() {
        exercise(&MemoryStore::default());
    }

    /// A daemon's store forgets sessions with nothing to remember, bounds each queue, and
    /// hands out at most [`MAX_RESULTS_PER_TAKE`] results per outcome (both stores).
    #[test]
    fn queues_are_bounded_and_empty_sessions_forgotten() {
        let memory = MemoryStore::default();
        for n in 0..100 {
            let id = format!("s{n}");
            memory.push_async(&id, result("a"));
            memory.take_async(&id);
            memory.update_stop_blocks(&id, &mut |c| c + 1).unwrap();
            memory.update_stop_blocks(&id, &mut |_| 0).unwrap();
        }
        assert!(memory.sessions.lock().unwrap().is_empty(), "nothing kept");
        for n in 0..MAX_QUEUED_RESULTS + 10 {
            memory.push_async("s", result(&format!("r{n}")));
        }
        let first = memory.take_async("s");
        assert_eq!(first.len(), MAX_RESULTS_PER_TAKE);
        assert_eq!(first[0].hook, "r10", "the oldest were dropped");
        let mut rest = 0;
        loop {
            let taken = memory.take_async("s").len();
            if taken == 0 {
                break;
            }
            rest += taken;
        }
        assert_eq!(first.len() + rest, MAX_QUEUED_RESULTS);

        let dir = tempfile::tempdir().unwrap();
        let disk = DiskStore::new(dir.path());
        for n in 0..MAX_RESULTS_PER_TAKE + 3 {
            disk.push_async("s", result(&format!("r{n}")));
        }
        assert_eq!(disk.take_async("s").len(), MAX_RESULTS_PER_TAKE);
        assert_eq!(disk.take_async("s").len(), 3);
    }

    /// A write that fails (the target is a directory) names the target and leaves no
    /// temporary file behind in the session's directory.
    #[test]
    fn a_failed_write_names_the_file_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("r.json");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let error = write_atomically(&target, b"{}").unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("cannot write `{}`", target.display())),
            "{error}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["r.json"], "only the target remains");
    }

    /// The messages read as they did before the errors were typed.
    #[test]
    fn messages_put_the_path_in_the_sentence() {
        let error = |action| {
            StoreError::io(action, Path::new("/s/x"))(std::io::Error::other("boom")).to_string()
        };
        assert_eq!(error(StoreAction::Lock), "cannot lock `/s/x`: boom");
        assert_eq!(
            error(StoreAction::MakePrivate),
            "cannot make `/s/x` private: boom"
        );
    }

    #[test]
    fn disk_store() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&DiskStore::new(dir.path()));
    }

    /// Every id, however long or odd, is one fixed-length name inside the store.
    #[test]
    fn session_ids_become_fixed_length_names() {
        let long = "s".repeat(200);
        let ids = ["abc-123_x", "../etc", "", "a/b", "nul\0byte", &long, "é"];
        let mut names = std::collections::HashSet::new();
        for id in ids {
            let name = session_key(id);
            assert_eq!(name.len(), 64, "{id}");
            assert!(name.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
            names.insert(name);
        }
        assert_eq!(names.len(), ids.len(), "distinct ids, distinct names");
        let store = DiskStore::new("/state");
        assert_eq!(
            store.session_dir("../x").parent(),
            Some(Path::new("/state"))
        );
    }

    #[test]
    fn state_is_private_and_refuses_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let store = DiskStore::new(dir.path().join("sessions"));
        store.set_stop_blocks("s", 2);
        let session = store.session_dir("s");
        for path in [dir.path().join("sessions"), session.clone()] {
            let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", path.display());
        }
        let counter = session.join("stop-blocks");
        assert_eq!(std::fs::metadata(&counter).unwrap().mode() & 0o777, 0o600);

        // A planted symlink is refused, not followed.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "7").unwrap();
        std::fs::remove_file(&counter).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &counter).unwrap();
        let error = store.update_stop_blocks("s", &mut |n| n + 1).unwrap_err();
        assert!(error.contains("symlink"), "{error}");
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "7");

        // An env file is created 0600 in 0700 directories; a wider one is narrowed.
        let env = store.session_dir("t").join("env");
        prepare_env_file(&env).unwrap();
        assert_eq!(std::fs::metadata(&env).unwrap().mode() & 0o777, 0o600);
        std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(
            env.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        prepare_env_file(&env).unwrap();
        assert_eq!(std::fs::metadata(&env).unwrap().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(env.parent().unwrap()).unwrap().mode() & 0o777,
            0o700
        );
    }

    /// Threads with their own file handles, as processes would have: no update is lost.
    #[test]
    fn concurrent_updates_are_never_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        std::thread::scope(|scope| {
            for _ in 0..8 {
                let path = path.clone();
                scope.spawn(move || {
                    let store = DiskStore::new(&path);
                    for _ in 0..25 {
                        store.update_stop_blocks("s", &mut |n| n + 1).unwrap();
                    }
                });
            }
        });
        assert_eq!(DiskStore::new(&path).stop_blocks("s"), 200);
        let memory = MemoryStore::default();
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..25 {
                        memory.update_stop_blocks("s", &mut |n| n + 1).unwrap();
                    }
                });
            }
        });
        assert_eq!(memory.stop_blocks("s"), 200);
    }
}
