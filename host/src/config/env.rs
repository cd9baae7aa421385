//! The `HOOKHOST_*` environment variables, judged before any of them decides anything.
//!
//! Under Claude Code, a project's `.claude/settings.json` may carry an `env` block that
//! reaches every hook's environment, so a repository can set any of these variables for
//! the `hookhost dispatch` that Claude Code runs. The rules, one per variable (the book's
//! "Environment variables" chapter, `docs/book/src/environment.md`, is the user-facing
//! copy):
//!
//! - **Empty means unset**, for every variable.
//! - **Paths** (`HOOKHOST_HOME`, `HOOKHOST_DATA_DIR`, `HOOKHOST_AUDIT_LOG`,
//!   `HOOKHOST_CACHE_DIR`, `HOOKHOST_MANAGED_DIR`) must be absolute, without `..`, and not
//!   inside the workspace (the project directory or the working directory, symlinks
//!   resolved): a repository does not know where it is cloned, so what it can set is a
//!   relative path or a guess, and both are refused. A refused value is ignored (the
//!   default is used) and every outcome says so. A workspace that is `/`, the user's home
//!   directory (from the password database, not `$HOME`) or above it is not a clone, and
//!   is not counted as a workspace for this check.
//! - **`HOOKHOST_MANAGED_DIR`** is honoured only where the system has no managed policy
//!   directory (`/etc/hookhost`; `/Library/Application Support/hookhost` on macOS): it
//!   exists for tests and unmanaged machines. Where the system directory exists, the
//!   variable is ignored with a notice.
//! - **`HOOKHOST_TRUST_WORKSPACE`** trusts only when it is exactly `1` (no trimming), and
//!   managed policy may forbid it (`forbidEnvironmentTrust`, or `forbidWorkspaceTrust`).
//! - **`HOOKHOST_STOP_BLOCK_CAP`** is ASCII digits only; it yields to a managed
//!   `stopBlockCap`.
//! - **`HOOKHOST_AUDIT_LOG`** yields to a managed `auditLog`.
//!
//! Nothing here panics on a value that is not UTF-8: paths stay `OsString`s.

//! The one reader of the process environment: every variable hookhost reads is declared
//! in [`VARIABLES`] with its kind and rule, and read through this file alone (a test greps
//! `host/src` for every other read: `tests::every_read_of_the_environment_is_here`).
//!
//! Under Claude Code, a project's `.claude/settings.json` may carry an `env` block that
//! reaches every hook's environment, so a repository can set any variable for the
//! `hookhost dispatch` that Claude Code runs. The rules, one per kind of variable (the
//! book's "Environment variables" chapter is the user-facing copy):
//!
//! - **Empty means unset**, for every variable.
//! - **Paths** ([`Kind::Path`]: `HOOKHOST_HOME`, `HOOKHOST_DATA_DIR`, `HOOKHOST_AUDIT_LOG`,
//!   `HOOKHOST_CACHE_DIR`, `HOOKHOST_MANAGED_DIR`, `HOME`, `XDG_*`, …) must be absolute,
//!   without `..`, and not inside the workspace (the project directory or the working
//!   directory, symlinks resolved): a repository does not know where it is cloned, so what
//!   it can set is a relative path or a guess, and both are refused. A refused value is
//!   ignored (the default is used) and every outcome says so. A workspace that is `/`, the
//!   user's home directory (from the password database, not `$HOME`) or above it is not a
//!   clone, and is not counted as a workspace for this check.
//! - **`HOOKHOST_MANAGED_DIR`** is honoured only where the system has no managed policy
//!   directory (`/etc/hookhost`; `/Library/Application Support/hookhost` on macOS): it
//!   exists for tests and unmanaged machines. Where the system directory exists, the
//!   variable is ignored with a notice.
//! - **Switches** ([`Kind::Switch`]) take exact values only: `HOOKHOST_TRUST_WORKSPACE`
//!   trusts only when it is exactly `1` (no trimming), and managed policy may forbid it.
//! - **Numbers** ([`Kind::Number`]) are ASCII digits only, within bounds; anything else is
//!   ignored with a notice.
//! - **Internal** variables ([`Kind::Internal`]) are never read: what hookhost hands its
//!   own children goes by descriptor, never by a variable a hook's environment could carry
//!   (the dispatch daemon gets its listening socket as its stdin, its lock as its stdout).
//! - **Ignored** variables ([`Kind::Ignored`]) are never read by hookhost: TLS roots come
//!   from the system's certificate store at fixed places, and HTTP hooks use no proxy.
//! - **Children**: command hooks get the environment without any variable that makes a
//!   shell or an interpreter load code ([`is_code_loading`]: a rule over name classes,
//!   not a list of names), and without the internal ones ([`for_children`]).
//!
//! Nothing here panics on a value that is not UTF-8: paths stay `OsString`s.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The system's managed policy directory.
#[cfg(target_os = "macos")]
pub const SYSTEM_MANAGED_DIR: &str = "/Library/Application Support/hookhost";
/// The system's managed policy directory.
#[cfg(not(target_os = "macos"))]
pub const SYSTEM_MANAGED_DIR: &str = "/etc/hookhost";

