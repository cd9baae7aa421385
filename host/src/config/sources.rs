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
    /// The file it was read from (`None`: inline `--settings` JSON, or built in code).
    pub file: Option<PathBuf>,
    /// The sha256 (hex) of the bytes it was parsed from, when read from a file.
    pub sha256: Option<String>,
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
        .or_else(|| directories::BaseDirs::new().map(|d| d.config_dir().join("hookhost")));
        SourceOptions {
            managed_dir: Some(managed_dir),
            settings,
            project_dir,
            user_dir,
            env_notices,
            home_dir: super::env::home_dir(),
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
    /// compares their state notices edits, creations and deletions. The drop-in
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
        if let Some(dir) = &self.user_dir {
            paths.push(dir.join("hooks.json"));
        }
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

/// Whether a `--settings` argument is inline JSON rather than a file path.
fn is_inline(arg: &str) -> bool {
    arg.trim_start().starts_with('{')
}

/// A source that failed to load: its file could not be read or parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedSource {
    /// Which source.
    pub kind: SourceKind,
    /// The file (`None`: inline `--settings` JSON).
    pub file: Option<PathBuf>,
    /// What is wrong.
    pub error: ConfigError,
}

/// The last version of each file source that loaded without an error, which a daemon
/// keeps serving while a newer version of the file is broken. Keyed by source and file.
pub type LastGood = std::collections::BTreeMap<(SourceKind, PathBuf), GoodSource>;

/// One entry of [`LastGood`].
#[derive(Debug, Clone)]
pub struct GoodSource {
    /// The layer as it loaded.
    pub layer: ConfigLayer,
    /// When this version was first loaded.
    pub since: std::time::SystemTime,
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
    /// trust fingerprints what was loaded, not a second read of it. For a file whose
    /// last good version is kept in force, the digest of that version.
    pub file_digests: Vec<(PathBuf, String)>,
    /// The sources that failed to load (also in [`LoadedConfig::errors`]), except those
    /// whose last good version is kept in force.
    pub failed: Vec<FailedSource>,
    /// Notices for every outcome: environment values refused, and each broken file whose
    /// last good version is kept in force (naming the file, the error and that the
    /// previous version is in force).
    pub notices: Vec<String>,
}

impl LoadedConfig {
    fn fail(&mut self, kind: SourceKind, file: Option<PathBuf>, error: ConfigError) {
        self.errors.push(error.clone());
        self.failed.push(FailedSource { kind, file, error });
    }

    /// Replaces the layer of `(kind, file)` by its last good version (or, during a load,
    /// appends it where the failed load left none), records the notice, and makes the trust fingerprint see
    /// the digest of the version in force.
    pub fn keep_in_force(&mut self, good: &GoodSource, why: &ConfigError) {
        let layer = &good.layer;
        let file = layer.file.clone();
        let same = |l: &ConfigLayer| l.origin.kind == layer.origin.kind && l.file == file;
        // During a load the failed source's place is the end of the layers read so far.
        match self.layers.iter_mut().find(|l| same(l)) {
            Some(slot) => *slot = layer.clone(),
            None => self.layers.push(layer.clone()),
        }
        self.errors.retain(|e| e != why);
        self.failed
            .retain(|f| !(f.kind == layer.origin.kind && f.file == file));
        if let (Some(path), Some(sha)) = (&file, &layer.sha256) {
            self.file_digests.retain(|(p, _)| p != path);
            self.file_digests.push((path.clone(), sha.clone()));
        }
        let since = good
            .since
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.notices.push(format!(
            "config error: {why}; the previous version of this file (loaded {since} s after \
             the Unix epoch) stays in force until the file is fixed"
        ));
    }
}

/// Reads every source in precedence order. A source that is absent is skipped; one that
/// fails to load is reported in [`LoadedConfig::errors`] and [`LoadedConfig::failed`],
/// and the others still load.
///
/// Every file is read with [`super::file::read_regular`]: only a regular file of at most
/// [`super::file::CONFIG_CAP`] bytes, opened without blocking, so a symlink to
/// `/dev/zero`, `/dev/tty` or a FIFO is a broken source, not a hang. A dangling symlink is
/// broken too, not absent. Managed policy must also be owned by root or this user and
/// not writable by other users (files and directories).
pub fn load(options: &SourceOptions, catalogue: &EventCatalogue) -> LoadedConfig {
    load_with(options, catalogue, None)
}

