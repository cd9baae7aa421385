//! `hookhost.lock`: the project's pins of its `oci://` plugins by manifest digest, written
//! by `hookhost plugin lock`. Read here, through the one reader, beside the project's
//! config files (its digest joins the workspace's trust fingerprint); the policy applies
//! the pins (`policy::oci::Pins`), so what runs is what was locked.

use std::path::Path;

use serde_json::Value;

use super::file::read_regular;

/// The lock file's name, at the top of the project.
pub const LOCK_FILE: &str = "hookhost.lock";

/// The longest lock file read.
pub const LOCK_CAP: u64 = 4 << 20;

/// A lock file as read: its location and its entries, or why it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLock {
    /// The file's path, for messages.
    pub location: String,
    /// `(reference, digest)` of each entry, as written (judged by the policy), or why the
    /// file cannot be read as a lock.
    pub entries: Result<Vec<(String, String)>, String>,
}

/// Reads `hookhost.lock` in `project_dir`: `None` when there is none; else the entries and
/// the sha256 of the bytes read.
pub fn read(project_dir: &Path) -> Option<(RawLock, Option<String>)> {
    let path = project_dir.join(LOCK_FILE);
    let location = path.display().to_string();
    let bytes = match read_regular(&path, LOCK_CAP) {
        Ok((bytes, _)) => bytes,
        Err(e) if e.is_not_found() && std::fs::symlink_metadata(&path).is_err() => return None,
        Err(e) => {
            let entries = Err(format!("cannot read it: {e}"));
            return Some((RawLock { location, entries }, None));
        }
    };
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(&bytes));
    let entries = parse(&bytes);
    Some((RawLock { location, entries }, Some(digest)))
}

fn parse(bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    let json: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if json.get("version").and_then(Value::as_u64) != Some(1) {
        return Err("`$.version` is not 1".into());
    }
    let plugins = json
        .get("plugins")
        .and_then(Value::as_array)
        .ok_or("`$.plugins` is not a list")?;
    plugins
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let field = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
            match (field("reference"), field("digest")) {
                (Some(reference), Some(digest)) => Ok((reference, digest)),
                _ => Err(format!("`$.plugins[{i}]` needs `reference` and `digest`")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_read_or_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None, "no lock");
        let lock = dir.path().join(LOCK_FILE);
        std::fs::write(
            &lock,
            r#"{"version": 1, "plugins": [{"reference": "oci://r/a:v1", "digest": "sha256:00"}]}"#,
        )
        .unwrap();
        let (raw, digest) = read(dir.path()).unwrap();
        assert_eq!(
            raw.entries,
            Ok(vec![("oci://r/a:v1".into(), "sha256:00".into())])
        );
        assert_eq!(digest.map(|d| d.len()), Some(64));
        for (bad, why) in [
            ("{", "not JSON"),
            (r#"{"plugins": []}"#, "version"),
            (
                r#"{"version": 1, "plugins": [{"reference": "x"}]}"#,
                "$.plugins[0]",
            ),
        ] {
            std::fs::write(&lock, bad).unwrap();
            let entries = read(dir.path()).unwrap().0.entries;
            assert!(
                entries.as_ref().is_err_and(|e| e.contains(why)),
                "{bad}: {entries:?}"
            );
        }
        // A lock that is a FIFO or a dangling symlink is a broken lock, not no lock.
        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink(dir.path().join("gone"), &lock).unwrap();
        assert!(read(dir.path()).unwrap().0.entries.is_err());
    }
}
