//! Per-session state that outlives one dispatch: the count of consecutive Stop blocks
//! (for the loop cap), the results of async hooks waiting for the next outcome, and the
//! async jobs handed to detached runners that have not run yet.
//!
//! There is one store: [`DiskStore`], a directory of private files under a lock per
//! session. Every host shares it: the one-shot CLI, the dispatch daemon and any number of
//! `serve` daemons on the same data directory keep their state in
//! `<data dir>/sessions` ([`crate::HostBuilder::standard_sources`]), so two daemons
//! count the Stop blocks of a session together. [`SessionStore`] is sealed: nothing else
//! can stand in for it (`serve` adds its subscriptions on top of a `DiskStore`). A host
//! built without the standard sources and without a store gets a private `DiskStore` of
//! its own in a temporary directory.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod disk;
mod private;

pub use disk::{DiskStore, JOB_ID_LEN, MAX_PENDING_JOBS, SESSION_MAX_IDLE, SWEEP_MOST};
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

pub(crate) mod sealed {
    /// Only the crate's stores implement [`super::SessionStore`].
    pub trait Sealed {}
}

/// Where session state lives: a [`DiskStore`], or (in `serve`) a layer over one. Sealed:
/// every implementation keeps its state in the one shared, locked store.
pub trait SessionStore: Send + Sync + std::fmt::Debug + sealed::Sealed {
    /// Consecutive Stop blocks so far.
    fn stop_blocks(&self, session: &str) -> u32;
    /// Replaces the count of consecutive Stop blocks with `update(count)`, atomically:
    /// no other update of the session's count runs between the read and the write, in
    /// this process or in another.
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
    /// Queues an async result, after every result queued before it (by a sequence
    /// number the store keeps, never by a clock).
    fn push_async(&self, session: &str, result: AsyncResult);
    /// Takes queued async results, oldest first (at most [`MAX_RESULTS_PER_TAKE`]).
    fn take_async(&self, session: &str) -> Vec<AsyncResult>;
    /// Records that the async job `id` (whose bytes have the sha256 `digest`) was handed
    /// to a runner: [`SessionStore::consume_job`] lets it run once.
    ///
    /// # Errors
    ///
    /// The record cannot be written (then the job must not be started).
    fn issue_job(&self, session: &str, id: &str, digest: &str) -> Result<(), String>;
    /// Forgets a job issued but never handed to a runner (its start failed).
    fn withdraw_job(&self, session: &str, id: &str);
    /// Consumes the record of the job `id`, under the session's lock: the first runner
    /// with the job's exact bytes may run it; a replay (the same bytes again, a copy, a
    /// second runner racing), a job never issued or one whose bytes changed may not.
    ///
    /// # Errors
    ///
    /// Why the job must not run, as a sentence.
    fn consume_job(&self, session: &str, id: &str, digest: &str) -> Result<(), String>;
    /// The session ended (`SessionEnd`, [`crate::event::EventSpec::ends_session`]): its
    /// state goes, except the jobs of its async hooks not run yet; then the store sweeps
    /// sessions untouched for [`SESSION_MAX_IDLE`] (a bounded number per sweep).
    fn end_session(&self, session: &str);
}

/// The most async results queued for one session: a session that never dispatches
/// again (its agent went away) must not make the store hold its results forever. Past it,
/// the oldest are dropped (with a warning in the log).
pub const MAX_QUEUED_RESULTS: usize = 1024;

/// The most queued async results one outcome takes: the rest wait for the session's next
/// event, so that no outcome has to read (or carry) an unbounded queue.
pub const MAX_RESULTS_PER_TAKE: usize = 256;

/// The file name of a session's state: the sha256 of the id, in hex (64 characters).
///
/// The id comes from the agent's input and may be anything: empty, 200 characters long
/// (above a file system's name limit), `../x`, with `/` or NUL bytes. A fixed-length
/// digest is a valid name for every one of them, and distinct ids get distinct names.
pub fn session_key(session: &str) -> String {
    crate::text::hex(&Sha256::digest(session.as_bytes()))
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

#[cfg(test)]
mod tests;
