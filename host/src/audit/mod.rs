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
//! line started (and should that fail, the next line starts on a new line).

use std::borrow::Cow;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::handlers::Invocation;
use crate::outcome::{Decision, HookStatus, Outcome};
use crate::policy::env::{credential_name_triggers, is_credential_name};

/// Characters of one string value kept in the log; the rest is cut with a note.
const VALUE_CAP: usize = 2000;
/// Bytes of strings and keys one logged JSON value (`toolName`, `toolInput`,
/// `updatedInput`) may take; past it, the remaining entries of each open object or array
/// are left out with a note of how many. An input of 100,000 entries gives a line of
/// about this size, not of the input's.
const VALUE_BUDGET: usize = 64 << 10;
/// Bytes the hooks' `message`s of one line may take together; past it, messages are left
/// out with a note (2,000 hooks that each fail with a long message give a bounded line).
const MESSAGES_BUDGET: usize = 64 << 10;
/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// An append-only JSON-lines audit log.
///
/// The file stays open between appends (a daemon appends thousands of lines a second):
/// each append only checks that the path still names the open file, and reopens it when
/// the log was rotated away or deleted.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    open: Mutex<Option<OpenLog>>,
}

/// The open log file and the (device, inode) it was opened as.
#[derive(Debug)]
struct OpenLog {
    file: File,
    id: (u64, u64),
    /// The next line must start with a newline: the file does not end with one (half a
    /// line that could not be removed, here or by another process before the open).
    needs_newline: bool,
    /// Whether the file's last byte is yet to be checked (once per open, under the lock).
    check_tail: bool,
}

