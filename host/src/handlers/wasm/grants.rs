//! Directory grants checked when they are used: at every instantiation each live
//! directory is opened, the *opened handle's* real path is checked against managed
//! policy's `ceilings.dirs` and against the compile cache, and the guest gets exactly
//! that handle (reopened through `/proc/self/fd`), so a path that changed since the
//! config was built (a directory replaced by a symlink out of the workspace) can neither
//! pass the check nor be swapped in after it.
//!
//! The compile cache holds native code the host runs unchecked and the key that
//! authenticates it, so no grant may reach it: a grant that contains the cache
//! directory, or lies inside it, is refused. Directories are compared by device and
//! inode along the real paths, which also sees through bind mounts.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::config::schema::DirMode;
use crate::policy::capability::{LiveDir, PathBase, expand_path, path_base};
use crate::policy::ceiling::{Ceilings, resolved_dir_within};

/// A device and inode: what a directory is, whatever path reaches it.
type FileId = (u64, u64);

fn id_of(meta: &std::fs::Metadata) -> FileId {
    (meta.dev(), meta.ino())
}

/// A granted directory, opened and checked.
pub(super) struct OpenedDir {
    file: File,
    /// The real path of the opened directory.
    pub(super) real: PathBuf,
    /// Where the guest sees it.
    pub(super) guest: String,
    /// Read-write.
    pub(super) write: bool,
}

impl OpenedDir {
    /// The path that reopens exactly this directory: its descriptor under
    /// `/proc/self/fd`, else (no procfs) its real path.
    pub(super) fn host_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        let fd = PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()));
        if fd.exists() { fd } else { self.real.clone() }
    }
}

/// The compile cache's place, to keep every grant away from it.
#[derive(Debug)]
pub(super) struct CacheGuard {
    /// The cache directory's real path.
    real: PathBuf,
    /// The cache directory.
    id: FileId,
    /// The cache directory and every directory above it: a grant of one of them
    /// reaches the cache.
    above: Vec<FileId>,
    /// Real paths of granted directories already found not to lie inside the cache.
    clear: Mutex<HashMap<(PathBuf, FileId), bool>>,
}

impl CacheGuard {
    /// The guard of the cache directory `dir`, created (0700) when absent so that it
    /// has an identity to compare with.
    pub(super) fn new(dir: &Path) -> Option<CacheGuard> {
        // Made (as the cache makes it) so that it can be resolved; a directory that
        // cannot be made private is still guarded, and the cache will refuse it.
        let _ = crate::session::private_dir(dir);
        let real = std::fs::canonicalize(dir).ok()?;
        let id = id_of(&std::fs::metadata(&real).ok()?);
        let above = real
            .ancestors()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| id_of(&m))
            .collect();
        Some(CacheGuard {
            real,
            id,
            above,
            clear: Mutex::default(),
        })
    }

    /// Why a directory (real path `real`, identity `id`) may not be granted, if it
    /// reaches the cache.
    fn refuses(&self, real: &Path, id: FileId) -> Option<String> {
        if self.above.contains(&id) {
            return Some(format!(
                "it contains the compile cache `{}`",
                self.real.display()
            ));
        }
        let key = (real.to_path_buf(), id);
        let mut clear = self.clear.lock().unwrap_or_else(|e| e.into_inner());
        let inside = *clear.entry(key).or_insert_with(|| {
            real.ancestors()
                .filter_map(|p| std::fs::metadata(p).ok())
                .any(|m| id_of(&m) == self.id)
        });
        if clear.len() > 4096 {
            clear.clear();
        }
        inside.then(|| format!("it lies inside the compile cache `{}`", self.real.display()))
    }
}

/// What the directory grants of one call are checked against.
pub(super) struct GrantCheck<'a> {
    /// Managed ceilings, for hooks outside managed policy.
    pub(super) ceilings: Option<&'a Ceilings>,
    /// The project directory (`${workspace}`).
    pub(super) workspace: &'a Path,
    /// The home directory (`${home}`).
    pub(super) home: Option<&'a Path>,
    /// The compile cache.
    pub(super) cache: Option<&'a CacheGuard>,
}

/// The real path of an open descriptor.
fn real_path(file: &File, fallback: &Path) -> PathBuf {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .or_else(|_| std::fs::canonicalize(fallback))
        .unwrap_or_else(|_| fallback.to_path_buf())
}

/// Where a ceiling is, resolved: its base (the workspace, the home directory, or the
/// whole absolute path) with symlinks resolved, and the rest as written.
fn ceiling_top(path: &str, workspace: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let expanded = expand_path(path, workspace, home).ok()?;
    let resolve = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    Some(match path_base(path) {
        (PathBase::Workspace, rest) => resolve(workspace).join(rest),
        (PathBase::Home, rest) => resolve(home?).join(rest),
        (PathBase::Absolute, _) => resolve(&expanded),
    })
}

