//! Tests of the last good versions on disk.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::*;
use crate::config::{Origin, SourceOptions};

/// The good version of the user's hooks file at `file`, as a load reads it.
fn good_of(file: &Path) -> GoodSource {
    let options = SourceOptions {
        user_dir: Some(file.parent().unwrap().to_path_buf()),
        ..SourceOptions::default()
    };
    let loaded = config::load(&options, &EventCatalogue::default());
    let layer = loaded.layers.into_iter().next().expect("the file loads");
    GoodSource {
        layer,
        since: UNIX_EPOCH + Duration::from_secs(1_000),
    }
}

fn hooks(command: &str) -> String {
    serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "Bash",
        "hooks": [{"type": "command", "command": command}]}]}})
    .to_string()
}

#[test]
fn a_stored_version_reads_back_as_it_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hooks.json");
    std::fs::write(&file, hooks("guard")).unwrap();
    let store = StoredGood::in_data_dir(&dir.path().join("data"));
    let good = good_of(&file);
    store.write(&good, None);
    let entry = store.entry_path(SourceKind::User, &file);
    let mode = std::fs::metadata(&entry).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored = store.read(SourceKind::User, &file).expect("stored");
    assert_eq!(Some(&stored.sha256), good.layer.sha256.as_ref());
    assert_eq!(stored.since, good.since);
    let back = stored
        .good(SourceKind::User, &file, &EventCatalogue::default())
        .unwrap();
    assert_eq!(back.layer.origin, good.layer.origin);
    assert_eq!(back.layer.sha256, good.layer.sha256);
    // Another source of the same path is another entry.
    assert!(store.read(SourceKind::Project, &file).is_none());
}

/// A file whose bytes changed since it was judged good is not stored (the next build
/// judges them); managed policy is never stored.
#[test]
fn only_the_bytes_judged_good_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hooks.json");
    std::fs::write(&file, hooks("guard")).unwrap();
    let store = StoredGood::in_data_dir(&dir.path().join("data"));
    let good = good_of(&file);
    std::fs::write(&file, hooks("other")).unwrap();
    store.write(&good, None);
    assert!(store.read(SourceKind::User, &file).is_none());
    std::fs::write(&file, hooks("guard")).unwrap();
    let mut managed = good.clone();
    managed.layer.origin = Origin {
        kind: SourceKind::Managed,
        location: file.display().to_string(),
    };
    store.write(&managed, None);
    assert!(!store.dir().exists());
}

/// Each way a stored version is not to be believed: readable or writable by others, a
/// symlink, of another file, bytes that are not of its digest, no header.
#[test]
fn a_stored_version_not_to_be_believed_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hooks.json");
    std::fs::write(&file, hooks("guard")).unwrap();
    let store = StoredGood::in_data_dir(&dir.path().join("data"));
    let entry = store.entry_path(SourceKind::User, &file);
    let good = good_of(&file);
    let fresh = || {
        let _ = std::fs::remove_file(&entry);
        store.write(&good, None);
        assert!(store.read(SourceKind::User, &file).is_some());
    };
    for mode in [0o644, 0o620, 0o604] {
        fresh();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
        assert!(store.read(SourceKind::User, &file).is_none(), "{mode:o}");
    }
    fresh();
    let real = dir.path().join("elsewhere");
    std::fs::rename(&entry, &real).unwrap();
    std::os::unix::fs::symlink(&real, &entry).unwrap();
    assert!(store.read(SourceKind::User, &file).is_none(), "a symlink");
    let tamper = |edit: &dyn Fn(String) -> String| {
        fresh();
        let text = std::fs::read_to_string(&entry).unwrap();
        std::fs::write(&entry, edit(text)).unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
        store.read(SourceKind::User, &file)
    };
    assert!(tamper(&|t| t.replace("guard", "allow")).is_none(), "body");
    let other = dir.path().join("other.json").display().to_string();
    let shown = file.display().to_string();
    assert!(tamper(&|t| t.replacen(&shown, &other, 1)).is_none(), "file");
    assert!(tamper(&|t| t.replace('\n', " ")).is_none(), "header");
}

/// The store keeps at most `STORED_FILES` versions, the newest.
#[test]
fn the_store_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoredGood::in_data_dir(&dir.path().join("data"));
    for n in 0..STORED_FILES + 8 {
        let sub = dir.path().join(format!("u{n}"));
        std::fs::create_dir(&sub).unwrap();
        let file = sub.join("hooks.json");
        std::fs::write(&file, hooks(&format!("guard {n}"))).unwrap();
        store.write(&good_of(&file), None);
    }
    let kept = std::fs::read_dir(store.dir()).unwrap().count();
    assert_eq!(kept, STORED_FILES);
    let last = dir.path().join(format!("u{}/hooks.json", STORED_FILES + 7));
    assert!(store.read(SourceKind::User, &last).is_some());
}