impl Clone for AuditLog {
    fn clone(&self) -> AuditLog {
        AuditLog::new(self.path.clone())
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

/// This process's effective uid.
fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why a directory may not hold the log, if it may not.
fn unsafe_dir(meta: &std::fs::Metadata) -> Option<String> {
    let uid = euid();
    if meta.uid() != uid && meta.uid() != 0 {
        return Some(format!(
            "its directory belongs to uid {}, not to this user (uid {uid}) or root",
            meta.uid()
        ));
    }
    let sticky = meta.mode() & libc::S_ISVTX != 0;
    if meta.mode() & 0o022 != 0 && !sticky {
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
    let uid = euid();
    if meta.uid() != uid {
        return Some(format!(
            "it belongs to uid {}, not to this user (uid {uid})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
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
        }
    }

    /// `$HOOKHOST_AUDIT_LOG` if set and not empty, else `DATA_DIR/audit.jsonl`.
    pub fn default_path(data_dir: &Path) -> PathBuf {
        match std::env::var_os("HOOKHOST_AUDIT_LOG") {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => data_dir.join("audit.jsonl"),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the line of one dispatch.
    ///
    /// # Errors
    ///
    /// The log cannot be opened, locked or written, or is refused; the message names the
    /// file.
    pub fn record(&self, invocation: &Invocation, outcome: &Outcome) -> Result<(), String> {
        self.append(&entry(invocation, outcome, SystemTime::now()))
    }

    /// Appends one JSON value as one line.
    ///
    /// # Errors
    ///
    /// The log cannot be opened, locked or written, or is refused (see the module docs);
    /// the message names the file.
    pub fn append(&self, entry: &impl Serialize) -> Result<(), String> {
        let shown = self.path.display();
        let mut line = Vec::with_capacity(512);
        line.push(b'\n'); // dropped unless the file lacks its last newline
        serde_json::to_writer(&mut line, entry).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        // The path's own inode, not a symlink's target: a log replaced by a symlink is
        // reopened, and then refused.
        let current = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if open.as_ref().map(|o| Some(o.id)) != Some(current) {
            *open = None;
            let file = self.open_file()?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot open the audit log `{shown}`: {e}"))?;
            *open = Some(OpenLog {
                file,
                id: (meta.dev(), meta.ino()),
                needs_newline: false,
                check_tail: meta.len() > 0,
            });
        }
        let log = open.as_mut().expect("opened above");
        let _lock = Flock::exclusive(&log.file)
            .map_err(|e| format!("cannot lock the audit log `{shown}`: {e}"))?;
        if log.check_tail {
            log.check_tail = false;
            let size = log.file.metadata().map(|m| m.len()).unwrap_or(0);
            let mut last = [b'\n'];
            if size > 0 && log.file.read_exact_at(&mut last, size - 1).is_ok() {
                log.needs_newline = last[0] != b'\n';
            }
        }
        let bytes = if log.needs_newline {
            &line[..]
        } else {
            &line[1..]
        };
        write_line(&log.file, bytes, &mut log.needs_newline)
            .map_err(|e| format!("cannot write the audit log `{shown}`: {e}"))
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
        let flags = libc::O_WRONLY
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

    /// Reads every entry, oldest first. Lines that are not JSON are returned as errors
    /// naming their line number.
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn read(&self) -> Result<Vec<Result<Value, String>>, String> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read `{}`: {e}", self.path.display())),
        };
        let mut entries = Vec::new();
        for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| format!("cannot read `{}`: {e}", self.path.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            entries.push(
                serde_json::from_str(&line).map_err(|e| format!("line {}: not JSON ({e})", n + 1)),
            );
        }
        Ok(entries)
    }
}

/// Writes one whole line with one `write` (the file is in append mode and locked). On a
/// short write (a full disk, a file size limit) the part that was written is truncated
/// away, so the file still ends with a whole line; if even that fails, `needs_newline`
/// makes the next line start on a line of its own. A failed `write` wrote nothing.
fn write_line(file: &File, line: &[u8], needs_newline: &mut bool) -> std::io::Result<()> {
    let written = loop {
        match (&*file).write(line) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            result => break result?,
        }
    };
    if written == line.len() {
        *needs_newline = false;
        return Ok(());
    }
    let partial = std::io::Error::other(format!(
        "only {written} of the line's {} bytes could be written (is the disk full?)",
        line.len()
    ));
    let end = file.metadata()?.len();
    match file.set_len(end.saturating_sub(written as u64)) {
        Ok(()) => Err(partial),
        Err(truncate) => {
            // The half line stays; end it, or have the next line start with a newline.
            *needs_newline = !matches!((&*file).write(b"\n"), Ok(1));
            Err(std::io::Error::other(format!(
                "{partial}; the partial line could not be removed ({truncate})"
            )))
        }
    }
}

/// The audit line of one dispatch, serialized straight from the invocation and the
/// outcome it borrows (a daemon writes thousands a second).
#[derive(Debug, Serialize)]
pub struct Entry<'a> {
    time: String,
    session: &'a str,
    event: &'a str,
    #[serde(serialize_with = "lossy_path")]
    project: &'a Path,
    #[serde(rename = "toolName", skip_serializing_if = "Option::is_none")]
    tool_name: Option<Redacted<'a>>,
    #[serde(rename = "toolInput", skip_serializing_if = "Option::is_none")]
    tool_input: Option<Redacted<'a>>,
    decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<RedactedText<'a>>,
    #[serde(rename = "continue")]
    continue_: bool,
    /// The rewritten tool input (redacted like `toolInput`), so a rewrite is auditable.
    #[serde(rename = "updatedInput", skip_serializing_if = "Option::is_none")]
    updated_input: Option<Redacted<'a>>,
    /// The hook whose rewrite won.
    #[serde(rename = "updatedInputBy", skip_serializing_if = "Option::is_none")]
    updated_input_by: Option<&'a str>,
    hooks: Vec<HookLine<'a>>,
    /// The line of an async hook's run, written after its event's line.
    #[serde(rename = "async", skip_serializing_if = "std::ops::Not::not")]
    is_async: bool,
}

/// A path as text, with any invalid UTF-8 replaced (a log line is never refused).
fn lossy_path<S: Serializer>(path: &&Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&path.display())
}

/// One hook of an [`Entry`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HookLine<'a> {
    id: &'a str,
    source: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    status: HookStatus,
    duration_ms: Option<f64>,
    exit_code: Option<i32>,
    fuel: Option<u64>,
    memory_bytes: Option<u64>,
    message: Option<Message<'a>>,
}

/// A hook's message in a line: redacted, or left out once the line's
/// [`MESSAGES_BUDGET`] is spent.
#[derive(Debug)]
enum Message<'a> {
    Logged(RedactedText<'a>),
    LeftOut(usize),
}

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Message::Logged(text) => text.serialize(serializer),
            Message::LeftOut(bytes) => serializer.collect_str(&format_args!(
                "[{bytes} bytes not logged: the line's messages are over {MESSAGES_BUDGET} bytes]"
            )),
        }
    }
}

