//! The settings file on disk: reading it (refusing what cannot be written back exactly, or
//! should not be written through), rendering a value as the agent writes it, and writing
//! it back atomically with a backup, refusing when it changed meanwhile.

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use hookhost::config::file::{FileError, read_regular};
use hookhost::text::escape;

/// The largest settings file hookhost edits. Claude Code's are a few KiB.
const MAX_SETTINGS_BYTES: u64 = 4 << 20;
/// A settings file as read: its text, its parsed value, and what identifies the file.
pub(super) struct Settings {
    pub(super) path: PathBuf,
    /// `None`: the file does not exist yet.
    pub(super) original: Option<Original>,
    pub(super) value: Map<String, Value>,
}

pub(super) struct Original {
    pub(super) text: String,
    mode: u32,
    identity: (u64, u64, u64, i64, i64),
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64, u64, i64, i64) {
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    )
}

/// Reads and checks the settings file at `path`.
pub(super) fn read_settings(path: &Path, project_scope: bool) -> Result<Settings, String> {
    read_file(path, project_scope, true)
}

/// Reads and checks a file hookhost owns whole (OpenCode's plugin), as text: its
/// `value` is empty.
pub(super) fn read_text(path: &Path, project_scope: bool) -> Result<Settings, String> {
    read_file(path, project_scope, false)
}

/// Removes the file of `settings` (the plugin `install --opencode` wrote), after a
/// backup, unless it changed since it was read.
pub(super) fn remove_file(settings: &Settings) -> Result<PathBuf, String> {
    let shown = escape(&settings.path.display().to_string()).into_owned();
    let Some(original) = &settings.original else {
        return Err(format!("`{shown}` does not exist"));
    };
    if !is_unchanged(&settings.path, Some(original)) {
        return Err(format!(
            "`{shown}` changed while hookhost was editing it; nothing was removed"
        ));
    }
    let mut name = settings.path.file_name().unwrap_or_default().to_owned();
    name.push(".hookhost-backup");
    let backup = settings.path.with_file_name(name);
    std::fs::write(&backup, &original.text)
        .map_err(|e| format!("cannot write the backup of `{shown}`: {e}"))?;
    std::fs::remove_file(&settings.path).map_err(|e| format!("cannot remove `{shown}`: {e}"))?;
    Ok(backup)
}

fn read_file(path: &Path, project_scope: bool, json: bool) -> Result<Settings, String> {
    let shown = escape(&path.display().to_string()).into_owned();
    if let Some(dir) = path.parent()
        && project_scope
        && std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink())
    {
        return Err(format!(
            "`{}` is a symlink; hookhost does not write a project's settings through it (it \
             could lead anywhere, such as your user settings)",
            escape(&dir.display().to_string())
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            let target = std::fs::read_link(path)
                .map(|t| escape(&t.display().to_string()).into_owned())
                .unwrap_or_else(|_| "?".into());
            return Err(format!(
                "`{shown}` is a symlink (to `{target}`); hookhost does not write through it: \
                 pass the file it points to with `--file`, or edit it by hand"
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Settings {
                path: path.to_path_buf(),
                original: None,
                value: Map::new(),
            });
        }
        Err(e) => return Err(format!("cannot read `{shown}`: {e}")),
    }
    let (bytes, meta) = read_regular(path, MAX_SETTINGS_BYTES).map_err(|e| match e {
        FileError::NotRegular(kind) => format!("`{shown}` is not a regular file (it is {kind})"),
        e => format!("cannot read `{shown}`: {e}"),
    })?;
    let refuse = |why: String| {
        format!(
            "`{shown}` {why}; hookhost does not rewrite a file it cannot keep exactly as it \
             is: add the drop-in by hand (see the book's chapter \"The Claude Code drop-in\", docs/book/src/drop-in.md)"
        )
    };
    let text = String::from_utf8(bytes).map_err(|e| refuse(format!("is not UTF-8 text ({e})")))?;
    if text.starts_with('\u{feff}') {
        return Err(refuse("starts with a byte-order mark".into()));
    }
    let mut value = if text.trim().is_empty() || !json {
        Value::Object(Map::new())
    } else {
        serde_json::from_str::<CheckedJson>(&text).map_err(|e| {
            refuse(format!(
                "is not plain JSON (comments and trailing commas are not JSON): {e}"
            ))
        })?;
        serde_json::from_str::<Value>(&text).map_err(|e| refuse(format!("is not JSON: {e}")))?
    };
    let Value::Object(map) = value.take() else {
        return Err(refuse("is not a JSON object".into()));
    };
    Ok(Settings {
        path: path.to_path_buf(),
        original: Some(Original {
            text,
            mode: meta.permissions().mode() & 0o7777,
            identity: identity(&meta),
        }),
        value: map,
    })
}

/// Validates JSON without keeping it: refuses duplicate keys (serde_json keeps the last
/// and drops the others) and integers too large to be kept exactly.
struct CheckedJson;

impl<'de> Deserialize<'de> for CheckedJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedJson)
    }
}