// By path, so that the same lines find it when `hookhost-dispatch` compiles this file
// as a module of its own (`src/dispatch_client.rs`).
#[path = "env/otel.rs"]
mod otel;
#[path = "env/table.rs"]
mod table;
pub use otel::{Otel, otel};
pub use table::{
    Kind, SHELL_CODE_VARIABLES, SHELL_FUNCTION_PREFIX, VARIABLES, Variable, is_code_loading,
    is_shell_code_variable,
};

/// Variables that tune this very process from inside the standard library (read when
/// the first thread starts): removed by [`forget_process_tunables`] before any thread.
const PROCESS_TUNABLES: &[&str] = &["RUST_MIN_STACK"];

/// Removes `PROCESS_TUNABLES` from this process's environment (a tiny `RUST_MIN_STACK`
/// would overflow a thread's stack: a crash, and the hooks' verdicts lost).
///
/// # Safety
///
/// Call before any other thread exists (first thing in `main`): nothing may read the
/// environment concurrently.
pub unsafe fn forget_process_tunables() {
    for name in PROCESS_TUNABLES {
        if std::env::var_os(name).is_some() {
            // SAFETY: the caller guarantees that this process has one thread.
            unsafe { std::env::remove_var(name) };
        }
    }
}

/// The longest path value judged (Linux's `PATH_MAX`): a longer one cannot be opened,
/// and would make whatever it names fail rather than be absent.
const MAX_PATH_BYTES: usize = 4096;

/// The declaration of `name`.
pub fn declared(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

/// The one read of a declared variable: `None` when unset or empty. Reading an internal
/// or ignored variable, or one not declared, is a bug: it panics in debug builds and
/// reads nothing in release builds.
fn read(name: &str) -> Option<OsString> {
    let readable =
        declared(name).is_some_and(|v| !matches!(v.kind, Kind::Internal | Kind::Ignored));
    debug_assert!(
        readable,
        "`{name}` is read but not declared readable in config::env::VARIABLES"
    );
    if !readable {
        return None;
    }
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// A [`Kind::Passthrough`] or [`Kind::Workspace`] variable, `None` when unset or empty.
pub fn var(name: &str) -> Option<OsString> {
    debug_assert!(
        declared(name).is_some_and(|v| matches!(v.kind, Kind::Passthrough | Kind::Workspace)),
        "`{name}` has a kind with its own reader"
    );
    read(name)
}

/// The value of a variable a config file grants to a hook (a wasm plugin's `env` grant,
/// an HTTP hook's `allowedEnvVars`): handed to that hook only, it decides nothing for
/// hookhost, so any name may be granted.
pub fn granted(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// The environment as a whole, for a dispatch daemon's key only: two callers share a
/// daemon only when their environments are equal. Sorted.
pub fn snapshot() -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    env.sort();
    env
}

/// The environment a command hook starts from: this process's, without any variable that
/// makes a program load code ([`is_code_loading`]), without internal ones, and without a
/// declared path ([`Kind::Path`]: `HOME`, `XDG_CONFIG_HOME`, …) that [`check_path`]
/// refuses for hookhost itself (inside the workspace of `project` or of the working
/// directory): the programs a hook runs read their own config from there (`git` reads
/// `$XDG_CONFIG_HOME/git/config` and runs its `core.fsmonitor`). A refused `HOME` is
/// replaced by the judged one ([`home_dir`]). (Credential scrubbing and `PATH` are the
/// command runner's, on top of this.)
pub fn for_children(project: Option<&Path>) -> Vec<(OsString, OsString)> {
    /// The variable a refused value of is replaced, not dropped.
    const HOME: &str = "HOME";
    let workspaces = workspaces_of(project);
    let refused = |value: &OsStr| !value.is_empty() && check_path(value, &workspaces).is_err();
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, value)| {
            !is_code_loading(name.as_bytes())
                && match declared(&name.to_string_lossy()).map(|v| v.kind) {
                    Some(Kind::Internal) => false,
                    Some(Kind::Path) => !refused(value),
                    _ => true,
                }
        })
        .collect();
    if std::env::var_os(HOME).is_some_and(|v| refused(&v))
        && let Some(home) = home_dir_judged(&workspaces).0
    {
        env.push((HOME.into(), home.into_os_string()));
    }
    env
}