impl Entry<'_> {
    /// Marks the line as that of an async hook's run.
    pub fn of_async_run(mut self) -> Self {
        self.is_async = true;
        self
    }
}

/// The audit line of one dispatch.
pub fn entry<'a>(invocation: &'a Invocation, outcome: &'a Outcome, now: SystemTime) -> Entry<'a> {
    let mut messages = 0usize;
    Entry {
        time: rfc3339(now),
        // As hooks get it: an id of megabytes is not a line of megabytes.
        session: crate::handlers::command::session_id_text(&invocation.session_id),
        event: &outcome.event,
        project: &invocation.project_dir,
        tool_name: invocation.input.get("tool_name").map(Redacted),
        tool_input: invocation.input.get("tool_input").map(Redacted),
        decision: outcome.decision,
        reason: outcome.reason.as_deref().map(RedactedText),
        continue_: outcome.continue_,
        updated_input: outcome.updated_input.as_ref().map(Redacted),
        updated_input_by: outcome.updated_input_by.as_deref(),
        hooks: outcome
            .hooks
            .iter()
            .map(|h| HookLine {
                id: &h.id,
                source: &h.source,
                kind: &h.kind,
                status: h.status,
                duration_ms: h.duration_ms,
                exit_code: h.exit_code,
                fuel: h.fuel,
                memory_bytes: h.memory_bytes,
                message: h.message.as_deref().map(|message| {
                    messages = messages.saturating_add(message.len().min(VALUE_CAP * 4));
                    if messages > MESSAGES_BUDGET {
                        Message::LeftOut(message.len())
                    } else {
                        Message::Logged(RedactedText(message))
                    }
                }),
            })
            .collect(),
        is_async: false,
    }
}

/// A JSON value that serializes with secrets masked: the value of every object key that
/// looks like a credential name ([`is_credential_name`]) as [`REDACTED`], and every
/// string and every key through [`redact_text`] (a key can hold a secret as well as a
/// value can: `{"API_TOKEN=…": 1}`). At most [`VALUE_BUDGET`] bytes of strings and keys
/// are written; the entries past it are counted, not written. Nothing is copied unless a
/// string changes.
#[derive(Debug, Clone, Copy)]
pub struct Redacted<'a>(pub &'a Value);

impl Serialize for Redacted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let budget = std::cell::Cell::new(VALUE_BUDGET);
        Budgeted {
            value: self.0,
            budget: &budget,
        }
        .serialize(serializer)
    }
}

/// [`Redacted`] over a budget shared by the whole value.
struct Budgeted<'a> {
    value: &'a Value,
    budget: &'a std::cell::Cell<usize>,
}

impl Budgeted<'_> {
    /// Takes `bytes` from the budget; false when it was spent before.
    fn spend(&self, bytes: usize) -> bool {
        let left = self.budget.get();
        self.budget.set(left.saturating_sub(bytes));
        left > 0
    }
}

/// The note that stands for the entries of a container left out.
fn left_out(count: usize) -> String {
    format!("[{count} more entries not logged: over {VALUE_BUDGET} bytes]")
}

impl Serialize for Budgeted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let budget = self.budget;
        match self.value {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(None)?;
                for (n, (key, value)) in map.iter().enumerate() {
                    if !self.spend(key.len().min(VALUE_CAP) + 4) {
                        out.serialize_entry("…", &left_out(map.len() - n))?;
                        break;
                    }
                    let shown_key = redact_text(key);
                    if is_credential_name(key) && !value.is_null() {
                        out.serialize_entry(&*shown_key, REDACTED)?;
                    } else {
                        out.serialize_entry(&*shown_key, &Budgeted { value, budget })?;
                    }
                }
                out.end()
            }
            Value::Array(items) => {
                use serde::ser::SerializeSeq;
                let mut out = serializer.serialize_seq(None)?;
                for (n, value) in items.iter().enumerate() {
                    if !self.spend(2) {
                        out.serialize_element(&left_out(items.len() - n))?;
                        break;
                    }
                    out.serialize_element(&Budgeted { value, budget })?;
                }
                out.end()
            }
            Value::String(text) => {
                let shown = redact_text(text);
                self.spend(shown.len());
                serializer.serialize_str(&shown)
            }
            other => {
                self.spend(8);
                other.serialize(serializer)
            }
        }
    }
}