/// [`load`], keeping in force the last good version of each file that fails to load
/// now (a daemon's reload).
pub fn load_with(
    options: &SourceOptions,
    catalogue: &EventCatalogue,
    last_good: Option<&LastGood>,
) -> LoadedConfig {
    let mut loaded = LoadedConfig {
        notices: options.env_notices.clone(),
        ..LoadedConfig::default()
    };
    if let Some(dir) = &options.managed_dir {
        load_managed(&mut loaded, dir, catalogue, last_good);
    }
    for (n, arg) in options.settings.iter().enumerate() {
        if is_inline(arg) {
            let location = format!("--settings #{} (inline JSON)", n + 1);
            let cwd = std::env::current_dir().unwrap_or_default();
            let source = Source {
                kind: SourceKind::Cli,
                file: None,
                location,
                base_dir: cwd,
                sha256: None,
            };
            push_parsed(&mut loaded, source, arg, false, catalogue);
        } else {
            load_file(
                &mut loaded,
                SourceKind::Cli,
                Path::new(arg),
                catalogue,
                last_good,
            );
        }
    }
    for (kind, path) in options.project_files() {
        load_file(&mut loaded, kind, &path, catalogue, last_good);
    }
    if let Some(dir) = &options.user_dir {
        load_file(
            &mut loaded,
            SourceKind::User,
            &dir.join("hooks.json"),
            catalogue,
            last_good,
        );
    }
    loaded
}

/// Why managed policy at `path` (whose metadata is `meta`) is not to be believed:
/// another user owns it, or users other than its owner can write it.
fn unsafe_managed(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    // The system's policy is root's; an override directory (tests, unmanaged machines)
    // may also be the user's own.
    let owners = if path.starts_with(super::env::SYSTEM_MANAGED_DIR) {
        vec![0]
    } else {
        vec![0, super::file::effective_uid()]
    };
    super::file::unsafe_owner_or_mode(meta, &owners, 0o002)
}

fn load_managed(
    loaded: &mut LoadedConfig,
    dir: &Path,
    catalogue: &EventCatalogue,
    last_good: Option<&LastGood>,
) {
    let broken = |loaded: &mut LoadedConfig, path: &Path, message: String| {
        let error = ConfigError {
            location: path.display().to_string(),
            path: "$".into(),
            message,
        };
        loaded.fail(SourceKind::Managed, Some(path.to_path_buf()), error);
    };
    // Nothing there at all: no managed policy. Anything else that is not a directory we
    // may read is broken policy, which fails closed.
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return;
    }
    match std::fs::metadata(dir) {
        Err(e) => {
            return broken(
                loaded,
                dir,
                format!("cannot read the managed policy directory: {e}"),
            );
        }
        Ok(meta) if !meta.is_dir() => {
            return broken(
                loaded,
                dir,
                format!(
                    "the managed policy directory is {}",
                    super::file::kind_name(&meta)
                ),
            );
        }
        Ok(meta) => {
            if let Some(why) = unsafe_managed(dir, &meta) {
                return broken(
                    loaded,
                    dir,
                    format!("managed policy directory refused: {why}"),
                );
            }
        }
    }
    load_file(
        loaded,
        SourceKind::Managed,
        &dir.join("managed.json"),
        catalogue,
        last_good,
    );
    let drop_ins = dir.join("managed.d");
    if std::fs::symlink_metadata(&drop_ins).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        return;
    }
    match std::fs::metadata(&drop_ins) {
        Ok(meta) if !meta.is_dir() => {
            return broken(
                loaded,
                &drop_ins,
                format!("`managed.d` is {}", super::file::kind_name(&meta)),
            );
        }
        Ok(meta) => {
            if let Some(why) = unsafe_managed(&drop_ins, &meta) {
                return broken(loaded, &drop_ins, format!("`managed.d` refused: {why}"));
            }
        }
        Err(e) => return broken(loaded, &drop_ins, format!("cannot read `managed.d`: {e}")),
    }
    let entries = match std::fs::read_dir(&drop_ins) {
        Ok(entries) => entries,
        Err(e) => return broken(loaded, &drop_ins, format!("cannot read `managed.d`: {e}")),
    };
    let mut files = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => files.push(entry.path()),
            Err(e) => return broken(loaded, &drop_ins, format!("cannot read `managed.d`: {e}")),
        }
    }
    files.retain(|path| path.extension().is_some_and(|ext| ext == "json"));
    files.sort();
    for path in files {
        load_file(loaded, SourceKind::Managed, &path, catalogue, last_good);
    }
}

/// A source about to be parsed.
struct Source {
    kind: SourceKind,
    file: Option<PathBuf>,
    location: String,
    base_dir: PathBuf,
    sha256: Option<String>,
}

