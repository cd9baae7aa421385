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
/// How many times, and how far apart, a settings file that reads as empty or as broken
/// JSON is read again before hookhost takes it as it is (Claude Code 2.1.332's own
/// settings writer: 5 times, 40 ms apart).
const PARTWAY_READS: u32 = 5;
const PARTWAY_PAUSE: std::time::Duration = std::time::Duration::from_millis(40);
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
    let read = || {
        read_regular(path, MAX_SETTINGS_BYTES).map_err(|e| match e {
            FileError::NotRegular(kind) => {
                format!("`{shown}` is not a regular file (it is {kind})")
            }
            e => format!("cannot read `{shown}`: {e}"),
        })
    };
    let (mut bytes, mut meta) = read()?;
    // A writer that rewrites the file in place (truncate, then write) leaves it empty or
    // cut short for a moment; taken as it is then, an empty file would be written back
    // as hookhost's entries alone, and the other writer's bytes would go to the file
    // hookhost displaced. Read again a few times first, as Claude Code does before its
    // own writes ("still empty, broken or locked").
    for _ in 0..PARTWAY_READS {
        let partway = json
            && (bytes.trim_ascii().is_empty()
                || serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err());
        if !partway {
            break;
        }
        std::thread::sleep(PARTWAY_PAUSE);
        (bytes, meta) = read()?;
    }
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
///    (same device, inode, size, mtime) with the same bytes, its identity looked at once
///    more as the last step before the swap;
/// 2. the swap is `renameat2(RENAME_EXCHANGE)` (`RENAME_NOREPLACE` for a new file):
///    atomic, and it hands back the file it displaced;
/// 3. the displaced file must be the one read, with the same bytes; if another writer
///    replaced or rewrote it in between, the exchange is undone (their file back in
///    place) and nothing of hookhost's stays.
///
/// What no writer that takes no lock can rule out (Claude Code takes none on its
/// settings): another writer's rename that lands in the microseconds between step 1's last
/// look and the swap. Step 3 puts that writer's file back, but while hookhost's version
/// was in place (one `lstat` long: a different file is seen without reading it) a third
/// program could have read it, and what that program writes later lacks the second
/// writer's edit. That undo is reported as its own refusal ("was replaced as hookhost
/// swapped" or "was replaced twice as hookhost swapped"), so a lost edit can always be
/// traced to one.
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
    let undone = || {
        format!(
            "`{shown}` was replaced as hookhost swapped its version in (another program \
             wrote it at that moment); the other program's file is back in place and nothing \
             was written, run the command again"
        )
    };
    // Both paths as the system call takes them before the last look, so that nothing but
    // the swap follows it.
    let (tmp_c, path_c) = match (c_path(&tmp), c_path(path)) {
        (Ok(tmp_c), Ok(path_c)) => (tmp_c, path_c),
        (Err(e), _) | (_, Err(e)) => return Err(format!("cannot write `{shown}`: {e}")),
    };
    if !is_unchanged(path, settings.original.as_ref()) {
        return Err(changed());
    }
    let swap = |flags| {
        race::point();
        rename2(&tmp_c, &path_c, flags)
    };
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
                        Err(undone())
                    }
                    // A third writer replaced ours meanwhile: theirs is kept too.
                    Ok(()) => {
                        let kept = tmp.keep().unwrap_or_default();
                        Err(format!(
                            "`{shown}` was replaced twice as hookhost swapped its version in \
                             (two other programs wrote it at that moment): the first one's \
                             file is back in place, the second one's is in `{}`; nothing of \
                             hookhost's was written",
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
/// same bytes. The identity is looked at first (another file is told without reading it,
/// which keeps the undo of step 3 of [`write_settings`] as early as it can be) and last
/// (so that the look right before the swap is one `lstat`).
fn is_unchanged(path: &Path, original: Option<&Original>) -> bool {
    let Some(original) = original else {
        return std::fs::symlink_metadata(path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
    };
    let same_file = || {
        std::fs::symlink_metadata(path)
            .is_ok_and(|meta| meta.is_file() && identity(&meta) == original.identity)
    };
    same_file()
        && matches!(read_regular(path, MAX_SETTINGS_BYTES),
            Ok((bytes, meta)) if bytes == original.text.as_bytes()
                && identity(&meta) == original.identity)
        && same_file()
}

/// Where a test makes another writer's write land: right before each `renameat2` of
/// [`write_settings`] (the swap, then the undo), the next step a test queued runs. Nothing
/// outside the unit tests.
#[cfg(test)]
mod race {
    use std::cell::RefCell;
    use std::collections::VecDeque;

    thread_local! {
        /// The steps queued by the test running on this thread.
        pub(super) static STEPS: RefCell<VecDeque<Box<dyn FnOnce()>>> =
            RefCell::new(VecDeque::new());
    }

    pub(super) fn point() {
        if let Some(step) = STEPS.with(|steps| steps.borrow_mut().pop_front()) {
            step();
        }
    }
}

#[cfg(not(test))]
mod race {
    pub(super) fn point() {}
}

/// `path` as `renameat2` takes it.
fn c_path(path: &Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// `renameat2(from, to, flags)`.
fn rename2(from: &std::ffi::CStr, to: &std::ffi::CStr, flags: libc::c_uint) -> std::io::Result<()> {
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

    /// A file caught empty by a writer that rewrites it in place is read again, so the
    /// writer's keys are kept: taken as `{}` at once, they would all be lost.
    #[test]
    fn a_file_caught_empty_midway_through_an_in_place_write_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "").unwrap(); // the writer's truncate
        let writer = {
            let path = path.clone();
            std::thread::spawn(move || {
                std::thread::sleep(PARTWAY_PAUSE + PARTWAY_PAUSE / 2);
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"model\": \"x\"}\n"))
                    .unwrap();
            })
        };
        let settings = read_settings(&path, false).unwrap();
        writer.join().unwrap();
        assert_eq!(settings.value.get("model"), Some(&Value::from("x")));
        // A file that stays empty is taken as `{}` after the last read.
        std::fs::write(&path, "  \n").unwrap();
        assert!(read_settings(&path, false).unwrap().value.is_empty());
    }

    /// A step that renames another program's version, `text`, over `path`.
    fn theirs_over(dir: &Path, path: &Path, text: &'static str) -> Box<dyn FnOnce()> {
        let (staged, path) = (dir.join("theirs"), path.to_path_buf());
        Box::new(move || {
            std::fs::write(&staged, text).unwrap();
            std::fs::rename(&staged, &path).unwrap();
        })
    }

    /// Another program's rename that lands between hookhost's last look and its swap is
    /// put back, and the refusal says so.
    #[test]
    fn a_rename_that_lands_between_the_last_look_and_the_swap_is_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{}\n").unwrap();
        let settings = read_settings(&path, false).unwrap();
        race::STEPS.with(|steps| {
            steps
                .borrow_mut()
                .push_back(theirs_over(dir.path(), &path, "{\"theirs\": 1}\n"))
        });
        let e = write_settings(&settings, "{\"ours\": true}\n").unwrap_err();
        assert!(
            e.contains("was replaced as hookhost swapped its version in"),
            "{e}"
        );
        assert!(e.contains("settings.json"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"theirs\": 1}\n");
        // Nothing of hookhost's is left beside it but the backup.
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["settings.json", "settings.json.hookhost-backup"]);
    }

    /// A second rename, between the swap and its undo, is kept beside the file, and the
    /// first one is put back: neither is lost.
    #[test]
    fn two_renames_around_the_swap_are_both_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{}\n").unwrap();
        let settings = read_settings(&path, false).unwrap();
        race::STEPS.with(|steps| {
            let mut steps = steps.borrow_mut();
            steps.push_back(theirs_over(dir.path(), &path, "{\"first\": 1}\n"));
            steps.push_back(theirs_over(dir.path(), &path, "{\"second\": 1}\n"));
        });
        let e = write_settings(&settings, "{\"ours\": true}\n").unwrap_err();
        assert!(e.contains("was replaced twice as hookhost swapped"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"first\": 1}\n");
        let kept = e.rsplit_once("second one's is in `").unwrap().1;
        let kept = kept.split_once('`').unwrap().0;
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "{\"second\": 1}\n");
    }

    /// With no other writer, the swap goes in and the old file goes.
    #[test]
    fn an_undisturbed_write_goes_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{}\n").unwrap();
        let settings = read_settings(&path, false).unwrap();
        write_settings(&settings, "{\"ours\": true}\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"ours\": true}\n"
        );
    }

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
