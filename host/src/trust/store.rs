//! The trust store file: one record per trusted workspace, keyed by the exact bytes of
//! its canonical path, read and written only where no one but the user can have written.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::trust::Fingerprint;
use crate::session::{StoreAction, StoreError};

/// Why the trust store cannot be read or changed. Its message names the path.
#[derive(Debug, thiserror::Error)]
pub enum TrustStoreError {
    /// Opening, reading, creating, locking or writing the store or its directory failed.
    #[error(transparent)]
    Io(#[from] StoreError),
    /// The store's file or directory is refused: a symlink, not a regular file (or not a
    /// directory), another user's or writable by others, or too large.
    #[error(
        "the trust store{} `{}` {reason}",
        if *directory { "'s directory" } else { "" },
        path.display()
    )]
    Refused {
        /// Whether it is the store's directory that is refused.
        directory: bool,
        /// The file or directory.
        path: PathBuf,
        /// Why, as the rest of a sentence that starts with the path.
        reason: String,
    },
    /// The file is not a trust store that this hookhost reads (malformed, or newer).
    #[error("`{}` {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why, as the rest of a sentence that starts with the path.
        reason: String,
    },
}

impl TrustStoreError {
    /// Whether the store could not be read for want of the host's own descriptors or
    /// memory ([`crate::config::file::is_host_failure`]): the store says nothing then,
    /// and a trusted workspace must not read as untrusted (its guards skipped).
    pub fn is_host_failure(&self) -> bool {
        matches!(self, TrustStoreError::Io(StoreError::Io { source, .. })
            if crate::config::file::is_host_failure(source))
    }
}

impl From<TrustStoreError> for String {
    fn from(error: TrustStoreError) -> String {
        error.to_string()
    }
}

/// The [`TrustStoreError::Io`] of `action` on `path`, for `map_err`.
fn io_error(action: StoreAction, path: &Path) -> impl FnOnce(std::io::Error) -> TrustStoreError {
    let io = StoreError::io(action, path);
    move |source| TrustStoreError::Io(io(source))
}

fn refused(directory: bool, path: &Path, reason: String) -> TrustStoreError {
    TrustStoreError::Refused {
        directory,
        path: path.to_path_buf(),
        reason,
    }
}

/// One trusted workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustRecord {
    /// When it was trusted, in seconds since the Unix epoch.
    pub trusted_at: u64,
    /// The fingerprint it was trusted with.
    pub files: Fingerprint,
}

/// The store's format: version 2 keys each workspace by the exact bytes of its path.
const STORE_VERSION: u64 = 2;

/// One record of a version-2 store: the workspace path as text when it is UTF-8, else
/// its bytes in base64, so that two paths never share a record.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredWorkspace {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path_base64: Option<String>,
    #[serde(flatten)]
    record: TrustRecord,
}

/// The store in memory: workspace path (exact bytes) → record.
type Workspaces = BTreeMap<PathBuf, TrustRecord>;

/// A path as text for a JSON file, losing nothing: the path itself when it is UTF-8,
/// else `base64:` and its bytes (an absolute or relative path never starts so).
pub fn path_text(path: &Path) -> String {
    use base64::Engine;
    use std::os::unix::ffi::OsStrExt;
    match path.to_str() {
        Some(text) if !text.starts_with("base64:") => text.to_string(),
        _ => format!(
            "base64:{}",
            base64::engine::general_purpose::STANDARD.encode(path.as_os_str().as_bytes())
        ),
    }
}

fn decode_store(bytes: &[u8], path: &Path) -> Result<Workspaces, TrustStoreError> {
    use base64::Engine;
    use std::os::unix::ffi::OsStringExt;
    let invalid = |reason: String| TrustStoreError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let not_a_store = |e: &dyn std::fmt::Display| invalid(format!("is not a trust store: {e}"));
    let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| not_a_store(&e))?;
    let version = doc
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let list = doc
        .get("workspaces")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    match version {
        // Version 1 (and before): keyed by the path's `display()`, which is lossy for
        // paths that are not UTF-8. A key that is valid text names its path exactly and
        // is kept; a key with U+FFFD may stand for any of several paths and is dropped
        // (that workspace has to be trusted again).
        0 | 1 => {
            let map: BTreeMap<String, TrustRecord> = if list.is_null() {
                BTreeMap::new()
            } else {
                serde_json::from_value(list).map_err(|e| not_a_store(&e))?
            };
            Ok(map
                .into_iter()
                .filter(|(key, _)| !key.contains('\u{fffd}'))
                .map(|(key, record)| (PathBuf::from(key), record))
                .collect())
        }
        STORE_VERSION => {
            let list: Vec<StoredWorkspace> = if list.is_null() {
                Vec::new()
            } else {
                serde_json::from_value(list).map_err(|e| not_a_store(&e))?
            };
            let mut out = Workspaces::new();
            for entry in list {
                let path = match (entry.path, entry.path_base64) {
                    (Some(text), None) => PathBuf::from(text),
                    (None, Some(encoded)) => {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(encoded.as_bytes())
                            .map_err(|e| not_a_store(&e))?;
                        PathBuf::from(std::ffi::OsString::from_vec(bytes))
                    }
                    _ => return Err(not_a_store(&"a record needs one of `path`, `pathBase64`")),
                };
                out.insert(path, entry.record);
            }
            Ok(out)
        }
        newer => Err(invalid(format!(
            "is a version {newer} trust store, written by a newer hookhost; \
             refusing to read or rewrite it"
        ))),
    }
}

