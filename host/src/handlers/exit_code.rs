//! The exit-code contract of [`super::command`] ([`interpret_exit`]), and whether a
//! command hook's exit means "it could not start" (a named failure) rather than "it
//! decided" (issue 24.1).

use std::path::Path;

use super::output::{Stdout, cap_text, classify_stdout};
use super::{Answer, FailureKind, Verdict};

/// Whether an exit means "the hook could not start" rather than "the hook decided":
/// the shell's 126 (not executable) and 127 (not found), and an interpreter that exits 2
/// because it cannot open its script (CPython), which would otherwise read as a block.
///
/// The exit 2 is told from a block by the whole of stderr, never by words in it: a guard
/// that blocks often quotes the command it refuses, and the agent writes the command
/// (issue 24, second round: `rm -rf / # can't open file [Errno` disarmed such a guard).
/// So stderr must be exactly CPython's one line, `PROGRAM: can't open file 'FILE':
/// [Errno N] STRERROR(N)`, from a program named `python…`, about a file that indeed
/// cannot be opened from the hook's directory `dir`.
pub(super) fn cannot_start(code: i32, stdout: &str, stderr: &str, dir: &Path) -> bool {
    match code {
        126 | 127 => stdout.trim().is_empty(),
        2 => stdout.trim().is_empty() && python_cannot_open(stderr.trim(), dir),
        _ => false,
    }
}

/// Whether `line` is CPython's "can't open file" for a script that cannot be opened
/// from `dir` (see [`cannot_start`]).
fn python_cannot_open(line: &str, dir: &Path) -> bool {
    let parsed = (|| {
        if line.contains('\n') {
            return None;
        }
        let (program, rest) = line.split_once(": can't open file '")?;
        let (file, rest) = rest.rsplit_once("': [Errno ")?;
        let (errno, message) = rest.split_once("] ")?;
        Some((program, file, errno.parse::<i32>().ok()?, message))
    })();
    let Some((program, file, errno, message)) = parsed else {
        return false;
    };
    let name = program.rsplit('/').next().unwrap_or(program);
    let described = std::io::Error::from_raw_os_error(errno).to_string();
    let strerror = described
        .strip_suffix(&format!(" (os error {errno})"))
        .unwrap_or(&described);
    name.starts_with("python")
        && !program.contains(char::is_whitespace)
        && message == strerror
        && !file.is_empty()
        // `stat`, never an open: the name comes from the hook's stderr, and opening a
        // FIFO it names would block the host. A file that exists (and is not a
        // directory) could have been opened, so the exit 2 is the guard's own: a block.
        && std::fs::metadata(dir.join(file)).map_or(true, |m| m.is_dir())
}

/// Applies the exit-code contract to one finished process.
pub fn interpret_exit(code: i32, stdout: &str, stderr: &str, event: &str) -> Verdict {
    interpret_exit_in(code, stdout, stderr, event, Path::new("/"), false)
}

