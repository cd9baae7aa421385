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

/// The window between the check of a path and the call that uses it: the check resolves
/// `x/config` (its parent `x` a symlink to a plain directory), another writer of the same
/// read-write grant (another plugin's hook, the agent, a command hook; here a thread)
/// swaps `x` to point at a nested `.git`, and the call re-resolves the path by its text.
/// A rename made after such a check replaces `.git/config` (git runs `core.fsmonitor`
/// from it). The call must be made on what was checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_after_the_check_does_not_carry_a_change_into_dot_git() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let project = tempfile::tempdir().unwrap();
    let src = project.path().join("src");
    std::fs::create_dir_all(src.join("plaind")).unwrap();
    git_init(&[], &src.join("repo"));
    let config = src.join("repo/.git/config");
    let before = std::fs::read(&config).unwrap();
    std::os::unix::fs::symlink("plaind", src.join("x")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, src) = (stop.clone(), src.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for to in ["plaind", "repo/.git"] {
                    let tmp = src.join("x.tmp");
                    let _ = std::fs::remove_file(&tmp);
                    std::os::unix::fs::symlink(to, &tmp).unwrap();
                    std::fs::rename(&tmp, src.join("x")).unwrap();
                }
                swaps += 1;
            }
            swaps
        })
    };
    let hooks = (0..8)
        .map(|h| {
            let cases: serde_json::Map<String, Value> = (0..250)
                .map(|i| {
                    (
                        format!("c{h}-{i}"),
                        json!({"existing": format!("missing-{h}-{i}"), "fresh": "x/config"}),
                    )
                })
                .collect();
            wasm_hook(
                plugins::HOSTILE_RAW,
                json!({"id": format!("race-{h}"), "timeout": 60,
                       "capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]},
                       "config": {"attack": "fs-changes", "methods": ["rename-at"],
                                  "cases": cases}}),
            )
        })
        .collect();
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", hooks),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    let mut verdicts = std::collections::BTreeMap::<String, usize>::new();
    for (report, text) in outcome.hooks.iter().zip(&outcome.additional_context) {
        assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
        let said: Value = serde_json::from_str(text).unwrap();
        for v in said.as_object().unwrap().values() {
            *verdicts.entry(v.as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    assert!(swaps > 100, "{swaps}");
    // Both sides of the swap were seen: some renames got into the plain directory.
    assert!(verdicts.get("ok").copied().unwrap_or(0) > 0, "{verdicts:?}");
    let after = std::fs::read(&config).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&after),
        String::from_utf8_lossy(&before),
        "`.git/config` replaced through a swapped symlink ({verdicts:?}, {swaps} swaps); \
         .git now holds {:?}",
        std::fs::read_dir(src.join("repo/.git"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect::<Vec<_>>()
    );
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
    for path in [
        "/w/src/.git2/config",
        "/w/src/.gіt/config",
        "/w/a/CLAUDE.md.txt",
    ] {
        assert!(owned_by_name(Path::new(path)).is_none(), "{path}");
    }
}

/// Descriptor starvation by several hooks of one plugin: each hook holds at most a
/// quarter of the host's budget, so four hooks (one plugin file under four ids) with
/// `"instance": "session"` keep the whole budget between events, and the next event's
/// other hook could not get the descriptor of its preopened directory. The last quarter
/// of the budget is kept for every hook's first few descriptors (`held.rs`,
/// `Descriptors::take`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_session_hooks_of_one_plugin_do_not_starve_a_sibling_of_descriptors() {
    use hookhost::handlers::wasm::WasmRuntime;
    let _alone = crate::hostile::HOARDING.lock().await;
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("f"), "f").unwrap();
    // Its own runtime: the kept instances go with it at the end.
    let runtime = std::sync::Arc::new(WasmRuntime::new(Some(cache_dir())));
    let hoarders = (0..4)
        .map(|i| {
            wasm_hook(
                plugins::HOSTILE_RAW,
                json!({"id": format!("hoarder-{i}"), "instance": "session",
                       "capabilities": {"dirs": [{"path": "${workspace}", "mode": "ro"}]},
                       "limits": {"memoryMb": 1024},
                       "config": {"attack": "hoard-descriptors", "arg": "f", "n": 1_000_000}}),
            )
        })
        .collect();
    let first = dispatch_on(
        &runtime,
        project.path(),
        &settings("PreToolUse", "*", hoarders),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    assert_eq!(first.hooks.len(), 4, "{first:#?}");
    let sibling = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "sibling",
               "capabilities": {"dirs": [{"path": "${workspace}", "mode": "ro"}]},
               "config": {"attack": "echo"}}),
    );
    let second = dispatch_on(
        &runtime,
        project.path(),
        &settings("PreToolUse", "*", vec![sibling]),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    let report = only_report(&second);
    assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
}

