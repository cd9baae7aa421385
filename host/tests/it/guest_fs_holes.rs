//! Attacks on the guest filesystem chokepoint (`handlers/wasm/guest_fs.rs`) with members
//! of its classes that the issue does not name: a symlink swapped under a checked path by
//! another writer of the same grant, case variants of owned names, a bare repository (a
//! git directory without the name `.git`), a hard link made from outside.

use std::path::Path;

use hookhost::outcome::HookStatus;
use hookhost::policy::places::owned_by_name;
use hookhost_test_plugins::plugins;
use serde_json::{Value, json};

use crate::support::*;

fn git_init(args: &[&str], at: &Path) {
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .args(args)
        .arg(at)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Case variants of owned names: on a case-insensitive filesystem (a casefolded ext4
/// directory, a vfat or NTFS mount, a shared folder) `.GIT/config` is `.git/config`, and
/// git itself refuses `.GIT` in a tree for that reason. The names are compared without
/// ASCII case, so a variant is owned (and private) too; on a case-sensitive filesystem
/// refusing it costs nothing a plugin needs.
#[test]
fn case_variants_of_owned_and_private_names_are_owned() {
    use hookhost::policy::places::private_by_name;
    for path in [
        "/w/src/.GIT/config",
        "/w/src/.Git/hooks/pre-commit",
        "/w/a/.CLAUDE/settings.json",
        "/w/a/.HookHost/hooks.json",
        "/w/a/.Codex/x",
        "/w/a/claude.md",
        "/w/a/Agents.MD",
    ] {
        assert!(owned_by_name(Path::new(path)).is_some(), "{path}");
    }
    assert!(private_by_name(Path::new("/w/.Claude/Settings.Local.JSON")).is_some());
    // Look-alikes that are other names on every filesystem stay plain.
    for path in ["/w/src/.git2/config", "/w/src/.gіt/config", "/w/a/CLAUDE.md.txt"] {
        assert!(owned_by_name(Path::new(path)).is_none(), "{path}");
    }
}
