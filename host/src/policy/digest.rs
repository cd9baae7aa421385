//! The digest of a policy, for decision receipts ((`outcome::DecisionReceipt`)):
//! which config sources it was resolved from, each with the sha256 of the bytes it was
//! parsed from (what the managed digest and the trust store's fingerprints take), the
//! workspace trust decision, and the plugin pins of a trusted workspace. Pure: every
//! sha256 was taken when the source was read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use sha2::Digest as _;

use super::trust::TrustDecision;
use crate::config::{ConfigLayer, SourceKind};

/// One config source of a policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySource {
    /// `managed`, `cli`, `local`, `project`, `user`.
    pub source: String,
    /// Its file, or a description of an inline source.
    pub location: String,
    /// `sha256:<hex>` of the bytes it was parsed from (`None`: inline or built in code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Whether its hooks count: `false` for a project or local file of a workspace that
    /// is not trusted.
    pub applies: bool,
}

/// What a policy was resolved from, and the digest of it all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDigest {
    /// `sha256:<hex>` over the rest of this object (its JSON, in this field order).
    pub digest: String,
    /// The sources, in precedence order (managed first).
    pub sources: Vec<PolicySource>,
    /// `trusted`, `untrusted`, or `None` when no trust was judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_trust: Option<&'static str>,
    /// A trusted workspace's plugin files, each with the digest it was trusted with.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub plugin_pins: BTreeMap<PathBuf, String>,
}

impl PolicyDigest {
    /// The digest of `layers` (in precedence order) under `trust`.
    pub fn of(layers: &[ConfigLayer], trust: Option<&TrustDecision>) -> PolicyDigest {
        let trusted = trust.is_none_or(TrustDecision::is_trusted);
        let sources = layers
            .iter()
            .map(|layer| PolicySource {
                source: layer.origin.kind.as_str().to_string(),
                location: layer.origin.location.clone(),
                sha256: layer.sha256.as_ref().map(|hex| format!("sha256:{hex}")),
                applies: trusted
                    || !matches!(layer.origin.kind, SourceKind::Project | SourceKind::Local),
            })
            .collect();
        let plugin_pins = match trust {
            Some(TrustDecision::Trusted { pins, .. }) => pins
                .iter()
                .map(|(path, sha)| (path.clone(), format!("sha256:{sha}")))
                .collect(),
            _ => BTreeMap::new(),
        };
        let mut digest = PolicyDigest {
            digest: String::new(),
            sources,
            workspace_trust: trust.map(|t| match t.is_trusted() {
                true => "trusted",
                false => "untrusted",
            }),
            plugin_pins,
        };
        let json = serde_json::to_vec(&digest).unwrap_or_default();
        digest.digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&json)));
        digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Origin;

    fn layer(kind: SourceKind, sha: &str) -> ConfigLayer {
        ConfigLayer {
            origin: Origin {
                kind,
                location: format!("/{}/hooks.json", kind.as_str()),
            },
            base_dir: PathBuf::from("/"),
            settings: Default::default(),
            file: Some(PathBuf::from("hooks.json")),
            sha256: Some(sha.into()),
        }
    }

    #[test]
    fn the_digest_changes_with_a_source_and_with_trust() {
        let layers = [
            layer(SourceKind::Managed, "aa"),
            layer(SourceKind::User, "bb"),
        ];
        let one = PolicyDigest::of(&layers, None);
        assert_eq!(one, PolicyDigest::of(&layers, None), "deterministic");
        assert!(one.digest.starts_with("sha256:") && one.digest.len() == 71);
        let edited = [
            layer(SourceKind::Managed, "aa"),
            layer(SourceKind::User, "bc"),
        ];
        assert_ne!(one.digest, PolicyDigest::of(&edited, None).digest);
        let untrusted = TrustDecision::Untrusted {
            reason: String::new(),
            changes: Vec::new(),
        };
        assert_ne!(
            one.digest,
            PolicyDigest::of(&layers, Some(&untrusted)).digest
        );
        let project = [layer(SourceKind::Project, "cc")];
        let digest = PolicyDigest::of(&project, Some(&untrusted));
        assert!(!digest.sources[0].applies);
        assert_eq!(digest.sources[0].sha256.as_deref(), Some("sha256:cc"));
    }
}
