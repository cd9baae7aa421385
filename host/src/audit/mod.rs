//! The audit log: every dispatch appends one JSON line.
//!
//! A line holds the time (UTC, RFC 3339), the session, the event, the tool and its input
//! with secret-looking fields redacted ([`Redacted`]), the merged decision, the rewritten
//! input (redacted) and the hook whose rewrite won, and per hook its id, source, type,
//! status, duration, fuel and memory. The file is `$HOOKHOST_AUDIT_LOG`, else
//! `audit.jsonl` in the user's data directory (or the path an embedder or managed policy
//! gives [`AuditLog::new`]); it is created with mode 0600 and only ever appended to, so it
//! can be rotated by moving it away.
//!
//! What the log refuses to write to, with a message that becomes a notice of the outcome:
//! a symlink (opened with `O_NOFOLLOW`, relative to the directory it was checked in), a
//! file that is not regular, not this user's, or writable by group or others, and a
//! directory that is not this user's (or root's), or that others may write without the
//! sticky bit (they could replace the log).
//!
//! Concurrent writers (parallel `hookhost dispatch` processes, threads of a daemon) never
//! interleave or lose lines: each line is written with one `write` to the file opened in
//! append mode, while holding an exclusive lock on it. A full disk never leaves half a
//! line for the next one to be glued to: a short write is truncated back to where the
//! line started.
//!
//! Tamper-evident: every line carries `seq` and `prev` (the hash of the line before), a
//! signed genesis starts the chain and signed checkpoints follow every
//! [`CHECKPOINT_EVERY`] seqs and at a daemon's shutdown; the head is taken under the lock
//! (`chain.rs`), the key is the host's (`key.rs`), and [`verify`] checks it offline
//! (`docs/book/src/audit-chain.md`).
//!
//! Crash-only: a writer killed mid-line (`kill -9`, in any process, while a daemon holds
//! the log open) leaves half a line; the next writer, under the lock, reads the byte
//! before the end and starts its line on a new line, so no line is glued to half
//! another. A log deleted or swapped (for a symlink, a FIFO, a directory, another file)
//! while a line was written gets the line again at its path, or the dispatch a notice
//! ([`AuditLog::append`], the one place every line passes).

mod append;
mod chain;
mod entry;
pub mod key;
mod origin;
mod read;
mod redact;
mod rewrites;
pub mod verify;

pub use append::checkpoint_written;
pub use chain::{CHECKPOINT_EVERY, hash};
pub use entry::{Entry, entry, rfc3339};
pub use origin::Origin;
pub use read::{LINE_CAP, Tail};
pub use redact::{REDACTED, Redacted, redact_text};

use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, OnceLock};

use crate::config::file::effective_uid;

/// The largest log `hookhost audit` reads: 1 GiB (rotate the log by moving it away).
pub const READ_CAP: u64 = 1 << 30;

/// An append-only JSON-lines audit log.
///
/// The file stays open between appends (a daemon appends thousands of lines a second):
/// each append only checks that the path still names the open file, and reopens it when
/// the log was rotated away or deleted.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    open: Mutex<Option<OpenLog>>,
    /// The host, user, version and managed policy every line names.
    origin: Origin,
    /// Seqs between checkpoints ([`CHECKPOINT_EVERY`]).
    every: u64,
    /// The key that signs the chain (`None`: [`key::default_key_file`]).
    key_file: Option<PathBuf>,
    /// The key, loaded (or created) when the first signed line is written.
    key: OnceLock<Result<ed25519_dalek::SigningKey, String>>,
    /// Whether this log is in the list [`checkpoint_written`] signs at shutdown.
    listed: AtomicBool,
}

/// The open log file and the (device, inode) it was opened as.
#[derive(Debug)]
struct OpenLog {
    file: File,
    id: (u64, u64),
    /// Where this writer's last line left the file (which then ends with a newline), and
    /// the chain's head after it. Every writer appends under the lock, so while the file
    /// is still there no line (whole or torn) came since: neither the byte before the
    /// end nor the chain's record needs a read.
    cached: Option<(chain::At, chain::Head)>,
    /// The chain's record beside the log (the lock of the chain), or why it is refused.
    record: Result<chain::Record, String>,
}

impl Clone for AuditLog {
    fn clone(&self) -> AuditLog {
        AuditLog {
            origin: self.origin.clone(),
            every: self.every,
            key_file: self.key_file.clone(),
            ..AuditLog::new(self.path.clone())
        }
    }
}