/// The user's home directory (`$HOME` when it passes [`check_path`], else the password
/// database's), for `${home}` in grants and ceilings and the default places.
pub fn home_dir() -> Option<PathBuf> {
    home_dir_judged(&workspaces_of(None)).0
}

fn home_dir_judged(workspaces: &[PathBuf]) -> (Option<PathBuf>, Option<String>) {
    match path_var("HOME", workspaces) {
        Ok(Some(home)) => (Some(home), None),
        Ok(None) => (password_home(), None),
        Err(notice) => (password_home(), Some(notice)),
    }
}

/// A base directory of the user's: its XDG variable when it passes [`check_path`], else
/// its place under the home directory. The second value is a notice for a refused value.
fn base_dir(
    var_name: &str,
    under_home: &str,
    workspaces: &[PathBuf],
) -> (Option<PathBuf>, Vec<String>) {
    let (home, home_notice) = home_dir_judged(workspaces);
    let mut notices: Vec<String> = home_notice.into_iter().collect();
    if cfg!(not(target_os = "macos")) {
        match path_var(var_name, workspaces) {
            Ok(Some(dir)) => return (Some(dir), notices),
            Ok(None) => {}
            Err(notice) => notices.push(notice),
        }
    }
    (home.map(|h| h.join(under_home)), notices)
}

/// The user's config base (`~/.config`; `~/Library/Application Support` on macOS).
pub fn config_base(workspaces: &[PathBuf]) -> (Option<PathBuf>, Vec<String>) {
    let under = if cfg!(target_os = "macos") {
        "Library/Application Support"
    } else {
        ".config"
    };
    base_dir("XDG_CONFIG_HOME", under, workspaces)
}

/// The user's data base (`~/.local/share`; `~/Library/Application Support` on macOS).
pub fn data_base(workspaces: &[PathBuf]) -> (Option<PathBuf>, Vec<String>) {
    let under = if cfg!(target_os = "macos") {
        "Library/Application Support"
    } else {
        ".local/share"
    };
    base_dir("XDG_DATA_HOME", under, workspaces)
}

/// The user's cache base (`~/.cache`; `~/Library/Caches` on macOS).
pub fn cache_base(workspaces: &[PathBuf]) -> (Option<PathBuf>, Vec<String>) {
    let under = if cfg!(target_os = "macos") {
        "Library/Caches"
    } else {
        ".cache"
    };
    base_dir("XDG_CACHE_HOME", under, workspaces)
}

/// Whether `HOOKHOST_TRUST_WORKSPACE` asks to trust the workspace: exactly `1`.
pub fn trust_switch() -> bool {
    read("HOOKHOST_TRUST_WORKSPACE").is_some_and(|v| v == "1")
}

/// Whether `HOOKHOST_DISPATCH_DAEMON` turns the dispatch daemon off: set to anything but
/// `auto` (a misspelt setting falls back to the plain process).
pub fn daemon_off() -> bool {
    read("HOOKHOST_DISPATCH_DAEMON").is_some_and(|mode| mode != "auto")
}

/// `HOOKHOST_STOP_BLOCK_CAP`: `Ok(None)` when unset or empty, the number when it is ASCII
/// digits only, else `Err` with a notice.
pub fn stop_block_cap() -> Result<Option<u32>, String> {
    number("HOOKHOST_STOP_BLOCK_CAP", 0, u32::MAX as u64).map(|n| n.map(|n| n as u32))
}

/// The most `HOOKHOST_DEPTH` is read as (a larger number is junk).
pub const MAX_DEPTH_VALUE: u64 = 1_000_000;

/// `HOOKHOST_DEPTH`: `Ok(0)` when unset or empty (the outermost hookhost), the number
/// when it is ASCII digits only up to [`MAX_DEPTH_VALUE`], else `Err` with a notice: the
/// depth guard counts a value hookhost did not write (junk, negative, huge) as past its
/// limit, so that mangling the variable never lifts the guard.
pub fn depth() -> Result<u32, String> {
    match number("HOOKHOST_DEPTH", 0, MAX_DEPTH_VALUE) {
        Ok(n) => Ok(n.map_or(0, |n| n as u32)),
        Err(why) => Err(why.replace("; ignored", "; counted as past the depth limit")),
    }
}

