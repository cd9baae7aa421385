//! The chain that makes the audit log tamper-evident (`docs/book/src/audit-chain.md`).
//!
//! Every line starts with `"seq"` (0 at the genesis, one more each line) and `"prev"`:
//! the lowercase hex SHA-256 of the previous line's bytes, without its newline. The first
//! line of a chain is a genesis line (`"kind":"genesis"`, naming the host, user, version,
//! managed policy and the public key); every [`CHECKPOINT_EVERY`] seqs, and when a daemon
//! stops, a checkpoint line (`"kind":"checkpoint"`). Both are signed: their last member
//! is `"signature"`, the ed25519 signature of the line's bytes without it
//! (`…,"signature":"<hex>"}` signs `…}`), so a signed line vouches for every line before
//! it.
//!
//! The head (the last line's seq and hash) is taken under the log's lock: from this
//! writer's cache when the file is where its last line left it (same device, inode and
//! length), else from the chain's record beside the log ([`Record`], which also carries
//! the chain into a new file when the log was rotated away), else from the log's last
//! lines, read backward and bounded.

use std::fs::{File, Metadata};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signer, SigningKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Origin;
use super::read::{Backward, Line};

/// Seqs between two checkpoints at most: a checkpoint is written at every seq that is a
/// multiple of it (and at a daemon's shutdown), so at most `CHECKPOINT_EVERY - 1` lines
/// follow the last signature.
pub const CHECKPOINT_EVERY: u64 = 256;

/// A SHA-256.
pub type Hash = [u8; 32];

/// The `prev` of a genesis that follows no line.
pub const NO_PREV: Hash = [0; 32];

/// The hash of a line's bytes (without its newline).
pub fn hash(line: &[u8]) -> Hash {
    Sha256::digest(line).into()
}

/// Where a log file stood: its device, inode and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct At {
    dev: u64,
    ino: u64,
    len: u64,
}

impl At {
    pub(super) fn of(meta: &Metadata) -> At {
        At {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
        }
    }

    pub(super) fn len(self) -> u64 {
        self.len
    }

    fn same_file(self, other: At) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// What the next line follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    /// The last chain line's seq; `None`: there is no chain to continue, the next line is
    /// a genesis.
    seq: Option<u64>,
    /// The hash of the file's last line ([`NO_PREV`] after none).
    hash: Hash,
    /// The seq of the last signed line (genesis or checkpoint), when known.
    mark: Option<u64>,
    /// Why a genesis comes next (when `seq` is `None`).
    why: &'static str,
}

impl Head {
    /// A new chain after `hash` (or after nothing: [`NO_PREV`]).
    fn restart(hash: Hash, why: &'static str) -> Head {
        Head {
            seq: None,
            hash,
            mark: None,
            why,
        }
    }
}

/// The chain's record beside the log, `.<log name>.chain` (a dot file: rotation globs
/// like `*.jsonl` pass it over): the log file and length after the last line, and that
/// line's [`Head`]. Every writer locks it (after the log) and rewrites it after each
/// line, so writers on either side of a rotation keep one chain, and the first line of a
/// new (or emptied) log continues the chain of the old one.
#[derive(Debug)]
pub(super) struct Record {
    file: File,
}

/// The record's fixed size (one line, padded with spaces).
const RECORD_LEN: usize = 255;

#[derive(Serialize, Deserialize)]
struct RecordText {
    at: At,
    seq: u64,
    hash: String,
    mark: Option<u64>,
}

impl Record {
    /// The record of the log at `log`.
    pub(super) fn path_for(log: &Path) -> PathBuf {
        let mut name = std::ffi::OsString::from(".");
        name.push(log.file_name().unwrap_or_default());
        name.push(".chain");
        log.with_file_name(name)
    }

    /// Opens (creating it 0600) the record of the log at `log`, without following a
    /// symlink, this user's and writable by no one else.
    pub(super) fn open(log: &Path) -> Result<Record, String> {
        use crate::config::file::{Open, Owners, Rule, open_checked};
        let path = Record::path_for(log);
        let how = Open::read(4096)
            .no_follow()
            .write(Some(0o600))
            .rule(Rule::Believed(Owners::Me));
        open_checked(&path, &how)
            .map(|(file, _)| Record { file })
            .map_err(|e| {
                format!(
                    "refusing the audit chain's record `{}`: {e}",
                    path.display()
                )
            })
    }

    /// The lock every writer of the chain takes (after the log's).
    pub(super) fn file(&self) -> &File {
        &self.file
    }

    fn read(&self) -> Option<(At, Head)> {
        let mut bytes = [0u8; RECORD_LEN + 1];
        let n = self.file.read_at(&mut bytes, 0).ok()?;
        let text: RecordText = serde_json::from_slice(bytes[..n].trim_ascii()).ok()?;
        let mut hash = NO_PREV;
        hex::decode_to_slice(&text.hash, &mut hash).ok()?;
        let head = Head {
            seq: Some(text.seq),
            hash,
            mark: text.mark,
            why: "",
        };
        Some((text.at, head))
    }

