//! Reading the config sources, highest precedence first: managed policy with its
//! ownership checks, then each file through the non-blocking regular-file reader.

use std::path::{Path, PathBuf};

use super::loaded::{ConfigLayer, LastGood, LoadedConfig};
use super::sources::{Origin, SourceKind, SourceOptions, is_inline};
use super::{ConfigError, parse_settings};
use crate::event::EventCatalogue;

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
    if let Some((lock, digest)) = super::lock::read(&options.project_dir) {
        if let Some(digest) = digest {
            let path = options.project_dir.join(super::lock::LOCK_FILE);
            loaded.file_digests.push((path, digest));
        }
        loaded.lock = Some(lock);
    }
    for path in options.user_files() {
        load_file(&mut loaded, SourceKind::User, &path, catalogue, last_good);
    }
    loaded
}

/// Why managed policy at `path` (whose metadata is `meta`) is not to be believed:
/// another user owns it, or users other than its owner can write it.
fn unsafe_managed(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    // The system's policy is root's; an override directory (tests, unmanaged machines)
    // may also be the user's own.
    use super::file::{Owners, Rule};
    let owners = if path.starts_with(super::env::SYSTEM_MANAGED_DIR) {
        Owners::Root
    } else {
        Owners::MeOrRoot
    };
    Rule::Believed(owners).judge(meta)
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
    // A directory the host could not read for want of descriptors or memory: a host
    // error (see `load_file`), not broken policy.
    let unreadable = |loaded: &mut LoadedConfig, path: &Path, e: std::io::Error| {
        let message = format!("cannot read the managed policy directory: {e}");
        if super::file::is_host_failure(&e) {
            loaded
                .host_failures
                .push(format!("`{}`: {message}", path.display()));
        }
        broken(loaded, path, message);
    };
    // Nothing there at all: no managed policy. Anything else that is not a directory we
    // may read is broken policy, which fails closed.
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return;
    }
    match std::fs::metadata(dir) {
        Err(e) => return unreadable(loaded, dir, e),
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
        Err(e) => return unreadable(loaded, &drop_ins, e),
    }
    let entries = match std::fs::read_dir(&drop_ins) {
        Ok(entries) => entries,
        Err(e) => return unreadable(loaded, &drop_ins, e),
    };
    let mut files = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => files.push(entry.path()),
            Err(e) => return unreadable(loaded, &drop_ins, e),
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
    // The host could not read the file (out of descriptors or memory): not the file's
    // fault, and no reason to skip its hooks; a host error unless a last good version of
    // it is in force.
    let mut host_failure = false;
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
            host_failure = e.is_host_failure();
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
    if host_failure && loaded.failed.len() > failed_before {
        let error = &loaded.failed[failed_before].error;
        loaded
            .host_failures
            .push(format!("`{}`: {}", error.location, error.message));
    }
}

/// A config file's `text` (of digest `sha256`) parsed into a layer of `kind`, as
/// [`load`] parses the file at `path`: what a stored last good version of it becomes.
///
/// # Errors
///
/// The text does not parse.
pub fn parse_layer(
    kind: SourceKind,
    path: &Path,
    text: &str,
    sha256: String,
    catalogue: &EventCatalogue,
) -> Result<ConfigLayer, ConfigError> {
    let mut loaded = LoadedConfig::default();
    let source = Source {
        kind,
        file: Some(path.to_path_buf()),
        location: path.display().to_string(),
        base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        sha256: Some(sha256),
    };
    push_parsed(
        &mut loaded,
        source,
        text,
        is_claude_settings_file(path),
        catalogue,
    );
    match loaded.layers.pop() {
        Some(layer) => Ok(layer),
        None => Err(loaded.errors.remove(0)),
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
pub(crate) fn is_claude_settings_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("settings.json") || n.ends_with("settings.local.json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GoodSource;
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
                .contains("managed policy file refused: its group and other users can write it"),
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
