//! Finding the config sources and reading them, highest precedence first.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::schema::RawSettings;
use super::{ConfigError, ConfigWarning, parse_settings};
use crate::event::EventCatalogue;

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

/// One parsed source.
#[derive(Debug, Clone)]
pub struct ConfigLayer {
    /// Where it came from.
    pub origin: Origin,
    /// Directory that relative paths in it (plugins) resolve against.
    pub base_dir: PathBuf,
    /// The settings.
    pub settings: RawSettings,
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
}

impl SourceOptions {
    /// Options from the environment: `HOOKHOST_MANAGED_DIR` (default `/etc/hookhost`)
    /// and `HOOKHOST_HOME` (default `~/.config/hookhost`).
    pub fn from_env(project_dir: PathBuf, settings: Vec<String>) -> Self {
        let managed_dir = Some(
            std::env::var_os("HOOKHOST_MANAGED_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/etc/hookhost")),
        );
        let user_dir = std::env::var_os("HOOKHOST_HOME")
            .map(PathBuf::from)
            .or_else(|| directories::BaseDirs::new().map(|d| d.config_dir().join("hookhost")));
        SourceOptions {
            managed_dir,
            settings,
            project_dir,
            user_dir,
        }
    }

    /// The project's hook files, as `(kind, path)`, highest precedence first.
    pub fn project_files(&self) -> [(SourceKind, PathBuf); 2] {
        let dir = self.project_dir.join(".hookhost");
        [
            (SourceKind::Local, dir.join("hooks.local.json")),
            (SourceKind::Project, dir.join("hooks.json")),
        ]
    }

    /// Every file whose change can change the config, present or not: a watcher that
    /// compares their state notices edits, creations and deletions.
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
        let inline = |arg: &String| arg.trim_start().starts_with('{');
        paths.extend(
            self.settings
                .iter()
                .filter(|arg| !inline(arg))
                .map(PathBuf::from),
        );
        paths.extend(self.project_files().into_iter().map(|(_, path)| path));
        if let Some(dir) = &self.user_dir {
            paths.push(dir.join("hooks.json"));
        }
        paths.sort();
        paths
    }
}

/// Everything read from the sources.
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    /// Layers that loaded, highest precedence first.
    pub layers: Vec<ConfigLayer>,
    /// Sources that failed to load; their hooks are absent.
    pub errors: Vec<ConfigError>,
    /// Entries that were skipped.
    pub warnings: Vec<ConfigWarning>,
    /// The sha256 (hex) of the exact bytes read from each file, parsed or not: workspace
    /// trust fingerprints what was loaded, not a second read of it.
    pub file_digests: Vec<(PathBuf, String)>,
}

/// Reads every source in precedence order. A source that is absent is skipped; one that
/// fails to parse is reported in [`LoadedConfig::errors`] and the others still load.
pub fn load(options: &SourceOptions, catalogue: &EventCatalogue) -> LoadedConfig {
    let mut loaded = LoadedConfig::default();
    if let Some(dir) = &options.managed_dir {
        load_file(
            &mut loaded,
            SourceKind::Managed,
            &dir.join("managed.json"),
            catalogue,
        );
        let mut drop_ins: Vec<PathBuf> = std::fs::read_dir(dir.join("managed.d"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        drop_ins.sort();
        for path in drop_ins {
            load_file(&mut loaded, SourceKind::Managed, &path, catalogue);
        }
    }
    for (n, arg) in options.settings.iter().enumerate() {
        if arg.trim_start().starts_with('{') {
            let location = format!("--settings #{} (inline JSON)", n + 1);
            let cwd = std::env::current_dir().unwrap_or_default();
            push_parsed(
                &mut loaded,
                SourceKind::Cli,
                location,
                cwd,
                arg,
                false,
                catalogue,
            );
        } else {
            load_file(&mut loaded, SourceKind::Cli, Path::new(arg), catalogue);
        }
    }
    for (kind, path) in options.project_files() {
        load_file(&mut loaded, kind, &path, catalogue);
    }
    if let Some(dir) = &options.user_dir {
        load_file(
            &mut loaded,
            SourceKind::User,
            &dir.join("hooks.json"),
            catalogue,
        );
    }
    loaded
}

fn load_file(loaded: &mut LoadedConfig, kind: SourceKind, path: &Path, catalogue: &EventCatalogue) {
    let location = path.display().to_string();
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        // Managed, project and user files are optional; a `--settings` file is not.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && kind != SourceKind::Cli => return,
        Err(e) => {
            loaded.errors.push(ConfigError {
                location,
                path: "$".into(),
                message: format!("cannot read file: {e}"),
            });
            return;
        }
    };
    {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(&bytes));
        loaded.file_digests.push((path.to_path_buf(), digest));
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            loaded.errors.push(ConfigError {
                location,
                path: "$".into(),
                message: format!("cannot read file: not UTF-8 ({e})"),
            });
            return;
        }
    };
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let claude_format = is_claude_settings_file(path);
    push_parsed(
        loaded,
        kind,
        location,
        base_dir,
        &text,
        claude_format,
        catalogue,
    );
}

fn push_parsed(
    loaded: &mut LoadedConfig,
    kind: SourceKind,
    location: String,
    base_dir: PathBuf,
    text: &str,
    claude_format: bool,
    catalogue: &EventCatalogue,
) {
    match parse_settings(text, &location, claude_format, catalogue) {
        Ok((settings, warnings)) => {
            loaded.warnings.extend(warnings);
            loaded.layers.push(ConfigLayer {
                origin: Origin { kind, location },
                base_dir,
                settings,
            });
        }
        Err(e) => loaded.errors.push(e),
    }
}

/// Claude Code's own settings files carry many keys that are not about hooks.
fn is_claude_settings_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("settings.json") || n.ends_with("settings.local.json"))
}