    pub(super) fn write(&self, at: At, head: &Head) {
        let Some(seq) = head.seq else { return };
        let record = RecordText {
            at,
            seq,
            hash: crate::text::hex(&head.hash),
            mark: head.mark,
        };
        let mut text = Vec::with_capacity(RECORD_LEN + 1);
        if serde_json::to_writer(&mut text, &record).is_err() {
            return;
        }
        text.resize(RECORD_LEN, b' ');
        text.push(b'\n');
        let _ = self.file.write_all_at(&text, 0);
    }
}

/// The head of a log of the file `file` at `at`, under its lock: `cached` (where this
/// writer's last line left the file) when the file is still there, else the record's
/// when it names this file at this length, or the file is empty (a new log after a
/// rotation, or one emptied in place), else read from the file's last lines. The record
/// also wins over a file that shrank (lines cut from its end): the next line's `prev`
/// then shows the cut; and over a file that grew by chain lines no writer recorded
/// (lines appended from outside): the next line's `prev` then shows the insertion.
pub(super) fn head(
    file: &File,
    at: At,
    cached: Option<(At, Head)>,
    record: Option<&Record>,
) -> Head {
    if let Some((cached_at, head)) = cached
        && cached_at == at
    {
        return head;
    }
    let recorded = record.and_then(Record::read);
    if let Some((rec_at, head)) = recorded
        && (rec_at == at || at.len == 0)
    {
        return head;
    }
    if at.len == 0 {
        return Head::restart(NO_PREV, "a new log");
    }
    let read = read_head(file, at.len);
    match recorded {
        Some((rec_at, rec))
            if rec_at.same_file(at) && rec_at.len > at.len && rec.seq > read.seq =>
        {
            rec
        }
        // Chain lines after the record's length that no writer recorded (each rewrites
        // the record after its line): appended from outside the chain, made to chain on.
        // The next line follows the record, so verify shows them as `inserted` instead
        // of a checkpoint signing them. (Half a line left by a killed writer is no chain
        // line: it is chained over, as before.)
        Some((rec_at, rec))
            if rec_at.same_file(at) && rec_at.len < at.len && read.seq > rec.seq =>
        {
            rec
        }
        _ => read,
    }
}

/// The fields of a chain line this module reads.
#[derive(Deserialize)]
struct Fields {
    seq: u64,
    #[serde(default)]
    kind: Option<String>,
}

/// A line's seq and whether it is signed (a genesis or a checkpoint), if it is a chain
/// line.
fn chain_fields(line: &[u8]) -> Option<(u64, bool)> {
    let fields: Fields = serde_json::from_slice(line).ok()?;
    let signed = matches!(fields.kind.as_deref(), Some("genesis" | "checkpoint"));
    Some((fields.seq, signed))
}

/// Bytes read backward looking for the last signed line before a checkpoint is written
/// anyway.
const MARK_SCAN: u64 = 4 << 20;

/// The head read from the last lines of a file of `size` bytes (> 0). The last line's
/// hash is the `prev`; its seq, or, when it is not a chain line (half a line from a
/// writer killed mid-line), the seq of the one before it. Two lines at the end that are
/// not chain lines, or a last line over the cap, restart the chain.
fn read_head(file: &File, size: u64) -> Head {
    let mut lines = Backward::new(file, size);
    let mut last = [0u8];
    if file.read_exact_at(&mut last, size - 1).is_ok() && last[0] == b'\n' {
        let _ = lines.next_line(); // the empty line after the last newline
    }
    let Ok(Some(Line::Whole(line))) = lines.next_line() else {
        return Head::restart(NO_PREV, "the log's last line cannot be read");
    };
    let hash = hash(&line);
    let (seq, signed) = match chain_fields(&line) {
        Some(found) => found,
        None => match lines.next_line() {
            Ok(Some(Line::Whole(before))) => match chain_fields(&before) {
                Some(found) => found,
                None => return Head::restart(hash, "the log's last lines are not chain lines"),
            },
            _ => return Head::restart(hash, "the log's last lines are not chain lines"),
        },
    };
    let mut mark = signed.then_some(seq);
    while mark.is_none() && lines.bytes_read < MARK_SCAN {
        match lines.next_line() {
            Ok(Some(Line::Whole(line))) => match chain_fields(&line) {
                Some((at, true)) => mark = Some(at),
                Some((at, false)) if seq.saturating_sub(at) >= CHECKPOINT_EVERY => break,
                _ => {}
            },
            Ok(Some(Line::TooLong(_))) => {}
            _ => break,
        }
    }
    Head {
        seq: Some(seq),
        hash,
        mark,
        why: "",
    }
}

