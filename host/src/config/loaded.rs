//! What loading the config sources produced: the layers that loaded, the sources that
//! failed, and the last good versions a daemon keeps in force.

use std::path::PathBuf;

use super::schema::RawSettings;
use super::sources::{Origin, SourceKind};
use super::{ConfigError, ConfigWarning};

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
    /// Sources the host could not read for want of its own resources (descriptors,
    /// memory), with no last good version in force: what they say is unknown, so no
    /// event may be dispatched on this config (each a message naming the file and the
    /// error; also in [`LoadedConfig::failed`]).
    pub host_failures: Vec<String>,
    /// The sources that failed to load (also in [`LoadedConfig::errors`]), except those
    /// whose last good version is kept in force.
    pub failed: Vec<FailedSource>,
    /// Notices for every outcome: environment values refused, and each broken file whose
    /// last good version is kept in force (naming the file, the error and that the
    /// previous version is in force).
    pub notices: Vec<String>,
    /// The project's `hookhost.lock`, when it has one (its digest is in
    /// [`LoadedConfig::file_digests`]).
    pub lock: Option<super::lock::RawLock>,
}

impl LoadedConfig {
    pub(super) fn fail(&mut self, kind: SourceKind, file: Option<PathBuf>, error: ConfigError) {
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

/// What is known of a hook entry that could not be read but is required.
#[derive(Debug, Clone, PartialEq)]
pub struct UnreadHook {
    /// Its JSON path.
    pub path: String,
    /// Its `type`, when that much reads.
    pub kind: Option<super::schema::HandlerType>,
    /// Its `id`, when it has one.
    pub id: Option<String>,
    /// Why it could not be read.
    pub message: String,
}
