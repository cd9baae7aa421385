//! Directory grants checked when they are used: at every instantiation each live
//! directory is opened, the *opened handle's* real path is checked against managed
//! policy's `ceilings.dirs` and against the places hookhost owns, and the guest gets exactly
//! that handle (reopened through `/proc/self/fd`), so a path that changed since the
//! config was built (a directory replaced by a symlink out of the workspace) can neither
//! pass the check nor be swapped in after it.
//!
//! No grant may reach a place hookhost owns ([`crate::policy::places`]; the compile
//! cache, which holds native code the host runs unchecked and the key that authenticates
//! it, is one): a grant that is, contains or lies inside one is refused ([`PlaceGuard`]).
//! Directories are compared by real path and by device and inode along it, which also
//! sees through bind mounts.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::config::schema::DirMode;
use crate::policy::capability::{LiveDir, PathBase, expand_path, path_base};
use crate::policy::ceiling::{Ceilings, RealPath, resolved_dir_within};
use crate::policy::places::{Guard, HostPlace, HostPlaces, message, real_or_parent, relation};

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

/// The host-owned places ([`crate::policy::places`]) as the sandbox checks opened grants
/// against them: each place's real path (its longest existing part resolved) and the
/// identities of the place and of every directory above it, taken once per policy, at
/// its first check.
#[derive(Debug)]
pub(super) struct PlaceGuard {
    /// The places as listed.
    listed: Vec<HostPlace>,
    /// Each resolved (real path, identities), at the first check: a hook without a
    /// directory grant never checks, and its guest reaches no file to check.
    places: std::sync::OnceLock<Vec<GuardedPlace>>,
}

#[derive(Debug)]
struct GuardedPlace {
    place: HostPlace,
    /// Where the place is, symlinks resolved.
    real: PathBuf,
    /// The place itself, when it exists.
    id: Option<FileId>,
    /// The place (when it exists) and every existing directory above it: a grant of one
    /// of them contains it.
    above: Vec<FileId>,
}

impl PlaceGuard {
    /// The guard of `places` (resolved when first asked).
    pub(super) fn new(places: &[HostPlace]) -> PlaceGuard {
        PlaceGuard {
            listed: places.to_vec(),
            places: std::sync::OnceLock::new(),
        }
    }

    /// Each place resolved: its real path, its identity and those of the directories
    /// above it.
    fn places(&self) -> &[GuardedPlace] {
        self.places.get_or_init(|| self.resolve())
    }

    fn resolve(&self) -> Vec<GuardedPlace> {
        let resolve = RealPath(crate::config::file::real_path);
        self.listed
            .iter()
            .map(|place| {
                let real =
                    real_or_parent(&place.path, resolve).unwrap_or_else(|| place.path.clone());
                GuardedPlace {
                    id: std::fs::metadata(&real).ok().map(|m| id_of(&m)),
                    above: real
                        .ancestors()
                        .filter_map(|p| std::fs::metadata(p).ok())
                        .map(|m| id_of(&m))
                        .collect(),
                    real,
                    place: place.clone(),
                }
            })
            .collect()
    }

    /// Why an opened directory (real path `real`, identity `id`, mounted read-write when
    /// `write`) may not be granted: it is, contains or lies inside a host-owned place,
    /// by path or by identity (which also sees through bind mounts).
    fn refuses(&self, grant: &str, real: &Path, id: FileId, write: bool) -> Option<String> {
        let mut inside: Option<Vec<FileId>> = None;
        for guarded in self.places().iter().filter(|g| g.place.guards(write)) {
            let how = relation(real, &guarded.real).or_else(|| {
                if guarded.id == Some(id) {
                    Some("is")
                } else if guarded.above.contains(&id) {
                    Some("contains")
                } else {
                    let ids = inside.get_or_insert_with(|| {
                        real.ancestors()
                            .filter_map(|p| std::fs::metadata(p).ok())
                            .map(|m| id_of(&m))
                            .collect()
                    });
                    guarded
                        .id
                        .filter(|place| ids.contains(place))
                        .map(|_| "lies inside")
                }
            });
            if let Some(how) = how {
                return Some(message(grant, real, write, how, &guarded.place));
            }
        }
        if write && let Some(what) = crate::policy::places::owned_by_name(real) {
            return Some(format!(
                "`{grant}` (`{}`) (rw) reaches {what}, host-owned by its name wherever it \
                 is: no read-write grant may reach it",
                real.display()
            ));
        }
        None
    }
}

