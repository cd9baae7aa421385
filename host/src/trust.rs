//! The workspace trust store and fingerprints: the file I/O behind
//! [`crate::policy::trust`].
//!
//! The store is one JSON file, `trust.json` in the user's data directory
//! ([`crate::data_dir`]), keyed by the canonical workspace path. Each record holds the
//! fingerprint taken when the user trusted the workspace. Updates take an exclusive lock on
//! `trust.json.lock` and replace the file atomically (write a temporary file, rename).
//! Only the user's environment decides where the store is: no config file can move it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::schema::HandlerType;
use crate::config::{LoadedConfig, SourceKind, SourceOptions};
use crate::policy::TrustRequest;
use crate::policy::trust::{FileState, Fingerprint, TrustInput};

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
    /// Trusted for this host, pinned to the current fingerprint (`--trust-workspace`,
    /// `HOOKHOST_TRUST_WORKSPACE=1`).
    Explicit,
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

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    workspaces: BTreeMap<String, TrustRecord>,
}

/// The trust store file.
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

    fn read(&self) -> Result<StoreFile, String> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("`{}` is not a trust store: {e}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoreFile::default()),
            Err(e) => Err(format!("cannot read `{}`: {e}", self.path.display())),
        }
    }

    /// Every trusted workspace.
    ///
    /// # Errors
    ///
    /// The store cannot be read or parsed.
    pub fn list(&self) -> Result<BTreeMap<String, TrustRecord>, String> {
        Ok(self.read()?.workspaces)
    }

    /// The record of a workspace (canonical path).
    ///
    /// # Errors
    ///
    /// The store cannot be read or parsed.
    pub fn get(&self, workspace: &Path) -> Result<Option<TrustRecord>, String> {
        Ok(self
            .read()?
            .workspaces
            .remove(&workspace.display().to_string()))
    }

    /// Records `fingerprint` as trusted for `workspace`, replacing any earlier record.
    ///
    /// # Errors
    ///
    /// The store cannot be read, locked or written.
    pub fn trust(&self, workspace: &Path, fingerprint: Fingerprint) -> Result<(), String> {
        let trusted_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        self.update(|file| {
            file.workspaces.insert(
                workspace.display().to_string(),
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
    /// The store cannot be read, locked or written.
    pub fn untrust(&self, workspace: &Path) -> Result<bool, String> {
        self.update(|file| {
            file.workspaces
                .remove(&workspace.display().to_string())
                .is_some()
        })
    }

    /// Read-modify-write under an exclusive lock; the file is replaced atomically.
    fn update(&self, change: impl FnOnce(&mut StoreFile) -> bool) -> Result<bool, String> {
        let shown = self.path.display();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        let mut lock_name = self.path.as_os_str().to_owned();
        lock_name.push(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(PathBuf::from(lock_name))
            .map_err(|e| format!("cannot lock `{shown}`: {e}"))?;
        let _guard = crate::audit::Flock::exclusive(&lock)
            .map_err(|e| format!("cannot lock `{shown}`: {e}"))?;
        let mut file = self.read()?;
        let changed = change(&mut file);
        if !changed {
            return Ok(false);
        }
        file.version = 1;
        let json = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
        tmp.write_all(&json)
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
        tmp.persist(&self.path)
            .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
        Ok(true)
    }
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
/// path and fingerprint key.
pub fn fingerprint(
    loaded: &LoadedConfig,
    sources: &SourceOptions,
) -> (Fingerprint, BTreeMap<PathBuf, String>) {
    let workspace = canonical_workspace(&sources.project_dir);
    let key = |path: &Path| -> String {
        path.strip_prefix(&sources.project_dir)
            .map(|rel| rel.display().to_string())
            .unwrap_or_else(|_| path.display().to_string())
    };
    let mut files = Fingerprint::new();
    for (_, path) in sources.project_files() {
        let sha256 = loaded
            .file_digests
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, d)| d.clone());
        let state = FileState {
            target: if sha256.is_some() {
                real_target(&path, &workspace.join(key(&path)))
            } else {
                None
            },
            sha256,
        };
        files.insert(key(&path), state);
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
                let path = layer.base_dir.join(plugin);
                let k = key(&path);
                if plugins.contains_key(&path) {
                    continue;
                }
                let expected = if Path::new(&k).is_absolute() {
                    path.clone()
                } else {
                    workspace.join(&k)
                };
                let sha256 = std::fs::read(&path)
                    .ok()
                    .map(|bytes| hex::encode(Sha256::digest(&bytes)));
                let target = sha256.as_ref().and_then(|_| real_target(&path, &expected));
                files.insert(k.clone(), FileState { sha256, target });
                plugins.insert(path, k);
            }
        }
    }
    (files, plugins)
}

/// The real path behind `path` when it is not `expected` (a symlink on the way).
fn real_target(path: &Path, expected: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    (real != expected).then(|| real.display().to_string())
}

/// Gathers what the policy needs to decide the trust of the workspace of `sources`.
pub fn request(
    loaded: &LoadedConfig,
    sources: &SourceOptions,
    trust: &WorkspaceTrust,
) -> TrustRequest {
    let workspace = canonical_workspace(&sources.project_dir);
    let (fingerprint, plugins) = fingerprint(loaded, sources);
    let input = match trust {
        WorkspaceTrust::Untrusted => TrustInput::Untrusted,
        WorkspaceTrust::Explicit => TrustInput::Explicit,
        WorkspaceTrust::Store(path) => TrustInput::Recorded(
            TrustStore::new(path)
                .get(&workspace)
                .map(|r| r.map(|r| r.files)),
        ),
    };
    TrustRequest {
        workspace,
        fingerprint,
        plugins,
        input,
    }
}