/// An exclusive lock on a file (`flock`, through the standard library), released on
/// drop.
#[derive(Debug)]
pub struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    /// Blocks until the lock is held.
    ///
    /// # Errors
    ///
    /// The lock failed.
    pub fn exclusive(file: &'a File) -> std::io::Result<Flock<'a>> {
        loop {
            match file.lock() {
                Ok(()) => return Ok(Flock(file)),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Why a directory may not hold the log, if it may not.
fn unsafe_dir(meta: &std::fs::Metadata) -> Option<String> {
    use crate::config::file::Rule;
    let uid = effective_uid();
    if Rule::Holder.owner_refusal(meta).is_some() {
        return Some(format!(
            "its directory belongs to uid {}, not to this user (uid {uid}) or root",
            meta.uid()
        ));
    }
    if Rule::Holder.mode_exceeds(meta) {
        return Some(format!(
            "its directory is writable by other users (mode {:o}), who could replace the log",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Why an opened file may not be the log, if it may not.
fn unsafe_file(meta: &std::fs::Metadata) -> Option<String> {
    if !meta.is_file() {
        return Some(format!(
            "it is {}, not a regular file",
            crate::config::file::kind_name(meta)
        ));
    }
    use crate::config::file::{Owners, Rule};
    let uid = effective_uid();
    let rule = Rule::Believed(Owners::Me);
    if rule.owner_refusal(meta).is_some() {
        return Some(format!(
            "it belongs to uid {}, not to this user (uid {uid})",
            meta.uid()
        ));
    }
    if rule.mode_exceeds(meta) {
        return Some(format!(
            "it is writable by other users (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    None
}

impl AuditLog {
    /// A log in the file `path`.
    pub fn new(path: impl Into<PathBuf>) -> AuditLog {
        AuditLog {
            path: path.into(),
            open: Mutex::new(None),
            origin: Origin::here(None),
            every: CHECKPOINT_EVERY,
            key_file: None,
            key: OnceLock::new(),
            listed: AtomicBool::new(false),
        }
    }

    /// The same log, its chain signed with the key in `path` (created 0600 on first use)
    /// instead of `audit.key` in the data directory.
    pub fn with_key_file(mut self, path: impl Into<PathBuf>) -> AuditLog {
        self.key_file = Some(path.into());
        self
    }

    /// The same log with a checkpoint every `every` seqs instead of
    /// [`CHECKPOINT_EVERY`] (every writer of one log must use the same interval:
    /// `hookhost audit verify` holds the log to the interval its signed lines state).
    pub fn with_checkpoint_every(mut self, every: u64) -> AuditLog {
        self.every = every.max(1);
        self
    }

    /// The file of the key that signs the chain.
    pub fn key_file(&self) -> PathBuf {
        self.key_file.clone().unwrap_or_else(key::default_key_file)
    }

    /// The same log, its lines naming the managed policy of digest `digest`
    /// ([`crate::policy::Settings::managed_digest`]).
    pub fn with_managed_policy(mut self, digest: Option<String>) -> AuditLog {
        self.origin = Origin::here(digest);
        self
    }

    /// What every line says of where it comes from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open log, reopened when the path no longer names it (rotated, deleted,
    /// replaced). The path's own inode is compared, not a symlink's target: a log
    /// replaced by a symlink is reopened, and then refused.
    fn current<'a>(&self, open: &'a mut Option<OpenLog>) -> Result<&'a mut OpenLog, String> {
        let current = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if open.as_ref().map(|o| Some(o.id)) != Some(current) {
            *open = None;
            let file = self.open_file()?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot open the audit log `{}`: {e}", self.path.display()))?;
            *open = Some(OpenLog {
                file,
                id: (meta.dev(), meta.ino()),
                cached: None,
                record: chain::Record::open(&self.path).inspect_err(|refused| {
                    tracing::warn!("audit: {refused}; the chain is taken from the log's end");
                }),
            });
        }
        Ok(open.as_mut().expect("opened above"))
    }

    /// Opens (creating it 0600) the log file without following a symlink, in a directory
    /// opened and checked first, and checks the opened file (see the module docs).
    fn open_file(&self) -> Result<File, String> {
        let shown = self.path.display();
        let refuse = |why: String| format!("refusing the audit log `{shown}`: {why}");
        let dir = match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
                dir
            }
            None => Path::new("."),
        };
        let name = self
            .path
            .file_name()
            .ok_or_else(|| format!("cannot open the audit log `{shown}`: it names no file"))?;
        let dir_file =
            File::open(dir).map_err(|e| format!("cannot open the audit log `{shown}`: {e}"))?;
        let dir_meta = dir_file
            .metadata()
            .map_err(|e| format!("cannot open the audit log `{shown}`: {e}"))?;
        if !dir_meta.is_dir() {
            return Err(format!(
                "cannot open the audit log `{shown}`: `{}` is not a directory",
                dir.display()
            ));
        }
        if let Some(why) = unsafe_dir(&dir_meta) {
            return Err(refuse(why));
        }
        let name = CString::new(name.as_bytes())
            .map_err(|_| format!("cannot open the audit log `{shown}`: a NUL in its name"))?;
        // Read as well as write: the byte before the end is read before each line.
        let flags = libc::O_RDWR
            | libc::O_APPEND
            | libc::O_CREAT
            | libc::O_NOFOLLOW
            | libc::O_NONBLOCK
            | libc::O_NOCTTY
            | libc::O_CLOEXEC;
        // SAFETY: openat with a directory descriptor we own and a NUL-terminated name;
        // the returned descriptor, when valid, is owned by nobody else.
        let fd = unsafe {
            libc::openat(
                dir_file.as_raw_fd(),
                name.as_ptr(),
                flags,
                0o600 as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            // The kernel may answer EACCES for another user's symlink in a sticky
            // directory: say what is there.
            let found = matches!(e.raw_os_error(), Some(libc::EACCES | libc::ELOOP))
                .then(|| std::fs::symlink_metadata(&self.path).ok())
                .flatten();
            if found.as_ref().is_some_and(|m| m.file_type().is_symlink()) {
                return Err(refuse("it is a symlink".into()));
            }
            if let Some(why) = found.as_ref().and_then(unsafe_file) {
                return Err(refuse(why));
            }
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => refuse("it is a symlink".into()),
                Some(libc::EISDIR) => {
                    format!("cannot open the audit log `{shown}`: it is a directory")
                }
                _ => format!("cannot open the audit log `{shown}`: {e}"),
            });
        }
        // SAFETY: `fd` is a fresh, valid descriptor that nothing else owns.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot open the audit log `{shown}`: {e}"))?;
        if let Some(why) = unsafe_file(&meta) {
            return Err(refuse(why));
        }
        Ok(file)
    }
}

/// Writes one whole line with one `write` (the file is in append mode and locked). On a
/// short write (a full disk, a file size limit) the part that was written is truncated
/// away, so the file still ends with a whole line; should that fail, the next append
/// finds the half line and starts on a new line. A failed `write` wrote nothing.
fn write_line(file: &File, line: &[u8]) -> std::io::Result<()> {
    let written = loop {
        match (&*file).write(line) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            result => break result?,
        }
    };
    if written == line.len() {
        return Ok(());
    }
    let partial = std::io::Error::other(format!(
        "only {written} of the line's {} bytes could be written (is the disk full?)",
        line.len()
    ));
    let end = file.metadata()?.len();
    match file.set_len(end.saturating_sub(written as u64)) {
        Ok(()) => Err(partial),
        Err(truncate) => Err(std::io::Error::other(format!(
            "{partial}; the partial line could not be removed ({truncate})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A log at `path` whose key is beside it (not in the user's data directory).
    fn log_at(path: &Path) -> AuditLog {
        AuditLog::new(path).with_key_file(path.with_file_name("audit.key"))
    }

    /// The entries of a log's text: its lines without the chain's own lines, and the
    /// chain's fields (`seq`, `prev`) left out; a line that is not JSON as it is.
    fn without_chain(text: &str) -> Vec<String> {
        text.lines()
            .filter_map(
                |line| match serde_json::from_str::<serde_json::Value>(line) {
                    Ok(mut value) if value.get("kind").is_none() => {
                        let object = value.as_object_mut().unwrap();
                        object.remove("seq");
                        object.remove("prev");
                        Some(value.to_string())
                    }
                    Ok(_) => None,
                    Err(_) => Some(line.to_string()),
                },
            )
            .collect()
    }

    /// The log stays open between appends, yet a log moved away (rotated) or deleted is
    /// followed by a new file at the configured path.
    #[test]
    fn rotated_or_deleted_logs_are_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.jsonl");
        let log = log_at(&path);
        let lines = |p: &Path| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .count()
        };
        log.append(&json!({"n": 1})).unwrap();
        log.append(&json!({"n": 2})).unwrap();
        assert_eq!(lines(&path), 3, "a genesis and two lines");

        let rotated = dir.path().join("logs/audit.jsonl.1");
        std::fs::rename(&path, &rotated).unwrap();
        log.append(&json!({"n": 3})).unwrap();
        assert_eq!((lines(&rotated), lines(&path)), (3, 1), "the chain goes on");

        std::fs::remove_file(&path).unwrap();
        log.append(&json!({"n": 4})).unwrap();
        let entries = log.read().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].as_ref().unwrap()["n"], 4);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "a reopened log is private too");
    }

    /// Until a writer waits for the lock on inode `ino` (so it checked the path before):
    /// `/proc/locks` lists a waiter as `-> FLOCK … :INODE`.
    fn wait_for_a_lock_waiter(ino: u64) {
        let waiting = || {
            std::fs::read_to_string("/proc/locks")
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains("->") && l.contains(&format!(":{ino} ")))
        };
        while !waiting() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// A log this handle holds open gets half a line from someone else (a process killed
    /// mid-write): the next line starts on a line of its own, every time.
    #[test]
    fn a_torn_line_under_an_open_log_is_never_glued_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = log_at(&path);
        log.append(&json!({"n": 1})).unwrap(); // opened (and its tail checked) here
        for (n, torn) in [(2, "{\"killed\": \"mid"), (3, "{\"again"), (4, "x")] {
            let mut other = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            other.write_all(torn.as_bytes()).unwrap();
            log.append(&json!({"n": n})).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = without_chain(&text);
        assert_eq!(
            lines,
            [
                "{\"n\":1}",
                "{\"killed\": \"mid",
                "{\"n\":2}",
                "{\"again",
                "{\"n\":3}",
                "x",
                "{\"n\":4}"
            ],
            "{text}"
        );
    }

    /// The log is replaced by a symlink while a writer already checked its path and waits
    /// for the lock: the line it then writes lands in a file without a name, so it is
    /// written again at the path, which is refused: an error (a notice), not silence.
    #[test]
    fn a_log_replaced_while_a_line_waits_is_written_again_or_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = log_at(&path);
        log.append(&json!({"n": 1})).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        let holder = File::open(&path).unwrap();
        let held = Flock::exclusive(&holder).unwrap();
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| log.append(&json!({"n": 2})));
            wait_for_a_lock_waiter(ino);
            let victim = dir.path().join("victim");
            std::fs::write(&victim, "").unwrap();
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&victim, &link).unwrap();
            std::fs::rename(&link, &path).unwrap();
            drop(held);
            let error = writer.join().unwrap().unwrap_err();
            assert!(error.contains("symlink"), "{error}");
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "", "followed");
        });
        // And a regular file renamed over it the same way gets the line.
        std::fs::remove_file(&path).unwrap();
        log.append(&json!({"n": 3})).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        let holder = File::open(&path).unwrap();
        let held = Flock::exclusive(&holder).unwrap();
        std::thread::scope(|scope| {
            let writer = scope.spawn(|| log.append(&json!({"n": 4})));
            wait_for_a_lock_waiter(ino);
            let fresh = dir.path().join("fresh");
            std::fs::write(&fresh, "").unwrap();
            std::fs::set_permissions(&fresh, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            std::fs::rename(&fresh, &path).unwrap();
            drop(held);
            writer.join().unwrap().unwrap();
        });
        let entries = log.read().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].as_ref().unwrap()["n"], 4);
    }

    #[test]
    fn concurrent_writers_never_tear_or_lose_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.jsonl");
        let writers = 8;
        let per_writer = 40;
        // Lines far longer than PIPE_BUF, so that one line takes several writes.
        let filler = "y".repeat(70_000);
        std::thread::scope(|scope| {
            for w in 0..writers {
                let (path, filler) = (path.clone(), filler.clone());
                scope.spawn(move || {
                    // Each writer has its own handle, as separate processes would.
                    let log = log_at(&path);
                    for n in 0..per_writer {
                        log.append(&json!({"w": w, "n": n, "pad": filler})).unwrap();
                    }
                });
            }
        });
        let entries: Vec<_> = log_at(&path)
            .read()
            .unwrap()
            .into_iter()
            .filter(|e| e.as_ref().map_or(true, |e| e.get("kind").is_none()))
            .collect();
        assert_eq!(entries.len(), writers * per_writer);
        let mut seen = std::collections::HashSet::new();
        for e in entries {
            let e = e.expect("every line is whole JSON");
            assert_eq!(e["pad"].as_str().unwrap().len(), filler.len());
            seen.insert((e["w"].as_u64().unwrap(), e["n"].as_u64().unwrap()));
        }
        assert_eq!(seen.len(), writers * per_writer);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
