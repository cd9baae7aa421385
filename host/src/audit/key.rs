//! The host's audit key: the ed25519 key that signs the chain's genesis and checkpoint
//! lines (`audit/chain.rs`). It is `audit.key` in the data directory (a host-owned place
//! no plugin grant may reach), created on first use with mode 0600, in the format of
//! `hookhost keygen` (the 32-byte seed in hex). An embedder, or a test, may name another
//! file ([`super::AuditLog::with_key_file`]).
//!
//! The file is opened through the one reader ([`crate::config::file::open_checked`])
//! without following a symlink and held to [`Rule::Private`]: a key that is a symlink,
//! that is not this user's, or that its group or others may read or write, is refused
//! (never narrowed: who else could read it could sign). Two processes creating it at once
//! agree on one key: the one that locks it first writes it, the other reads it.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::config::file::{FileError, Open, Rule, open_checked};

/// The most bytes read from a key file (a seed in hex is 65).
const KEY_CAP: u64 = 4096;

/// `audit.key` in the user's data directory (`HOOKHOST_DATA_DIR`, else the platform's).
pub fn default_key_file() -> PathBuf {
    let workspaces = crate::config::env::workspaces_of(None);
    crate::config::env::data_dir_judged(&workspaces)
        .0
        .join("audit.key")
}

/// Opens the key file as the rules above say (`create`: created 0600 when absent).
fn open(path: &Path, create: bool) -> Result<File, FileError> {
    let how = Open::read(KEY_CAP)
        .no_follow()
        .rule(Rule::Private)
        .write(create.then_some(0o600));
    open_checked(path, &how).map(|(file, _)| file)
}

/// The key in `path`, created (with its directory, 0700) when there is none.
///
/// # Errors
///
/// The file is refused (a symlink, another user's, readable by others, not a regular
/// file), cannot be created, read or written, or does not hold a key; the message names
/// the file.
pub fn load_or_create(path: &Path) -> Result<SigningKey, String> {
    let shown = path.display();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    let file = open(path, true).map_err(|e| format!("refusing the audit key `{shown}`: {e}"))?;
    let _lock = super::Flock::exclusive(&file)
        .map_err(|e| format!("cannot lock the audit key `{shown}`: {e}"))?;
    let mut text = Vec::new();
    (&file)
        .take(KEY_CAP)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the audit key `{shown}`: {e}"))?;
    if !text.is_empty() {
        return crate::policy::allowlist::parse_signing_key(&text)
            .map_err(|e| format!("the audit key `{shown}` is not a private key: {e}"));
    }
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| format!("no randomness for the audit key: {e}"))?;
    (&file)
        .write_all(format!("{}\n", hex::encode(seed)).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write the audit key `{shown}`: {e}"))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The public half of the key in `path`, without creating it: `None` when there is no
/// key file.
///
/// # Errors
///
/// As [`load_or_create`], but an absent file is `Ok(None)`.
pub fn public_key(path: &Path) -> Result<Option<VerifyingKey>, String> {
    let shown = path.display();
    let file = match open(path, false) {
        Ok(file) => file,
        Err(FileError::NotFound) => return Ok(None),
        Err(e) => return Err(format!("refusing the audit key `{shown}`: {e}")),
    };
    let mut text = Vec::new();
    (&file)
        .take(KEY_CAP)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read the audit key `{shown}`: {e}"))?;
    if text.is_empty() {
        return Ok(None);
    }
    crate::policy::allowlist::parse_signing_key(&text)
        .map(|key| Some(key.verifying_key()))
        .map_err(|e| format!("the audit key `{shown}` is not a private key: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// Created 0600 on first use, the same key after; a key of another mode or a symlink
    /// is refused, not read.
    #[test]
    fn the_key_is_private_and_refused_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data/audit.key");
        assert!(public_key(&path).unwrap().is_none());
        let key = load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(load_or_create(&path).unwrap().to_bytes(), key.to_bytes());
        assert_eq!(public_key(&path).unwrap(), Some(key.verifying_key()));

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let refused = load_or_create(&path).unwrap_err();
        assert!(refused.contains("refusing the audit key"), "{refused}");
        assert!(public_key(&path).is_err());

        let link = dir.path().join("data/link.key");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let refused = load_or_create(&link).unwrap_err();
        assert!(refused.contains("symlink"), "{refused}");
    }
}
