//! Rebuilding a host when its sources change: the last good version of each broken file
//! stays in force ([`resolve_keeping_last_good`]), and [`SourcesFingerprint`] tells a
//! caller whether any source file changed since a host was built.

use std::path::PathBuf;

use crate::config::{self, ConfigError, LoadedConfig};
use crate::policy::Policy;

/// Resolves `loaded`; then every file source with an error (of the policy, or of `check`,
/// the reload gate's plugin checks, [`super::gate`]) whose bytes differ from its last good
/// version gets that version back and the policy is resolved again (this only happens
/// while a file is broken). Returns the policy, the good versions to keep for the next
/// rebuild (each file source without an error now, and each kept one), and the plugin
/// files the refused versions name (to watch: a plugin that appears later lets them in).
pub(super) fn resolve_keeping_last_good(
    loaded: LoadedConfig,
    previous: &config::LastGood,
    resolve: impl Fn(LoadedConfig) -> Policy,
    check: impl Fn(&Policy) -> Vec<ConfigError>,
) -> (Policy, config::LastGood, Vec<PathBuf>) {
    let kept = loaded.clone();
    let policy = resolve(loaded);
    let refused = check(&policy);
    let named: Vec<PathBuf> = policy
        .hooks
        .iter()
        .filter_map(|hook| match &hook.handler {
            crate::policy::HandlerSpec::Wasm(wasm) => Some(wasm.plugin.clone()),
            _ => None,
        })
        .collect();
    let erring = |layer: &config::ConfigLayer, policy: &Policy, refused: &[ConfigError]| {
        policy
            .errors
            .iter()
            .chain(refused)
            .find(|e| e.location == layer.origin.location)
            .cloned()
    };
    let mut again = kept.clone();
    let mut replaced = false;
    for layer in &kept.layers {
        let Some(file) = &layer.file else { continue };
        let Some(error) = erring(layer, &policy, &refused) else {
            continue;
        };
        if let Some(good) = previous.get(&(layer.origin.kind, file.clone()))
            && good.layer.sha256 != layer.sha256
        {
            again.keep_in_force(good, &error);
            replaced = true;
        }
    }
    let (policy, in_force, refused) = if replaced {
        let policy = resolve(again.clone());
        let refused = check(&policy);
        (policy, again, refused)
    } else {
        (policy, kept, refused)
    };
    let now = std::time::SystemTime::now();
    let mut good = config::LastGood::new();
    for layer in &in_force.layers {
        let Some(file) = &layer.file else { continue };
        let key = (layer.origin.kind, file.clone());
        if erring(layer, &policy, &refused).is_some() {
            // Not good now; an earlier good version stays the one to fall back to.
            if let Some(earlier) = previous.get(&key) {
                good.insert(key, earlier.clone());
            }
            continue;
        }
        let since = previous
            .get(&key)
            .filter(|g| g.layer.sha256 == layer.sha256)
            .map_or(now, |g| g.since);
        good.insert(
            key,
            config::GoodSource {
                layer: layer.clone(),
                since,
            },
        );
    }
    // The good versions of files this build did not load (absent now, or another
    // project's files, when a dispatch daemon's requests alternate between projects)
    // are kept for later, newest first, up to a bound.
    let mut others: Vec<_> = previous
        .iter()
        .filter(|(key, _)| !good.contains_key(*key))
        .collect();
    others.sort_by_key(|(_, source)| std::cmp::Reverse(source.since));
    let room = LAST_GOOD_FILES.saturating_sub(good.len());
    for (key, source) in others.into_iter().take(room) {
        good.insert(key.clone(), source.clone());
    }
    (policy, good, if replaced { named } else { Vec::new() })
}

/// How many files' last good versions a daemon's host remembers.
pub(super) const LAST_GOOD_FILES: usize = 256;

/// The state of each file a host was built from (`None`: absent): its `FileStamp`
/// (device, inode, size, mtime and ctime, as the compile cache stamps its entries), so
/// that a file replaced, rewritten within the same second or set back to its old mtime
/// is seen as changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesFingerprint(pub(super) Vec<(PathBuf, Option<config::file::FileStamp>)>);

impl SourcesFingerprint {
    /// The files whose state differs between `self` and `other`.
    pub fn changed_since(&self, other: &SourcesFingerprint) -> std::collections::BTreeSet<PathBuf> {
        self.0
            .iter()
            .filter(|entry| !other.0.contains(entry))
            .chain(other.0.iter().filter(|entry| !self.0.contains(entry)))
            .map(|(path, _)| path.clone())
            .collect()
    }

    /// Whether no file changed in the last second. A file written just before it was
    /// read and then again within its timestamp's granularity could look unchanged, so a
    /// host whose files are not settled should not be reused on its fingerprint alone.
    pub fn is_settled(&self) -> bool {
        self.settled_since(std::time::SystemTime::now())
    }

    /// Whether no file changed since `since`, or within a timestamp's granularity before
    /// it (a second): a build begun at `since` read each file as
    /// it still stands.
    pub fn settled_since(&self, since: std::time::SystemTime) -> bool {
        let Some(recent) = since.checked_sub(super::gate::STAMP_GRANULARITY) else {
            return false;
        };
        self.0
            .iter()
            .all(|(_, stamp)| stamp.is_none_or(|stamp| stamp.changed_at() < recent))
    }
}
