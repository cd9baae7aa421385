//! Which git directory a directory lies in, for the guest filesystem's change check
//! ([`super::guest_fs`]): a directory with `HEAD`, `objects/` and `refs/` is one whatever
//! its name, and git runs its config for any command beneath it.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The git directory (`HEAD`, `objects/` and `refs/`, as git recognises one when it
/// looks for a repository from a directory below, whatever its name) that `dir` is or
/// lies in: git runs that directory's config (`core.fsmonitor`) for any command run
/// beneath it.
pub(super) fn git_directory_of(dir: &Path) -> Option<PathBuf> {
    // As git looks: `HEAD` a file or a symlink, `objects` and `refs` followed.
    let head = |dir: &Path| std::fs::symlink_metadata(dir.join("HEAD")).is_ok_and(|m| !m.is_dir());
    let sub = |dir: &Path, name: &str| std::fs::metadata(dir.join(name)).is_ok_and(|m| m.is_dir());
    dir.ancestors()
        .find(|dir| head(dir) && sub(dir, "objects") && sub(dir, "refs"))
        .map(Path::to_path_buf)
}

/// Directories answered by [`GitDirs::lookup`] kept at most; past this many the cache
/// starts again.
const MAX_GIT_DIRS: usize = 1024;

/// Which git directory each directory a change was checked in lies in, kept for one
/// call of one store ([`super::limits::Limits::arm`] clears it): a change costs one
/// `stat` of its directory instead of three per ancestor up to `/`. An entry is keyed
/// by the directory's path and identity (device and inode, from that `stat`), so a
/// directory moved or swapped for another since is looked up afresh. What the cache
/// cannot see within the call is an ancestor becoming a git directory by something
/// other than the guest; the guest cannot make one: `HEAD` is host-owned by its name,
/// and a directory holding one is not renamed (`guest_fs/walk.rs`).
#[derive(Debug, Default)]
pub struct GitDirs(HashMap<(u64, u64, PathBuf), Option<PathBuf>>);

impl GitDirs {
    /// Forgets every answer (a new call).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The git directory `dir` is or lies in ([`git_directory_of`]), remembered.
    pub(super) fn lookup(&mut self, dir: &Path) -> Option<PathBuf> {
        let Ok(meta) = std::fs::metadata(dir) else {
            return git_directory_of(dir);
        };
        let key = (meta.dev(), meta.ino(), dir.to_path_buf());
        if let Some(found) = self.0.get(&key) {
            return found.clone();
        }
        let found = git_directory_of(dir);
        if self.0.len() >= MAX_GIT_DIRS {
            self.0.clear();
        }
        self.0.insert(key, found.clone());
        found
    }

    /// Why `real` lies in a git directory, if it does.
    pub(super) fn why(&mut self, real: &Path) -> Option<String> {
        let found = self.lookup(real.parent()?)?;
        Some(format!(
            "`{}` lies in `{}`, a git directory (HEAD, objects/, refs/) whatever its name",
            real.display(),
            found.display()
        ))
    }
}
