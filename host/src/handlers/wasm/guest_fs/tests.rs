//! Unit tests of the guest's filesystem chokepoint.

use super::*;
use crate::handlers::wasm::gitdir_cache::{GitDirs, git_directory_of};

/// Every method of `descriptor` in the WIT the linker defines is classified, and
/// nothing else is: a method added to WASI fails here until it is.
#[test]
fn every_descriptor_method_of_the_wit_is_classified() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut resolve = wit_parser::Resolve::default();
    for dir in ["wit/v0.1.0", "wit"] {
        resolve
            .push_dir(manifest.join(dir))
            .expect("hookhost's WIT parses");
    }
    resolve
        .push_dir(manifest.join("tests/fixtures/kitchen-sink"))
        .expect("the kitchen-sink WIT parses");
    let mut in_wit: Vec<String> = resolve
        .interfaces
        .iter()
        .filter(|(_, i)| i.name.as_deref() == Some("types"))
        .filter(|(_, i)| {
            i.package.is_some_and(|p| {
                resolve.packages[p]
                    .name
                    .to_string()
                    .starts_with("wasi:filesystem")
            })
        })
        .flat_map(|(_, i)| i.functions.keys())
        .filter_map(|name| name.strip_prefix("[method]descriptor."))
        .map(str::to_owned)
        .collect();
    in_wit.sort();
    let mut ours: Vec<String> = DESCRIPTOR_METHODS
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    ours.sort();
    assert!(in_wit.len() >= 27, "{in_wit:?}");
    assert_eq!(ours, in_wit);
}

#[test]
fn targets_resolve_beneath_their_directory_as_the_sandbox_does() {
    let root = tempfile::tempdir().unwrap();
    let top = root.path().join("top");
    std::fs::create_dir_all(top.join("src/.git")).unwrap();
    std::os::unix::fs::symlink(".git", top.join("src/x")).unwrap();
    std::os::unix::fs::symlink("x/config", top.join("src/y")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", top.join("abs")).unwrap();
    let dir = File::open(&top).unwrap();
    let real = std::fs::canonicalize(&top).unwrap();
    let at = |p: &str, follow| target(&dir, p, follow).map(|t| t.real());
    assert_eq!(
        at("src/x/config", false).unwrap(),
        real.join("src/.git/config")
    );
    assert_eq!(at("src/y", false).unwrap(), real.join("src/y"));
    assert_eq!(at("src/y", true).unwrap(), real.join("src/.git/config"));
    assert_eq!(at("src/.git/..", false).unwrap(), real.join("src"));
    assert_eq!(at(".", false).unwrap(), real);
    for escape in ["../top/src", "/etc/passwd", "src/../../x"] {
        let e = at(escape, false).unwrap_err();
        assert_eq!(resolve_error(e), ErrorCode::NotPermitted, "{escape}");
    }
    assert_eq!(
        resolve_error(at("abs", true).unwrap_err()),
        ErrorCode::NotPermitted
    );
    // Owned by name after resolution, not by the names the guest wrote.
    assert!(owned_by_name(&at("src/x/config", false).unwrap()).is_some());
}

/// The git-directory cache answers as the walk up the ancestors does, for a directory
/// found again at another path (moved into a git directory) too; an ancestor made a
/// git directory by someone else is seen from the next call (the cache is cleared at
/// each call).
#[test]
fn the_git_directory_cache_answers_as_the_walk_and_follows_moves() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let make_git = |dir: &Path| {
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::create_dir_all(dir.join("refs")).unwrap();
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    };
    let git = root.join("store");
    make_git(&git);
    let plain = root.join("x/d");
    std::fs::create_dir_all(&plain).unwrap();
    let mut cache = GitDirs::default();
    assert_eq!(cache.why(&plain.join("f")), None);
    assert!(cache.why(&git.join("objects/f")).unwrap().contains("store"));
    // Moved into the git directory: the same inode at another path.
    let moved = git.join("objects/d");
    std::fs::rename(&plain, &moved).unwrap();
    assert_eq!(
        cache.lookup(&moved),
        git_directory_of(&moved),
        "a moved directory is looked up afresh"
    );
    assert_eq!(cache.lookup(&moved), Some(git.clone()));
    // An ancestor made a git directory from outside: seen once the call's cache is gone.
    let other = root.join("y/e");
    std::fs::create_dir_all(&other).unwrap();
    assert_eq!(cache.lookup(&other), None);
    make_git(&root.join("y"));
    cache.clear();
    assert_eq!(cache.lookup(&other), Some(root.join("y")));
}

