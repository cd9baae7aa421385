//! Writing lines: [`AuditLog::append`], the one place every line passes, with the chain
//! (`audit/chain.rs`) taken under the lock; [`AuditLog::checkpoint`] and
//! [`checkpoint_written`], the signed line a daemon writes when it stops.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use serde::Serialize;

use super::chain::{self, At, Chainer, Why};
use super::{AuditLog, Flock, OpenLog, entry, write_line};
use crate::handlers::Invocation;
use crate::outcome::Outcome;

/// Writes of one line before [`AuditLog::append`] gives up on a log that keeps being
/// deleted or replaced under it.
const APPEND_ATTEMPTS: usize = 3;

/// The logs this process wrote to, for [`checkpoint_written`]: their path, key file and
/// interval.
static WRITTEN: Mutex<Vec<(PathBuf, PathBuf, u64)>> = Mutex::new(Vec::new());

/// Writes a checkpoint ([`AuditLog::checkpoint`]) into every log this process appended
/// to: what `hookhost serve` and the dispatch daemon do when they stop, so that the last
/// lines they wrote are signed. Returns the problems, one message each.
pub fn checkpoint_written() -> Vec<String> {
    let logs = std::mem::take(&mut *WRITTEN.lock().unwrap_or_else(|e| e.into_inner()));
    logs.into_iter()
        .filter_map(|(path, key, every)| {
            let log = AuditLog::new(path)
                .with_key_file(key)
                .with_checkpoint_every(every);
            log.checkpoint().err()
        })
        .collect()
}

/// Whether the file is empty or ends with a newline (read under the lock, before each
/// line). A file whose last byte cannot be read counts as not ending with one: a blank
/// line costs nothing, a glued one costs a line.
fn ends_with_newline(file: &File, size: u64, ours_until: Option<u64>) -> bool {
    let mut last = [0u8];
    size == 0
        || ours_until == Some(size)
        || (file.read_exact_at(&mut last, size - 1).is_ok() && last[0] == b'\n')
}

/// What one locked write adds to the chain.
#[derive(Clone, Copy)]
enum Add<'a> {
    /// The line of an entry (a serialized JSON object).
    Entry(&'a [u8]),
    /// A checkpoint.
    Checkpoint(Why),
}

impl AuditLog {
    /// Appends the line of one dispatch; returns its `seq` in the chain.
    ///
    /// # Errors
    ///
    /// The log cannot be opened, locked or written, or is refused; the message names the
    /// file.
    pub fn record(
        &self,
        invocation: &Invocation,
        outcome: &Outcome,
    ) -> Result<Option<u64>, String> {
        self.append(&entry(invocation, outcome, SystemTime::now()).with_origin(&self.origin))
    }

    /// Appends one JSON object as one line of the chain (with its `seq` and `prev`, after
    /// a genesis and a checkpoint when they are due); returns its `seq`.
    ///
    /// The one place every line passes (dispatches, async runs, every process and thread):
    /// under the file's lock (and the chain record's), the chain's head is taken (see
    /// `audit/chain.rs`); a line that would follow half a line (a writer killed mid-write,
    /// here or in another process, even while this handle was open) starts with a newline
    /// of its own. After the write, a file that lost its last name meanwhile (deleted, or
    /// replaced by a rename over the path, by a symlink, a FIFO, a directory or another
    /// file) held the line where no reader finds it: the line is written again at the
    /// path as it stands, which may be refused, and then the caller has an error for a
    /// notice: each line is in the log or reported, never lost silently.
    ///
    /// # Errors
    ///
    /// `entry` is not a JSON object, or the log cannot be opened, locked or written, or
    /// is refused (see the module docs); the message names the file.
    pub fn append(&self, entry: &impl Serialize) -> Result<Option<u64>, String> {
        let mut body = Vec::with_capacity(512);
        serde_json::to_writer(&mut body, entry).map_err(|e| e.to_string())?;
        if body.first() != Some(&b'{') {
            return Err("an audit line must be a JSON object".into());
        }
        self.add(Add::Entry(&body))
    }