impl<'de> Visitor<'de> for CheckedJson {
    type Value = CheckedJson;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_i64<E>(self, _: i64) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_u64<E>(self, _: u64) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<CheckedJson, E> {
        // An integer beyond 64 bits arrives as a float and would be written back rounded.
        if v.fract() == 0.0 && v.abs() >= 9_007_199_254_740_992.0 {
            return Err(E::custom(format!(
                "the number {v} cannot be written back exactly"
            )));
        }
        Ok(CheckedJson)
    }
    fn visit_str<E>(self, _: &str) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_unit<E>(self) -> Result<CheckedJson, E> {
        Ok(CheckedJson)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CheckedJson, A::Error> {
        while seq.next_element::<CheckedJson>()?.is_some() {}
        Ok(CheckedJson)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CheckedJson, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key `{}`",
                    escape(&key)
                )));
            }
            map.next_value::<CheckedJson>()?;
        }
        Ok(CheckedJson)
    }
}
/// The text of `value` as Claude Code writes its settings (`JSON.stringify(v, null, 2)`),
/// so that the parts hookhost did not touch keep their bytes.
pub(super) fn render(value: &Map<String, Value>, trailing_newline: bool) -> Result<String, String> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    if trailing_newline {
        text.push('\n');
    }
    Ok(text)
}

