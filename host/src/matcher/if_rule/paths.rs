//! `Edit(glob)`, `Write(glob)`, `Read(glob)`: path patterns, anchored at the root, the home
//! directory, the project directory or the cwd, matched without touching the file system
//! or the environment.

use std::path::{Path, PathBuf};

use super::lazy_glob::LazyGlob;

/// Where a path pattern is anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PathBase {
    /// `//abs`: the glob is absolute.
    Root,
    /// `~/x`: relative to the home directory given at load (normalized once there);
    /// `None` where there is none, and the pattern then matches nothing.
    Home(Option<PathBuf>),
    /// `/x`: relative to the project directory.
    Project,
    /// `x/y`, `./x`: relative to the cwd.
    Cwd,
    /// A bare name: at any depth (the glob is `**/name`, absolute).
    AnyDepth,
}

/// A path pattern, parsed once (compiled when an event reaches it, [`LazyGlob`]): the glob is relative to its base, and paths are made
/// relative to the base (after resolving `.` and `..`) at match time, so that nothing from
/// the event (its cwd) is ever compiled.
#[derive(Debug, Clone)]
pub(super) struct PathPattern {
    base: PathBase,
    glob: LazyGlob,
}

impl PathPattern {
    /// Compiles `pattern`; `home` anchors `~/` (the matcher reads no environment: the
    /// home directory is config's, [`crate::policy::ResolveOptions::home_dir`]).
    pub(super) fn parse(pattern: &str, home: Option<&Path>) -> Result<PathPattern, String> {
        let (base, glob) = if let Some(abs) = pattern.strip_prefix("//") {
            (PathBase::Root, format!("/{abs}"))
        } else if let Some(rest) = pattern.strip_prefix("~/") {
            (PathBase::Home(home.map(normalize)), rest.to_string())
        } else if let Some(rest) = pattern.strip_prefix('/') {
            (PathBase::Project, rest.to_string())
        } else {
            let rest = pattern.strip_prefix("./").unwrap_or(pattern);
            if rest.contains('/') {
                (PathBase::Cwd, rest.to_string())
            } else {
                // gitignore: a bare name matches at any depth.
                (PathBase::AnyDepth, format!("**/{rest}"))
            }
        };
        let glob = LazyGlob::new(&glob, true)?;
        Ok(PathPattern { base, glob })
    }

    pub(super) fn matches(&self, path: &str, cwd: &Path, project_dir: &Path) -> bool {
        let absolute = normalize(&cwd.join(path));
        let relative_to = |base: &Path| {
            absolute
                .strip_prefix(base)
                .is_ok_and(|relative| self.glob.is_match(relative))
        };
        match &self.base {
            PathBase::Root | PathBase::AnyDepth => self.glob.is_match(&absolute),
            PathBase::Home(Some(home)) => relative_to(home),
            PathBase::Home(None) => false,
            PathBase::Project => relative_to(&normalize(project_dir)),
            PathBase::Cwd => relative_to(&normalize(cwd)),
        }
    }
}

/// Resolves `.` and `..` without touching the file system (`a/../b` is `b`): a path that
/// walks out of a directory and back in is where it ends, not where it starts.
pub(super) fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
