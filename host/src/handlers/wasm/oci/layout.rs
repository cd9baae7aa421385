//! The CNCF wasm artifact layout (what a manifest must say to be a plugin), and hookhost's
//! signature referrer: an artifact of type [`SIGNATURE_ARTIFACT_TYPE`] whose one layer
//! is the `.sig` file's text and whose `subject` is the plugin's manifest.

use serde_json::{Value, json};

use super::client::Registry;
use super::sha256_hex;
use crate::policy::oci::OciRef;

/// The manifest of an OCI artifact.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// A list of manifests (the referrers of one).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The config of a wasm artifact (CNCF TAG Runtime's wasm OCI artifact layout).
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer of a wasm artifact: the component's bytes.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The artifact type of hookhost's signature referrers.
pub const SIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.hookhost.signature.v1";
/// The layer of a signature referrer: the `.sig` file (the ed25519 signature over the
/// component's sha256, hex).
const SIGNATURE_LAYER_MEDIA_TYPE: &str = "application/vnd.hookhost.signature.v1+ed25519";
/// The config of a signature referrer: `{}`.
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// Docker's own manifest type: asked for only to refuse it by name.
pub(super) const DOCKER_MANIFEST_MEDIA_TYPE: &str =
    "application/vnd.docker.distribution.manifest.v2+json";

/// The largest manifest read (a wasm artifact's is a few hundred bytes).
pub const MANIFEST_CAP: u64 = 64 << 10;

/// The largest signature layer read (a `.sig` is 128 hex digits).
const SIGNATURE_CAP: u64 = 4096;

/// The most referrers looked at for a signature.
const MOST_REFERRERS: usize = 16;

/// The wasm layer a manifest names.
pub(super) struct Layer {
    pub(super) hex: String,
    pub(super) size: u64,
}

/// The one wasm layer of a wasm artifact's manifest `bytes` (sent as `content_type`),
/// refusing anything else: another manifest type, another config type, other layers, a
/// layer above `cap` bytes, a digest that is not sha256.
pub(super) fn wasm_layer(bytes: &[u8], content_type: &str, cap: u64) -> Result<Layer, String> {
    let manifest: Value =
        serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    let media_type = manifest
        .get("mediaType")
        .and_then(Value::as_str)
        .unwrap_or(content_type.split(';').next().unwrap_or_default().trim());
    if media_type != MANIFEST_MEDIA_TYPE {
        return Err(format!(
            "the manifest's media type is `{}`, not `{MANIFEST_MEDIA_TYPE}` (not a wasm artifact)",
            crate::text::escape(media_type)
        ));
    }
    if manifest.get("schemaVersion").and_then(Value::as_u64) != Some(2) {
        return Err("the manifest's `schemaVersion` is not 2".into());
    }
    let config = manifest
        .pointer("/config/mediaType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if config != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "the config's media type is `{}`, not `{CONFIG_MEDIA_TYPE}` (not a wasm artifact)",
            crate::text::escape(config)
        ));
    }
    let layers = manifest
        .get("layers")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let [layer] = layers else {
        return Err(format!(
            "the manifest has {} layers, not one `{LAYER_MEDIA_TYPE}` layer",
            layers.len()
        ));
    };
    let kind = layer
        .get("mediaType")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if kind != LAYER_MEDIA_TYPE {
        return Err(format!(
            "the layer's media type is `{}`, not `{LAYER_MEDIA_TYPE}`",
            crate::text::escape(kind)
        ));
    }
    let hex = digest_hex(layer).ok_or("the layer's digest is not `sha256:` and 64 hex digits")?;
    let size = layer
        .get("size")
        .and_then(Value::as_u64)
        .ok_or("the layer has no size")?;
    if size > cap {
        return Err(format!(
            "the layer is {size} bytes, above the plugin cap of {cap} (`HOOKHOST_MAX_PLUGIN_MB`)"
        ));
    }
    Ok(Layer { hex, size })
}