/// Writes `text` to the settings file: a backup of the old file first, then a temporary
/// file in the same directory, complete and synced, with the old file's mode (0600 for a
/// new one: settings can hold tokens), swapped in by compare-and-swap, so that no other
/// writer's edit (an editor, Claude Code, another `hookhost install`) is ever lost:
///
/// 1. right before the swap, the file is read again and must still be the one read
///    (same device, inode, size, mtime) with the same bytes;
/// 2. the swap is `renameat2(RENAME_EXCHANGE)` (`RENAME_NOREPLACE` for a new file):
///    atomic, and it hands back the file it displaced;
/// 3. the displaced file must be the one read, with the same bytes; if another writer
///    replaced or rewrote it in between, the exchange is undone (their file back in
///    place) and nothing of hookhost's stays.
///
/// Each refusal names the file. Where the file system cannot exchange (`EINVAL`), step 1
/// is followed by a plain rename, and a writer in the microseconds between them can still
/// be overwritten.
pub(super) fn write_settings(settings: &Settings, text: &str) -> Result<Option<PathBuf>, String> {
    use std::io::Write;
    let path = &settings.path;
    let shown = escape(&path.display().to_string()).into_owned();
    let dir = path
        .parent()
        .ok_or_else(|| format!("`{shown}` has no directory"))?;
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "cannot create `{}`: {e}",
            escape(&dir.display().to_string())
        )
    })?;
    let staged = |bytes: &[u8], mode: u32| -> std::io::Result<tempfile::NamedTempFile> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".hookhost-")
            .tempfile_in(dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
        tmp.as_file().sync_all()?;
        Ok(tmp)
    };
    let mode = settings.original.as_ref().map_or(0o600, |o| o.mode);
    let mut backup = None;
    if let Some(original) = &settings.original {
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(".hookhost-backup");
        let backup_path = dir.join(name);
        staged(original.text.as_bytes(), original.mode)
            .and_then(|tmp| tmp.persist(&backup_path).map_err(|e| e.error))
            .map_err(|e| format!("cannot write the backup of `{shown}`: {e}"))?;
        backup = Some(backup_path);
    }
    let tmp = staged(text.as_bytes(), mode).map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    let ours = tmp.as_file().metadata().map(|m| (m.dev(), m.ino())).ok();
    let tmp = tmp.into_temp_path();
    let changed = || {
        format!(
            "`{shown}` changed while hookhost was editing it (another program wrote it); \
             nothing was written, run the command again"
        )
    };
    if !is_unchanged(path, settings.original.as_ref()) {
        return Err(changed());
    }
    let swap = |flags| rename2(&tmp, path, flags);
    match &settings.original {
        None => match swap(libc::RENAME_NOREPLACE) {
            Ok(()) => {
                tmp.keep().ok(); // the path is ours now; nothing is left to remove
                Ok(backup)
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(changed()),
            Err(e) if unsupported(&e) => {
                tmp.persist(path)
                    .map_err(|e| format!("cannot write `{shown}`: {}", e.error))?;
                Ok(backup)
            }
            Err(e) => Err(format!("cannot write `{shown}`: {e}")),
        },
        Some(original) => match swap(libc::RENAME_EXCHANGE) {
            Ok(()) => {
                // `tmp` now names the displaced file.
                if is_unchanged(&tmp, Some(original)) {
                    return Ok(backup); // dropping `tmp` removes the old file
                }
                match swap(libc::RENAME_EXCHANGE) {
                    // Theirs is back; `tmp` is ours, and removed.
                    Ok(())
                        if std::fs::symlink_metadata(&tmp)
                            .ok()
                            .map(|m| (m.dev(), m.ino()))
                            == ours =>
                    {
                        Err(changed())
                    }
                    // A third writer replaced ours meanwhile: theirs is kept too.
                    Ok(()) => {
                        let kept = tmp.keep().unwrap_or_default();
                        Err(format!(
                            "`{shown}` changed twice while hookhost was writing it; nothing of \
                             hookhost's was written, the other version is in `{}`",
                            escape(&kept.display().to_string())
                        ))
                    }
                    Err(e) => {
                        let kept = tmp.keep().unwrap_or_default();
                        Err(format!(
                            "`{shown}` changed while hookhost was writing it, and putting the \
                             other program's version back failed ({e}): it is in `{}`",
                            escape(&kept.display().to_string())
                        ))
                    }
                }
            }
            Err(e) if unsupported(&e) => {
                tmp.persist(path)
                    .map_err(|e| format!("cannot write `{shown}`: {}", e.error))?;
                Ok(backup)
            }
            Err(e) => Err(format!("cannot write `{shown}`: {e}")),
        },
    }
}

/// Whether `path` is still the file read (`None`: still absent): same identity and the
/// same bytes.
fn is_unchanged(path: &Path, original: Option<&Original>) -> bool {
    let Some(original) = original else {
        return std::fs::symlink_metadata(path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() && identity(&meta) == original.identity => {}
        _ => return false,
    }
    matches!(read_regular(path, MAX_SETTINGS_BYTES),
        Ok((bytes, meta)) if bytes == original.text.as_bytes()
            && identity(&meta) == original.identity)
}

/// `renameat2(from, to, flags)`.
fn rename2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths, relative to the working directory (both are
    // absolute here).
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A file system (or kernel) that cannot exchange or refuse to replace.
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_cannot_round_trip_is_refused() {
        for bad in [
            "{\"a\": 1, \"a\": 2}",
            "{\"a\": {\"b\": 1, \"b\": 1}}",
            "{\"n\": 123456789012345678901234567890}",
            "{\"a\": 1,}",
            "{// comment\n\"a\": 1}",
        ] {
            assert!(serde_json::from_str::<CheckedJson>(bad).is_err(), "{bad}");
        }
        for good in ["{\"a\": [1, 2.5, -3, 1e3, null, true, \"x\"]}", "{}", "[]"] {
            assert!(serde_json::from_str::<CheckedJson>(good).is_ok(), "{good}");
        }
    }
}
