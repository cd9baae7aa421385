//! The `HOOKHOST_*` environment variables, judged before any of them decides anything.
//!
//! Under Claude Code, a project's `.claude/settings.json` may carry an `env` block that
//! reaches every hook's environment, so a repository can set any of these variables for
//! the `hookhost dispatch` that Claude Code runs. The rules, one per variable (the README's
//! "Environment variables" section is the user-facing copy):
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

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

/// The system's managed policy directory.
#[cfg(target_os = "macos")]
pub const SYSTEM_MANAGED_DIR: &str = "/Library/Application Support/hookhost";
/// The system's managed policy directory.
#[cfg(not(target_os = "macos"))]
pub const SYSTEM_MANAGED_DIR: &str = "/etc/hookhost";

/// The value of `name`, `None` when unset or empty.
pub fn var(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// The user's home directory (`$HOME`, else the password database), for `${home}` in
/// grants and ceilings.
pub fn home_dir() -> Option<PathBuf> {
    directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf())
}

/// Whether `HOOKHOST_TRUST_WORKSPACE` asks to trust the workspace: exactly `1`.
pub fn trust_switch() -> bool {
    std::env::var_os("HOOKHOST_TRUST_WORKSPACE").is_some_and(|v| v == "1")
}

/// `HOOKHOST_STOP_BLOCK_CAP`: `Ok(None)` when unset or empty, the number when it is ASCII
/// digits only, else `Err` with a notice.
pub fn stop_block_cap() -> Result<Option<u32>, String> {
    let Some(value) = var("HOOKHOST_STOP_BLOCK_CAP") else {
        return Ok(None);
    };
    let digits = value
        .to_str()
        .filter(|v| v.bytes().all(|b| b.is_ascii_digit()));
    match digits.and_then(|d| d.parse::<u32>().ok()) {
        Some(cap) => Ok(Some(cap)),
        None => Err(format!(
            "HOOKHOST_STOP_BLOCK_CAP `{}` is not a number of blocks (ASCII digits); ignored",
            value.to_string_lossy()
        )),
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
/// `workspaces` (symlinks on its existing part resolved); else why not.
pub fn check_path(value: &OsStr, workspaces: &[PathBuf]) -> Result<PathBuf, String> {
    let path = PathBuf::from(value);
    if !path.is_absolute() {
        return Err("a relative path is refused (a repository could set it)".into());
    }
    if path.components().any(|c| c == Component::ParentDir) {
        return Err("a path with `..` is refused".into());
    }
    let resolved = resolve_existing(&path);
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
    let Some(value) = var(name) else {
        return Ok(None);
    };
    check_path(&value, workspaces).map(Some).map_err(|why| {
        format!(
            "{name} `{}` is ignored: {why}; the default is used",
            value.to_string_lossy()
        )
    })
}

/// Where managed policy is read from: the system directory when it exists (whatever
/// `HOOKHOST_MANAGED_DIR` says), else an accepted `HOOKHOST_MANAGED_DIR`, else the
/// system directory (absent: no managed policy). The second value is a notice when the
/// variable was set and not used.
pub fn managed_dir(system: &Path, workspaces: &[PathBuf]) -> (PathBuf, Option<String>) {
    let asked = var("HOOKHOST_MANAGED_DIR");
    // `symlink_metadata`: a dangling symlink is a system policy that is broken, not
    // absent, and the loader reports it as such.
    if std::fs::symlink_metadata(system).is_ok() {
        let notice = asked.filter(|a| Path::new(a) != system).map(|a| {
            format!(
                "HOOKHOST_MANAGED_DIR `{}` is ignored: the system's managed policy `{}` exists \
                 and cannot be moved by the environment",
                a.to_string_lossy(),
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
/// rest appended as it is.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |acc, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The home directory of the effective user from the password database: unlike
/// `$HOME`, nothing in the environment can move it. Looked up once per process.
fn password_home() -> Option<PathBuf> {
    static HOME: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    HOME.get_or_init(look_up_password_home).clone()
}

fn look_up_password_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buffer = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero passwd is a valid value for getpwuid_r to overwrite.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and the buffer's length is passed; the
    // strings written point into `buffer`, which outlives their use below.
    let rc = unsafe {
        libc::getpwuid_r(
            super::file::effective_uid(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() || entry.pw_dir.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so pw_dir is a NUL-terminated string in `buffer`.
    let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
    let dir = PathBuf::from(OsStr::from_bytes(dir.to_bytes()));
    dir.is_absolute().then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn paths_must_be_absolute_and_outside_the_workspace() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let repo = base.join("repo");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::os::unix::fs::symlink(repo.join("sub"), base.join("link")).unwrap();
        let ws = workspaces(&[&repo]);
        let ok = |v: &str| check_path(OsStr::new(v), &ws);
        assert!(ok(base.join("data").to_str().unwrap()).is_ok());
        assert!(ok(base.join("repository").to_str().unwrap()).is_ok());
        for refused in [
            "data".to_string(),
            "./data".to_string(),
            format!("{}/../repo/x", base.join("elsewhere").display()),
            repo.display().to_string(),
            repo.join("sub/x").display().to_string(),
            // A symlink outside that leads inside.
            base.join("link/x").display().to_string(),
        ] {
            assert!(ok(&refused).is_err(), "{refused} was accepted");
        }
        // Bytes that are not UTF-8 do not panic and are judged like any other.
        let odd = OsStr::from_bytes(b"/tmp/\xff\xfe");
        assert!(check_path(odd, &ws).is_ok());
        let odd_inside = [repo.as_os_str().as_bytes(), b"/\xff"].concat();
        assert!(check_path(OsStr::from_bytes(&odd_inside), &ws).is_err());
    }

    #[test]
    fn the_root_and_the_home_directory_are_not_workspaces() {
        assert!(workspaces(&[Path::new("/")]).is_empty());
        if let Some(home) = password_home() {
            assert!(workspaces(&[&home]).is_empty());
            if let Some(parent) = home.parent() {
                assert!(workspaces(&[parent]).is_empty());
            }
        }
    }
}
