//! The command handler: a process per run, Claude Code's contract.
//!
//! - stdin: the input JSON on one line; cwd: the project directory;
//! - shell form runs `sh -c COMMAND` (or `bash -c`); exec form runs the program with
//!   `args`, no shell, with `${CLAUDE_PROJECT_DIR}`-style placeholders substituted;
//! - the process leads its own process group, and on timeout (or cancellation) the whole
//!   group is killed, so a hook that forked a sleeper leaves nothing behind;
//! - exit 0: success, stdout is JSON when its first non-blank character is `{`;
//!   exit 2: a blocking error whose reason is the JSON reason, else stderr (JSON cannot
//!   undo it); any other exit: a non-blocking error, unless stdout is a valid JSON object,
//!   which then decides alone;
//! - a process that cannot start (spawn error, shell exit 126/127, an interpreter that
//!   cannot open its script) is a non-blocking error, never a block (claude-code #80697);
//! - the environment is the host's, minus credential-looking variables (see
//!   [`is_credential_name`]) unless `envAllowlist` names them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::output::{Stdout, cap_text, classify_stdout};
use super::{Answer, FailureKind, HandlerRun, Invocation, Usage, Verdict};
use crate::policy::{CommandSpec, Hook, Settings, Shell};

/// Bytes of stdout or stderr kept per run; the rest is read and dropped so the hook never
/// blocks on a full pipe.
pub const CAPTURE_LIMIT: usize = 1 << 20;

/// Substrings that mark an environment variable as a credential.
const CREDENTIAL_MARKERS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "KEY",
    "CREDENTIAL",
    "PRIVATE",
];
/// Prefixes of cloud credentials.
const CREDENTIAL_PREFIXES: &[&str] = &["AWS_", "AZURE_", "GCP_", "GOOGLE_"];
/// Whole names of variables that usually embed credentials.
const CREDENTIAL_NAMES: &[&str] = &["DATABASE_URL", "NETRC"];

/// Whether a variable name looks like it holds a credential.
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_MARKERS.iter().any(|m| upper.contains(m))
        || CREDENTIAL_PREFIXES.iter().any(|p| upper.starts_with(p))
        || CREDENTIAL_NAMES.contains(&upper.as_str())
}

/// Whether `name` matches an allowlist entry (`*` is a wildcard).
pub fn allowlisted(name: &str, allowlist: &[String]) -> bool {
    allowlist
        .iter()
        .any(|pattern| wildcard_match(pattern, name))
}

fn wildcard_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first)
        || !text[first.len()..].ends_with(last)
        || text.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// The environment a command hook gets.
pub fn hook_env(invocation: &Invocation, settings: &Settings) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(name, _)| !is_credential_name(name) || allowlisted(name, &settings.env_allowlist))
        .collect();
    let project = invocation.project_dir.display().to_string();
    env.push(("CLAUDE_PROJECT_DIR".into(), project.clone()));
    env.push(("HOOKHOST_PROJECT_DIR".into(), project));
    env.push((
        "CLAUDE_CODE_SESSION_ID".into(),
        invocation.session_id.clone(),
    ));
    env.push(("HOOKHOST_SESSION_ID".into(), invocation.session_id.clone()));
    env.push(("HOOKHOST_EVENT".into(), invocation.spec.name.to_string()));
    if let Some(file) = &invocation.env_file {
        env.push(("CLAUDE_ENV_FILE".into(), file.display().to_string()));
        env.push(("HOOKHOST_ENV_FILE".into(), file.display().to_string()));
    }
    env
}

/// Substitutes `${CLAUDE_PROJECT_DIR}`, `${HOOKHOST_PROJECT_DIR}` and
/// `${CLAUDE_CODE_SESSION_ID}` in an exec-form argument, as plain strings.
fn substitute(arg: &str, invocation: &Invocation) -> String {
    let project = invocation.project_dir.display().to_string();
    arg.replace("${CLAUDE_PROJECT_DIR}", &project)
        .replace("${HOOKHOST_PROJECT_DIR}", &project)
        .replace("${CLAUDE_CODE_SESSION_ID}", &invocation.session_id)
}

