//! Which project a command works on, found the way agents mean it.
//!
//! An agent runs its hooks with the environment and input of the session, not always
//! in the project's root: Claude Code sets `CLAUDE_PROJECT_DIR` and may run a hook after
//! the agent `cd`ed into a subdirectory; Codex sets no variable but puts the session's
//! `cwd` in the input. Taking the process's working directory as the project made the
//! drop-in miss the project's `.hookhost/` from a subdirectory and run none of its hooks,
//! silently. So the starting directory is, in order:
//!
//! 1. `--project DIR` (used exactly as given: the caller said which),
//! 2. `HOOKHOST_PROJECT_DIR`, then `CLAUDE_PROJECT_DIR` (when set, not empty, and a
//!    directory),
//! 3. the input's `cwd` (when it is an absolute path to a directory),
//! 4. the working directory;
//!
//! and from 2–4 hookhost walks up to the nearest directory with a `.hookhost/`. The walk
//! stops below the user's home directory and the filesystem root, and at any mount point,
//! a bind mount of the same file system included (mount ids, `statx`'s `STX_MNT_ID`, not
//! devices: `mount_of`), and it only takes a `.hookhost/` above the starting directory
//! that belongs to the user or to root, so a directory another user planted higher up
//! (`/tmp/.hookhost`) never becomes the project. With no `.hookhost/` on the way, the
//! project is the starting directory itself.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The variables that name the project, in order of precedence.
pub const PROJECT_VARS: [&str; 2] = ["HOOKHOST_PROJECT_DIR", "CLAUDE_PROJECT_DIR"];

/// The project for `explicit` (`--project`), the environment and the input's `cwd`.
///
/// # Errors
///
/// An explicit directory that cannot be made absolute, or a working directory that
/// cannot be read when nothing else names the project.
pub fn find(explicit: Option<&Path>, input_cwd: Option<&str>) -> Result<PathBuf, String> {
    if let Some(dir) = explicit {
        return std::path::absolute(dir).map_err(|e| {
            format!(
                "bad project directory `{}`: {e}",
                hookhost::text::escape(&dir.display().to_string())
            )
        });
    }
    // Each candidate costs a `stat`; the working directory is read only when needed.
    let working = std::cell::OnceCell::new();
    let working = || {
        working
            .get_or_init(std::env::current_dir)
            .as_ref()
            .ok()
            .cloned()
    };
    let from_env = PROJECT_VARS
        .iter()
        .filter_map(|name| hookhost::config::env::var(name))
        .filter_map(|value| absolute_from(value, working));
    let from_input = input_cwd
        .map(Path::new)
        .filter(|cwd| cwd.is_absolute())
        .map(Path::to_path_buf);
    let start = match from_env.chain(from_input).find(|dir| dir.is_dir()) {
        Some(dir) => dir,
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    // The common case, a `.hookhost/` right there, needs no walk and no home directory.
    if is_marker(&start) {
        return Ok(start);
    }
    let home = hookhost::config::env::home_dir().and_then(|d| d.canonicalize().ok());
    Ok(nearest_project(&start, home.as_deref()).unwrap_or(start))
}

/// `value` as an absolute path (relative ones against the working directory).
fn absolute_from(value: OsString, working: impl FnOnce() -> Option<PathBuf>) -> Option<PathBuf> {
    let path = PathBuf::from(value);
    if path.is_absolute() {
        Some(path)
    } else {
        working().map(|dir| dir.join(path))
    }
}

/// Whether `dir` holds a `.hookhost/` that marks a project: a real directory, judged by
/// `lstat` (no open, so a FIFO there cannot block), not a symlink (a repository's
/// `.hookhost` pointing at the user's config or anywhere else marks nothing).
fn is_marker(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(".hookhost")).is_ok_and(|m| m.is_dir())
}

/// The directory at or above `start` that holds a `.hookhost/`, under the rules of the
/// module docs; `None` when there is none. `start` itself is returned as given (so its
/// hooks see the path the agent used); an ancestor is returned canonical.
pub fn nearest_project(start: &Path, home: Option<&Path>) -> Option<PathBuf> {
    nearest_project_on(start, home, &mount_of)
}

