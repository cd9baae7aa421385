//! Plugins from OCI registries: the pull, the cache by digest, and the push of the CNCF
//! wasm artifact layout (one manifest, config `application/vnd.wasm.config.v0+json`, one
//! layer `application/wasm`).
//!
//! A pull checks the manifest's bytes against the digest the reference pins, and the
//! layer's bytes against the digest the manifest names, before anything is written; the
//! cache (`oci/` in the data directory) keeps both by digest, the layer as
//! `layers/<hex>.wasm`. What the sandbox then loads is that file, through the path of any
//! plugin file: the `sha256` check (pinned to the layer's digest), managed policy's
//! allowlist and signatures, the compile cache. A signature pushed beside the artifact
//! as a referrer lands as `layers/<hex>.wasm.sig`, where the allowlist looks for one.
//! A warm cache needs no registry; a cold one is pulled within the hook's deadline.

pub(crate) mod auth;
mod client;
mod layout;
mod sandbox;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::config::file::{Open, Rule, read_checked};
use crate::policy::oci::OciRef;
use crate::session::write_atomically;

pub use layout::{
    CONFIG_MEDIA_TYPE, INDEX_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_CAP, MANIFEST_MEDIA_TYPE,
    SIGNATURE_ARTIFACT_TYPE,
};

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One pull under way, and its outcome once it ended.
type Pulling = Arc<tokio::sync::OnceCell<Result<CachedPlugin, String>>>;

/// What makes two references one pull: the registry, the repository and the pinned
/// digest (the tag then names nothing more), else the tag.
fn pull_key(reference: &OciRef) -> String {
    match &reference.digest {
        Some(hex) => format!(
            "{}/{}@sha256:{hex}",
            reference.registry, reference.repository
        ),
        None => reference.name(),
    }
}

/// A plugin whose artifact is in the cache: its layer file and digests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedPlugin {
    /// The layer file (`layers/<hex>.wasm`): the component.
    pub path: PathBuf,
    /// The layer's sha256: the component's digest.
    pub layer: String,
    /// The manifest's sha256: the digest the reference pins.
    pub manifest: String,
}

/// The cache of pulled artifacts, and the pulls and pushes that fill and read it.
#[derive(Debug, Clone)]
pub struct OciStore {
    dir: PathBuf,
    layer_cap: u64,
    /// The pulls under way, one per artifact ([`pull_key`]): concurrent events of a
    /// daemon that find the same plugin uncached wait for one pull and share its outcome,
    /// instead of each starting their own.
    pulls: Arc<Mutex<HashMap<String, Pulling>>>,
}

impl OciStore {
    /// The cache in `dir`, taking layers of at most `layer_cap` bytes (the plugin cap).
    pub fn new(dir: PathBuf, layer_cap: u64) -> OciStore {
        OciStore {
            dir,
            layer_cap,
            pulls: Arc::default(),
        }
    }

    /// [`OciStore::pull`], once per artifact at a time: a caller that finds a pull of
    /// the same artifact under way (a clone of this store; any spelling of the reference,
    /// `pull_key`) waits for it and takes its outcome, a failure included (red team,
    /// stop 37: each waiter of a failed pull pulled again in turn, and a caller arriving
    /// meanwhile started another beside them). A pull whose caller is dropped (its hook's
    /// deadline) is carried on by a waiter.
    ///
    /// # Errors
    ///
    /// As [`OciStore::pull`].
    pub async fn pull_once(&self, reference: &OciRef) -> Result<CachedPlugin, String> {
        let key = pull_key(reference);
        let pulling = {
            let mut pulls = self.pulls.lock().unwrap_or_else(|e| e.into_inner());
            let pulling = pulls.entry(key.clone()).or_default();
            // An outcome left by a caller dropped before it could clear it: this caller
            // came after that pull ended, so it looks again.
            if pulling.initialized() {
                *pulling = Pulling::default();
            }
            pulling.clone()
        };
        let outcome = pulling
            .get_or_init(|| async {
                match self.cached(reference) {
                    Ok(Some(cached)) => Ok(cached),
                    Ok(None) => self.pull(reference).await,
                    Err(e) => Err(e),
                }
            })
            .await
            .clone();
        let mut pulls = self.pulls.lock().unwrap_or_else(|e| e.into_inner());
        if pulls.get(&key).is_some_and(|p| Arc::ptr_eq(p, &pulling)) {
            pulls.remove(&key);
        }
        outcome
    }

