//! The managed plugin allowlist: wasm plugins admitted by sha256, or by a detached
//! ed25519 signature from a listed key.
//!
//! A signature is the file `PLUGIN.wasm.sig` beside the plugin: the 64-byte ed25519
//! signature, in hex or base64, over the 32 raw bytes of the sha256 of the plugin file.
//! Signing the digest (not the file) lets the host verify the very digest it computed from
//! the bytes it compiles, so what is verified is what runs.
//!
//! Everything here is pure: the sandbox reads the plugin (once) and its `.sig`, and asks
//! [`PluginAllowlist::admit`].

use std::path::{Path, PathBuf};

use base64::Engine as _;
use ed25519_dalek::{Signature, Signer};
pub use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::config::schema::RawAllowEntry;

/// The allowlist of managed policy, compiled.
#[derive(Debug, Clone, Default)]
pub struct PluginAllowlist {
    digests: Vec<(String, Option<String>)>,
    keys: Vec<(VerifyingKey, String, Option<String>)>,
    required: bool,
}

/// Why a plugin was admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// `requireAllowlistedPlugins` is not set: every plugin may run.
    NotRequired,
    /// Its digest is listed (with the entry's name, if any).
    Digest(Option<String>),
    /// Its signature verifies under a listed key (hex), with the entry's name.
    Signature(String, Option<String>),
}

impl PluginAllowlist {
    /// Compiles the `pluginAllowlist` entries of managed policy. Each entry is
    /// `(file, index, entry)`; a malformed entry is returned as `(file, JSON path,
    /// message)` and left out (an allowlist only ever admits less because of it).
    pub fn new(
        entries: &[(String, usize, RawAllowEntry)],
        required: bool,
    ) -> (PluginAllowlist, Vec<(String, String, String)>) {
        let mut list = PluginAllowlist {
            required,
            ..PluginAllowlist::default()
        };
        let mut errors = Vec::new();
        for (location, index, entry) in entries {
            let path = format!("$.pluginAllowlist[{index}]");
            match (&entry.sha256, &entry.public_key) {
                (Some(sha), None) => {
                    if sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()) {
                        list.digests
                            .push((sha.to_ascii_lowercase(), entry.name.clone()));
                    } else {
                        errors.push((
                            location.clone(),
                            format!("{path}.sha256"),
                            format!("`{sha}` is not 64 hex digits"),
                        ));
                    }
                }
                (None, Some(key)) => match parse_public_key(key) {
                    Ok(k) => list
                        .keys
                        .push((k, hex::encode(k.as_bytes()), entry.name.clone())),
                    Err(e) => errors.push((location.clone(), format!("{path}.publicKey"), e)),
                },
                _ => errors.push((
                    location.clone(),
                    path,
                    "an entry names exactly one of `sha256` and `publicKey`".into(),
                )),
            }
        }
        (list, errors)
    }

    /// Whether `requireAllowlistedPlugins` is set.
    pub fn required(&self) -> bool {
        self.required
    }

    /// Whether admission needs the plugin's signature file: required, and the digest is
    /// not listed, and some key is.
    pub fn needs_signature(&self, digest: &str) -> bool {
        self.required && !self.lists_digest(digest) && !self.keys.is_empty()
    }

    fn lists_digest(&self, digest: &str) -> bool {
        self.digests
            .iter()
            .any(|(d, _)| d.eq_ignore_ascii_case(digest))
    }

    /// Decides whether the plugin at `plugin` whose bytes have sha256 `digest` (hex) may
    /// be compiled and run. `signature` is the content of its `.sig` file: `None` when
    /// there is none, `Some(Err)` when it could not be read.
    ///
    /// # Errors
    ///
    /// The refusal, naming the plugin, its digest and why no entry admits it.
    pub fn admit(
        &self,
        plugin: &Path,
        digest: &str,
        signature: Option<Result<Vec<u8>, String>>,
    ) -> Result<Admission, String> {
        if !self.required {
            return Ok(Admission::NotRequired);
        }
        if let Some((_, name)) = self
            .digests
            .iter()
            .find(|(d, _)| d.eq_ignore_ascii_case(digest))
        {
            return Ok(Admission::Digest(name.clone()));
        }
        let refused = |why: String| {
            Err(format!(
                "plugin `{}` refused before compiling: sha256 {digest} is not in managed \
                 `pluginAllowlist` and {why} (`requireAllowlistedPlugins` is set)",
                plugin.display()
            ))
        };
        let sig_path = signature_path(plugin);
        let shown = sig_path.display();
        if self.keys.is_empty() {
            return refused("the allowlist names no signing keys".into());
        }
        let bytes = match signature {
            None => return refused(format!("it has no signature `{shown}`")),
            Some(Err(e)) => return refused(format!("its signature `{shown}` is unreadable: {e}")),
            Some(Ok(bytes)) => bytes,
        };
        let signature = match parse_signature(&bytes) {
            Ok(s) => s,
            Err(e) => return refused(format!("its signature `{shown}` is malformed: {e}")),
        };
        let Some(message) = digest_bytes(digest) else {
            return refused(format!("its digest `{digest}` is not sha256 hex"));
        };
        for (key, key_hex, name) in &self.keys {
            if key.verify_strict(&message, &signature).is_ok() {
                return Ok(Admission::Signature(key_hex.clone(), name.clone()));
            }
        }
        refused(format!(
            "its signature `{shown}` does not verify under any allowlisted key (signed by an \
             unknown key, or the plugin or the signature was altered)"
        ))
    }
}