/// [`nearest_project`] with the mount of a directory told by `mount`: the walk stops where
/// the mount changes (the one place the walk decides it).
fn nearest_project_on(
    start: &Path,
    home: Option<&Path>,
    mount: &dyn Fn(&Path) -> Option<Mount>,
) -> Option<PathBuf> {
    if is_marker(start) {
        return Some(start.to_path_buf());
    }
    let canonical = start.canonicalize().ok()?;
    let here = mount(&canonical)?;
    let me = hookhost::config::file::effective_uid();
    let mut dir = canonical.as_path();
    while let Some(parent) = dir.parent() {
        let at_boundary = parent.parent().is_none() // the root
            || Some(parent) == home
            || mount(parent) != Some(here);
        if at_boundary {
            return None;
        }
        if let Ok(meta) = std::fs::symlink_metadata(parent.join(".hookhost"))
            && meta.is_dir()
            && (meta.uid() == me || meta.uid() == 0)
        {
            return Some(parent.to_path_buf());
        }
        dir = parent;
    }
    None
}

/// Which mount a directory is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mount {
    /// `statx`'s mount id (Linux 5.8+): a bind mount of the same file system has its own.
    Id(u64),
    /// The device (`st_dev`), where the kernel gives no mount id: misses bind mounts.
    Device(u64),
}

/// The mount `dir` is on: its mount id, else its device; `None` when it cannot be told.
fn mount_of(dir: &Path) -> Option<Mount> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statx` is a valid value of the plain C struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer the kernel fills.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            0,
            libc::STATX_MNT_ID,
            &mut stx,
        )
    };
    if rc == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0 {
        return Some(Mount::Id(stx.stx_mnt_id));
    }
    std::fs::metadata(dir).ok().map(|m| Mount::Device(m.dev()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_up_to_the_nearest_hookhost_dir() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let project = base.join("repo");
        let deep = project.join("src/a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(project.join(".hookhost")).unwrap();
        assert_eq!(nearest_project(&deep, None), Some(project.clone()));
        assert_eq!(nearest_project(&project, None), Some(project.clone()));
        // A nested project wins over the outer one.
        std::fs::create_dir_all(project.join("src/.hookhost")).unwrap();
        assert_eq!(nearest_project(&deep, None), Some(project.join("src")));
    }

    /// The walk stops wherever the mount changes, whatever the device says: told by an
    /// oracle here (a real bind mount: `tests/cli/config.rs`, under `unshare -rm`).
    #[test]
    fn the_walk_stops_at_a_mount_point() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let project = base.join("repo");
        let mounted = project.join("vendor/bound");
        let deep = mounted.join("src");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(project.join(".hookhost")).unwrap();
        let one_mount = |_: &Path| Some(Mount::Id(1));
        assert_eq!(
            nearest_project_on(&deep, None, &one_mount),
            Some(project.clone())
        );
        let bound = mounted.clone();
        let bind_mount =
            move |dir: &Path| Some(Mount::Id(if dir.starts_with(&bound) { 2 } else { 1 }));
        assert_eq!(nearest_project_on(&deep, None, &bind_mount), None);
        assert_eq!(nearest_project_on(&mounted, None, &bind_mount), None);
        let unknown = |dir: &Path| (dir != project.join("vendor")).then_some(Mount::Id(1));
        assert_eq!(
            nearest_project_on(&deep, None, &unknown),
            None,
            "unknown stops"
        );
        // The real oracle sees one mount across a plain directory tree.
        assert_eq!(nearest_project(&deep, None), Some(project.clone()));
        assert!(
            matches!(mount_of(&deep), Some(Mount::Id(_))),
            "statx gives mount ids here"
        );
    }

    #[test]
    fn the_walk_stops_below_home() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().canonicalize().unwrap().join("home");
        let work = home.join("work/x");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(home.join(".hookhost")).unwrap();
        assert_eq!(nearest_project(&work, Some(&home)), None);
        // Starting at home itself still finds its own `.hookhost/`.
        assert_eq!(nearest_project(&home, Some(&home)), Some(home.clone()));
        assert_eq!(
            nearest_project(&work, None),
            Some(home.clone()),
            "without a home boundary the walk goes on"
        );
    }

    #[test]
    fn a_file_named_hookhost_is_not_a_project() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let deep = base.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(base.join("a/.hookhost"), "not a dir").unwrap();
        assert_eq!(nearest_project(&deep, Some(&base)), None);
    }

    #[test]
    fn a_symlink_or_a_fifo_named_hookhost_is_not_a_project() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let deep = base.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(base.join("elsewhere")).unwrap();
        // A symlink to a real directory, above and at the start.
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("a/.hookhost")).unwrap();
        assert_eq!(nearest_project(&deep, Some(&base)), None);
        assert_eq!(nearest_project(&base.join("a"), Some(&base)), None);
        // A FIFO: judged without opening it, so nothing blocks.
        let fifo = deep.join(".hookhost");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(nearest_project(&deep, Some(&base)), None);
    }
}