fn encode_store(workspaces: &Workspaces) -> serde_json::Result<Vec<u8>> {
    use base64::Engine;
    use std::os::unix::ffi::OsStrExt;
    let list: Vec<StoredWorkspace> = workspaces
        .iter()
        .map(|(path, record)| {
            let (text, encoded) = match path.to_str() {
                Some(text) => (Some(text.to_string()), None),
                None => (
                    None,
                    Some(
                        base64::engine::general_purpose::STANDARD
                            .encode(path.as_os_str().as_bytes()),
                    ),
                ),
            };
            StoredWorkspace {
                path: text,
                path_base64: encoded,
                record: record.clone(),
            }
        })
        .collect();
    let doc = serde_json::json!({"version": STORE_VERSION, "workspaces": list});
    serde_json::to_vec_pretty(&doc)
}

/// The trust store file.
///
/// The store decides whether a repository's hooks run, so it is believed only when no
/// one but the user can have written it: `trust.json` and its directory are opened
/// without following symlinks (a symlink there is refused, not followed), and each must
/// be owned by the user (the directory may also be root's) and not writable by its group
/// or other users. `trust.json` must be a regular file of at most
/// [`crate::config::file::CONFIG_CAP`] bytes.
#[derive(Debug, Clone)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    /// A store in the file `path`.
    pub fn new(path: impl Into<PathBuf>) -> TrustStore {
        TrustStore { path: path.into() }
    }

    /// The store of a data directory: `DIR/trust.json`.
    pub fn in_data_dir(dir: &Path) -> TrustStore {
        TrustStore::new(dir.join("trust.json"))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        }
    }

    fn file_name(&self) -> Result<&std::ffi::OsStr, TrustStoreError> {
        self.path
            .file_name()
            .ok_or_else(|| TrustStoreError::Invalid {
                path: self.path.clone(),
                reason: "is not a file name".into(),
            })
    }

    /// Opens the store's directory without following a symlink and checks who can write
    /// it. `Ok(None)`: it does not exist.
    fn open_dir(&self) -> Result<Option<std::fs::File>, TrustStoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = self.dir();
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(dir);
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            // With O_DIRECTORY, Linux answers a symlink with ENOTDIR rather than ELOOP.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                let symlink = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_symlink());
                let reason = if symlink {
                    "is a symlink; refused (not followed)"
                } else {
                    "is not a directory; refused"
                };
                return Err(refused(true, dir, reason.into()));
            }
            Err(e) => return Err(io_error(StoreAction::Open, dir)(e)),
        };
        let meta = file.metadata().map_err(io_error(StoreAction::Read, dir))?;
        let rule = crate::config::file::Rule::Believed(crate::config::file::Owners::MeOrRoot);
        if let Some(why) = rule.judge(&meta) {
            return Err(refused(true, dir, format!("is refused: {why}")));
        }
        Ok(Some(file))
    }

    /// Opens `name` in the directory `dir` with `flags` and never through a symlink.
    fn open_at(
        dir: &std::fs::File,
        name: &std::ffi::OsStr,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> std::io::Result<std::fs::File> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        let name = std::ffi::CString::new(name.as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: `dir` is an open directory and `name` a NUL-terminated string; openat
        // returns a new descriptor or -1.
        let fd = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY,
                libc::c_uint::from(mode),
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by openat and is owned by nothing else.
        Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn read(&self) -> Result<Workspaces, TrustStoreError> {
        let path = self.path.as_path();
        let Some(dir) = self.open_dir()? else {
            return Ok(Workspaces::new());
        };
        // The one reader: by name in the checked directory, never through a symlink,
        // a regular file of this user's that no one else can write, at most the cap.
        use crate::config::file::{FileError, Open, Owners, Rule, read_checked};
        let how = Open::read(crate::config::file::CONFIG_CAP)
            .no_follow()
            .rule(Rule::Believed(Owners::Me))
            .at(&dir);
        let name = Path::new(self.file_name()?);
        let bytes = match read_checked(name, &how) {
            Ok((bytes, _)) => bytes,
            Err(FileError::NotFound) => return Ok(Workspaces::new()),
            Err(FileError::Symlink) => {
                let reason = "is a symlink; refused (not followed)".into();
                return Err(refused(false, path, reason));
            }
            Err(FileError::NotRegular(kind)) => {
                return Err(refused(false, path, format!("is {kind}; refused")));
            }
            Err(FileError::Unsafe(why)) => {
                return Err(refused(false, path, format!("is refused: {why}")));
            }
            Err(FileError::TooLarge { cap, .. }) => {
                let reason = format!("is larger than {cap} bytes; refused");
                return Err(refused(false, path, reason));
            }
            Err(FileError::Io(e)) => return Err(io_error(StoreAction::Read, path)(e)),
        };
        decode_store(&bytes, path)
    }

    /// Every trusted workspace, by its exact path.
    ///
    /// # Errors
    ///
    /// The store cannot be read or parsed, or is refused.
    pub fn list(&self) -> Result<BTreeMap<PathBuf, TrustRecord>, TrustStoreError> {
        self.read()
    }

    /// The record of a workspace (canonical path, compared byte for byte).
    ///
    /// # Errors
    ///
    /// The store cannot be read or parsed, or is refused.
    pub fn get(&self, workspace: &Path) -> Result<Option<TrustRecord>, TrustStoreError> {
        Ok(self.read()?.remove(workspace))
    }

    /// Records `fingerprint` as trusted for `workspace`, replacing any earlier record.
    ///
    /// # Errors
    ///
    /// The store cannot be read, locked or written, or is refused.
    pub fn trust(&self, workspace: &Path, fingerprint: Fingerprint) -> Result<(), TrustStoreError> {
        let trusted_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.update(|workspaces| {
            workspaces.insert(
                workspace.to_path_buf(),
                TrustRecord {
                    trusted_at,
                    files: fingerprint,
                },
            );
            true
        })
        .map(|_| ())
    }

    /// Forgets a workspace; returns whether it was trusted.
    ///
    /// # Errors
    ///
    /// The store cannot be read, locked or written, or is refused.
    pub fn untrust(&self, workspace: &Path) -> Result<bool, TrustStoreError> {
        self.update(|workspaces| workspaces.remove(workspace).is_some())
    }

    /// Read-modify-write under an exclusive lock; the file is replaced atomically.
    fn update(
        &self,
        change: impl FnOnce(&mut Workspaces) -> bool,
    ) -> Result<bool, TrustStoreError> {
        use std::os::unix::fs::DirBuilderExt;
        let path = self.path.as_path();
        let dir_path = self.dir();
        let create = io_error(StoreAction::Create, dir_path);
        if let Err(e) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir_path)
        {
            return Err(create(e));
        }
        // Created a moment ago, the directory is gone again: a race with its removal.
        let Some(dir) = self.open_dir()? else {
            return Err(create(std::io::ErrorKind::NotFound.into()));
        };
        let mut lock_name = self.file_name()?.to_owned();
        lock_name.push(".lock");
        let lock = Self::open_at(&dir, &lock_name, libc::O_WRONLY | libc::O_CREAT, 0o600)
            .map_err(io_error(StoreAction::Lock, path))?;
        let _guard =
            crate::audit::Flock::exclusive(&lock).map_err(io_error(StoreAction::Lock, path))?;
        let mut workspaces = self.read()?;
        if !change(&mut workspaces) {
            return Ok(false);
        }
        let write = io_error(StoreAction::Write, path);
        let json = match encode_store(&workspaces) {
            Ok(json) => json,
            Err(e) => return Err(write(e.into())),
        };
        let mut tmp = match tempfile::NamedTempFile::new_in(dir_path) {
            Ok(tmp) => tmp,
            Err(e) => return Err(write(e)),
        };
        if let Err(e) = tmp.write_all(&json).and_then(|()| tmp.as_file().sync_all()) {
            return Err(write(e));
        }
        match tmp.persist(path) {
            Ok(_) => Ok(true),
            Err(e) => Err(write(e.error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::trust::FileState;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;

    fn fingerprint(sha: &str) -> Fingerprint {
        [(
            ".hookhost/hooks.json".to_string(),
            FileState {
                sha256: Some(sha.into()),
                target: None,
            },
        )]
        .into()
    }

    #[test]
    fn paths_that_differ_in_bytes_never_share_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::in_data_dir(dir.path());
        let ff = PathBuf::from(std::ffi::OsStr::from_bytes(b"/src/repo\xff"));
        let fe = PathBuf::from(std::ffi::OsStr::from_bytes(b"/src/repo\xfe"));
        store.trust(&ff, fingerprint("aa")).unwrap();
        store
            .trust(Path::new("/src/plain"), fingerprint("bb"))
            .unwrap();
        assert_eq!(store.get(&ff).unwrap().unwrap().files, fingerprint("aa"));
        assert_eq!(store.get(&fe).unwrap(), None);
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 2);
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(text.contains("\"version\": 2"), "{text}");
        assert!(text.contains("\"path\": \"/src/plain\""), "{text}");
        assert!(text.contains("\"pathBase64\""), "{text}");
        assert!(store.untrust(&ff).unwrap());
        assert!(!store.untrust(&fe).unwrap());
    }

    #[test]
    fn version_1_stores_are_read_and_their_lossy_keys_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::in_data_dir(dir.path());
        let record = serde_json::json!({"trustedAt": 5, "files": fingerprint("aa")});
        let v1 = serde_json::json!({"version": 1, "workspaces": {
            "/src/repo": record, "/src/repo\u{fffd}": record}});
        std::fs::write(store.path(), v1.to_string()).unwrap();
        let got = store.get(Path::new("/src/repo")).unwrap().unwrap();
        assert_eq!(got.trusted_at, 5);
        assert_eq!(
            store.list().unwrap().len(),
            1,
            "the ambiguous key is dropped"
        );
        // Rewritten as version 2 on the next update, keeping the record.
        store
            .trust(Path::new("/src/other"), fingerprint("bb"))
            .unwrap();
        assert!(store.get(Path::new("/src/repo")).unwrap().is_some());
        let newer = serde_json::json!({"version": 3, "workspaces": []});
        std::fs::write(store.path(), newer.to_string()).unwrap();
        let e = store.get(Path::new("/src/repo")).unwrap_err();
        assert!(matches!(e, TrustStoreError::Invalid { .. }), "{e:?}");
        assert!(e.to_string().contains("newer hookhost"), "{e}");
    }

    #[test]
    fn a_store_that_others_can_write_or_that_is_a_symlink_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        let store = TrustStore::in_data_dir(&data);
        store
            .trust(Path::new("/src/repo"), fingerprint("aa"))
            .unwrap();
        // Refused (not an I/O failure), naming the file or the directory, for reads and
        // for writes alike.
        let refused_as = |directory: bool, why: &str| {
            let read = store.get(Path::new("/src/repo")).unwrap_err();
            let write = store
                .trust(Path::new("/src/x"), fingerprint("bb"))
                .unwrap_err();
            for e in [read, write] {
                assert!(
                    matches!(e, TrustStoreError::Refused { directory: d, .. } if d == directory),
                    "{why}: {e:?}"
                );
                let shown = if directory {
                    "trust store's directory `"
                } else {
                    "trust store `"
                };
                assert!(e.to_string().contains(shown), "{e}");
                assert!(e.to_string().contains(why), "{why}: {e}");
            }
        };
        let refused = |why: &str| refused_as(false, why);
        let mode = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        mode(store.path(), 0o646);
        refused("other users can write it");
        mode(store.path(), 0o660);
        refused("its group can write it");
        mode(store.path(), 0o600);
        mode(&data, 0o777);
        refused_as(true, "other users can write it");
        mode(&data, 0o700);
        assert!(store.get(Path::new("/src/repo")).unwrap().is_some());

        // trust.json as a symlink to a store that would trust: not followed.
        let elsewhere = root.path().join("elsewhere.json");
        std::fs::rename(store.path(), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.path()).unwrap();
        refused("is a symlink; refused (not followed)");
        std::fs::remove_file(store.path()).unwrap();
        std::fs::rename(&elsewhere, store.path()).unwrap();

        // The data directory as a symlink to a directory with a store in it.
        let real = root.path().join("real");
        std::fs::rename(&data, &real).unwrap();
        std::os::unix::fs::symlink(&real, &data).unwrap();
        refused_as(true, "is a symlink; refused (not followed)");

        // A FIFO where the store should be does not block.
        std::fs::remove_file(&data).unwrap();
        std::fs::create_dir(&data).unwrap();
        mode(&data, 0o700);
        let c = std::ffi::CString::new(store.path().as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        refused("a FIFO");
    }
}