/// A string that serializes through [`redact_text`].
#[derive(Debug, Clone, Copy)]
struct RedactedText<'a>(&'a str);

impl Serialize for RedactedText<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&redact_text(self.0))
    }
}

/// One masking rule: a regex, what replaces its matches, and literals of which every
/// match of the regex contains at least one (compared ASCII case-insensitively).
///
/// The triggers exist for start-up time: compiling the regexes costs milliseconds, more
/// than the rest of a one-shot `hookhost dispatch`, while most strings (a `cargo test`
/// command, a file path) contain no trigger at all. A rule's regex is compiled the first
/// time one of its triggers is seen, and is the only judge of what is masked.
struct SecretRule {
    triggers: Triggers,
    pattern: &'static str,
    replacement: Replacement,
}

/// The literals that can start a rule's work.
enum Triggers {
    /// These (lowercase).
    Literals(&'static [&'static str]),
    /// The literals of the credential-name rule
    /// ([`credential_name_triggers`]): every credential name contains one.
    CredentialNames,
}

/// What a match becomes.
enum Replacement {
    /// A regex replacement template.
    Template(&'static str),
    /// `NAME`, the separator, then [`REDACTED`] — when capture 1 (`NAME`) is a
    /// credential name by the one rule ([`is_credential_name`]); else the match is kept.
    CredentialAssignment,
}

const SECRET_RULES: &[SecretRule] = &[
    SecretRule {
        triggers: Triggers::Literals(&["-----begin "]),
        pattern: r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
        replacement: Replacement::Template("[REDACTED PRIVATE KEY]"),
    },
    SecretRule {
        triggers: Triggers::Literals(&["bearer", "basic", "token"]),
        pattern: r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}",
        replacement: Replacement::Template("${1} [REDACTED]"),
    },
    // `NAME=value`, `NAME: value`, `"NAME": "value"`, and URL query parameters
    // (`?api_key=v&page=2`), where NAME is a credential name by the one rule that also
    // scrubs command hooks' environment.
    SecretRule {
        triggers: Triggers::CredentialNames,
        pattern: r#"\b([A-Za-z0-9_.-]+)(["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s"',;&|]+)"#,
        replacement: Replacement::CredentialAssignment,
    },
    SecretRule {
        triggers: Triggers::Literals(&[
            "--password",
            "--passwd",
            "--token",
            "--secret",
            "--api-key",
            "--access-key",
        ]),
        pattern: r"(?i)(--(?:password|passwd|token|secret|api-key|access-key)[= ]\s*)\S+",
        replacement: Replacement::Template("${1}[REDACTED]"),
    },
    SecretRule {
        triggers: Triggers::Literals(&["://"]),
        pattern: r"(://[^/\s:@]+:)[^@\s/]+@",
        replacement: Replacement::Template("${1}[REDACTED]@"),
    },
    SecretRule {
        triggers: Triggers::Literals(&[
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
            "xox",
            "sk-",
            "sk_live_",
            "sk_test_",
            "akia",
            "aiza",
            "eyj",
        ]),
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
        replacement: Replacement::Template("[REDACTED]"),
    },
];

/// Each rule's regex, compiled the first time one of its triggers occurs.
fn rule_regex(index: usize) -> &'static Regex {
    static REGEXES: [OnceLock<Regex>; SECRET_RULES.len()] =
        [const { OnceLock::new() }; SECRET_RULES.len()];
    REGEXES[index]
        .get_or_init(|| Regex::new(SECRET_RULES[index].pattern).expect("secret patterns are valid"))
}

/// Applies one rule to a text; borrows it when nothing matched.
fn apply_rule<'t>(index: usize, regex: &Regex, text: &'t str) -> Cow<'t, str> {
    match SECRET_RULES[index].replacement {
        Replacement::Template(template) => regex.replace_all(text, template),
        Replacement::CredentialAssignment => mask_credential_assignments(regex, text),
    }
}

