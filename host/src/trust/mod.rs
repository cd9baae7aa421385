//! The workspace trust store and fingerprints: the file I/O behind
//! [`crate::policy::trust`].
//!
//! The store is one JSON file, `trust.json` in the user's data directory
//! ([`crate::data_dir`]), keyed by the exact bytes of the canonical workspace path (text
//! when it is UTF-8, base64 when not; version-1 stores, keyed by the lossy display of the
//! path, are still read). Each record holds the fingerprint taken when the user trusted
//! the workspace. Updates take an exclusive lock on `trust.json.lock` and replace the file
//! atomically (write a temporary file, rename). Only the user's environment decides where
//! the store is: no config file can move it, and a store inside the workspace, one
//! another user can write, or one reached through a symlink is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::schema::HandlerType;
use crate::config::{LoadedConfig, SourceKind, SourceOptions};
use crate::policy::TrustRequest;
use crate::policy::trust::{FileState, Fingerprint, TrustInput};

mod store;

pub use store::{TrustRecord, TrustStore, TrustStoreError, path_text};

/// How a host judges the trust of its workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WorkspaceTrust {
    /// Not trusted: project and local hooks are skipped (the library default, so that an
    /// embedder never runs a repository's hooks without deciding to).
    #[default]
    Untrusted,
    /// Trusted when the store at this path has a record whose fingerprint still matches
    /// (what the CLI and the daemon use).
    Store(PathBuf),
    /// Trusted for this host, pinned to the current fingerprint (`--trust-workspace`).
    Explicit,
    /// `HOOKHOST_TRUST_WORKSPACE=1`: trusted for this host like [`WorkspaceTrust::Explicit`],
    /// unless managed policy sets `forbidEnvironmentTrust`; then judged by the store at
    /// this path like [`WorkspaceTrust::Store`].
    Environment(PathBuf),
}

/// The canonical form of a workspace path (symlinks resolved); the path made absolute
/// when it cannot be resolved.
pub fn canonical_workspace(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf())
}

/// A workspace's fingerprint: its hook files (digests of the very bytes `loaded` parsed)
/// and every plugin they reference. Returns the fingerprint and, for each plugin, its
/// path and fingerprint key. Plugins are hashed as they are read, only when they are
/// regular files and at most [`crate::config::file::PLUGIN_CAP`] bytes (a plugin path of
/// `/dev/zero` is an unreadable plugin, not an endless read).
pub fn fingerprint(
    loaded: &LoadedConfig,
    sources: &SourceOptions,
) -> (Fingerprint, BTreeMap<PathBuf, String>) {
    let workspace = canonical_workspace(&sources.project_dir);
    // The key of a file: its path relative to the project when it is inside, else the
    // path; and where that path would be if no symlink were on the way.
    let key = |path: &Path| -> (String, PathBuf) {
        match path.strip_prefix(&sources.project_dir) {
            Ok(rel) => (path_text(rel), workspace.join(rel)),
            Err(_) => (path_text(path), path.to_path_buf()),
        }
    };
    let mut files = Fingerprint::new();
    for (_, path) in sources.project_files() {
        let sha256 = loaded
            .file_digests
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, d)| d.clone());
        // The flat file counts only when it is there: trust recorded before hookhost
        // looked for it stays valid, and one that appears changes the fingerprint.
        if sha256.is_none()
            && path.ends_with(crate::config::FLAT_FILE)
            && std::fs::symlink_metadata(&path).is_err()
        {
            continue;
        }
        let (name, expected) = key(&path);
        let state = FileState {
            target: if sha256.is_some() {
                real_target(&path, &expected)
            } else {
                None
            },
            sha256,
        };
        files.insert(name, state);
    }
    // The lock chooses the digests the project's plugins run at: it is part of what is
    // trusted, when it is there (trust recorded before it appeared stays valid until then).
    let lock = sources.project_dir.join(crate::config::lock::LOCK_FILE);
    if let Some((_, sha256)) = loaded.file_digests.iter().find(|(p, _)| *p == lock) {
        let (name, expected) = key(&lock);
        let target = real_target(&lock, &expected);
        files.insert(
            name,
            FileState {
                target,
                sha256: Some(sha256.clone()),
            },
        );
    } else if std::fs::symlink_metadata(&lock).is_ok() {
        // There but unreadable (a FIFO, a dangling link): still a change to what is trusted.
        let (name, _) = key(&lock);
        files.insert(
            name,
            FileState {
                target: None,
                sha256: None,
            },
        );
    }
    let mut plugins = BTreeMap::new();
    for layer in loaded
        .layers
        .iter()
        .filter(|l| matches!(l.origin.kind, SourceKind::Project | SourceKind::Local))
    {
        for group in &layer.settings.groups {
            for raw in &group.group.hooks {
                let (HandlerType::Wasm, Some(plugin)) = (raw.kind, &raw.plugin) else {
                    continue;
                };
                // A plugin from a registry: its reference and the digest it pins (a tag
                // alone pins nothing; only managed policy allows one).
                if crate::policy::oci::OciRef::is_reference(plugin) {
                    if let Ok(reference) = crate::policy::oci::OciRef::parse(plugin) {
                        let state = FileState {
                            sha256: reference.digest.clone(),
                            target: None,
                        };
                        files.insert(reference.to_string(), state);
                    }
                    continue;
                }
                let path = layer.base_dir.join(plugin);
                if plugins.contains_key(&path) {
                    continue;
                }
                let (name, expected) = key(&path);
                let sha256 =
                    crate::config::file::sha256_regular(&path, crate::config::file::PLUGIN_CAP)
                        .ok();
                let target = sha256.as_ref().and_then(|_| real_target(&path, &expected));
                files.insert(name.clone(), FileState { sha256, target });
                plugins.insert(path, name);
            }
        }
    }
    (files, plugins)
}

/// The real path behind `path` when it is not `expected` (a symlink on the way).
fn real_target(path: &Path, expected: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    (real != expected).then(|| path_text(&real))
}

/// Gathers what the policy needs to decide the trust of the workspace of `sources`.
pub fn request(
    loaded: &LoadedConfig,
    sources: &SourceOptions,
    trust: &WorkspaceTrust,
) -> TrustRequest {
    let workspace = canonical_workspace(&sources.project_dir);
    let (fingerprint, plugins) = fingerprint(loaded, sources);
    let mut host_failure = None;
    let mut recorded = |path: &Path| -> Result<Option<Fingerprint>, String> {
        let store = TrustStore::new(path);
        // A store inside the workspace would let the repository vouch for itself.
        let real = crate::config::env::workspaces(&[&workspace]);
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        if let Err(why) = crate::config::env::check_path(absolute.as_os_str(), &real) {
            let refused = TrustStoreError::Refused {
                directory: false,
                path: path.to_path_buf(),
                reason: format!("is refused: {why}"),
            };
            return Err(refused.to_string());
        }
        store
            .get(&workspace)
            .map(|r| r.map(|r| r.files))
            .map_err(|e| {
                if e.is_host_failure() {
                    host_failure = Some(format!("the trust store cannot be read: {e}"));
                }
                e.to_string()
            })
    };
    let input = match trust {
        WorkspaceTrust::Untrusted => TrustInput::Untrusted,
        WorkspaceTrust::Explicit => TrustInput::Explicit,
        WorkspaceTrust::Store(path) => TrustInput::Recorded(recorded(path)),
        WorkspaceTrust::Environment(path) => TrustInput::Environment(recorded(path)),
    };
    TrustRequest {
        workspace,
        fingerprint,
        plugins,
        input,
        host_failure,
    }
}
