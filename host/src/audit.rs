//! The audit log: every dispatch appends one JSON line.
//!
//! A line holds the time (UTC, RFC 3339), the session, the event, the tool and its input
//! with secret-looking fields redacted ([`Redacted`]), the merged decision, and per hook its
//! id, source, type, status, duration, fuel and memory. The file is
//! `$HOOKHOST_AUDIT_LOG`, else `audit.jsonl` in the user's data directory; it is created
//! with mode 0600 and only ever appended to, so it can be rotated by moving it away.
//!
//! Concurrent writers (parallel `hookhost dispatch` processes, threads of a daemon) never
//! interleave or lose lines: each line is written with the file opened in append mode
//! while holding an exclusive `flock` on it, so even a line longer than one `write` is
//! never torn.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;

use crate::handlers::Invocation;
use crate::handlers::command::is_credential_name;
use crate::outcome::{Decision, HookStatus, Outcome};

/// Characters of one string value kept in the log; the rest is cut with a note.
const VALUE_CAP: usize = 2000;
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
}

impl Clone for AuditLog {
    fn clone(&self) -> AuditLog {
        AuditLog::new(self.path.clone())
    }
}

/// An exclusive `flock` on a file, released on drop.
#[derive(Debug)]
pub struct Flock<'a>(&'a File);

impl<'a> Flock<'a> {
    /// Blocks until the lock is held.
    ///
    /// # Errors
    ///
    /// `flock` failed.
    pub fn exclusive(file: &'a File) -> std::io::Result<Flock<'a>> {
        loop {
            // SAFETY: flock on a file descriptor owned by `file`, which outlives the guard.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(Flock(file));
            }
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

impl Drop for Flock<'_> {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor locked in `exclusive`.
        unsafe {
            libc::flock(self.0.as_raw_fd(), libc::LOCK_UN);
        }
    }
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
    /// The log cannot be opened, locked or written; the message names the file.
    pub fn record(&self, invocation: &Invocation, outcome: &Outcome) -> Result<(), String> {
        self.append(&entry(invocation, outcome, SystemTime::now()))
    }

    /// Appends one JSON value as one line.
    ///
    /// # Errors
    ///
    /// The log cannot be opened, locked or written; the message names the file.
    pub fn append(&self, entry: &impl Serialize) -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        let shown = self.path.display();
        let mut line = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let current = std::fs::metadata(&self.path)
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
            });
        }
        let file = &open.as_ref().expect("opened above").file;
        let _lock = Flock::exclusive(file)
            .map_err(|e| format!("cannot lock the audit log `{shown}`: {e}"))?;
        (&*file)
            .write_all(&line)
            .map_err(|e| format!("cannot write the audit log `{shown}`: {e}"))
    }

    fn open_file(&self) -> Result<File, String> {
        use std::os::unix::fs::OpenOptionsExt;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)
            .map_err(|e| format!("cannot open the audit log `{}`: {e}", self.path.display()))
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
    tool_name: Option<&'a Value>,
    #[serde(rename = "toolInput", skip_serializing_if = "Option::is_none")]
    tool_input: Option<Redacted<'a>>,
    decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<RedactedText<'a>>,
    #[serde(rename = "continue")]
    continue_: bool,
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
    message: Option<RedactedText<'a>>,
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
    Entry {
        time: rfc3339(now),
        session: &invocation.session_id,
        event: &outcome.event,
        project: &invocation.project_dir,
        tool_name: invocation.input.get("tool_name"),
        tool_input: invocation.input.get("tool_input").map(Redacted),
        decision: outcome.decision,
        reason: outcome.reason.as_deref().map(RedactedText),
        continue_: outcome.continue_,
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
                message: h.message.as_deref().map(RedactedText),
            })
            .collect(),
        is_async: false,
    }
}

/// A JSON value that serializes with secrets masked: the value of every object key that
/// looks like a credential name ([`is_credential_name`]) as [`REDACTED`], and every
/// string through [`redact_text`]. Nothing is copied unless a string changes.
#[derive(Debug, Clone, Copy)]
pub struct Redacted<'a>(pub &'a Value);

