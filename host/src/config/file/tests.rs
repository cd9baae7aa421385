//! The one reader and the one owner and mode rule.

use super::*;

#[test]
fn a_regular_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.json");
    std::fs::write(&path, b"{}").unwrap();
    let (bytes, meta) = read_regular(&path, 10).unwrap();
    assert_eq!(bytes, b"{}");
    assert!(meta.is_file());
}

#[test]
fn what_is_not_a_small_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // No writer: a blocking open would hang here.
    assert!(matches!(
        read_regular(&fifo, 10),
        Err(FileError::NotRegular("a FIFO"))
    ));
    assert!(matches!(
        read_regular(Path::new("/dev/zero"), 10),
        Err(FileError::NotRegular("a character device"))
    ));
    let link = dir.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    assert!(matches!(
        read_regular(&link, 10),
        Err(FileError::NotRegular(_))
    ));
    assert!(matches!(
        read_regular(dir.path(), 10),
        Err(FileError::NotRegular("a directory"))
    ));
    assert!(
        read_regular(&dir.path().join("absent"), 10)
            .unwrap_err()
            .is_not_found()
    );
    let big = dir.path().join("big");
    std::fs::write(&big, [b' '; 11]).unwrap();
    assert!(matches!(
        read_regular(&big, 10),
        Err(FileError::TooLarge { size: 11, cap: 10 })
    ));
}

#[test]
fn digests_stream_under_the_cap_and_refuse_devices() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.wasm");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        sha256_regular(&path, 200_000).unwrap(),
        hex::encode(sha2::Sha256::digest(&bytes))
    );
    assert!(matches!(
        sha256_regular(&path, 199_999),
        Err(FileError::TooLarge { .. })
    ));
    assert!(matches!(
        sha256_regular(Path::new("/dev/zero"), PLUGIN_CAP),
        Err(FileError::NotRegular(_))
    ));
}

#[test]
fn stamps_change_with_any_write_and_owners_and_modes_are_judged() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"ab").unwrap();
    let before = FileStamp::of(&std::fs::metadata(&path).unwrap());
    // Same size, same mtime set back: the ctime still moves.
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&path, b"cd").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let after = FileStamp::of(&std::fs::metadata(&path).unwrap());
    assert_ne!(before, after);

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(Rule::Believed(Owners::Me).judge(&meta), None);
    if effective_uid() != 0 {
        assert!(
            Rule::Believed(Owners::Root)
                .judge(&meta)
                .unwrap()
                .contains("owned by uid")
        );
    }
    // Readable by others: believed, not private.
    assert!(
        Rule::Private
            .judge(&meta)
            .unwrap()
            .contains("other users can read or write it (mode 644)")
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert!(
        Rule::Believed(Owners::MeOrRoot)
            .judge(&meta)
            .unwrap()
            .contains("its group can write it (mode 664)")
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o646)).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert!(
        Rule::Believed(Owners::Me)
            .judge(&meta)
            .unwrap()
            .contains("other users can write it (mode 646)")
    );
    // A sticky directory writable by all only holds files.
    let sticky = dir.path().join("sticky");
    std::fs::create_dir(&sticky).unwrap();
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let meta = std::fs::metadata(&sticky).unwrap();
    assert_eq!(Rule::Holder.judge(&meta), None);
    assert!(Rule::Believed(Owners::Me).judge(&meta).is_some());
}

/// Every way of opening a file by path that the grep below looks for. A reader that
/// opens a file any of these ways outside `config/file.rs` fails the test unless the
/// allow-table says why it may.
const OPENS: &[&str] = &[
    "File::open(",
    "File::create(",
    "File::options(",
    "OpenOptions::new(",
    "fs::read(",
    "fs::read_to_string(",
    "libc::open(",
    "libc::openat(",
    "SYS_openat2",
    "deserialize_file(",
];