/// [`interpret_exit`] for a hook run in `dir` (where a script it names is looked for).
pub fn interpret_exit_in(
    code: i32,
    stdout: &str,
    stderr: &str,
    event: &str,
    dir: &Path,
    cut: bool,
) -> Verdict {
    if cannot_start(code, stdout, stderr, dir) {
        let first = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Verdict::failed(
            FailureKind::CannotStart,
            cap_text(&format!("cannot start (exit {code}): {first}")),
        );
    }
    let parsed = classify_stdout(stdout, event);
    // Strings of the answer were cut (`handlers::capture`): it counts only if it restricts.
    let parsed = if cut {
        super::capture::restrictive_or_invalid(parsed, "the hook's stdout")
    } else {
        parsed
    };
    match code {
        0 => match parsed {
            Stdout::Empty => Verdict::Answer(Answer::default()),
            Stdout::Json(output) => Verdict::Answer(Answer {
                output,
                ..Answer::default()
            }),
            Stdout::Text(text) => Verdict::Answer(Answer {
                plain_text: Some(text),
                ..Answer::default()
            }),
            Stdout::InvalidJson(e) => Verdict::failed(FailureKind::InvalidOutput, e),
        },
        2 => {
            let output = match parsed {
                Stdout::Json(output) => output,
                _ => Default::default(),
            };
            let reason = output
                .reason_text()
                .map(str::to_string)
                .or_else(|| Some(stderr.trim().to_string()).filter(|s| !s.is_empty()))
                .unwrap_or_else(|| "blocked by hook (exit 2)".into());
            Verdict::Answer(Answer {
                output,
                blocking_error: Some(cap_text(&reason)),
                ..Answer::default()
            })
        }
        _ => match parsed {
            Stdout::Json(output) => Verdict::Answer(Answer {
                output,
                ..Answer::default()
            }),
            Stdout::InvalidJson(e) => {
                Verdict::failed(FailureKind::InvalidOutput, format!("exit {code}; {e}"))
            }
            _ => {
                let first = stderr
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim();
                Verdict::failed(
                    FailureKind::ExitCode,
                    cap_text(&format!(
                        "Failed with non-blocking status code {code}: {first}"
                    )),
                )
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(v: Verdict) -> Answer {
        match v {
            Verdict::Answer(a) => a,
            Verdict::Failed(f) => panic!("expected an answer, got {f:?}"),
        }
    }

    fn failure(v: Verdict) -> FailureKind {
        match v {
            Verdict::Failed(f) => f.kind,
            Verdict::Answer(a) => panic!("expected a failure, got {a:?}"),
        }
    }

    #[test]
    fn exit_code_contract() {
        let e = "PreToolUse";
        assert_eq!(answer(interpret_exit(0, "", "", e)), Answer::default());
        assert_eq!(
            answer(interpret_exit(0, "note", "", e))
                .plain_text
                .as_deref(),
            Some("note")
        );
        assert_eq!(
            failure(interpret_exit(0, "{bad", "", e)),
            FailureKind::InvalidOutput
        );

        // exit 2: reason from stderr, or from JSON when it gives one; JSON allow cannot undo it
        let a = answer(interpret_exit(2, "", "no way\n", e));
        assert_eq!(a.blocking_error.as_deref(), Some("no way"));
        let json = r#"{"hookSpecificOutput": {"permissionDecision": "allow", "permissionDecisionReason": "json reason"}}"#;
        let a = answer(interpret_exit(2, json, "stderr reason", e));
        assert_eq!(a.blocking_error.as_deref(), Some("json reason"));
        let a = answer(interpret_exit(2, "{broken", "stderr reason", e));
        assert_eq!(a.blocking_error.as_deref(), Some("stderr reason"));

        // other codes: JSON decides alone, otherwise a non-blocking error
        let a = answer(interpret_exit(
            1,
            r#"{"decision": "block", "reason": "r"}"#,
            "",
            "Stop",
        ));
        assert_eq!(a.output.decision.as_deref(), Some("block"));
        assert!(a.blocking_error.is_none());
        assert_eq!(
            failure(interpret_exit(1, "", "boom", e)),
            FailureKind::ExitCode
        );
        assert_eq!(
            failure(interpret_exit(3, "text", "", e)),
            FailureKind::ExitCode
        );
    }

    #[test]
    fn cannot_start_is_never_a_block() {
        let py = "python3: can't open file '/x/hook.py': [Errno 2] No such file or directory";
        assert_eq!(
            failure(interpret_exit(2, "", py, "PreToolUse")),
            FailureKind::CannotStart
        );
        assert_eq!(
            failure(interpret_exit(
                127,
                "",
                "sh: 1: nope: not found",
                "PreToolUse"
            )),
            FailureKind::CannotStart
        );
        assert_eq!(
            failure(interpret_exit(126, "", "Permission denied", "PreToolUse")),
            FailureKind::CannotStart
        );
    }

    /// Words of CPython's message in a guard's reason are a block: the agent wrote them
    /// into the command the guard quotes.
    #[test]
    fn words_of_the_message_in_a_reason_are_not_a_failed_start() {
        let root = Path::new("/");
        for spoof in [
            "guard: refusing rm -rf / # can't open file [Errno",
            "refusing: rm -rf / # python3: can't open file '/x': [Errno 2] No such file or directory",
            "python3: can't open file '/x': [Errno 2] No such file or directory; rm -rf /",
            "x;rm -rf /;python3: can't open file '/x': [Errno 2] No such file or directory",
            "python3: can't open file '/x': [Errno 2] No such file or directory\nrm -rf /",
            "python3: can't open file '/': [Errno 21] Is a directory x",
            "sh: can't open file '/x': [Errno 2] No such file or directory",
            // A script that can be opened was opened: its exit 2 is its own.
            "python3: can't open file '/proc/self/status': [Errno 2] No such file or directory",
        ] {
            assert!(!cannot_start(2, "", spoof, root), "{spoof}");
        }
        let missing =
            "/usr/bin/python3: can't open file '/x/hook.py': [Errno 2] No such file or directory";
        assert!(cannot_start(2, "", missing, root));
        assert!(cannot_start(2, "", &format!("\n{missing}\n"), root));
        assert!(!cannot_start(2, "{}", missing, root));
        let unreadable = "python3: can't open file '/': [Errno 21] Is a directory";
        assert!(cannot_start(2, "", unreadable, root));
    }

    /// A FIFO named in the message is looked at, never opened: an open would block the
    /// host until a writer came. It exists, so the exit 2 is the guard's own.
    #[test]
    fn a_fifo_named_in_the_message_is_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("hook.py");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let line = format!(
            "python3: can't open file '{}': [Errno 2] No such file or directory",
            fifo.display()
        );
        let (done, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(cannot_start(2, "", &line, Path::new("/")));
        });
        let started = answer
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the check blocked on the FIFO");
        assert!(!started);
    }
}