/// Where the detached signature of a plugin lives: `PLUGIN.wasm.sig`.
pub fn signature_path(plugin: &Path) -> PathBuf {
    let mut name = plugin.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

fn digest_bytes(digest: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(digest).ok()?;
    bytes.try_into().ok()
}

/// Decodes hex or base64 (standard, padded or not) text, ignoring surrounding whitespace.
fn decode_text(text: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not text".to_string())?;
    let text = text.trim();
    if let Ok(bytes) = hex::decode(text) {
        return Ok(bytes);
    }
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
        .map_err(|_| "neither hex nor base64".to_string())
}

/// Parses a detached signature: 64 bytes in hex or base64.
///
/// # Errors
///
/// Not hex or base64, or not 64 bytes.
pub fn parse_signature(text: &[u8]) -> Result<Signature, String> {
    let bytes = decode_text(text)?;
    let bytes: [u8; 64] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{} bytes, expected 64", b.len()))?;
    Ok(Signature::from_bytes(&bytes))
}

/// Parses an ed25519 public key: 32 bytes in hex or base64.
///
/// # Errors
///
/// Not hex or base64, not 32 bytes, or not a point on the curve.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, String> {
    let bytes = decode_text(text.as_bytes()).map_err(|e| format!("`{text}`: {e}"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("`{text}`: {} bytes, expected 32", b.len()))?;
    VerifyingKey::from_bytes(&bytes)
        .map_err(|e| format!("`{text}` is not an ed25519 public key: {e}"))
}

/// Parses a private key file written by `hookhost keygen`: the 32-byte seed in hex or
/// base64.
///
/// # Errors
///
/// Not hex or base64, or not 32 bytes.
pub fn parse_signing_key(text: &[u8]) -> Result<SigningKey, String> {
    let bytes = decode_text(text)?;
    let seed: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{} bytes, expected a 32-byte ed25519 seed", b.len()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Signs a plugin digest (hex sha256); returns the signature as hex, the content of a
/// `.sig` file.
///
/// # Errors
///
/// `digest` is not 64 hex digits.
pub fn sign_digest(key: &SigningKey, digest: &str) -> Result<String, String> {
    let message = digest_bytes(digest).ok_or_else(|| format!("`{digest}` is not sha256 hex"))?;
    Ok(hex::encode(key.sign(&message).to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const OTHER: &str = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn list(entries: Vec<RawAllowEntry>, required: bool) -> PluginAllowlist {
        let entries: Vec<_> = entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| ("managed.json".to_string(), i, e))
            .collect();
        let (list, errors) = PluginAllowlist::new(&entries, required);
        assert!(errors.is_empty(), "{errors:?}");
        list
    }

    fn by_key(k: &SigningKey) -> RawAllowEntry {
        RawAllowEntry {
            public_key: Some(hex::encode(k.verifying_key().as_bytes())),
            ..Default::default()
        }
    }

    #[test]
    fn admission_table() {
        let plugin = Path::new("/p/gate.wasm");
        let good = sign_digest(&key(1), DIGEST).unwrap().into_bytes();
        let unknown = sign_digest(&key(2), DIGEST).unwrap().into_bytes();
        let other_digest = sign_digest(&key(1), OTHER).unwrap().into_bytes();
        let mut tampered = hex::decode(&good).unwrap();
        tampered[10] ^= 1;
        let tampered = hex::encode(tampered).into_bytes();
        let b64 = base64::engine::general_purpose::STANDARD
            .encode(hex::decode(&good).unwrap())
            .into_bytes();
        let by_digest = RawAllowEntry {
            sha256: Some(DIGEST.to_uppercase()),
            name: Some("gate".into()),
            ..Default::default()
        };
        type Sig = Option<Result<Vec<u8>, String>>;
        // (entries, required, digest, signature, admitted, refusal contains)
        type Row<'a> = (
            Vec<RawAllowEntry>,
            bool,
            &'a str,
            Sig,
            Option<Admission>,
            &'a str,
        );
        let rows: Vec<Row> = vec![
            (
                vec![],
                false,
                DIGEST,
                None,
                Some(Admission::NotRequired),
                "",
            ),
            (
                vec![by_digest.clone()],
                true,
                DIGEST,
                None,
                Some(Admission::Digest(Some("gate".into()))),
                "",
            ),
            (
                vec![by_digest.clone()],
                true,
                OTHER,
                None,
                None,
                "no signing keys",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Ok(good.clone())),
                Some(Admission::Signature(
                    hex::encode(key(1).verifying_key().as_bytes()),
                    None,
                )),
                "",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Ok(b64)),
                Some(Admission::Signature(
                    hex::encode(key(1).verifying_key().as_bytes()),
                    None,
                )),
                "",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                None,
                None,
                "has no signature `/p/gate.wasm.sig`",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Ok(unknown)),
                None,
                "does not verify",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Ok(tampered)),
                None,
                "does not verify",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Ok(other_digest)),
                None,
                "does not verify",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Ok(b"zz".to_vec())),
                None,
                "malformed",
            ),
            (
                vec![by_key(&key(1))],
                true,
                DIGEST,
                Some(Err("permission denied".into())),
                None,
                "unreadable: permission denied",
            ),
        ];
        for (entries, required, digest, sig, admitted, refusal) in rows {
            let got = list(entries.clone(), required).admit(plugin, digest, sig);
            match (admitted, got) {
                (Some(want), Ok(got)) => assert_eq!(want, got, "{entries:?}"),
                (None, Err(message)) => {
                    assert!(message.contains(refusal), "{message}");
                    assert!(message.contains(digest), "{message}");
                    assert!(message.contains("/p/gate.wasm"), "{message}");
                }
                (want, got) => panic!("{entries:?} {digest}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn malformed_entries_are_reported_and_left_out() {
        let entries = vec![
            (
                "m.json".to_string(),
                0,
                RawAllowEntry {
                    sha256: Some("abc".into()),
                    ..Default::default()
                },
            ),
            (
                "m.json".to_string(),
                1,
                RawAllowEntry {
                    public_key: Some("00".into()),
                    ..Default::default()
                },
            ),
            ("m.json".to_string(), 2, RawAllowEntry::default()),
        ];
        let (list, errors) = PluginAllowlist::new(&entries, true);
        assert_eq!(errors.len(), 3);
        assert_eq!(errors[0].1, "$.pluginAllowlist[0].sha256");
        assert_eq!(errors[1].1, "$.pluginAllowlist[1].publicKey");
        assert!(errors[2].2.contains("exactly one"));
        assert!(list.admit(Path::new("x.wasm"), DIGEST, None).is_err());
    }

    #[test]
    fn keys_round_trip_through_text() {
        let k = key(7);
        let parsed = parse_signing_key(hex::encode(k.to_bytes()).as_bytes()).unwrap();
        assert_eq!(parsed.verifying_key(), k.verifying_key());
        let public = base64::engine::general_purpose::STANDARD.encode(k.verifying_key().as_bytes());
        assert_eq!(parse_public_key(&public).unwrap(), k.verifying_key());
        assert!(parse_signing_key(b"not a key").is_err());
        assert_eq!(
            signature_path(Path::new("/a/b.wasm")),
            Path::new("/a/b.wasm.sig")
        );
    }
}