/// Socket activation (systemd's `sd_listen_fds` protocol): how many descriptors, from 3
/// on, the supervisor passed this process to listen on. `Ok(0)` when not activated:
/// `LISTEN_PID` unset, or naming another process (the variables of an activated parent,
/// inherited). `Err` with a notice when either is not a number.
pub fn listen_fds() -> Result<u32, String> {
    let Some(pid) = number("LISTEN_PID", 1, i32::MAX as u64)? else {
        return Ok(0);
    };
    if pid != u64::from(std::process::id()) {
        return Ok(0);
    }
    Ok(number("LISTEN_FDS", 0, 1 << 16)?.map_or(0, |n| n as u32))
}

/// A [`Kind::Number`] variable: `Ok(None)` when unset or empty, the number when it is
/// ASCII digits only and within `min..=max`, else `Err` with a notice (the caller uses
/// its default).
pub fn number(name: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
    debug_assert!(
        declared(name).is_some_and(|v| v.kind == Kind::Number),
        "{name}"
    );
    let Some(value) = read(name) else {
        return Ok(None);
    };
    let digits = value
        .to_str()
        .filter(|v| v.bytes().all(|b| b.is_ascii_digit()));
    match digits.and_then(|d| d.parse::<u64>().ok()) {
        Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
        _ => Err(format!(
            "{name} `{}` is not a number from {min} to {max} (ASCII digits); ignored",
            shown(&value)
        )),
    }
}

/// A value as a notice quotes it: lossy, and cut to 200 characters (a value may be huge).
fn shown(value: &OsStr) -> String {
    let text = value.to_string_lossy();
    match text.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.into_owned(),
    }
}

/// The directories that count as "the workspace" for the path check: each of `dirs`
/// that could be a repository clone, with its canonical form.
pub fn workspaces(dirs: &[&Path]) -> Vec<PathBuf> {
    let home = password_home();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(absolute) = std::path::absolute(dir) else {
            continue;
        };
        let canonical = std::fs::canonicalize(&absolute).unwrap_or_else(|_| absolute.clone());
        for candidate in [absolute, canonical] {
            let is_root = candidate.parent().is_none();
            let holds_home = home.as_ref().is_some_and(|h| h.starts_with(&candidate));
            if !is_root && !holds_home && !out.contains(&candidate) {
                out.push(candidate);
            }
        }
    }
    out
}

/// The working directory and `project`, as [`workspaces`].
pub fn workspaces_of(project: Option<&Path>) -> Vec<PathBuf> {
    let cwd = std::env::current_dir().ok();
    let dirs: Vec<&Path> = cwd.as_deref().into_iter().chain(project).collect();
    workspaces(&dirs)
}

/// Judges a path value: `Ok` when it is absolute, has no `..`, and is not inside any of
/// `workspaces` (symlinks on its existing part resolved; a path whose existing part
/// cannot be resolved, a symlink loop or a name too long, is refused: where it leads
/// cannot be told); else why not.
pub fn check_path(value: &OsStr, workspaces: &[PathBuf]) -> Result<PathBuf, String> {
    if value.len() > MAX_PATH_BYTES {
        return Err(format!("a path over {MAX_PATH_BYTES} bytes is refused"));
    }
    if value.as_bytes().iter().any(u8::is_ascii_control) {
        return Err("a path with a control character (a newline, …) is refused".into());
    }
    let path = PathBuf::from(value);
    if !path.is_absolute() {
        return Err("a relative path is refused (a repository could set it)".into());
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err("a path with `..` is refused".into());
    }
    let resolved = resolve_existing(&path)
        .map_err(|e| format!("a path whose real location cannot be told is refused ({e})"))?;
    for workspace in workspaces {
        if path.starts_with(workspace) || resolved.starts_with(workspace) {
            return Err(format!(
                "a path inside the workspace `{}` is refused (a repository could set it)",
                workspace.display()
            ));
        }
    }
    Ok(path)
}

/// A path variable judged by [`check_path`]: `Ok(None)` when unset or empty, `Ok(path)`
/// when accepted, `Err(notice)` when refused (the caller uses its default).
pub fn path_var(name: &str, workspaces: &[PathBuf]) -> Result<Option<PathBuf>, String> {
    debug_assert!(
        declared(name).is_some_and(|v| v.kind == Kind::Path),
        "{name}"
    );
    let Some(value) = read(name) else {
        return Ok(None);
    };
    check_path(&value, workspaces).map(Some).map_err(|why| {
        format!(
            "{name} `{}` is ignored: {why}; the default is used",
            shown(&value)
        )
    })
}