/// A git directory needs no name `.git`: a directory holding `HEAD`, `objects/` and
/// `refs/` is one (a bare repository), and git looking for a repository from any
/// directory below finds it first and runs its config. A guest with a read-write grant
/// over `${workspace}/src` made `src` itself one (`HEAD`, `objects/`, `refs/` and a
/// `config` with `core.fsmonitor`, all plain names) and `git status` run anywhere under
/// `src/` ran its command. `HEAD` is now host-owned by its name (no guest makes the
/// marker), and a change inside a directory that already is a git directory (a bare
/// repository in the repository's content) is refused whatever the directory's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_directory_not_named_dot_git_is_not_made_or_changed() {
    let project = tempfile::tempdir().unwrap();
    let src = project.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir_all(src.join("objects")).unwrap();
    std::fs::create_dir_all(src.join("refs")).unwrap();
    git_init(&["--bare"], &src.join("evil"));
    std::fs::create_dir(src.join("evil/empty")).unwrap();
    // One whose `objects` and `refs` are symlinks (git follows them).
    std::fs::create_dir(src.join("linked")).unwrap();
    std::fs::write(src.join("linked/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(src.join("linked/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink("../evil/objects", src.join("linked/objects")).unwrap();
    std::os::unix::fs::symlink("../evil/refs", src.join("linked/refs")).unwrap();
    let methods = [
        "open-at",
        "create-directory-at",
        "rename-at",
        "unlink-file-at",
        "remove-directory-at",
        "link-at",
        "symlink-at",
        "set-times-at",
    ];
    let cases = json!({
        // The marker itself, beside objects/ and refs/ made earlier.
        "make-head": {"existing": "HEAD", "fresh": "HEAD"},
        // A bare repository already there.
        "bare-config": {"existing": "evil/config", "fresh": "evil/hooks/pre-commit",
                        "empty_dir": "evil/empty"},
        "linked-config": {"existing": "linked/config", "fresh": "linked/hooks"},
        "bare-via-dir": {"base": "evil", "existing": "config", "fresh": "info/x",
                         "empty_dir": "empty"},
    });
    let hook = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "bare", "timeout": 60,
               "capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]},
               "config": {"attack": "fs-changes", "methods": methods, "cases": cases}}),
    );
    let config_before = std::fs::read(src.join("evil/config")).unwrap();
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", vec![hook]),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    let report = only_report(&outcome);
    assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
    let said: Value = serde_json::from_str(&outcome.additional_context.join("")).unwrap();
    let mut through = Vec::new();
    for (key, verdict) in said.as_object().unwrap() {
        let verdict = verdict.as_str().unwrap();
        if verdict == "n/a" {
            continue;
        }
        if verdict != "err:not-permitted" {
            through.push(format!("{key}: {verdict}"));
        }
    }
    assert!(through.is_empty(), "got through:\n{}", through.join("\n"));
    assert!(!src.join("HEAD").exists(), "the guest made src/HEAD");
    assert_eq!(
        std::fs::read(src.join("evil/config")).unwrap(),
        config_before
    );
    assert!(!src.join("evil/hooks/pre-commit").exists());
}

/// The read side of the window: `stat-at` and `metadata-hash-at` check that the target is
/// not a private file, then looked the path up again by its text. A symlink swapped on the
/// way between a plain directory and a `.claude` one gave the private file's size (and
/// times, and hash) to a read-only plugin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_after_the_check_does_not_reveal_a_private_file() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().join("d");
    std::fs::create_dir_all(dir.join(".claude")).unwrap();
    std::fs::create_dir_all(dir.join("plain")).unwrap();
    // 77 bytes private, 3 bytes plain: a `found:77` is the private file's size.
    std::fs::write(dir.join(".claude/settings.local.json"), "x".repeat(77)).unwrap();
    std::fs::write(dir.join("plain/settings.local.json"), "abc").unwrap();
    std::os::unix::fs::symlink("plain", dir.join("x")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, dir) = (stop.clone(), dir.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for to in ["plain", ".claude"] {
                    let tmp = dir.join("x.tmp");
                    let _ = std::fs::remove_file(&tmp);
                    std::os::unix::fs::symlink(to, &tmp).unwrap();
                    std::fs::rename(&tmp, dir.join("x")).unwrap();
                }
                swaps += 1;
            }
            swaps
        })
    };
    // What one hook may say is capped: many hooks, a few short paths each.
    let hooks = (0..20)
        .map(|h| {
            let paths: Vec<String> = (0..8)
                .map(|k| format!("{}x{}/settings.local.json", "./".repeat(h), "/.".repeat(k)))
                .collect();
            wasm_hook(
                plugins::HOSTILE_RAW,
                json!({"id": format!("peek-{h}"), "timeout": 60,
                       "capabilities": {"dirs": [{"path": "${workspace}/d", "mode": "ro"}]},
                       "config": {"attack": "fs-reads", "paths": paths}}),
            )
        })
        .collect();
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", hooks),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut leaked = Vec::new();
    let mut hashes = std::collections::BTreeSet::new();
    for (report, text) in outcome.hooks.iter().zip(&outcome.additional_context) {
        assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
        let said: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text} {report:#?}"));
        for (key, v) in said.as_object().unwrap() {
            let v = v.as_str().unwrap();
            let how = key.rsplit('/').next().unwrap();
            *seen.entry(format!("{how} {v}")).or_default() += 1;
            if (how == "stat" && v == "found:77") || (how == "open" && v.contains("xxx")) {
                leaked.push(format!("{key}: {v}"));
            }
            if how == "hash" && v.starts_with("found:") {
                hashes.insert(v.to_owned());
            }
        }
    }
    assert!(swaps > 10, "{swaps}");
    // The plain side was seen (the race ran).
    assert!(seen.contains_key("stat found:3"), "{seen:?}");
    // Only the plain file's metadata hash: another one is the private file's.
    assert!(hashes.len() <= 1, "{hashes:?} ({swaps} swaps)");
    assert!(
        leaked.is_empty(),
        "{} reads of the private file ({swaps} swaps): {:?}",
        leaked.len(),
        &leaked[..leaked.len().min(5)]
    );
}