fn load_file(
    loaded: &mut LoadedConfig,
    kind: SourceKind,
    path: &Path,
    catalogue: &EventCatalogue,
    last_good: Option<&LastGood>,
) {
    use super::file::{CONFIG_CAP, FileError, read_regular};
    let location = path.display().to_string();
    let failed_before = loaded.failed.len();
    let read = read_regular(path, CONFIG_CAP).and_then(|(bytes, meta)| {
        if kind == SourceKind::Managed
            && let Some(why) = unsafe_managed(path, &meta)
        {
            return Err(FileError::Io(std::io::Error::other(format!(
                "managed policy file refused: {why}"
            ))));
        }
        Ok(bytes)
    });
    let bytes = match read {
        Ok(bytes) => Some(bytes),
        Err(e) if e.is_not_found() => {
            // A symlink whose target is missing is a broken file, not an absent one.
            let dangling = std::fs::symlink_metadata(path).is_ok();
            // Managed, project and user files are optional; a `--settings` file is not.
            if !dangling && kind != SourceKind::Cli {
                return;
            }
            let message = if dangling {
                "cannot read file: a symlink to nothing".to_string()
            } else {
                "cannot read file: no such file".to_string()
            };
            let error = ConfigError {
                location: location.clone(),
                path: "$".into(),
                message,
            };
            loaded.fail(kind, Some(path.to_path_buf()), error);
            None
        }
        Err(e) => {
            let error = ConfigError {
                location: location.clone(),
                path: "$".into(),
                message: format!("cannot read file: {e}"),
            };
            loaded.fail(kind, Some(path.to_path_buf()), error);
            None
        }
    };
    if let Some(bytes) = bytes {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(&bytes));
        loaded
            .file_digests
            .push((path.to_path_buf(), digest.clone()));
        match String::from_utf8(bytes) {
            Ok(text) => {
                let source = Source {
                    kind,
                    file: Some(path.to_path_buf()),
                    location: location.clone(),
                    base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
                    sha256: Some(digest),
                };
                let claude_format = is_claude_settings_file(path);
                push_parsed(loaded, source, &text, claude_format, catalogue);
            }
            Err(e) => {
                let error = ConfigError {
                    location: location.clone(),
                    path: "$".into(),
                    message: format!("cannot read file: not UTF-8 ({e})"),
                };
                loaded.fail(kind, Some(path.to_path_buf()), error);
            }
        }
    }
    // A daemon keeps serving the last good version of a file that fails to load now.
    if loaded.failed.len() > failed_before
        && let Some(good) = last_good.and_then(|g| g.get(&(kind, path.to_path_buf())))
    {
        let why = loaded.failed[failed_before].error.clone();
        loaded.keep_in_force(good, &why);
    }
}

fn push_parsed(
    loaded: &mut LoadedConfig,
    source: Source,
    text: &str,
    claude_format: bool,
    catalogue: &EventCatalogue,
) {
    match parse_settings(text, &source.location, claude_format, catalogue) {
        Ok((settings, warnings)) => {
            loaded.warnings.extend(warnings);
            loaded.layers.push(ConfigLayer {
                origin: Origin {
                    kind: source.kind,
                    location: source.location,
                },
                base_dir: source.base_dir,
                settings,
                file: source.file,
                sha256: source.sha256,
            });
        }
        Err(e) => loaded.fail(source.kind, source.file, e),
    }
}

