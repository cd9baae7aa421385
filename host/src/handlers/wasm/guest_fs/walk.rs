//! What a renamed directory carries with it: `rename-at` of a directory moves its whole
//! subtree, so a directory that holds a host-owned name anywhere below it (a nested
//! `.git`, `.claude/`, a `CLAUDE.md`, a `HEAD`, which every git directory has whatever
//! its name) is not renamed: that would move a repository, or an agent's instructions,
//! to where the agent works. The check walks the subtree before the rename, bounded: a
//! subtree of more than [`MAX_RENAME_ENTRIES`] entries or deeper than
//! [`MAX_RENAME_DEPTH`] is refused too (deny by default: what was not seen may hold
//! one). The walk never follows a symlink (each directory is opened beneath the renamed
//! one, `O_NOFOLLOW`, one at a time), and a symlink is renamed as a link, not as what it
//! points to.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::config::file::open_beneath;
use crate::policy::places::owned_by_name;

/// Entries (at every depth) a directory's subtree may hold and still be renamed.
pub const MAX_RENAME_ENTRIES: usize = 10_000;
/// Directory levels below a renamed directory the walk goes down.
pub const MAX_RENAME_DEPTH: usize = 64;

/// Whether `name` in the directory `parent` is a directory (not followed).
fn is_dir(parent: &OwnedFd, name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: an all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is a valid out-pointer.
    let rc = unsafe {
        libc::fstatat(
            parent.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Why the directory `name` in `parent` (at `real`) may not be renamed, or `None` when
/// it is not a directory or holds nothing host-owned; and how many entries were walked.
pub(super) fn rename_refusal(parent: &OwnedFd, name: &str, real: &Path) -> (Option<String>, usize) {
    let mut seen = 0usize;
    let refusal = walk(parent, name, real, &mut seen);
    (refusal, seen)
}

fn walk(parent: &OwnedFd, name: &str, real: &Path, seen: &mut usize) -> Option<String> {
    // An empty name is the directory itself (`.`).
    let name = if name.is_empty() { "." } else { name };
    if !is_dir(parent, name) {
        return None;
    }
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let root = match open_beneath(parent, name, flags, 0) {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) => return Some(format!("`{}` cannot be walked: {e}", real.display())),
    };
    let too_big = || {
        format!(
            "`{}` holds more than {MAX_RENAME_ENTRIES} entries or {MAX_RENAME_DEPTH} levels, \
             too many to check that it holds nothing host-owned",
            real.display()
        )
    };
    let mut pending: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let Some(rel) = dir.to_str() else {
            return Some(too_big());
        };
        let rel = if rel.is_empty() { "." } else { rel };
        let fd = match open_beneath(&root, rel, flags, 0) {
            Ok(fd) => fd,
            Err(e) => {
                return Some(format!(
                    "`{}` cannot be walked: {e}",
                    real.join(&dir).display()
                ));
            }
        };
        let entries = match std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
            Ok(entries) => entries,
            Err(e) => {
                return Some(format!(
                    "`{}` cannot be listed: {e}",
                    real.join(&dir).display()
                ));
            }
        };
        for entry in entries {
            let Ok(entry) = entry else {
                return Some(too_big());
            };
            *seen += 1;
            if *seen > MAX_RENAME_ENTRIES {
                return Some(too_big());
            }
            let entry_name = entry.file_name();
            let entry_name = entry_name.to_string_lossy();
            if let Some(what) = owned_by_name(Path::new(&*entry_name)) {
                return Some(format!(
                    "`{}` holds `{}`, {what}, host-owned by its name",
                    real.display(),
                    real.join(&dir).join(&*entry_name).display()
                ));
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if depth + 1 > MAX_RENAME_DEPTH {
                    return Some(too_big());
                }
                pending.push((dir.join(&*entry_name), depth + 1));
            }
        }
    }
    None
}