/// The opens that are not reads of a file by the host, each with why it may bypass
/// the one reader: `(file under src/, what it calls, why)`.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "handlers/agent/tools.rs",
        "OpenOptions::new(",
        "an agent hook's Read: beneath the workspace's cap-std handle (no escape by `..` or \
         symlink), O_NONBLOCK, regular files only (fstat after open), its real path checked \
         against private files and host-owned places; bounded reads",
    ),
    (
        "handlers/wasm/grants.rs",
        "OpenOptions::new(",
        "O_PATH|O_DIRECTORY handle of a granted directory: nothing is read through it",
    ),
    (
        "handlers/wasm/cache.rs",
        "deserialize_file(",
        "reopens, through /proc/self/fd, the artifact open_regular opened and checked",
    ),
    (
        "handlers/wasm/cache_key.rs",
        "OpenOptions::new(",
        "writes a new key (create_new, O_NOFOLLOW); the key is read with read_regular",
    ),
    (
        "audit/mod.rs",
        "File::open(",
        "the log's directory, as the handle of the openat below (judged by Rule::Holder)",
    ),
    (
        "audit/mod.rs",
        "libc::openat(",
        "appends to the log (O_WRONLY|O_APPEND|O_NOFOLLOW|O_NONBLOCK); a writer",
    ),
    (
        "trust/store.rs",
        "OpenOptions::new(",
        "the store's directory (O_DIRECTORY|O_NOFOLLOW), judged by Rule::Believed",
    ),
    (
        "trust/store.rs",
        "libc::openat(",
        "the store's lock and its atomic replacement (writers); the store is read by read_checked",
    ),
    (
        "cli/signing.rs",
        "OpenOptions::new(",
        "writes new key and signature files; keys and signatures are read by read_regular",
    ),
    (
        "cli/dispatch_daemon/server.rs",
        "OpenOptions::new(",
        "`/dev/null` for the daemon's standard streams (nothing is read from it)",
    ),
    (
        "dispatch_client.rs",
        "libc::open(",
        "`/dev/null` in place of a standard stream the agent left closed, at the small \
         client's entry (nothing is read from it as a file)",
    ),
    (
        "cli/dispatch_daemon/place.rs",
        "OpenOptions::new(",
        "a daemon's log (append) and lock (flock): writers in the private daemons directory",
    ),
    (
        "handlers/descendants.rs",
        "libc::open(",
        "a hook's keeper (a forked child: async-signal-safe calls only) reads the kernel's list \
         of its own children, /proc/thread-self/children",
    ),
];

/// The source files of the crate, with the text before their unit tests.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            let is_test = name.ends_with("tests.rs") || name.split('/').any(|p| p == "tests");
            if is_test || name == "config/file.rs" {
                return None;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("\n#[cfg(test)]")
                .next()
                .unwrap_or("")
                .to_string();
            Some((name, code))
        })
        .collect()
}

#[test]
fn every_open_goes_through_the_one_reader() {
    let mut found = Vec::new();
    let mut used = std::collections::HashSet::new();
    for (name, code) in sources() {
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for open in OPENS.iter().filter(|open| line.contains(*open)) {
                match ALLOWED.iter().position(|(f, o, _)| *f == name && o == open) {
                    Some(i) => {
                        used.insert(i);
                    }
                    None => found.push(format!("{name}:{}: {open} — {line}", n + 1)),
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "files opened outside the one reader (config/file.rs open_checked); route them \
         through it or add them to ALLOWED with why:\n{}",
        found.join("\n")
    );
    // The table does not outlive what it allows.
    let stale: Vec<_> = (0..ALLOWED.len()).filter(|i| !used.contains(i)).collect();
    assert!(
        stale.is_empty(),
        "allow-table entries that match nothing: {stale:?}"
    );
    // And the one rule: no owner or mode mask outside `Rule`.
    for (name, code) in sources() {
        for mask in ["0o002", "0o022", "0o077"] {
            assert!(
                !code.contains(mask),
                "{name} checks a mode with `{mask}` by hand; use config::file::Rule"
            );
        }
    }
}