    /// Signs the chain now: appends a checkpoint line unless the log's last line is
    /// signed already. Returns the seq of the last signed line (`None`: no chain yet).
    ///
    /// # Errors
    ///
    /// As [`AuditLog::append`].
    pub fn checkpoint(&self) -> Result<Option<u64>, String> {
        if std::fs::symlink_metadata(&self.path).is_err() {
            return Ok(None); // no log, nothing to sign (and none created)
        }
        self.add(Add::Checkpoint(Why::Shutdown))
    }

    /// The key that signs the chain, loaded (or created) once.
    fn signing_key(&self) -> Result<ed25519_dalek::SigningKey, String> {
        self.key
            .get_or_init(|| {
                super::key::load_or_create(&self.key_file()).inspect_err(|e| {
                    tracing::warn!("audit: {e}; the chain's signed lines say so and are unsigned");
                })
            })
            .clone()
    }

    fn add(&self, add: Add<'_>) -> Result<Option<u64>, String> {
        let shown = self.path.display();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..APPEND_ATTEMPTS {
            let log = self.current(&mut open)?;
            let (written, after, seq) = self.add_locked(log, add)?;
            written.map_err(|e| format!("cannot write the audit log `{shown}`: {e}"))?;
            if !self.listed.swap(true, Ordering::Relaxed) {
                let mut list = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
                if !list.iter().any(|(p, _, _)| *p == self.path) {
                    list.push((self.path.clone(), self.key_file(), self.every));
                }
            }
            if after.is_none_or(|nlink| nlink > 0) {
                return Ok(seq);
            }
            *open = None; // written to a file without a name: again, at the path
        }
        Err(format!(
            "cannot write the audit log `{shown}`: it was deleted or replaced while each of \
             {APPEND_ATTEMPTS} attempts wrote the line"
        ))
    }

    /// Under the log's lock and the chain record's: the head, the lines, one write, and
    /// the head after it (kept here and in the record). Returns the write's result, the
    /// file's link count after it, and the seq to report.
    #[allow(clippy::type_complexity)]
    fn add_locked(
        &self,
        log: &mut OpenLog,
        add: Add<'_>,
    ) -> Result<(std::io::Result<()>, Option<u64>, Option<u64>), String> {
        let shown = self.path.display();
        let lock = Flock::exclusive(&log.file)
            .map_err(|e| format!("cannot lock the audit log `{shown}`: {e}"))?;
        let record = log.record.as_ref().ok();
        let record_lock =
            match record {
                Some(record) => Some(Flock::exclusive(record.file()).map_err(|e| {
                    format!("cannot lock the audit chain's record of `{shown}`: {e}")
                })?),
                None => None,
            };
        let meta = log
            .file
            .metadata()
            .map_err(|e| format!("cannot read the audit log `{shown}`: {e}"))?;
        let at = At::of(&meta);
        let head = chain::head(&log.file, at, log.cached, record);
        let key = || self.signing_key();
        let mut chainer = Chainer::new(head, self.every, &self.origin, &key);
        if !ends_with_newline(&log.file, at.len(), log.cached.map(|(at, _)| at.len())) {
            chainer.out.push(b'\n');
        }
        let seq = match add {
            Add::Entry(body) => Some(chainer.entry(body)),
            Add::Checkpoint(why) => chainer.checkpoint(why),
        };
        let skip = usize::from(chainer.out.first() == Some(&b'\n'));
        if chainer.out.len() == skip {
            return Ok((Ok(()), None, seq)); // nothing to write
        }
        let written = write_line(&log.file, &chainer.out);
        let after = log.file.metadata();
        log.cached = match (&written, &after) {
            (Ok(()), Ok(meta)) => {
                let head = chainer.head();
                if let Some(record) = record {
                    record.write(At::of(meta), &head);
                }
                Some((At::of(meta), head))
            }
            _ => None,
        };
        drop(record_lock);
        drop(lock);
        Ok((written, after.ok().map(|m| m.nlink()), seq))
    }
}