/// A hard link to an owned file made from outside the sandbox (by a command hook, the
/// agent, a tool that links files): its other name is plain, and the check sees only the
/// name the guest uses. A regular file with more than one name is not written, truncated
/// or resized by a guest, whether opened after the link was made or before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hard_link_to_an_owned_file_made_from_outside_is_not_written() {
    let project = tempfile::tempdir().unwrap();
    let src = project.path().join("src");
    std::fs::create_dir(&src).unwrap();
    git_init(&[], &src.join("repo"));
    let config = src.join("repo/.git/config");
    let before = std::fs::read(&config).unwrap();
    std::fs::hard_link(&config, src.join("alias")).unwrap();
    let methods = [
        "open-at",
        "set-size",
        "write",
        "write-via-stream",
        "append-via-stream",
    ];
    let cases = json!({"alias": {"existing": "alias", "fresh": "g-new"}});
    let hook = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "alias", "timeout": 60,
               "capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]},
               "config": {"attack": "fs-changes", "methods": methods, "cases": cases}}),
    );
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", vec![hook]),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    let report = only_report(&outcome);
    assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
    let said: Value = serde_json::from_str(&outcome.additional_context.join("")).unwrap();
    // `open-at` also creates `g-new`, a plain new file: it alone gets through.
    assert_eq!(said["alias/open-at"], "ok", "{said}");
    assert_eq!(
        String::from_utf8_lossy(&std::fs::read(&config).unwrap()),
        String::from_utf8_lossy(&before),
        "written through the hard link: {said}"
    );
}

/// Renaming a directory that holds an owned name would move the owned place with it:
/// the check at the two ends sees `repo` and `other`, plain names, not the `.git`
/// inside. The rename walks what the directory holds (`guest_fs/walk.rs`) and refuses
/// it, naming what it found; so for a directory holding `.claude/`, `CLAUDE.md`, or a
/// git directory of another name (its `HEAD`) at any depth. A plain directory is still
/// renamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_holding_an_owned_name_is_not_renamed() {
    let project = tempfile::tempdir().unwrap();
    let src = project.path().join("src");
    std::fs::create_dir(&src).unwrap();
    git_init(&[], &src.join("repo"));
    git_init(&["--bare"], &src.join("deep/x/store"));
    std::fs::create_dir_all(src.join("notes/a/b")).unwrap();
    std::fs::write(src.join("notes/a/b/claude.md"), "instructions").unwrap();
    std::fs::create_dir_all(src.join("tool/.Claude")).unwrap();
    std::fs::create_dir_all(src.join("plain/a/b")).unwrap();
    std::fs::write(src.join("plain/a/b/file"), "f").unwrap();
    let owned = ["repo", "deep", "notes", "tool"];
    let mut cases = serde_json::Map::new();
    for dir in owned.iter().chain(&["plain"]) {
        cases.insert(
            dir.to_string(),
            json!({"existing": dir, "fresh": format!("fresh-{dir}")}),
        );
    }
    let hook = wasm_hook(
        plugins::HOSTILE_RAW,
        json!({"id": "mover",
               "capabilities": {"dirs": [{"path": "${workspace}/src", "mode": "rw"}]},
               "config": {"attack": "fs-changes", "methods": ["rename-at"], "cases": cases}}),
    );
    let outcome = dispatch(
        project.path(),
        &settings("PreToolUse", "*", vec![hook]),
        "PreToolUse",
        bash("ls"),
    )
    .await;
    let report = only_report(&outcome);
    assert_eq!(report.status, HookStatus::Ok, "{report:#?}");
    let diagnostics = report.diagnostics.clone().unwrap_or_default();
    for dir in owned {
        assert!(
            src.join(dir).is_dir() && !src.join(format!("g-moved-{dir}-rename-at")).exists(),
            "{dir} moved: {diagnostics}"
        );
        assert!(
            diagnostics.contains(&format!(
                "`rename-at` refused: `{}` holds",
                src.canonicalize().unwrap().join(dir).display()
            )),
            "{dir}: {diagnostics}"
        );
    }
    // A directory holding nothing host-owned is still renamed.
    assert!(
        src.join("g-moved-plain-rename-at/a/b/file").is_file(),
        "{diagnostics}"
    );
}
