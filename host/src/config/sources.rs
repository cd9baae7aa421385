//! Where to look for config sources and what each is: the kinds in precedence order, a
//! layer's origin, and the options that say where the files are.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where a layer came from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SourceKind {
    /// `$HOOKHOST_MANAGED_DIR/managed.json` and `managed.d/*.json`.
    Managed,
    /// `--settings FILE|JSON`.
    Cli,
    /// `.hookhost/hooks.local.json` in the project.
    Local,
    /// `.hookhost/hooks.json` in the project.
    Project,
    /// `$HOOKHOST_HOME/hooks.json`.
    User,
    /// Hooks an embedding program registered in code.
    Embedded,
}

impl SourceKind {
    /// The label used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Managed => "managed",
            SourceKind::Cli => "cli",
            SourceKind::Local => "local",
            SourceKind::Project => "project",
            SourceKind::User => "user",
            SourceKind::Embedded => "embedded",
        }
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The origin of a layer: its kind and its file (or `--settings` argument).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Origin {
    /// Which source.
    pub kind: SourceKind,
    /// The file path, or a description of an inline source.
    pub location: String,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind, self.location)
    }
}

/// Where to look for sources.
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    /// Directory of managed policy (`managed.json`, `managed.d/`).
    pub managed_dir: Option<PathBuf>,
    /// `--settings` arguments, each a file path or inline JSON, in command-line order.
    pub settings: Vec<String>,
    /// The project directory (`.hookhost/` lives there).
    pub project_dir: PathBuf,
    /// The user's config directory (`hooks.json` lives there).
    pub user_dir: Option<PathBuf>,
    /// Notices about environment values that were refused while these options were
    /// read ([`super::env`]); every outcome carries them.
    pub env_notices: Vec<String>,
    /// The user's home directory, for `${home}` in grants and ceilings (policy does no
    /// I/O of its own: it gets the directory from here).
    pub home_dir: Option<PathBuf>,
}

impl SourceOptions {
    /// Options from the environment, judged by [`super::env`]: managed policy from the
    /// system directory (`/etc/hookhost`), or from `HOOKHOST_MANAGED_DIR` only where the
    /// system has none; the user's config from `HOOKHOST_HOME` (default
    /// `~/.config/hookhost`). Values that are refused (relative, inside the workspace)
    /// are ignored, with a notice in [`SourceOptions::env_notices`].
    pub fn from_env(project_dir: PathBuf, settings: Vec<String>) -> Self {
        let workspaces = super::env::workspaces_of(Some(&project_dir));
        let mut env_notices = Vec::new();
        let (managed_dir, notice) =
            super::env::managed_dir(Path::new(super::env::SYSTEM_MANAGED_DIR), &workspaces);
        env_notices.extend(notice);
        let user_dir = match super::env::path_var("HOOKHOST_HOME", &workspaces) {
            Ok(Some(dir)) => Some(dir),
            Ok(None) => None,
            Err(notice) => {
                env_notices.push(notice);
                None
            }
        }
        .or_else(|| {
            let (base, notices) = super::env::config_base(&workspaces);
            env_notices.extend(notices);
            base.map(|d| d.join("hookhost"))
        });
        SourceOptions {
            managed_dir: Some(managed_dir),
            settings,
            project_dir,
            user_dir,
            env_notices,
            home_dir: super::env::home_dir(),
        }
    }

    /// The project's hook files, as `(kind, path)`, highest precedence first: beside
    /// `hooks.json`, a [`FLAT_FILE`] in the founding article's flat format; last the
    /// project's `.mcp.json` (Claude Code's: its `mcpServers` only), which like the
    /// others counts in a trusted workspace only and is part of its trust fingerprint.
    pub fn project_files(&self) -> [(SourceKind, PathBuf); 4] {
        let dir = self.project_dir.join(".hookhost");
        [
            (SourceKind::Local, dir.join("hooks.local.json")),
            (SourceKind::Project, dir.join("hooks.json")),
            (SourceKind::Project, dir.join(FLAT_FILE)),
            (SourceKind::Project, self.project_dir.join(".mcp.json")),
        ]
    }

    /// The user's hook files: `hooks.json`, then a [`FLAT_FILE`] beside it.
    pub fn user_files(&self) -> Vec<PathBuf> {
        self.user_dir
            .iter()
            .flat_map(|dir| [dir.join("hooks.json"), dir.join(FLAT_FILE)])
            .collect()
    }

    /// Every file whose change can change the config, present or not (the project's
    /// `hookhost.lock` included): a watcher that compares their state notices edits,
    /// creations and deletions. The drop-in
    /// directory is one (a file added there is a new source); the managed directory is
    /// not ([`SourceOptions::watched_places`]).
    pub fn watched_paths(&self) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        if let Some(dir) = &self.managed_dir {
            paths.push(dir.join("managed.json"));
            let drop_ins = dir.join("managed.d");
            paths.extend(
                std::fs::read_dir(&drop_ins)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
            paths.push(drop_ins);
        }
        paths.extend(
            self.settings
                .iter()
                .filter(|arg| !is_inline(arg))
                .map(PathBuf::from),
        );
        paths.extend(self.project_files().into_iter().map(|(_, path)| path));
        // The lock binds the digests the project's plugins run at and is part of the
        // workspace's trust fingerprint: a daemon that did not watch it kept the old
        // binding (and the old trust) after `hookhost plugin lock` or an edit.
        paths.push(self.project_dir.join(super::lock::LOCK_FILE));
        paths.extend(self.user_files());
        paths.sort();
        paths
    }

    /// The directories whose owner and mode decide whether their files are believed
    /// (the managed directory), watched as places ([`crate::config::file::FileStamp::of_place`]):
    /// their files are each in [`SourceOptions::watched_paths`].
    pub fn watched_places(&self) -> Vec<PathBuf> {
        self.managed_dir.iter().cloned().collect()
    }
}

/// The name of a hook file in the founding article's flat format (the book's configuration chapter, `docs/book/src/configuration.md`),
/// looked up beside each `hooks.json` (the project's `.hookhost/`, the user's
/// `$HOOKHOST_HOME`). A `--settings` file in that format is read by its shape, whatever
/// its name.
pub const FLAT_FILE: &str = "hooks.flat.json";

/// Whether a `--settings` argument is inline JSON rather than a file path.
pub(super) fn is_inline(arg: &str) -> bool {
    arg.trim_start().starts_with('{')
}