fn mode_name(write: bool) -> &'static str {
    if write { "rw" } else { "ro" }
}

/// Opens and checks the live directories of a call.
///
/// # Errors
///
/// A message naming the grant: it does not resolve to a directory, its real path is
/// above the managed ceiling, or it reaches the compile cache.
pub(super) fn open_dirs(
    dirs: &[LiveDir],
    check: &GrantCheck<'_>,
) -> Result<Vec<OpenedDir>, String> {
    let mut opened = Vec::with_capacity(dirs.len());
    for dir in dirs {
        opened.push(open_dir(dir, check)?);
    }
    Ok(opened)
}

fn open_dir(dir: &LiveDir, check: &GrantCheck<'_>) -> Result<OpenedDir, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let named = || format!("directory grant `{}`", dir.grant);
    // `O_PATH`: nothing is read through this handle; `O_DIRECTORY`: a FIFO or a device
    // at the path is refused without blocking.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(&dir.host)
        .map_err(|e| {
            format!(
                "{} does not resolve to a directory (`{}`: {e}); not mounted",
                named(),
                dir.host.display()
            )
        })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: cannot inspect `{}`: {e}", named(), dir.host.display()))?;
    let real = real_path(&file, &dir.host);
    if let Some(cache) = check.cache
        && let Some(why) = cache.refuses(&real, id_of(&meta))
    {
        return Err(format!(
            "{} (`{}`) is refused: {why}, which no plugin may reach",
            named(),
            real.display()
        ));
    }
    if let Some(ceilings) = check.ceilings
        && let Some(list) = ceilings.dir_ceilings()
    {
        let fits = list.iter().any(|(path, mode)| {
            ceiling_top(path, check.workspace, check.home)
                .is_some_and(|top| resolved_dir_within(&real, dir.write, &top, *mode))
        });
        if !fits {
            let shown: Vec<String> = list
                .iter()
                .map(|(p, m)| format!("`{p}` ({})", mode_name(*m == DirMode::ReadWrite)))
                .collect();
            return Err(format!(
                "{} ({}) resolves to `{}`, which is above the managed ceiling `ceilings.dirs`: {}",
                named(),
                mode_name(dir.write),
                real.display(),
                if shown.is_empty() {
                    "no directories".to_string()
                } else {
                    shown.join(", ")
                }
            ));
        }
    }
    Ok(OpenedDir {
        file,
        real,
        guest: dir.guest.clone(),
        write: dir.write,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(path: &Path, write: bool) -> LiveDir {
        LiveDir {
            grant: path.display().to_string(),
            host: path.to_path_buf(),
            guest: "/g".into(),
            write,
        }
    }

    fn check(cache: Option<&CacheGuard>) -> GrantCheck<'_> {
        GrantCheck {
            ceilings: None,
            workspace: Path::new("/nonexistent"),
            home: None,
            cache,
        }
    }

    #[test]
    fn grants_that_reach_the_cache_are_refused_both_ways() {
        let root = tempfile::tempdir().unwrap();
        let cache_dir = root.path().join("home/.cache/hookhost/wasm");
        let guard = CacheGuard::new(&cache_dir).unwrap();
        std::fs::create_dir_all(cache_dir.join("digests")).unwrap();
        std::fs::create_dir_all(root.path().join("home/work")).unwrap();
        let ok = open_dirs(
            &[live(&root.path().join("home/work"), true)],
            &check(Some(&guard)),
        );
        assert!(ok.is_ok(), "{:?}", ok.err());
        for (dir, why) in [
            (root.path().join("home"), "contains the compile cache"),
            (cache_dir.clone(), "contains the compile cache"),
            (cache_dir.join("digests"), "inside the compile cache"),
        ] {
            let e = open_dirs(&[live(&dir, false)], &check(Some(&guard)))
                .err()
                .unwrap();
            assert!(e.contains(why) && e.contains("directory grant"), "{e}");
        }
        // Through a symlink too: the opened directory's identity counts, not the path.
        let link = root.path().join("sneaky");
        std::os::unix::fs::symlink(root.path().join("home/.cache"), &link).unwrap();
        let e = open_dirs(&[live(&link, false)], &check(Some(&guard)))
            .err()
            .unwrap();
        assert!(e.contains("contains the compile cache"), "{e}");
    }

    #[test]
    fn a_grant_that_does_not_resolve_is_refused_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let e = open_dirs(&[live(&root.path().join("absent"), false)], &check(None))
            .err()
            .unwrap();
        assert!(e.contains("does not resolve to a directory"), "{e}");
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(open_dirs(&[live(&file, false)], &check(None)).is_err());
    }
}