impl PlaceGuard {
    /// Why a guest may not reach `real` (a path it names, resolved: [`super::guest_fs`]),
    /// changing it when `write`: it is or lies inside a place that a grant of that mode
    /// may not reach. (A place inside `real` is no matter here: the call reaches `real`,
    /// not below it, and the grant was already refused if it contained one.)
    pub(super) fn owns(&self, real: &Path, write: bool) -> Option<String> {
        self.places()
            .iter()
            .filter(|g| g.place.guards(write))
            .find(|g| real.starts_with(&g.real))
            .map(|g| {
                let how = if real == g.real { "is" } else { "lies inside" };
                format!(
                    "`{}` {how} {} `{}`, a place hookhost owns",
                    real.display(),
                    g.place.what,
                    g.place.path.display()
                )
            })
    }
}

/// The sandbox's guards: its own compile cache (always a host-owned place, whatever the
/// caller passes) and the guard of the policy last seen, rebuilt when the policy changes.
#[derive(Debug)]
pub(super) struct PlaceGuards {
    cache: Option<HostPlace>,
    /// The guard of the cache alone, for calls outside a policy.
    alone: std::sync::OnceLock<Arc<PlaceGuard>>,
    last: Mutex<Option<(HostPlaces, Arc<PlaceGuard>)>>,
}

impl PlaceGuards {
    /// The guards of a sandbox whose compile cache is `cache_dir`, created (0700) when
    /// absent so that it has an identity to compare with.
    pub(super) fn new(cache_dir: Option<&Path>) -> PlaceGuards {
        // Made (as the cache makes it) so that it can be resolved; a directory that
        // cannot be made private is still guarded, and the cache will refuse it.
        if let Some(dir) = cache_dir {
            let _ = crate::session::private_dir(dir);
        }
        PlaceGuards {
            cache: cache_dir.map(|d| HostPlace::new(d, "the compile cache", Guard::Any)),
            alone: std::sync::OnceLock::new(),
            last: Mutex::default(),
        }
    }

    /// The guard of `places` and the compile cache.
    pub(super) fn of(&self, places: &HostPlaces) -> Arc<PlaceGuard> {
        if places.is_empty() {
            let cache = || Arc::new(PlaceGuard::new(self.cache.as_slice()));
            return self.alone.get_or_init(cache).clone();
        }
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((seen, guard)) = last.as_ref()
            && Arc::ptr_eq(seen, places)
        {
            return guard.clone();
        }
        let all: Vec<HostPlace> = places.iter().chain(&self.cache).cloned().collect();
        let guard = Arc::new(PlaceGuard::new(&all));
        *last = Some((places.clone(), guard.clone()));
        guard
    }
}

/// What a store's guest is held to besides its limits: the hook whose descriptor share
/// it draws on ([`super::held`]), and the host-owned places its filesystem calls are
/// checked against ([`super::guest_fs`]).
pub(super) struct StoreGuard {
    /// The hook (its label).
    pub(super) hook: Arc<str>,
    /// The host-owned places.
    pub(super) places: Arc<PlaceGuard>,
}