impl Serialize for Redacted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    if is_credential_name(key) && !value.is_null() {
                        out.serialize_entry(key, REDACTED)?;
                    } else {
                        out.serialize_entry(key, &Redacted(value))?;
                    }
                }
                out.end()
            }
            Value::Array(items) => serializer.collect_seq(items.iter().map(Redacted)),
            Value::String(text) => serializer.serialize_str(&redact_text(text)),
            other => other.serialize(serializer),
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

/// One masking rule: a regex, its replacement, and lowercase literals of which every
/// match of the regex contains at least one (compared ASCII case-insensitively).
///
/// The triggers exist for start-up time: compiling the six regexes costs ~3 ms, more
/// than the rest of a one-shot `hookhost dispatch`, while most strings (a `cargo test`
/// command, a file path) contain no trigger at all. A rule's regex is compiled the first
/// time one of its triggers is seen, and is the only judge of what is masked.
struct SecretRule {
    triggers: &'static [&'static str],
    pattern: &'static str,
    replacement: &'static str,
}

const SECRET_RULES: &[SecretRule] = &[
    SecretRule {
        triggers: &["-----begin "],
        pattern: r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
        replacement: "[REDACTED PRIVATE KEY]",
    },
    SecretRule {
        triggers: &["bearer", "basic", "token"],
        pattern: r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}",
        replacement: "${1} [REDACTED]",
    },
    // NAME=value and NAME: value where NAME looks like a credential.
    SecretRule {
        triggers: &["token", "secret", "passw", "key", "credential", "auth"],
        pattern: r#"(?i)\b([A-Z0-9_.-]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH)[A-Z0-9_.-]*)(\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s"',;&|]+)"#,
        replacement: "${1}${2}[REDACTED]",
    },
    SecretRule {
        triggers: &[
            "--password",
            "--passwd",
            "--token",
            "--secret",
            "--api-key",
            "--access-key",
        ],
        pattern: r"(?i)(--(?:password|passwd|token|secret|api-key|access-key)[= ]\s*)\S+",
        replacement: "${1}[REDACTED]",
    },
    SecretRule {
        triggers: &["://"],
        pattern: r"(://[^/\s:@]+:)[^@\s/]+@",
        replacement: "${1}[REDACTED]@",
    },
    SecretRule {
        triggers: &[
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
        ],
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
        replacement: "[REDACTED]",
    },
];

/// Each rule's regex, compiled the first time one of its triggers occurs.
fn rule_regex(index: usize) -> &'static Regex {
    static REGEXES: [OnceLock<Regex>; SECRET_RULES.len()] =
        [const { OnceLock::new() }; SECRET_RULES.len()];
    REGEXES[index]
        .get_or_init(|| Regex::new(SECRET_RULES[index].pattern).expect("secret patterns are valid"))
}

/// Every rule's triggers in one automaton (ASCII case-insensitive), each pattern
/// mapped back to its rule: one pass over a string tells which rules could match.
fn triggers() -> &'static (AhoCorasick, Vec<usize>) {
    static TRIGGERS: OnceLock<(AhoCorasick, Vec<usize>)> = OnceLock::new();
    TRIGGERS.get_or_init(|| {
        let (patterns, rules): (Vec<&str>, Vec<usize>) = SECRET_RULES
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| rule.triggers.iter().map(move |t| (*t, index)))
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
    for (index, rule) in SECRET_RULES.iter().enumerate() {
        if !triggered[index] {
            continue;
        }
        let regex = rule_regex(index);
        if let Cow::Owned(replaced) = regex.replace_all(&out, rule.replacement) {
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
        ];
        for sample in samples {
            let mut unconditional = sample.to_string();
            for rule in SECRET_RULES {
                let regex = Regex::new(rule.pattern).unwrap();
                unconditional = regex
                    .replace_all(&unconditional, rule.replacement)
                    .into_owned();
            }
            assert_eq!(redact_text(sample), unconditional, "sample: {sample}");
        }
        assert_ne!(redact_text(samples[0]), samples[0], "the samples do mask");
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