/// Claude Code's own settings files carry many keys that are not about hooks.
fn is_claude_settings_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("settings.json") || n.ends_with("settings.local.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    fn options(root: &Path) -> SourceOptions {
        SourceOptions {
            managed_dir: Some(root.join("managed")),
            settings: Vec::new(),
            project_dir: root.join("project"),
            user_dir: Some(root.join("user")),
            env_notices: Vec::new(),
            home_dir: None,
        }
    }

    const HOOK: &str =
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#;

    /// Every kind of file that is not a small regular file is a broken source, named with
    /// what it is, and none of them blocks or floods the load.
    #[test]
    fn sources_that_are_not_small_regular_files_are_broken_not_read() {
        let root = tempfile::tempdir().unwrap();
        let o = options(root.path());
        let project = o.project_dir.join(".hookhost");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(o.user_dir.as_ref().unwrap()).unwrap();
        let file = project.join("hooks.json");
        let catalogue = EventCatalogue::default();
        let big = root.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(super::super::file::CONFIG_CAP + 1)
            .unwrap();
        let fifo = root.path().join("fifo");
        mkfifo(&fifo);
        let odd = root.path().join("odd.json");
        std::fs::write(&odd, b"{\"hooks\": {}, \"description\": \"\xff\"}").unwrap();
        type Make<'a> = &'a dyn Fn(&Path);
        let cases: &[(Make, &str)] = &[
            (
                &|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
                "a character device",
            ),
            (&|p| std::os::unix::fs::symlink(&fifo, p).unwrap(), "a FIFO"),
            (
                &|p| std::os::unix::fs::symlink(root.path().join("gone"), p).unwrap(),
                "a symlink to nothing",
            ),
            (&|p| std::fs::create_dir(p).unwrap(), "a directory"),
            (
                &|p| std::os::unix::fs::symlink(&big, p).unwrap(),
                "above the cap",
            ),
            (
                &|p| std::os::unix::fs::symlink(&odd, p).unwrap(),
                "not UTF-8",
            ),
        ];
        for (make, words) in cases {
            let _ = std::fs::remove_file(&file).or_else(|_| std::fs::remove_dir(&file));
            make(&file);
            let loaded = load(&o, &catalogue);
            assert_eq!(loaded.failed.len(), 1, "{words}: {:?}", loaded.errors);
            let failed = &loaded.failed[0];
            assert_eq!(failed.kind, SourceKind::Project);
            assert_eq!(failed.file.as_deref(), Some(file.as_path()));
            assert_eq!(failed.error.location, file.display().to_string());
            assert!(
                failed.error.message.contains(words),
                "{words}: {}",
                failed.error.message
            );
            assert!(loaded.layers.is_empty());
        }
        // An absent optional file is no error at all.
        std::fs::remove_file(&file).unwrap();
        assert!(load(&o, &catalogue).errors.is_empty());
    }

    #[test]
    fn managed_policy_that_another_user_can_change_is_broken() {
        let root = tempfile::tempdir().unwrap();
        let o = options(root.path());
        let managed = o.managed_dir.clone().unwrap();
        std::fs::create_dir_all(managed.join("managed.d")).unwrap();
        std::fs::write(managed.join("managed.json"), HOOK).unwrap();
        std::fs::write(managed.join("managed.d/a.json"), HOOK).unwrap();
        std::fs::write(managed.join("managed.d/ignored.txt"), "not json").unwrap();
        let catalogue = EventCatalogue::default();
        let loaded = load(&o, &catalogue);
        assert!(loaded.errors.is_empty(), "{:?}", loaded.errors);
        assert_eq!(loaded.layers.len(), 2);

        let world = std::fs::Permissions::from_mode(0o666);
        std::fs::set_permissions(managed.join("managed.d/a.json"), world).unwrap();
        let loaded = load(&o, &catalogue);
        assert_eq!(loaded.failed.len(), 1);
        assert!(
            loaded.failed[0]
                .error
                .message
                .contains("managed policy file refused: other users can write it"),
            "{:?}",
            loaded.failed
        );

        std::fs::set_permissions(
            managed.join("managed.d/a.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        std::fs::set_permissions(&managed, std::fs::Permissions::from_mode(0o777)).unwrap();
        let loaded = load(&o, &catalogue);
        assert_eq!(loaded.failed.len(), 1);
        assert_eq!(loaded.failed[0].kind, SourceKind::Managed);
        assert!(loaded.layers.is_empty(), "nothing is read from it");

        // `managed.d` that is not a directory is broken, not absent.
        std::fs::set_permissions(&managed, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_dir_all(managed.join("managed.d")).unwrap();
        std::os::unix::fs::symlink("/dev/null", managed.join("managed.d")).unwrap();
        let loaded = load(&o, &catalogue);
        assert!(
            loaded.failed[0]
                .error
                .message
                .contains("`managed.d` is a character device"),
            "{:?}",
            loaded.failed
        );
    }

    #[test]
    fn a_broken_file_keeps_its_last_good_version_when_one_is_given() {
        let root = tempfile::tempdir().unwrap();
        let o = options(root.path());
        let user = o.user_dir.clone().unwrap();
        std::fs::create_dir_all(&user).unwrap();
        let file = user.join("hooks.json");
        std::fs::write(&file, HOOK).unwrap();
        let catalogue = EventCatalogue::default();
        let good = load(&o, &catalogue);
        let mut last_good = LastGood::new();
        last_good.insert(
            (SourceKind::User, file.clone()),
            GoodSource {
                layer: good.layers[0].clone(),
                since: std::time::UNIX_EPOCH,
            },
        );
        std::fs::write(&file, "{ not json").unwrap();
        let loaded = load_with(&o, &catalogue, Some(&last_good));
        assert!(loaded.errors.is_empty() && loaded.failed.is_empty());
        assert_eq!(loaded.layers.len(), 1);
        assert_eq!(loaded.layers[0].sha256, good.layers[0].sha256);
        assert_eq!(loaded.notices.len(), 1);
        let notice = &loaded.notices[0];
        assert!(
            notice.contains(&file.display().to_string())
                && notice.contains("invalid JSON")
                && notice.contains("previous version of this file")
                && notice.contains("stays in force"),
            "{notice}"
        );
        // Without a last good version (a one-shot run) the file is broken.
        let loaded = load(&o, &catalogue);
        assert_eq!(loaded.failed.len(), 1);
        assert!(loaded.layers.is_empty());
    }
}