/// Masks the value of every assignment whose name is a credential name. The search
/// resumes inside the value of an assignment that is not masked, since that value may
/// hold one (`https://host/x?key=v`: `https` is no credential, `key` is).
fn mask_credential_assignments<'t>(regex: &Regex, text: &'t str) -> Cow<'t, str> {
    let mut out = String::new();
    let (mut copied, mut from) = (0, 0);
    while let Some(caps) = regex.captures_at(text, from) {
        let (name, value) = (
            &caps[1],
            caps.get(3).expect("the value group always takes part"),
        );
        if is_credential_name(name) {
            out.push_str(&text[copied..value.start()]);
            out.push_str(REDACTED);
            copied = value.end();
            from = value.end();
        } else {
            from = value.start();
        }
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Every rule's triggers in one automaton (ASCII case-insensitive), each pattern
/// mapped back to its rule: one pass over a string tells which rules could match.
fn triggers() -> &'static (AhoCorasick, Vec<usize>) {
    static TRIGGERS: OnceLock<(AhoCorasick, Vec<usize>)> = OnceLock::new();
    TRIGGERS.get_or_init(|| {
        let (patterns, rules): (Vec<&str>, Vec<usize>) = SECRET_RULES
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| {
                let literals: Vec<&'static str> = match rule.triggers {
                    Triggers::Literals(literals) => literals.to_vec(),
                    Triggers::CredentialNames => credential_name_triggers().collect(),
                };
                literals.into_iter().map(move |t| (t, index))
            })
            .unzip();
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(patterns)
            .expect("secret triggers are valid literals");
        (automaton, rules)
    })
}

/// Masks secret-looking parts of a string and cuts it at [`VALUE_CAP`] characters;
/// borrows `text` when nothing in it is masked or cut (most strings).
pub fn redact_text(text: &str) -> Cow<'_, str> {
    // Triggers are looked for in the original text only: replacements add no trigger a
    // later rule could need ("[REDACTED PRIVATE KEY]" follows a "PRIVATE KEY" that was
    // already there).
    let (automaton, rule_of) = triggers();
    let mut triggered = [false; SECRET_RULES.len()];
    for found in automaton.find_overlapping_iter(text) {
        triggered[rule_of[found.pattern().as_usize()]] = true;
    }
    let mut out = Cow::Borrowed(text);
    for (index, _) in triggered.iter().enumerate().filter(|(_, on)| **on) {
        if let Cow::Owned(replaced) = apply_rule(index, rule_regex(index), &out) {
            out = Cow::Owned(replaced);
        }
    }
    // Cheap test first: a string of at most VALUE_CAP bytes has at most as many chars.
    if out.len() > VALUE_CAP && out.chars().count() > VALUE_CAP {
        let kept: String = out.chars().take(VALUE_CAP).collect();
        let more = out.len() - kept.len();
        out = Cow::Owned(format!("{kept}…[{more} more bytes]"));
    }
    out
}