/// Finds `program` the way `execvp` would in the hook's environment: a name with a `/`
/// as it is, else the first executable file of that name in `search_path` (relative
/// entries against `cwd`, the hook's working directory; `/bin:/usr/bin` when unset).
///
/// Why not leave the search to the spawn: with a cleared environment and a bare name,
/// the standard library must `fork` the whole host to search in the child, while an
/// absolute path lets it use `posix_spawn` (a `vfork`), which does not copy the host's
/// page tables: a large share of a command hook's start-up. A name found nowhere is
/// returned unchanged, so the spawn reports the same error it always did.
fn resolve_program(program: &str, search_path: Option<&str>, cwd: &Path) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    search_path
        .unwrap_or("/bin:/usr/bin")
        .split(':')
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| is_executable_file(candidate))
        .unwrap_or_else(|| PathBuf::from(program))
}

fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Kills the process group when dropped, unless disarmed: a cancelled dispatch (a
/// disconnected client, a timeout) leaves no process behind.
struct GroupGuard(Option<i32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: killpg has no memory-safety preconditions; a stale pgid is harmless
            // because the group leader is our unreaped child, so the id cannot be reused.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
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
    if let Some(file) = &invocation.env_file {
        // The hook appends `export NAME=value` lines; the file exists, empty, before it
        // runs. Failing to create it is not the hook's failure: it then finds no file.
        let _ = std::fs::create_dir_all(file.parent().expect("an env file has a parent"));
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file);
    }
    let env = hook_env(invocation, settings);
    let search_path = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_str());
    let (program, args) = match &spec.args {
        None => {
            let shell = match spec.shell {
                Shell::Sh => "sh",
                Shell::Bash => "bash",
            };
            (
                shell.to_string(),
                vec!["-c".to_string(), spec.command.clone()],
            )
        }
        Some(args) => (
            substitute(&spec.command, invocation),
            args.iter().map(|a| substitute(a, invocation)).collect(),
        ),
    };
    let mut command = Command::new(resolve_program(
        &program,
        search_path,
        &invocation.project_dir,
    ));
    command
        .arg0(&program)
        .args(&args)
        .current_dir(&invocation.project_dir)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);

    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let what = spec.args.as_ref().map_or("sh", |_| spec.command.as_str());
            return HandlerRun::failed(
                FailureKind::CannotStart,
                format!("cannot start `{what}`: {e}"),
                started,
            );
        }
    };
    let mut guard = GroupGuard(child.id().map(|pid| pid as i32));

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
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let (_, out, err, status) =
            tokio::join!(feed, read_capped(stdout), read_capped(stderr), child.wait());
        (out, err, status)
    };
    let (stdout, stderr, status) = match tokio::time::timeout(hook.timeout, work).await {
        Ok(result) => result,
        Err(_) => {
            guard.kill();
            let _ = child.wait().await;
            return HandlerRun {
                verdict: Verdict::failed(
                    FailureKind::Timeout,
                    format!(
                        "timed out after {}s; process group killed",
                        format_secs(hook.timeout.as_secs_f64())
                    ),
                ),
                exit_code: None,
                duration: started.elapsed(),
                usage: Usage::default(),
                diagnostics: None,
            };
        }
    };
    guard.0 = None; // the process ended on its own; leave what it deliberately detached
    let duration = started.elapsed();
    let stderr_text = String::from_utf8_lossy(&stderr).into_owned();
    let stdout_text = String::from_utf8_lossy(&stdout).into_owned();
    let (verdict, exit_code) = match status {
        Ok(status) => match status.code() {
            Some(code) => (
                interpret_exit(code, &stdout_text, &stderr_text, &invocation.spec.name),
                Some(code),
            ),
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

fn format_secs(secs: f64) -> String {
    if secs.fract() == 0.0 {
        format!("{secs:.0}")
    } else {
        format!("{secs}")
    }
}

async fn read_capped(pipe: Option<impl AsyncRead + Unpin>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else { return kept };
    let mut buf = [0u8; 8192];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = CAPTURE_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// Whether an exit means "the hook could not start" rather than "the hook decided":
/// the shell's 126 (not executable) and 127 (not found), and an interpreter that exits 2
/// because it cannot open its script (CPython), which would otherwise read as a block.
fn cannot_start(code: i32, stdout: &str, stderr: &str) -> bool {
    match code {
        126 | 127 => stdout.trim().is_empty(),
        2 => {
            stdout.trim().is_empty()
                && stderr.contains("can't open file")
                && stderr.contains("[Errno")
        }
        _ => false,
    }
}

/// Applies the exit-code contract to one finished process.
pub fn interpret_exit(code: i32, stdout: &str, stderr: &str, event: &str) -> Verdict {
    if cannot_start(code, stdout, stderr) {
        let first = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim();
        return Verdict::failed(
            FailureKind::CannotStart,
            format!("cannot start (exit {code}): {first}"),
        );
    }
    let parsed = classify_stdout(stdout, event);
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
                plain_text: None,
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
                    format!("Failed with non-blocking status code {code}: {first}"),
                )
            }
        },
    }
}

