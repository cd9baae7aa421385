//! Attacks on the trust store: a store another user can write, a store reached through a
//! symlink (in place of `trust.json` or of its directory), a store inside the workspace
//! it would vouch for, workspace names that differ only in bytes that are not UTF-8, and
//! today's stores, which must keep working.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::managed::{isolated_home, marking, root_or_skip};
use crate::support::{TestEnv, bash_input, hooks};
use crate::support::{as_nobody, chown_tree};

/// Trusts the project with `hookhost trust` and checks that its hook then runs.
fn trusted_env() -> TestEnv {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("project", "project-ran")]),
    ));
    let run = env.run_untrusted(&["trust"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        project_hook_runs(&env, env.untrusted_command()).0,
        "trusted"
    );
    env
}

/// Dispatches with `cmd`; whether the project hook ran, and the outcome.
fn project_hook_runs(env: &TestEnv, mut cmd: Command) -> (bool, Value) {
    let marker = env.project.join("project-ran");
    let _ = std::fs::remove_file(&marker);
    let run = env.run_with(
        cmd.args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    (marker.exists(), run.json())
}

fn mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A store anyone else could have written, or one reached through a symlink, does not
/// trust: the project's hooks are skipped with a message naming the store and why, and
/// `hookhost trust` refuses to write into it. Checked to trust without the rule.
#[test]
fn a_store_others_can_write_or_reached_through_a_symlink_does_not_trust() {
    let env = trusted_env();
    let store = env.data.join("trust.json");
    let refused = |why: &str| {
        let (ran, out) = project_hook_runs(&env, env.untrusted_command());
        assert!(!ran, "{why}: the project hook ran");
        let hooks = out["hooks"].to_string();
        assert!(
            hooks.contains("the trust store") && hooks.contains(why),
            "{why}: {hooks}"
        );
        let write = env.run_untrusted(&["trust"], "");
        assert_ne!(write.code, 0, "{why}: hookhost trust wrote into it");
        assert!(write.stderr.contains(why), "{why}: {}", write.stderr);
    };
    mode(&store, 0o602);
    refused("other users can write it");
    mode(&store, 0o620);
    refused("its group can write it");
    mode(&store, 0o600);
    mode(&env.data, 0o757);
    refused("directory");
    mode(&env.data, 0o755);

    // trust.json a symlink to a store that trusts the workspace: not followed.
    let elsewhere = env.home.join("elsewhere.json");
    std::fs::rename(&store, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &store).unwrap();
    refused("is a symlink; refused (not followed)");
    std::fs::remove_file(&store).unwrap();
    std::fs::rename(&elsewhere, &store).unwrap();
    assert!(
        project_hook_runs(&env, env.untrusted_command()).0,
        "restored"
    );

    // The data directory a symlink to a directory holding a store that trusts.
    let real = env.home.join("real-data");
    let mut cmd = env.untrusted_command();
    let link = env.home.join("data-link");
    copy_dir(&env.data, &real);
    std::os::unix::fs::symlink(&real, &link).unwrap();
    cmd.env("HOOKHOST_DATA_DIR", &link);
    let (ran, out) = project_hook_runs(&env, cmd);
    assert!(!ran, "{out}");
    assert!(out["hooks"].to_string().contains("is a symlink"), "{out}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    mode(to, 0o700);
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A store owned by another user (chowned to uid 65534 while hookhost runs as root), and
/// the same from the other side: hookhost run as uid 65534 does not believe a store in
/// its directory that root wrote, or one it owns that is writable by all, and believes
/// one it owns (the control).
#[test]
fn another_users_store_does_not_trust() {
    if !root_or_skip(
        "another_users_store_does_not_trust",
        "a second uid (chown, setpriv)",
    ) {
        return;
    }
    let env = trusted_env();
    let store = env.data.join("trust.json");
    std::os::unix::fs::chown(&store, Some(65534), Some(65534)).unwrap();
    let (ran, out) = project_hook_runs(&env, env.untrusted_command());
    assert!(!ran, "{out}");
    assert!(
        out["hooks"].to_string().contains("owned by uid 65534"),
        "{out}"
    );
    std::os::unix::fs::chown(&store, Some(0), Some(0)).unwrap();

    // Now the user is uid 65534, with its own data directory; root wrote trust.json.
    let root = env.project.parent().unwrap().to_path_buf();
    mode(&root, 0o755);
    for dir in [&env.project, &env.home] {
        chown_tree(dir, 65534);
    }
    chown_tree(&env.data, 65534);
    std::os::unix::fs::chown(&store, Some(0), Some(0)).unwrap();
    // Readable, so that what refuses it is its owner, not a failed read.
    mode(&store, 0o644);
    let nobody = || {
        let mut cmd = env.untrusted_command();
        cmd.env("HOOKHOST_CACHE_DIR", env.home.join("cache"));
        as_nobody(&mut cmd)
    };
    let (ran, out) = project_hook_runs(&env, nobody());
    assert!(!ran, "a store root wrote: {out}");
    assert!(out["hooks"].to_string().contains("owned by uid 0"), "{out}");
    std::os::unix::fs::chown(&store, Some(65534), Some(65534)).unwrap();
    assert!(project_hook_runs(&env, nobody()).0, "its own store trusts");
    mode(&store, 0o666);
    let (ran, out) = project_hook_runs(&env, nobody());
    assert!(!ran, "{out}");
    assert!(out["hooks"].to_string().contains("can write it"), "{out}");
}

/// A store inside the workspace would let a repository vouch for itself: with
/// `HOOKHOST_DATA_DIR` pointing into the workspace (relative or absolute), a store there
/// that trusts the workspace with the right fingerprint is not used.
#[test]
fn a_store_inside_the_workspace_does_not_trust() {
    let env = trusted_env();
    let planted = env.project.join(".data");
    copy_dir(&env.data, &planted);
    for value in [planted.as_os_str(), OsStr::new(".data")] {
        let mut cmd = env.untrusted_command();
        cmd.env("HOOKHOST_DATA_DIR", value);
        isolated_home(&env, &mut cmd);
        let (ran, out) = project_hook_runs(&env, cmd);
        assert!(!ran, "{value:?}: the planted store trusted: {out}");
        assert!(
            out["notices"].to_string().contains("HOOKHOST_DATA_DIR `"),
            "{value:?}: {out}"
        );
    }
}

/// Two workspaces whose names differ only in a byte that is not UTF-8 (`repo\xff`,
/// `repo\xfe`) are trusted apart. Checked to fail without the rule: both had the key
/// `repo\u{fffd}`.
#[test]
fn workspaces_that_differ_only_in_bytes_that_are_not_utf8_are_trusted_apart() {
    let env = TestEnv::new();
    let base = env.project.parent().unwrap();
    let named = |bytes: &[u8]| -> PathBuf {
        let mut name = b"repo".to_vec();
        name.extend_from_slice(bytes);
        let dir = base.join(OsStr::from_bytes(&name));
        let config = hooks(
            "PreToolUse",
            "Bash",
            json!([marking("project", "project-ran")]),
        );
        std::fs::create_dir_all(dir.join(".hookhost")).unwrap();
        std::fs::write(dir.join(".hookhost/hooks.json"), config.to_string()).unwrap();
        dir
    };
    let (ff, fe) = (named(b"\xff"), named(b"\xfe"));
    let trust = env.run_with(env.untrusted_command().arg("trust").arg(&ff), "");
    assert_eq!(trust.code, 0, "{}", trust.stderr);
    let runs_in = |dir: &Path| {
        let marker = dir.join("project-ran");
        let _ = std::fs::remove_file(&marker);
        let run = env.run_with(
            env.untrusted_command()
                .current_dir(dir)
                .args(["dispatch", "PreToolUse"]),
            &bash_input("ls").to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        marker.exists()
    };
    assert!(runs_in(&ff), "the trusted workspace");
    assert!(!runs_in(&fe), "a workspace that was never trusted");
    let text = std::fs::read_to_string(env.data.join("trust.json")).unwrap();
    assert!(text.contains("pathBase64"), "{text}");
}

/// A `trust.json` written by the previous version (version 1, keyed by the display of
/// the path) keeps trusting its workspaces, and is rewritten in version 2 on the next
/// `hookhost trust`.
#[test]
fn todays_trust_json_keeps_trusting() {
    let env = trusted_env();
    let store = env.data.join("trust.json");
    let v2: Value = serde_json::from_str(&std::fs::read_to_string(&store).unwrap()).unwrap();
    let mut workspaces = serde_json::Map::new();
    for entry in v2["workspaces"].as_array().unwrap() {
        let mut record = entry.clone();
        let path = record.as_object_mut().unwrap().remove("path").unwrap();
        workspaces.insert(path.as_str().unwrap().to_string(), record);
    }
    let v1 = json!({"version": 1, "workspaces": workspaces});
    std::fs::write(&store, serde_json::to_string_pretty(&v1).unwrap()).unwrap();
    mode(&store, 0o600);
    assert!(
        project_hook_runs(&env, env.untrusted_command()).0,
        "the v1 record trusts"
    );
    let other = env.home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let run = env.run_with(env.untrusted_command().arg("trust").arg(&other), "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&store).unwrap();
    assert!(text.contains("\"version\": 2"), "{text}");
    assert!(
        project_hook_runs(&env, env.untrusted_command()).0,
        "still trusted"
    );
}