/// `2026-05-01T12:34:56.789Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn times_are_rfc3339_utc() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"),
            (1_777_638_896_789, "2026-05-01T12:34:56.789Z"),
        ];
        for (millis, want) in cases {
            assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(millis)), want);
        }
    }

    #[test]
    fn secrets_are_redacted() {
        let input = json!({
            "command": "curl -H 'Authorization: Bearer abcdefghijklmnop' https://bob:hunter2@example.com/x && API_TOKEN=s3cr3t-value make deploy --password=pw123",
            "file_path": "/src/main.rs",
            "apiKey": "plain",
            "nested": [{"client_secret": {"x": 1}, "note": "AKIAABCDEFGHIJKLMNOP and ghp_abcdefghijklmnopqrstuvwxyz0123"}],
            "content": "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nrest",
            "count": 3
        });
        let out = serde_json::to_value(Redacted(&input)).unwrap();
        let text = out.to_string();
        for secret in [
            "abcdefghijklmnop",
            "hunter2",
            "s3cr3t-value",
            "pw123",
            "plain",
            "AKIAABCDEFGHIJKLMNOP",
            "ghp_abcdef",
            "AAAA",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(out["file_path"], "/src/main.rs");
        assert_eq!(out["apiKey"], REDACTED);
        assert_eq!(out["nested"][0]["client_secret"], REDACTED);
        assert_eq!(out["count"], 3);
        assert!(
            out["command"]
                .as_str()
                .unwrap()
                .contains("API_TOKEN=[REDACTED] make deploy"),
            "{text}"
        );
        assert!(
            text.contains("https://bob:[REDACTED]@example.com"),
            "{text}"
        );
        assert!(out["content"].as_str().unwrap().ends_with("\nrest"));
        let long = redact_text(&"x".repeat(5000)).into_owned();
        assert!(long.starts_with(&"x".repeat(VALUE_CAP)) && long.ends_with("[3000 more bytes]"));
    }

    /// The triggers only skip work: on every sample, masking with them equals applying
    /// every rule's regex unconditionally. The samples hit each rule in odd casings and
    /// each alternative of the token rule.
    #[test]
    fn triggers_never_hide_a_secret() {
        let samples = [
            "authorization: BeArEr abcdefgh12345678",
            "Basic dXNlcjpwYXNzd29yZA==",
            "db_PassWd = 'x y'",
            "MY_ACCESSKEY: zzz",
            "private_key=\"k\"",
            "Credentials=abc; next",
            "OAUTH_thing=1",
            "x-api_key: v",
            "run --Secret value --API-KEY=v2 --access-key k3",
            "HTTPS://u:p@host/x",
            "gho_abcdefghijklmnopqrstuvwxyz glpat-abcdefghijklmnop1 xoxb-1234567890-abc",
            "sk-abcdefghijklmnop12 sk_live_abcdefghijklmnop AIza0123456789012345678901234567890",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLXBhcnQ",
            "-----BEGIN RSA PRIVATE KEY-----\nabc",
            "cargo test --workspace",
            "plain text with no secret at all",
            "ENCRYPTION_KEY=e1 SIGNING_KEY=s1 SSH_KEY=k1 MASTER_KEY=m1 GCP_SA=g1 make",
            "curl 'https://api.example.com/v1?key=q1&page=2&access_token=q2'",
            "GITHUB_PAT=p1 BASIC_AUTH=b1 PATH=/usr/bin AUTHOR=bob FOO=1",
            r#"{"password": "j1", "path": "/x"}"#,
        ];
        for sample in samples {
            let mut unconditional = sample.to_string();
            for (index, rule) in SECRET_RULES.iter().enumerate() {
                let regex = Regex::new(rule.pattern).unwrap();
                unconditional = apply_rule(index, &regex, &unconditional).into_owned();
            }
            assert_eq!(redact_text(sample), unconditional, "sample: {sample}");
        }
        assert_ne!(redact_text(samples[0]), samples[0], "the samples do mask");
        // The one credential-name rule decides assignments and query parameters.
        for (sample, secrets, kept) in [
            (16, &["e1", "s1", "k1", "m1", "g1"][..], &["make"][..]),
            (17, &["q1", "q2"], &["page=2"]),
            (18, &["p1", "b1"], &["PATH=/usr/bin", "AUTHOR=bob", "FOO=1"]),
            (19, &["j1"], &[r#""path": "/x""#]),
        ] {
            let masked = redact_text(samples[sample]);
            for secret in secrets {
                assert!(!masked.contains(secret), "{secret} in {masked}");
            }
            for kept in kept {
                assert!(masked.contains(kept), "{kept} lost: {masked}");
            }
        }
        assert!(matches!(
            redact_text("FOO=1 make https://x"),
            Cow::Borrowed(_)
        ));
    }
    /// The log stays open between appends, yet a log moved away (rotated) or deleted is
    /// followed by a new file at the configured path.
    #[test]
    fn rotated_or_deleted_logs_are_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.jsonl");
        let log = AuditLog::new(&path);
        let lines = |p: &Path| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .lines()
                .count()
        };
        log.append(&json!({"n": 1})).unwrap();
        log.append(&json!({"n": 2})).unwrap();
        assert_eq!(lines(&path), 2);

        let rotated = dir.path().join("logs/audit.jsonl.1");
        std::fs::rename(&path, &rotated).unwrap();
        log.append(&json!({"n": 3})).unwrap();
        assert_eq!((lines(&rotated), lines(&path)), (2, 1));

        std::fs::remove_file(&path).unwrap();
        log.append(&json!({"n": 4})).unwrap();
        let entries = log.read().unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].as_ref().unwrap()["n"], 4);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "a reopened log is private too");
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
                    let log = AuditLog::new(&path);
                    for n in 0..per_writer {
                        log.append(&json!({"w": w, "n": n, "pad": filler})).unwrap();
                    }
                });
            }
        });
        let entries = AuditLog::new(&path).read().unwrap();
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