/// Where a private temporary directory of the host's own is made (the session store of a
/// library host built without a data directory): `TMPDIR` when [`check_path`] accepts it,
/// else `/tmp`. What is made there has a random name and mode 0700, so the variable
/// chooses only where.
pub fn private_temp_base() -> PathBuf {
    path_var("TMPDIR", &[])
        .ok()
        .flatten()
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// The user's data directory: `HOOKHOST_DATA_DIR`, else `~/.local/share/hookhost` (the
/// platform's data directory), else `/tmp/hookhost`; judged against `workspaces`, with the
/// notices when a variable was refused. Session state, the trust store, the audit log and
/// the dispatch daemons live there (`hookhost::data_dir`; the small client
/// `hookhost-dispatch` finds its daemon through this very function).
pub fn data_dir_judged(workspaces: &[PathBuf]) -> (PathBuf, Vec<String>) {
    // No home directory at all (no `$HOME`, no password entry): a fixed place, never
    // `$TMPDIR` (the environment does not choose it).
    let default = |mut notices: Vec<String>| {
        let (base, more) = data_base(workspaces);
        notices.extend(more);
        let dir = base.map_or_else(|| PathBuf::from("/tmp/hookhost"), |d| d.join("hookhost"));
        (dir, notices)
    };
    match path_var("HOOKHOST_DATA_DIR", workspaces) {
        Ok(Some(dir)) => (dir, Vec::new()),
        Ok(None) => default(Vec::new()),
        Err(notice) => default(vec![notice]),
    }
}

/// Where managed policy is read from: the system directory when it exists (whatever
/// `HOOKHOST_MANAGED_DIR` says), else an accepted `HOOKHOST_MANAGED_DIR`, else the
/// system directory (absent: no managed policy). The second value is a notice when the
/// variable was set and not used.
pub fn managed_dir(system: &Path, workspaces: &[PathBuf]) -> (PathBuf, Option<String>) {
    let asked = read("HOOKHOST_MANAGED_DIR");
    // `symlink_metadata`: a dangling symlink is a system policy that is broken, not
    // absent, and the loader reports it as such.
    if std::fs::symlink_metadata(system).is_ok() {
        let notice = asked.filter(|a| Path::new(a) != system).map(|a| {
            format!(
                "HOOKHOST_MANAGED_DIR `{}` is ignored: the system's managed policy `{}` exists \
                 and cannot be moved by the environment",
                shown(&a),
                system.display()
            )
        });
        return (system.to_path_buf(), notice);
    }
    match path_var("HOOKHOST_MANAGED_DIR", workspaces) {
        Ok(Some(dir)) => (dir, None),
        Ok(None) => (system.to_path_buf(), None),
        Err(notice) => (system.to_path_buf(), Some(notice)),
    }
}

/// `path` with its longest existing prefix canonicalized (symlinks resolved) and the
/// rest appended as it is. Only absence (`ENOENT`, `ENOTDIR`) moves the resolution to
/// the parent; any other failure (a symlink loop, a name or a resolved path too long,
/// a directory that may not be searched) is the error: the path past it might lead
/// anywhere, the workspace included (`/proc/self/cwd/…` when the working directory is
/// deeper than `PATH_MAX`).
fn resolve_existing(path: &Path) -> std::io::Result<PathBuf> {
    use std::io::ErrorKind::{NotADirectory, NotFound};
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(real) => return Ok(rest.iter().rev().fold(real, |acc, part| acc.join(part))),
            Err(e) if !matches!(e.kind(), NotFound | NotADirectory) => return Err(e),
            Err(_) => {}
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return Ok(path.to_path_buf()),
        }
    }
}

/// The home directory of the effective user from the password database: unlike
/// `$HOME`, nothing in the environment can move it. Looked up once per process, by the
/// program's own lookup, which keeps its answer (`super::password_home_lookup`: the
/// library's `config::nss::this_user`; the small client's `files_home`, from
/// `config/passwd.rs` without NSS). Part of the dispatch daemon's key: a daemon keeps the
/// home it looked up, so one looked up again differently is another daemon's.
pub fn password_home() -> Option<PathBuf> {
    super::password_home_lookup()
}

#[cfg(test)]
#[path = "env/tests.rs"]
mod tests;