/// The hex of a descriptor's `sha256:` digest.
fn digest_hex(descriptor: &Value) -> Option<String> {
    let hex = descriptor
        .get("digest")?
        .as_str()?
        .strip_prefix("sha256:")?;
    (hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then(|| hex.to_string())
}

/// A descriptor of `bytes` as `media_type`.
fn descriptor(media_type: &str, bytes: &[u8]) -> Value {
    json!({
        "mediaType": media_type,
        "digest": format!("sha256:{}", sha256_hex(bytes)),
        "size": bytes.len(),
    })
}

/// The first signature referrer of manifest `hex` that the registry lists: its `.sig`
/// bytes. Each read bounded; a referrer whose subject is another manifest is skipped.
pub(super) async fn pull_signature(
    registry: &Registry,
    repository: &str,
    hex: &str,
) -> Result<Option<Vec<u8>>, String> {
    let Some(index) = registry.referrers(repository, hex).await? else {
        return Ok(None);
    };
    let index: Value =
        serde_json::from_slice(&index).map_err(|e| format!("the referrers are not JSON: {e}"))?;
    let entries = index
        .get("manifests")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for entry in entries
        .iter()
        .filter(|e| e.get("artifactType").and_then(Value::as_str) == Some(SIGNATURE_ARTIFACT_TYPE))
        .take(MOST_REFERRERS)
    {
        let Some(referrer) = digest_hex(entry) else {
            continue;
        };
        let Some((bytes, _)) = registry
            .manifest(
                repository,
                &format!("sha256:{referrer}"),
                MANIFEST_MEDIA_TYPE,
                MANIFEST_CAP,
            )
            .await?
        else {
            continue;
        };
        if sha256_hex(&bytes) != referrer {
            continue;
        }
        let Ok(manifest) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if manifest.get("subject").and_then(digest_hex).as_deref() != Some(hex) {
            continue;
        }
        let Some(layer) = manifest.pointer("/layers/0") else {
            continue;
        };
        if layer.get("mediaType").and_then(Value::as_str) != Some(SIGNATURE_LAYER_MEDIA_TYPE) {
            continue;
        }
        let Some(layer_hex) = digest_hex(layer) else {
            continue;
        };
        let signature = registry.blob(repository, &layer_hex, SIGNATURE_CAP).await?;
        if sha256_hex(&signature) == layer_hex {
            return Ok(Some(signature));
        }
    }
    Ok(None)
}

/// Pushes the artifact (config, layer, manifest under the tag or by digest) and the
/// signature referrer; returns the manifest's sha256.
pub(super) async fn push(
    registry: &Registry,
    reference: &OciRef,
    wasm: &[u8],
    signature: Option<&[u8]>,
) -> Result<String, String> {
    let repository = &reference.repository;
    let layer_digest = format!("sha256:{}", sha256_hex(wasm));
    let config = serde_json::to_vec(&json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    }))
    .map_err(|e| e.to_string())?;
    registry.push_blob(repository, &config).await?;
    registry.push_blob(repository, wasm).await?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": CONFIG_MEDIA_TYPE,
        "config": descriptor(CONFIG_MEDIA_TYPE, &config),
        "layers": [descriptor(LAYER_MEDIA_TYPE, wasm)],
    }))
    .map_err(|e| e.to_string())?;
    let hex = sha256_hex(&manifest);
    if let Some(pinned) = &reference.digest
        && *pinned != hex
    {
        return Err(format!(
            "the artifact's manifest is sha256:{hex}, not the digest the reference pins"
        ));
    }
    let target = reference
        .tag
        .clone()
        .unwrap_or_else(|| format!("sha256:{hex}"));
    registry
        .push_manifest(repository, &target, MANIFEST_MEDIA_TYPE, manifest.clone())
        .await?;
    if let Some(signature) = signature {
        push_signature(registry, repository, &manifest, signature).await?;
    }
    Ok(hex)
}

/// Pushes `signature` as a referrer of `subject` (a manifest's bytes); where the registry
/// keeps no referrers (no `OCI-Subject` answer), also adds it to the `sha256-<hex>` tag's
/// index, the distribution spec's fallback.
async fn push_signature(
    registry: &Registry,
    repository: &str,
    subject: &[u8],
    signature: &[u8],
) -> Result<(), String> {
    let empty = b"{}";
    registry.push_blob(repository, empty).await?;
    registry.push_blob(repository, signature).await?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": SIGNATURE_ARTIFACT_TYPE,
        "config": descriptor(EMPTY_MEDIA_TYPE, empty),
        "layers": [descriptor(SIGNATURE_LAYER_MEDIA_TYPE, signature)],
        "subject": descriptor(MANIFEST_MEDIA_TYPE, subject),
    }))
    .map_err(|e| e.to_string())?;
    let hex = sha256_hex(&manifest);
    let kept = registry
        .push_manifest(
            repository,
            &format!("sha256:{hex}"),
            MANIFEST_MEDIA_TYPE,
            manifest.clone(),
        )
        .await
        .map_err(|e| format!("the signature referrer: {e}"))?;
    if kept {
        return Ok(());
    }
    let subject_hex = sha256_hex(subject);
    let tag = format!("sha256-{subject_hex}");
    let mut entries = match registry
        .manifest(repository, &tag, INDEX_MEDIA_TYPE, MANIFEST_CAP)
        .await?
    {
        Some((bytes, _)) => serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.get("manifests").and_then(Value::as_array).cloned())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut entry = descriptor(MANIFEST_MEDIA_TYPE, &manifest);
    entry["artifactType"] = SIGNATURE_ARTIFACT_TYPE.into();
    entries.retain(|e| e.get("digest") != entry.get("digest"));
    entries.insert(0, entry);
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": entries,
    }))
    .map_err(|e| e.to_string())?;
    registry
        .push_manifest(repository, &tag, INDEX_MEDIA_TYPE, index)
        .await
        .map_err(|e| format!("the referrers tag `{tag}`: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": config, "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
            "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn only_a_one_layer_wasm_artifact_under_the_cap_is_a_plugin() {
        let layer = |kind: &str, size: u64| json!({"mediaType": kind, "digest": format!("sha256:{}", "a".repeat(64)), "size": size});
        let good = manifest(CONFIG_MEDIA_TYPE, json!([layer(LAYER_MEDIA_TYPE, 10)]));
        assert_eq!(wasm_layer(&good, "", 100).unwrap().size, 10);
        for (bytes, words) in [
            (manifest("application/vnd.oci.image.config.v1+json", json!([layer(LAYER_MEDIA_TYPE, 10)])), "config's media type"),
            (manifest(CONFIG_MEDIA_TYPE, json!([layer("application/vnd.oci.image.layer.v1.tar+gzip", 10)])), "layer's media type"),
            (manifest(CONFIG_MEDIA_TYPE, json!([])), "0 layers"),
            (manifest(CONFIG_MEDIA_TYPE, json!([layer(LAYER_MEDIA_TYPE, 101)])), "above the plugin cap"),
            (b"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\"}".to_vec(), "not a wasm artifact"),
            (b"[".to_vec(), "not JSON"),
        ] {
            let e = wasm_layer(&bytes, "", 100).err().unwrap();
            assert!(e.contains(words), "{e}");
        }
    }
}