/// The genesis line's fields after `seq` and `prev`.
#[derive(Serialize)]
struct Genesis<'a> {
    kind: &'static str,
    time: String,
    #[serde(flatten)]
    origin: &'a Origin,
    every: u64,
    reason: &'a str,
}

/// A checkpoint line's fields after `seq` and `prev`.
#[derive(Serialize)]
struct Checkpoint<'a> {
    kind: &'static str,
    time: String,
    /// Lines since the last signed line, when the writer knows it.
    count: Option<u64>,
    every: u64,
    reason: &'a str,
}

/// Why a checkpoint is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// Its seq is a multiple of the interval, or the interval passed.
    Interval,
    /// A daemon stops.
    Shutdown,
}

/// Lines being added to the chain under the lock: [`Chainer::entry`] and
/// [`Chainer::checkpoint`] append to `out` the lines after `head`.
pub(super) struct Chainer<'a> {
    pub(super) out: Vec<u8>,
    head: Head,
    every: u64,
    origin: &'a Origin,
    key: &'a dyn Fn() -> Result<SigningKey, String>,
}

impl<'a> Chainer<'a> {
    pub(super) fn new(
        head: Head,
        every: u64,
        origin: &'a Origin,
        key: &'a dyn Fn() -> Result<SigningKey, String>,
    ) -> Chainer<'a> {
        Chainer {
            out: Vec::with_capacity(1024),
            head,
            every: every.max(1),
            origin,
            key,
        }
    }

    /// The head after the lines added.
    pub(super) fn head(&self) -> Head {
        self.head
    }

    /// Appends a line `{"seq":…,"prev":…,<body's members>}` (and returns its seq); the
    /// key signs it when `signed` (its last member is then `signature`, or `keyError`
    /// when there is no key).
    fn line(&mut self, body: &[u8], signed: bool) -> u64 {
        let seq = self.head.seq.map_or(0, |s| s + 1);
        let start = self.out.len();
        self.out.extend_from_slice(b"{\"seq\":");
        let _ = write!(self.out, "{seq}");
        self.out.extend_from_slice(b",\"prev\":\"");
        crate::text::hex_into(&mut self.out, &self.head.hash);
        self.out.push(b'"');
        let members = body.strip_prefix(b"{").unwrap_or(b"}");
        if members != b"}" {
            self.out.push(b',');
        }
        self.out.extend_from_slice(members);
        if signed {
            // `key` is signed with the rest; `signature`, last, is not.
            self.out.pop(); // the `}`
            match (self.key)() {
                Ok(key) => {
                    let public = hex::encode(key.verifying_key().as_bytes());
                    let _ = write!(self.out, ",\"key\":\"{public}\"}}");
                    let signature = key.sign(&self.out[start..]);
                    self.out.pop();
                    let _ = write!(
                        self.out,
                        ",\"signature\":\"{}\"}}",
                        hex::encode(signature.to_bytes())
                    );
                }
                Err(e) => {
                    let e = serde_json::Value::from(e);
                    let _ = write!(self.out, ",\"key\":null,\"keyError\":{e}}}");
                }
            }
        }
        self.head = Head {
            seq: Some(seq),
            hash: hash(&self.out[start..]),
            mark: if signed { Some(seq) } else { self.head.mark },
            why: "",
        };
        self.out.push(b'\n');
        seq
    }

    /// A genesis first when there is no chain to continue.
    fn genesis_if_needed(&mut self) {
        if self.head.seq.is_some() {
            return;
        }
        let body = Genesis {
            kind: "genesis",
            time: super::rfc3339(std::time::SystemTime::now()),
            origin: self.origin,
            every: self.every,
            reason: self.head.why,
        };
        let body = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
        self.line(&body, true);
    }

    /// Appends the line of `entry` (a JSON object), after a genesis and a checkpoint
    /// when they are due; returns the entry's seq.
    pub(super) fn entry(&mut self, entry: &[u8]) -> u64 {
        self.genesis_if_needed();
        let next = self.head.seq.map_or(0, |s| s + 1);
        let due = match self.head.mark {
            Some(mark) => next.is_multiple_of(self.every) || next - mark >= self.every,
            None => true,
        };
        if due {
            self.checkpoint(Why::Interval);
        }
        self.line(entry, false)
    }

    /// Appends a checkpoint (unless the last line is signed already); returns the seq of
    /// the last signed line, `None` when there is no chain.
    pub(super) fn checkpoint(&mut self, why: Why) -> Option<u64> {
        let seq = self.head.seq?;
        if self.head.mark == Some(seq) {
            return Some(seq);
        }
        let body = Checkpoint {
            kind: "checkpoint",
            time: super::rfc3339(std::time::SystemTime::now()),
            count: self.head.mark.map(|mark| seq - mark),
            every: self.every,
            reason: match why {
                Why::Interval => "interval",
                Why::Shutdown => "shutdown",
            },
        };
        let body = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
        Some(self.line(&body, true))
    }
}
