//! The command handler: a process per run, Claude Code's contract.
//!
//! - stdin: the input JSON on one line; cwd: the project directory;
//! - shell form runs `/bin/sh -c COMMAND` (or `bash -c`, bash found in `PATH`); exec form
//!   runs the program with `args`, no shell, with `${CLAUDE_PROJECT_DIR}`-style
//!   placeholders substituted;
//! - programs are never chosen by the repository: empty and relative `PATH` entries
//!   (`PATH=:/usr/bin`, `PATH=.:/bin`) are ignored when the shell or an exec-form program
//!   is looked up, and removed from the `PATH` the hook gets; a relative exec-form path
//!   (`./hooks/x`) is the project's own and is taken relative to the project directory;
//! - the process leads its own process group under a keeper that is its subreaper
//!   ([`super::descendants`]): when it exits, times out or is cancelled, its group and
//!   every descendant (a `setsid` child, a double fork) are killed, so a hook leaves
//!   nothing behind: on a timeout or a cancellation `SIGTERM` to the group first and
//!   `SIGKILL` after the hook's `killGrace`; after the hook's own exit, what it left is
//!   killed at once, and a pipe still held (by a process that escaped the keeper) is read
//!   for [`super::descendants::DRAIN`] at most;
//! - exit 0: success, stdout is JSON when its first non-blank character is `{`;
//!   exit 2: a blocking error whose reason is the JSON reason, else stderr (JSON cannot
//!   undo it); any other exit: a non-blocking error, unless stdout is a valid JSON object,
//!   which then decides alone;
//! - a process that cannot start (spawn error, shell exit 126/127, an interpreter that
//!   cannot open its script) is a non-blocking error, never a block (claude-code #80697);
//! - the environment is the host's, byte for byte (names and values need not be UTF-8),
//!   minus credential-looking variables (see [`is_credential_name`]) unless
//!   `envAllowlist` names them, plus the event's context with `contextEnv` and
//!   `HOOKHOST_DEPTH` (`super::context_env`); the values hookhost sets itself never
//!   hold a NUL byte.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::capture::Capture;
use super::context_env::without_nul;
pub use super::exit_code::{interpret_exit, interpret_exit_in};
use super::output::cap_text;
use super::{FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::{CommandSpec, Hook, Settings, Shell};

pub use crate::policy::env::{allowlisted, is_credential_name};
use crate::policy::env::{allowlisted_bytes, is_credential_name_bytes};

/// Bytes of stdout or stderr kept per run; the rest is read and dropped so the hook never
/// blocks on a full pipe.
pub const CAPTURE_LIMIT: usize = 1 << 20;

/// The shell of the shell form, by absolute path: never looked up in `PATH`.
pub const SH: &str = "/bin/sh";

/// The `PATH` of hooks, and where programs are looked up, when the host's `PATH` is unset
/// or has no absolute entry: a hook's shell must never fall back to searching the
/// current directory (an empty `PATH` means exactly that to `sh`, and bash's built-in
/// default for an unset one ends with `.`).
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The longest session id hookhost puts in a hook's environment or argv, in bytes. The
/// kernel refuses any one argument or variable over 128 KiB (`E2BIG`), which would make
/// every command hook fail to start; ids are UUIDs.
pub const MAX_SESSION_ID_BYTES: usize = 4096;

/// The session id as hooks get it (`CLAUDE_CODE_SESSION_ID`,
/// `${CLAUDE_CODE_SESSION_ID}`): without NUL bytes, and cut at a character boundary to at
/// most [`MAX_SESSION_ID_BYTES`].
pub fn session_id_value(id: &str) -> OsString {
    without_nul(OsStr::new(cut_at_char(id, MAX_SESSION_ID_BYTES)))
}

/// The session id as the audit log records it: cut like [`session_id_value`] (NULs kept;
/// JSON escapes them).
pub fn session_id_text(id: &str) -> &str {
    cut_at_char(id, MAX_SESSION_ID_BYTES)
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
fn cut_at_char(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `PATH` without its empty and relative entries: those name directories of whatever
/// the current directory is (the repository), and a hook must not run the repository's
/// `./sh` or `./git` because of them.
pub fn absolute_path_entries(path: &OsStr) -> OsString {
    let kept: Vec<&[u8]> = path
        .as_bytes()
        .split(|&b| b == b':')
        .filter(|entry| entry.first() == Some(&b'/'))
        .collect();
    OsString::from_vec(kept.join(&b':'))
}

/// The `PATH` of hooks for the host's `PATH`: its absolute entries, else
/// [`DEFAULT_PATH`].
pub fn hook_path(path: Option<&OsStr>) -> OsString {
    match path.map(absolute_path_entries) {
        Some(path) if !path.is_empty() => path,
        _ => OsString::from(DEFAULT_PATH),
    }
}

/// The variable whose value hookhost replaces (see [`hook_path`]) and searches programs in.
const PATH: &str = "PATH";

/// The environment a command hook gets: the one place it is built. `context` adds the
/// event's context (`contextEnv`, `super::context_env`); every hook gets
/// `HOOKHOST_DEPTH` (the depth guard's).
pub fn hook_env(
    invocation: &Invocation,
    settings: &Settings,
    context: bool,
) -> Vec<(OsString, OsString)> {
    let scrubbed = |name: &[u8]| {
        !is_credential_name_bytes(name) || allowlisted_bytes(name, &settings.env_allowlist)
    };
    let mut env: Vec<(OsString, OsString)> =
        crate::config::env::for_children(Some(&invocation.project_dir))
            .into_iter()
            .filter(|(name, _)| {
                let name = name.as_bytes();
                name != PATH.as_bytes()
                    && name != super::context_env::DEPTH.as_bytes()
                    && scrubbed(name)
            })
            .collect();
    env.push(super::context_env::depth_var());
    if context {
        let values = super::context_env::context_env(invocation);
        env.extend(
            values
                .into_iter()
                .filter(|(name, _)| scrubbed(name.as_bytes())),
        );
    }
    // Always set, and always absolute (see [`DEFAULT_PATH`]).
    env.push((
        PATH.into(),
        hook_path(crate::config::env::var(PATH).as_deref()),
    ));
    let project = without_nul(invocation.project_dir.as_os_str());
    let session = session_id_value(&invocation.session_id);
    env.push(("CLAUDE_PROJECT_DIR".into(), project.clone()));
    env.push(("HOOKHOST_PROJECT_DIR".into(), project));
    env.push(("CLAUDE_CODE_SESSION_ID".into(), session.clone()));
    env.push(("HOOKHOST_SESSION_ID".into(), session));
    env.push((
        "HOOKHOST_EVENT".into(),
        without_nul(OsStr::new(&*invocation.spec.name)),
    ));
    if let Some(file) = &invocation.env_file {
        let file = without_nul(file.as_os_str());
        env.push(("CLAUDE_ENV_FILE".into(), file.clone()));
        env.push(("HOOKHOST_ENV_FILE".into(), file));
    }
    env
}

/// Substitutes `${CLAUDE_PROJECT_DIR}`, `${HOOKHOST_PROJECT_DIR}` and
/// `${CLAUDE_CODE_SESSION_ID}` in an exec-form argument, as plain bytes (the project
/// directory need not be UTF-8; NUL bytes are dropped, see [`without_nul`]).
fn substitute(arg: &str, invocation: &Invocation) -> OsString {
    const PLACEHOLDERS: [&str; 3] = [
        "${CLAUDE_PROJECT_DIR}",
        "${HOOKHOST_PROJECT_DIR}",
        "${CLAUDE_CODE_SESSION_ID}",
    ];
    if !arg.contains("${") {
        return without_nul(OsStr::new(arg));
    }
    let project = invocation.project_dir.as_os_str().as_bytes();
    let session = session_id_value(&invocation.session_id);
    let session = session.as_bytes();
    let mut out = Vec::with_capacity(arg.len());
    let mut rest = arg;
    while let Some((at, placeholder)) = PLACEHOLDERS
        .iter()
        .filter_map(|p| rest.find(p).map(|at| (at, *p)))
        .min_by_key(|(at, _)| *at)
    {
        out.extend_from_slice(&rest.as_bytes()[..at]);
        out.extend_from_slice(if placeholder == PLACEHOLDERS[2] {
            session
        } else {
            project
        });
        rest = &rest[at + placeholder.len()..];
    }
    out.extend_from_slice(rest.as_bytes());
    without_nul(OsStr::from_bytes(&out))
}

/// Finds the program a hook runs, never in a directory the repository chose:
///
/// - a name with a `/` is a path: absolute as it is, relative against `project_dir` (the
///   project's own scripts, `./hooks/x`);
/// - a bare name is looked up in the absolute entries of `search_path` (empty and
///   relative entries are ignored, as hardened `execvp`s do), [`DEFAULT_PATH`] when it is
///   unset or has no absolute entry.
///
/// Why resolve here rather than leave the search to the spawn: the spawn would search
/// the relative entries too, and an absolute path also lets the standard library use
/// `posix_spawn` instead of `fork`ing the whole host.
///
/// # Errors
///
/// A bare name found in no absolute entry: a message for the hook's failure.
pub fn resolve_program(
    program: &OsStr,
    search_path: Option<&OsStr>,
    project_dir: &Path,
) -> Result<PathBuf, String> {
    let bytes = program.as_bytes();
    if bytes.contains(&b'/') {
        let path = Path::new(program);
        return Ok(if path.is_absolute() {
            path.to_path_buf()
        } else {
            project_dir.join(path)
        });
    }
    let search = hook_path(search_path);
    search
        .as_bytes()
        .split(|&b| b == b':')
        .filter(|entry| entry.first() == Some(&b'/'))
        .map(|dir| Path::new(OsStr::from_bytes(dir)).join(program))
        .find(|candidate| is_executable_file(candidate))
        .ok_or_else(|| {
            format!(
                "`{}` is not in PATH (only its absolute entries are searched)",
                program.to_string_lossy()
            )
        })
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Ends the hook, its process group and every descendant when dropped, unless
/// disarmed: a cancelled dispatch (a disconnected client, a timeout) leaves no process
/// behind. The hook's keeper does the killing ([`super::descendants`]).
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(keeper) = self.0.take() {
            super::descendants::end(keeper);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs a command hook once.
pub async fn run(
    spec: &CommandSpec,
    hook: &Hook,
    invocation: &Invocation,
    settings: &Settings,
) -> HandlerRun {
    let started = Instant::now();
    let env = hook_env(invocation, settings, spec.context_env);
    let search_path = env
        .iter()
        .find(|(name, _)| name == PATH)
        .map(|(_, value)| value.as_os_str());
    let (program, shown, args): (OsString, &str, Vec<OsString>) = match &spec.args {
        None => {
            let shell = match spec.shell {
                Shell::Sh => SH,
                Shell::Bash => "bash",
            };
            (
                shell.into(),
                shell,
                vec!["-c".into(), without_nul(OsStr::new(&spec.command))],
            )
        }
        Some(args) => (
            substitute(&spec.command, invocation),
            spec.command.as_str(),
            args.iter().map(|a| substitute(a, invocation)).collect(),
        ),
    };
    let resolved = match resolve_program(&program, search_path, &invocation.project_dir) {
        Ok(path) => path,
        Err(message) => {
            return HandlerRun::failed(
                FailureKind::CannotStart,
                format!("cannot start `{shown}`: {message}"),
                started,
            );
        }
    };
    let mut command = Command::new(&resolved);
    command
        .arg0(&program)
        .args(&args)
        .current_dir(&invocation.project_dir)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Under a keeper of its own, which ends the hook's descendants with it (a dropped
    // run asks the keeper through `GroupGuard`, not with a `SIGKILL` it could not act on).
    super::descendants::keep_descendants(&mut command, spec.kill_grace);

    // A spawn that fails (out of processes, descriptors or memory included) fails the
    // hook at once, as a named "could not start": waiting for other hooks to free what
    // ran out held the agent until the hook's timeout (600 s by default), and
    // `onFailure: "block"` decides what it means for the action.
    let mut child = match super::descendants::spawn_own(|| command.spawn(), |c| c.id()) {
        Ok(child) => child,
        Err(e) => return super::start_failed(&format!("`{shown}`"), &e, started),
    };
    let mut guard = GroupGuard(child.id());

    let mut stdin = child.stdin.take();
    let input = invocation.input_json.clone();
    let feed = async move {
        if let Some(stdin) = stdin.as_mut() {
            // A hook that does not read its stdin closes the pipe: that is not an error.
            let _ = stdin.write_all(input.as_bytes()).await;
            let _ = stdin.write_all(b"\n").await;
        }
        drop(stdin);
    };
    // The pipes are read by tasks of their own, which outlive a cancelled run: the hook's
    // group gets its `SIGTERM` and its grace with its pipes still read (a shell that
    // reports its child's signal on stderr must not die of `SIGPIPE` before its `TERM`
    // trap runs). A reader ends at the pipe's end, or at `reading_bound` at the latest.
    let reading_bound = hook.timeout + spec.kill_grace + 2 * super::descendants::DRAIN;
    let out = Arc::new(Mutex::new(Capture::new(CAPTURE_LIMIT)));
    let err = Arc::new(Mutex::new(Capture::text(CAPTURE_LIMIT)));
    let out_read = tokio::spawn(read_shared(child.stdout.take(), out.clone(), reading_bound));
    let err_read = tokio::spawn(read_shared(child.stderr.take(), err.clone(), reading_bound));
    let status = {
        let work = async {
            let pipes = async {
                let _ = tokio::join!(out_read, err_read);
            };
            tokio::pin!(pipes);
            let waited = async {
                tokio::select! {
                    status = child.wait() => {
                        // The keeper exited: the hook and its descendants are gone. A pipe
                        // still held open (by a process that escaped the keeper) is read for
                        // the drain at most.
                        let _ = tokio::time::timeout(super::descendants::DRAIN, &mut pipes).await;
                        status
                    }
                    () = &mut pipes => child.wait().await,
                }
            };
            tokio::join!(feed, waited).1
        };
        tokio::pin!(work);
        match tokio::time::timeout(hook.timeout, &mut work).await {
            Ok(status) => status,
            Err(_) => {
                guard.kill();
                // The keeper ends the group: `SIGTERM`, then `SIGKILL` after `killGrace`.
                let ended = work.await;
                return HandlerRun {
                    verdict: Verdict::failed(
                        FailureKind::Timeout,
                        format!(
                            "timed out after {}s; {}",
                            format_secs(hook.timeout.as_secs_f64()),
                            how_it_ended(ended.ok(), spec.kill_grace)
                        ),
                    ),
                    exit_code: None,
                    duration: started.elapsed(),
                    usage: Usage::default(),
                    diagnostics: None,
                };
            }
        }
    };
    let take = |capture: &Mutex<Capture>| {
        let mut kept = capture
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *kept, Capture::text(0))
    };
    let (stdout, stderr) = (take(&out), take(&err));
    guard.0 = None; // the keeper exited (and was reaped): the hook and its descendants are gone
    let duration = started.elapsed();
    let stderr_text = String::from_utf8_lossy(stderr.bytes()).into_owned();
    let cut = stdout.cut;
    let stdout_text = String::from_utf8_lossy(stdout.bytes()).into_owned();
    let (verdict, exit_code) = match status {
        Ok(status) => match status.code() {
            Some(code) => {
                let verdict = interpret_exit_in(
                    code,
                    &stdout_text,
                    &stderr_text,
                    &invocation.spec.name,
                    &invocation.project_dir,
                    cut,
                );
                (required_exit(hook, code, verdict), Some(code))
            }
            None => {
                use std::os::unix::process::ExitStatusExt;
                let signal = status.signal().unwrap_or(0);
                (
                    Verdict::failed(FailureKind::ExitCode, format!("killed by signal {signal}")),
                    None,
                )
            }
        },
        Err(e) => (
            Verdict::failed(
                FailureKind::CannotStart,
                format!("cannot wait for the hook: {e}"),
            ),
            None,
        ),
    };
    let diagnostics = (!stderr_text.trim().is_empty()).then(|| cap_text(stderr_text.trim()));
    HandlerRun {
        verdict,
        exit_code,
        duration,
        usage: Usage::default(),
        diagnostics,
    }
}

/// A required hook that exited with a failing code (neither 0 nor 2) gave a verdict only
/// when its JSON restricts (a deny, an ask, a block): an answer that lets the action go
/// (`{}`, a `systemMessage` printed before a crash) is no verdict, so the event fails
/// closed (docs/book/src/required-hooks.md: "an exit code" is a failure).
fn required_exit(hook: &Hook, code: i32, verdict: Verdict) -> Verdict {
    match verdict {
        Verdict::Answer(answer)
            if hook.required
                && code != 0
                && code != 2
                && !super::capture::restricts(&answer.output) =>
        {
            Verdict::failed(
                FailureKind::ExitCode,
                format!(
                    "exit {code}: a required hook's answer on a failing exit counts only \
                     when it denies or blocks"
                ),
            )
        }
        verdict => verdict,
    }
}

/// How a timed-out hook ended, from its keeper's exit status (the hook's own).
fn how_it_ended(status: Option<std::process::ExitStatus>, grace: std::time::Duration) -> String {
    use std::os::unix::process::ExitStatusExt;
    let grace = format_secs(grace.as_secs_f64());
    match status.and_then(|s| s.signal()) {
        Some(libc::SIGKILL) => format!(
            "SIGTERM sent to its process group; it did not end within its killGrace \
             ({grace}s) and was killed (SIGKILL)"
        ),
        _ => format!("SIGTERM sent to its process group; it ended within its killGrace ({grace}s)"),
    }
}

fn format_secs(secs: f64) -> String {
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs}")
    }
}

/// Reads `pipe` into `kept` until its end, or for `bound` at most.
async fn read_shared(
    pipe: Option<impl AsyncRead + Unpin>,
    kept: Arc<Mutex<Capture>>,
    bound: std::time::Duration,
) {
    let Some(mut pipe) = pipe else { return };
    let read = async {
        let mut buf = [0u8; 8192];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => kept
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(bound, read).await;
}

/// Whether a command hook's program would be found, for `hookhost hooks` diagnostics:
/// by the same rule as a run ([`resolve_program`]), in this process's `PATH`.
pub fn program_exists(program: &str, project_dir: &Path) -> bool {
    let path = crate::config::env::var(PATH);
    resolve_program(OsStr::new(program), path.as_deref(), project_dir)
        .is_ok_and(|resolved| is_executable_file(&resolved))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_in_absolute_path_entries_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let other = dir.path().join("other");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let write = |path: &Path, mode: u32| {
            std::fs::write(path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write(&bin.join("tool"), 0o644); // not executable: skipped, as execvp does
        write(&other.join("tool"), 0o755);
        write(&dir.path().join("planted"), 0o755); // in the "repository" itself
        std::fs::create_dir_all(bin.join("dir-not-file")).unwrap();
        let path = OsString::from(format!("{}:{}", bin.display(), other.display()));
        let found =
            |name: &str, path: Option<&OsStr>| resolve_program(OsStr::new(name), path, dir.path());
        assert_eq!(found("tool", Some(&path)), Ok(other.join("tool")));
        // Relative and empty entries name the current directory (the repository): ignored.
        for relative in ["bin:other", ":", "", ".", "./", "bin", "::."] {
            let path = OsString::from(relative);
            assert!(found("tool", Some(&path)).is_err(), "{relative:?}");
            assert!(found("planted", Some(&path)).is_err(), "{relative:?}");
        }
        let mixed = OsString::from(format!(":.:{}", other.display()));
        assert_eq!(found("tool", Some(&mixed)), Ok(other.join("tool")));
        assert!(found("dir-not-file", Some(&path)).is_err());
        // Names with a slash are paths; relative ones belong to the project.
        assert_eq!(found("./tool", Some(&path)), Ok(dir.path().join("./tool")));
        assert_eq!(
            found("/abs/tool", Some(&path)),
            Ok(PathBuf::from("/abs/tool"))
        );
        assert!(
            found("no-such-tool", Some(&path))
                .unwrap_err()
                .contains("not in PATH")
        );
        assert!(found("sh", None).unwrap().is_absolute());
        // Non-UTF-8 entries are searched like any other.
        let odd = dir.path().join(OsStr::from_bytes(b"odd\xff"));
        std::fs::create_dir_all(&odd).unwrap();
        write(&odd.join("tool2"), 0o755);
        assert_eq!(found("tool2", Some(odd.as_os_str())), Ok(odd.join("tool2")));
    }

    #[test]
    fn path_loses_its_empty_and_relative_entries() {
        let cases: [(&[u8], &[u8]); 6] = [
            (b":/usr/bin", b"/usr/bin"),
            (b"/usr/bin:", b"/usr/bin"),
            (b"/a::/b", b"/a:/b"),
            (b".:bin:/b:./x", b"/b"),
            (b"", b""),
            (b"/\xff:/c", b"/\xff:/c"),
        ];
        for (path, want) in cases {
            assert_eq!(
                absolute_path_entries(OsStr::from_bytes(path)).as_bytes(),
                want,
                "{path:?}"
            );
        }
    }

    #[test]
    fn values_set_by_the_host_never_hold_nul() {
        assert_eq!(without_nul(OsStr::new("a\0b\0")), OsString::from("ab"));
        assert_eq!(without_nul(OsStr::new("plain")), OsString::from("plain"));
    }
}