    /// `oci/` in the user's data directory (judged as `hookhost::data_dir`).
    pub fn default_dir() -> PathBuf {
        let workspaces = crate::config::env::workspaces_of(None);
        crate::config::env::data_dir_judged(&workspaces)
            .0
            .join("oci")
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn manifest_path(&self, hex: &str) -> PathBuf {
        self.dir.join("manifests").join(format!("{hex}.json"))
    }

    fn layer_path(&self, hex: &str) -> PathBuf {
        self.dir.join("layers").join(format!("{hex}.wasm"))
    }

    fn tag_path(&self, reference: &OciRef) -> PathBuf {
        self.dir
            .join("tags")
            .join(sha256_hex(reference.name().as_bytes()))
    }

    /// The manifest digest a tag-only reference had at its last pull, from the cache.
    pub fn tagged(&self, reference: &OciRef) -> Option<String> {
        let how = Open::read(256).no_follow().rule(Rule::Private);
        let (bytes, _) = read_checked(&self.tag_path(reference), &how).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let hex = text.lines().next()?.trim().to_string();
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
    }

    /// The cached artifact of `reference` (its pinned digest, or the digest its tag had at
    /// the last pull), with no registry asked: `None` when not cached. A cached manifest
    /// whose bytes no longer hash to its name is not used.
    ///
    /// # Errors
    ///
    /// The cached manifest is not a wasm artifact (cannot happen to one this host wrote).
    pub fn cached(&self, reference: &OciRef) -> Result<Option<CachedPlugin>, String> {
        let Some(hex) = reference.digest.clone().or_else(|| self.tagged(reference)) else {
            return Ok(None);
        };
        let how = Open::read(MANIFEST_CAP).no_follow().rule(Rule::Private);
        let bytes = match read_checked(&self.manifest_path(&hex), &how) {
            Ok((bytes, _)) => bytes,
            Err(_) => return Ok(None),
        };
        if sha256_hex(&bytes) != hex {
            return Ok(None);
        }
        let layer = layout::wasm_layer(
            &bytes,
            "application/vnd.oci.image.manifest.v1+json",
            self.layer_cap,
        )
        .map_err(|e| format!("the cached manifest of `{reference}`: {e}"))?;
        let path = self.layer_path(&layer.hex);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        Ok(Some(CachedPlugin {
            path,
            layer: layer.hex,
            manifest: hex,
        }))
    }

    /// The cached artifact of `reference`, pulled first when it is not cached.
    ///
    /// # Errors
    ///
    /// As [`OciStore::pull`].
    pub async fn cached_or_pull(&self, reference: &OciRef) -> Result<CachedPlugin, String> {
        if let Some(cached) = self.cached(reference)? {
            return Ok(cached);
        }
        self.pull_once(reference).await
    }

    /// Pulls `reference` from its registry: the manifest (at most [`MANIFEST_CAP`] bytes,
    /// hashing to the pinned digest, a wasm artifact), then its layer (at most the plugin
    /// cap, hashing to the layer's digest), then any signature referrer; only then are
    /// they written to the cache (layer first, manifest last: a manifest in the cache
    /// means its layer is there).
    ///
    /// # Errors
    ///
    /// The registry cannot be reached or refuses, or what it sent is refused, named.
    pub async fn pull(&self, reference: &OciRef) -> Result<CachedPlugin, String> {
        let registry = client::Registry::new(reference, auth::for_registry(&reference.registry))?;
        let wanted = match (&reference.digest, &reference.tag) {
            (Some(hex), _) => format!("sha256:{hex}"),
            (None, Some(tag)) => tag.clone(),
            (None, None) => return Err(format!("`{reference}` names neither a tag nor a digest")),
        };
        let accept = format!(
            "{MANIFEST_MEDIA_TYPE}, {}",
            layout::DOCKER_MANIFEST_MEDIA_TYPE
        );
        let (manifest, kind) = registry
            .manifest(&reference.repository, &wanted, &accept, MANIFEST_CAP)
            .await
            .map_err(|e| format!("pulling `{reference}`: {e}"))?
            .ok_or_else(|| {
                format!("pulling `{reference}`: the registry has no manifest `{wanted}`")
            })?;
        let hex = sha256_hex(&manifest);
        if let Some(pinned) = &reference.digest
            && *pinned != hex
        {
            return Err(format!(
                "pulling `{reference}`: the manifest the registry sent hashes to sha256:{hex}, \
                 not the pinned digest; nothing was cached"
            ));
        }
        let layer = layout::wasm_layer(&manifest, &kind, self.layer_cap)
            .map_err(|e| format!("pulling `{reference}`: {e}; nothing was cached"))?;
        let bytes = registry
            // The manifest's size is the cap (itself within the plugin cap): a registry
            // that sends more is cut there, not at the plugin cap.
            .blob(
                &reference.repository,
                &layer.hex,
                layer.size.min(self.layer_cap),
            )
            .await
            .map_err(|e| format!("pulling `{reference}`: layer: {e}; nothing was cached"))?;
        let got = sha256_hex(&bytes);
        if got != layer.hex || bytes.len() as u64 != layer.size {
            return Err(format!(
                "pulling `{reference}`: the layer the registry sent ({} bytes, sha256:{got}) \
                 does not match the manifest's sha256:{} ({} bytes); nothing was cached",
                bytes.len(),
                layer.hex,
                layer.size
            ));
        }
        let signature = match layout::pull_signature(&registry, &reference.repository, &hex).await {
            Ok(signature) => signature,
            Err(e) => {
                tracing::warn!("pulling `{reference}`: its signature referrers: {e}");
                None
            }
        };
        let path = self.layer_path(&layer.hex);
        let write = |path: &Path, bytes: &[u8]| {
            write_atomically(path, bytes).map_err(|e| format!("caching `{reference}`: {e}"))
        };
        write(&path, &bytes)?;
        // A layer's signature is written once: a later pull of another manifest naming the
        // same layer (another repository, another registry) cannot replace the `.sig`
        // that other projects' allowlists read.
        let signature_path = crate::policy::allowlist::signature_path(&path);
        if let Some(signature) = signature
            && std::fs::symlink_metadata(&signature_path).is_err()
        {
            write(&signature_path, &signature)?;
        }
        write(&self.manifest_path(&hex), &manifest)?;
        if reference.tag.is_some() {
            write(
                &self.tag_path(reference),
                format!("{hex}\n{}\n", reference.name()).as_bytes(),
            )?;
        }
        Ok(CachedPlugin {
            path,
            layer: layer.hex,
            manifest: hex,
        })
    }

    /// The digest `reference`'s tag names in its registry now (for `validate` and
    /// `plugin lock`); `None` when the registry has no such tag.
    ///
    /// # Errors
    ///
    /// The registry cannot be reached or refuses.
    pub async fn resolve(&self, reference: &OciRef) -> Result<Option<String>, String> {
        let registry = client::Registry::new(reference, auth::for_registry(&reference.registry))?;
        let Some(tag) = &reference.tag else {
            return Ok(reference.digest.clone());
        };
        let accept = format!(
            "{MANIFEST_MEDIA_TYPE}, {}",
            layout::DOCKER_MANIFEST_MEDIA_TYPE
        );
        Ok(registry
            .manifest(&reference.repository, tag, &accept, MANIFEST_CAP)
            .await?
            .map(|(bytes, _)| sha256_hex(&bytes)))
    }

    /// Pushes the component `wasm` as a wasm artifact under `reference`'s tag (or by its
    /// digest alone), and `signature` (a `.sig` file's bytes) as a referrer of it. Returns
    /// the manifest's sha256.
    ///
    /// # Errors
    ///
    /// The registry cannot be reached or refuses, named.
    pub async fn push(
        &self,
        reference: &OciRef,
        wasm: &[u8],
        signature: Option<&[u8]>,
    ) -> Result<String, String> {
        let registry = client::Registry::new(reference, auth::for_registry(&reference.registry))?;
        layout::push(&registry, reference, wasm, signature)
            .await
            .map_err(|e| format!("pushing `{reference}`: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_answers_only_for_a_manifest_that_hashes_to_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = OciStore::new(dir.path().join("oci"), 1 << 20);
        let layer = b"component";
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": format!("sha256:{}", sha256_hex(layer)), "size": layer.len()}],
        }))
        .unwrap();
        let hex = sha256_hex(&manifest);
        let reference =
            OciRef::parse(&format!("oci://localhost:5000/a/b:v1@sha256:{hex}")).unwrap();
        assert_eq!(store.cached(&reference).unwrap(), None, "empty");
        write_atomically(&store.layer_path(&sha256_hex(layer)), layer).unwrap();
        write_atomically(&store.manifest_path(&hex), &manifest).unwrap();
        let cached = store.cached(&reference).unwrap().unwrap();
        assert_eq!(cached.layer, sha256_hex(layer));
        assert_eq!(cached.manifest, hex);
        assert_eq!(std::fs::read(&cached.path).unwrap(), layer);
        // A manifest changed in the cache is not used.
        let mut changed = manifest.clone();
        changed.push(b' ');
        write_atomically(&store.manifest_path(&hex), &changed).unwrap();
        assert_eq!(store.cached(&reference).unwrap(), None);
        // A tag alone finds nothing until a pull records it.
        let tagged = OciRef::parse("oci://localhost:5000/a/b:v1").unwrap();
        assert_eq!(store.cached(&tagged).unwrap(), None);
    }
}