/// Whether a path exists and is executable, for `hookhost hooks` diagnostics.
pub fn program_exists(program: &str, project_dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = Path::new(program);
        return executable(&if p.is_absolute() {
            p.to_path_buf()
        } else {
            project_dir.join(p)
        });
    }
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| executable(&dir.join(program))))
        .unwrap_or(false)
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

    #[test]
    fn credential_names() {
        for name in [
            "GITHUB_TOKEN",
            "AWS_REGION",
            "ANTHROPIC_API_KEY",
            "db_password",
            "MY_SECRET_X",
            "DATABASE_URL",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "LANG", "TERM", "SHELL", "USER"] {
            assert!(!is_credential_name(name), "{name}");
        }
    }

    #[test]
    fn allowlist_wildcards() {
        let list = vec![
            "GITHUB_TOKEN".to_string(),
            "NPM_*".to_string(),
            "*_PUBLIC_KEY".to_string(),
        ];
        assert!(allowlisted("GITHUB_TOKEN", &list));
        assert!(allowlisted("NPM_TOKEN", &list));
        assert!(allowlisted("SSH_PUBLIC_KEY", &list));
        assert!(!allowlisted("GITLAB_TOKEN", &list));
        assert!(wildcard_match("a*b*c", "aXbYc"));
        assert!(!wildcard_match("a*b*c", "aXcYb"));
        assert!(!wildcard_match("ab*ba", "aba"));
    }

    #[test]
    fn programs_are_found_like_execvp_does() {
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
        std::fs::create_dir_all(bin.join("dir-not-file")).unwrap();
        let path = format!("{}:{}", bin.display(), other.display());
        assert_eq!(
            resolve_program("tool", Some(&path), dir.path()),
            other.join("tool")
        );
        // Relative entries are relative to the hook's working directory.
        assert_eq!(
            resolve_program("tool", Some("bin:other"), dir.path()),
            other.join("tool")
        );
        assert_eq!(
            resolve_program("dir-not-file", Some(&path), dir.path()),
            PathBuf::from("dir-not-file")
        );
        // Names with a slash are used as they are; unknown names are left to the spawn.
        assert_eq!(
            resolve_program("./tool", Some(&path), dir.path()),
            PathBuf::from("./tool")
        );
        assert_eq!(
            resolve_program("no-such-tool", Some(&path), dir.path()),
            PathBuf::from("no-such-tool")
        );
        assert!(resolve_program("sh", None, dir.path()).is_absolute());
    }
}
