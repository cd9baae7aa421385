//! The key that authenticates the compile cache's records, and the records it seals.
//!
//! Anything in the cache directory could have been written by someone else, so every
//! record the cache keeps (an artifact's sidecar, a digest memo, a `describe` memo) is
//! sealed with HMAC-SHA256 under a per-user key: whoever cannot read the key cannot write
//! a record that verifies. See [`super::cache`] for what the records say.

use std::io::Write;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::file::{FileError, effective_uid, read_regular};
use crate::session::private_dir;

/// The largest record (sidecar, memo, key) the cache reads.
pub(super) const MAX_RECORD_BYTES: u64 = 64 * 1024;

/// The first line of every authenticated record: a new format gets a new tag, so that
/// records of another format never verify.
const RECORD_TAG: &str = "hookhost-cache-2";

/// The per-user key that authenticates cache records: 32 random bytes in
/// `<cache>/auth.key`, created 0600 by the first hookhost that uses the directory and
/// accepted only when it is a regular file owned by this user that no one else may read
/// or write.
#[derive(Clone)]
pub(super) struct CacheKey([u8; 32]);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey(…)")
    }
}

impl CacheKey {
    /// The MAC of `fields`, each ended by a newline, after the record tag.
    fn mac(&self, fields: &[&str]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key size");
        mac.update(RECORD_TAG.as_bytes());
        mac.update(b"\n");
        for field in fields {
            mac.update(field.as_bytes());
            mac.update(b"\n");
        }
        mac
    }

    /// A record: the tag, the fields, and their MAC, one per line.
    pub(super) fn seal(&self, fields: &[&str]) -> String {
        let tag = hex::encode(self.mac(fields).finalize().into_bytes());
        let mut text = format!("{RECORD_TAG}\n");
        for field in fields {
            text.push_str(field);
            text.push('\n');
        }
        text.push_str(&tag);
        text.push('\n');
        text
    }

    /// The fields of a record sealed by [`CacheKey::seal`] with `count` fields, if its
    /// MAC verifies (in constant time).
    pub(super) fn open<'t>(&self, text: &'t str, count: usize) -> Option<Vec<&'t str>> {
        let mut lines = text.lines();
        if lines.next()? != RECORD_TAG {
            return None;
        }
        let fields: Vec<&str> = lines.by_ref().take(count).collect();
        let tag = hex::decode(lines.next()?).ok()?;
        if fields.len() != count || lines.next().is_some() {
            return None;
        }
        self.mac(&fields).verify_slice(&tag).ok()?;
        Some(fields)
    }

    /// The key of the cache directory `dir`, created when absent.
    pub(super) fn load_or_create(dir: &Path) -> Result<CacheKey, String> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let path = dir.join("auth.key");
        let read = |path: &Path| -> Result<Option<CacheKey>, String> {
            match read_regular(path, MAX_RECORD_BYTES) {
                Err(FileError::NotFound) => Ok(None),
                Err(e) => Err(format!("{}: {e}", path.display())),
                Ok((bytes, meta)) => {
                    let me = effective_uid();
                    if crate::config::file::Rule::Private.judge(&meta).is_some() {
                        return Err(format!(
                            "{} is owned by uid {} with mode {:o}; it must be this user's ({me}) and 0600",
                            path.display(),
                            meta.uid(),
                            meta.mode() & 0o7777
                        ));
                    }
                    let key: [u8; 32] = hex::decode(String::from_utf8_lossy(&bytes).trim())
                        .ok()
                        .and_then(|k| k.try_into().ok())
                        .ok_or_else(|| format!("{} is not a key", path.display()))?;
                    Ok(Some(CacheKey(key)))
                }
            }
        };
        // The directory first: whoever owns it can swap what is in it, a key included.
        private_dir(dir).map_err(|e| e.to_string())?;
        if let Some(key) = read(&path)? {
            return Ok(key);
        }
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key).map_err(|e| format!("no randomness for a key: {e}"))?;
        // Written to a temporary file and linked into place, which fails when another
        // process got there first: then its key is the one.
        let tmp = dir.join(format!(".auth.key.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| f.write_all(hex::encode(key).as_bytes()));
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, &path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(CacheKey(key)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path)?
                .ok_or_else(|| format!("{} vanished while it was created", path.display())),
            Err(e) => Err(format!("cannot create {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_verify_only_under_their_key_and_untouched() {
        let key = CacheKey([7; 32]);
        let other = CacheKey([8; 32]);
        let record = key.seal(&["name", "digest", "stamp"]);
        assert_eq!(key.open(&record, 3), Some(vec!["name", "digest", "stamp"]));
        assert_eq!(other.open(&record, 3), None, "another key");
        assert_eq!(key.open(&record.replace("digest", "digesu"), 3), None);
        assert_eq!(key.open(&record, 2), None, "another shape");
        assert_eq!(key.open("hookhost-cache-2\nname\ndigest\nstamp\n", 3), None);
        let mut extra = record.clone();
        extra.push_str("more\n");
        assert_eq!(key.open(&extra, 3), None);
    }

    #[test]
    fn the_key_is_private_and_shared_by_later_processes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache_dir = dir.path().join("c");
        let first = CacheKey::load_or_create(&cache_dir).unwrap();
        let again = CacheKey::load_or_create(&cache_dir).unwrap();
        assert_eq!(first.0, again.0);
        let key = cache_dir.join("auth.key");
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A key others can read is not a secret any more: refused.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = CacheKey::load_or_create(&cache_dir).unwrap_err();
        assert!(e.contains("0600"), "{e}");
    }

    #[test]
    fn a_cache_directory_of_another_user_gets_no_key() {
        // Whoever owns the directory can replace what is in it: a key kept there would
        // authenticate nothing.
        if effective_uid() != 0 {
            eprintln!(
                "SKIPPED: a_cache_directory_of_another_user_gets_no_key: needs root to give a directory away"
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cache_dir = dir.path().join("c");
        std::fs::create_dir(&cache_dir).unwrap();
        std::os::unix::fs::chown(&cache_dir, Some(65534), Some(65534)).unwrap();
        let e = CacheKey::load_or_create(&cache_dir).unwrap_err();
        assert!(e.contains("belongs to uid 65534"), "{e}");
        assert!(!cache_dir.join("auth.key").exists());
    }
}
