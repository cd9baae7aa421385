//! Per-session state that outlives one dispatch: the count of consecutive Stop blocks
//! (for the loop cap) and the results of async hooks waiting for the next outcome.
//!
//! The library and the daemon keep it in memory ([`MemoryStore`]); the one-shot CLI keeps
//! it on disk ([`DiskStore`]) so that consecutive `hookhost dispatch` processes of one
//! session share it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

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
    /// Records the count of consecutive Stop blocks.
    fn set_stop_blocks(&self, session: &str, count: u32);
    /// Queues an async result.
    fn push_async(&self, session: &str, result: AsyncResult);
    /// Takes every queued async result, oldest first.
    fn take_async(&self, session: &str) -> Vec<AsyncResult>;
}

/// Session state in memory.
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
    fn set_stop_blocks(&self, session: &str, count: u32) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(session.to_string())
            .or_default()
            .0 = count;
    }
    fn push_async(&self, session: &str, result: AsyncResult) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(session.to_string())
            .or_default()
            .1
            .push(result);
    }
    fn take_async(&self, session: &str) -> Vec<AsyncResult> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(session)
            .map(|s| std::mem::take(&mut s.1))
            .unwrap_or_default()
    }
}

/// Session state in a directory: `<dir>/<session>/stop-blocks` and
/// `<dir>/<session>/async/*.json`. Writes go through a temporary file and a rename, and
/// readers claim a result by renaming it first, so concurrent processes never deliver a
/// result twice or read half a file.
#[derive(Debug, Clone)]
pub struct DiskStore {
    dir: PathBuf,
}

impl DiskStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> DiskStore {
        DiskStore { dir: dir.into() }
    }

    /// The directory of one session.
    pub fn session_dir(&self, session: &str) -> PathBuf {
        self.dir.join(file_safe(session))
    }
}

/// A file name for a session id: kept as is when it is plain, hex-encoded otherwise, so
/// that an id like `../x` cannot leave the store.
fn file_safe(session: &str) -> String {
    let plain = !session.is_empty()
        && session.len() <= 128
        && session
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        session.to_string()
    } else {
        format!("x-{}", hex::encode(session.as_bytes()))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("state files live in a directory");
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

impl SessionStore for DiskStore {
    fn stop_blocks(&self, session: &str) -> u32 {
        std::fs::read_to_string(self.session_dir(session).join("stop-blocks"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    fn set_stop_blocks(&self, session: &str, count: u32) {
        let path = self.session_dir(session).join("stop-blocks");
        if let Err(e) = write_atomically(&path, count.to_string().as_bytes()) {
            tracing::warn!(
                "cannot record the Stop block count in {}: {e}",
                path.display()
            );
        }
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
        let path = self.session_dir(session).join("async").join(name);
        let bytes = serde_json::to_vec(&result).expect("async results serialize");
        if let Err(e) = write_atomically(&path, &bytes) {
            tracing::warn!(
                "cannot queue the async result of `{}` in {}: {e}",
                result.hook,
                path.display()
            );
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
            let claimed = path.with_extension(format!("claimed-{}", std::process::id()));
            if std::fs::rename(&path, &claimed).is_err() {
                continue; // another dispatch took it
            }
            if let Ok(bytes) = std::fs::read(&claimed)
                && let Ok(result) = serde_json::from_slice(&bytes)
            {
                results.push(result);
            }
            let _ = std::fs::remove_file(&claimed);
        }
        results
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn disk_store() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&DiskStore::new(dir.path()));
    }

    #[test]
    fn session_ids_cannot_escape_the_store() {
        assert_eq!(file_safe("abc-123_x"), "abc-123_x");
        assert!(file_safe("../etc").starts_with("x-"));
        assert!(file_safe("").starts_with("x-"));
    }
}