/// What the directory grants of one call are checked against.
pub(super) struct GrantCheck<'a> {
    /// The hook whose grants these are (its label).
    pub(super) hook: &'a str,
    /// Managed ceilings, for hooks outside managed policy.
    pub(super) ceilings: Option<&'a Ceilings>,
    /// The project directory (`${workspace}`).
    pub(super) workspace: &'a Path,
    /// The home directory (`${home}`).
    pub(super) home: Option<&'a Path>,
    /// The host-owned places, the compile cache among them.
    pub(super) places: &'a Arc<PlaceGuard>,
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
/// above the managed ceiling, or it reaches a place hookhost owns.
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
    if let Some(why) = check
        .places
        .refuses(&dir.grant, &real, id_of(&meta), dir.write)
    {
        return Err(format!("directory grant refused: {why}"));
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

/// Warnings for granted variables whose value cannot reach the plugin: WASI passes
/// environment values as strings, so a value that is not UTF-8 is left out (rather than
/// changed), and the user is told why the plugin does not see it.
pub(super) fn unpassable_env(
    live: &crate::policy::capability::Live,
) -> impl Iterator<Item = String> + '_ {
    live.env
        .iter()
        .filter(|name| {
            crate::config::env::granted(name).is_some_and(|value| value.to_str().is_none())
        })
        .map(|name| format!("env grant `{name}`: its value is not UTF-8; not passed"))
}

/// The values of the granted variables that are set (and UTF-8; see [`unpassable_env`]).
pub(super) fn env_values(live: &crate::policy::capability::Live) -> Vec<(String, String)> {
    live.env
        .iter()
        .filter_map(|name| {
            let value = crate::config::env::granted(name)?.into_string().ok()?;
            Some((name.clone(), value))
        })
        .collect()
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

    fn check(places: &Arc<PlaceGuard>) -> GrantCheck<'_> {
        GrantCheck {
            hook: "h",
            ceilings: None,
            workspace: Path::new("/nonexistent"),
            home: None,
            places,
        }
    }

    fn cache_guard(dir: &Path) -> Arc<PlaceGuard> {
        std::fs::create_dir_all(dir).unwrap();
        Arc::new(PlaceGuard::new(&[HostPlace::new(
            dir,
            "the compile cache",
            Guard::Any,
        )]))
    }

    #[test]
    fn grants_that_reach_the_cache_are_refused_both_ways() {
        let root = tempfile::tempdir().unwrap();
        let cache_dir = root.path().join("home/.cache/hookhost/wasm");
        let guard = cache_guard(&cache_dir);
        std::fs::create_dir_all(cache_dir.join("digests")).unwrap();
        std::fs::create_dir_all(root.path().join("home/work")).unwrap();
        let ok = open_dirs(
            &[live(&root.path().join("home/work"), true)],
            &check(&guard),
        );
        assert!(ok.is_ok(), "{:?}", ok.err());
        for (dir, why) in [
            (root.path().join("home"), "contains the compile cache"),
            (cache_dir.clone(), "is the compile cache"),
            (cache_dir.join("digests"), "inside the compile cache"),
        ] {
            let e = open_dirs(&[live(&dir, false)], &check(&guard))
                .err()
                .unwrap();
            assert!(e.contains(why) && e.contains("directory grant"), "{e}");
        }
        // Through a symlink too: the opened directory's identity counts, not the path.
        let link = root.path().join("sneaky");
        std::os::unix::fs::symlink(root.path().join("home/.cache"), &link).unwrap();
        let e = open_dirs(&[live(&link, false)], &check(&guard))
            .err()
            .unwrap();
        assert!(e.contains("contains the compile cache"), "{e}");
    }

    #[test]
    fn a_grant_that_does_not_resolve_is_refused_naming_it() {
        let root = tempfile::tempdir().unwrap();
        let none = Arc::new(PlaceGuard::new(&[]));
        let e = open_dirs(&[live(&root.path().join("absent"), false)], &check(&none))
            .err()
            .unwrap();
        assert!(e.contains("does not resolve to a directory"), "{e}");
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(open_dirs(&[live(&file, false)], &check(&none)).is_err());
    }
}