/// The rename walk refuses a directory holding an owned name at any depth, or a subtree
/// deeper than it checks (the entry bound takes the same way out, and 10,000 files are
/// too slow to make here), and lets a plain directory (or a non-directory) go.
#[test]
fn the_rename_walk_finds_owned_names_at_any_depth_and_fails_closed_past_its_bound() {
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let parent = OwnedFd::from(File::open(&root_path).unwrap());
    std::fs::create_dir_all(root_path.join("plain/a/b")).unwrap();
    std::fs::write(root_path.join("plain/a/b/f"), "").unwrap();
    std::fs::create_dir_all(root_path.join("deep/a/b/c/.GIT")).unwrap();
    let tall = "t/".repeat(walk::MAX_RENAME_DEPTH + 1);
    std::fs::create_dir_all(root_path.join("tall").join(tall)).unwrap();
    std::fs::write(root_path.join("file"), "").unwrap();
    let refusal = |name: &str| walk::rename_refusal(&parent, name, &root_path.join(name)).0;
    assert_eq!(
        walk::rename_refusal(&parent, "plain", &root_path.join("plain")).1,
        3
    );
    assert_eq!(refusal("plain"), None);
    assert_eq!(refusal("file"), None);
    let deep = refusal("deep").unwrap();
    assert!(deep.contains("deep/a/b/c/.GIT"), "{deep}");
    let tall = refusal("tall").unwrap();
    assert!(tall.contains("or 64 levels, too many to check"), "{tall}");
}

/// Issue 23, fourth round, against the rename walk: members its test does not make. A
/// symlink loop (a link to the directory itself, to its parent, to `/`) is not followed
/// and ends the walk; a name that is not UTF-8 fails closed (it cannot be reopened by a
/// lossy name); 10,000 entries pass and the 10,001st refuses; an owned name that is a
/// symlink or a FIFO (not a directory) still refuses.
#[test]
fn the_rename_walk_holds_against_loops_odd_names_and_its_entry_bound() {
    use std::os::unix::ffi::OsStrExt;
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let parent = OwnedFd::from(File::open(&root_path).unwrap());
    let refusal = |name: &str| walk::rename_refusal(&parent, name, &root_path.join(name));

    std::fs::create_dir_all(root_path.join("loop/a")).unwrap();
    std::os::unix::fs::symlink(".", root_path.join("loop/a/self")).unwrap();
    std::os::unix::fs::symlink("..", root_path.join("loop/a/up")).unwrap();
    std::os::unix::fs::symlink("/", root_path.join("loop/a/root")).unwrap();
    assert_eq!(
        refusal("loop"),
        (None, 4),
        "links are entries, not followed"
    );

    std::fs::create_dir_all(root_path.join("odd")).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"d\xff");
    std::fs::create_dir_all(root_path.join("odd").join(name)).unwrap();
    assert!(
        refusal("odd").0.is_some(),
        "a name it cannot reopen fails closed"
    );

    for (dir, owned) in [("linked", ".git"), ("fifo", "CLAUDE.md")] {
        std::fs::create_dir_all(root_path.join(dir)).unwrap();
        let at = root_path.join(dir).join(owned);
        if dir == "fifo" {
            let made = std::process::Command::new("mkfifo")
                .arg(&at)
                .status()
                .unwrap();
            assert!(made.success());
        } else {
            std::os::unix::fs::symlink("/nonexistent", &at).unwrap();
        }
        let why = refusal(dir)
            .0
            .unwrap_or_else(|| panic!("{dir}/{owned} let through"));
        assert!(why.contains(owned), "{why}");
    }

    let bound = walk::MAX_RENAME_ENTRIES;
    std::fs::create_dir_all(root_path.join("many")).unwrap();
    for n in 0..bound {
        std::fs::File::create(root_path.join("many").join(n.to_string())).unwrap();
    }
    assert_eq!(refusal("many"), (None, bound), "exactly the bound passes");
    std::fs::File::create(root_path.join("many/one-more")).unwrap();
    let why = refusal("many").0.expect("one past the bound refuses");
    assert!(why.contains("more than 10000 entries"), "{why}");
}
