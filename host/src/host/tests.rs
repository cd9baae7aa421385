//! Tests of the host builder: sources, trust, last good versions, fingerprints.

use super::*;

const GUARD: &str = r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
    {"type": "command", "id": "guard", "command": "exit 2"}]}]}}"#;

struct Dirs {
    _root: tempfile::TempDir,
    project: PathBuf,
    user: PathBuf,
    managed: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().to_path_buf();
    let d = Dirs {
        project: base.join("project"),
        user: base.join("user"),
        managed: base.join("managed"),
        _root: root,
    };
    for dir in [&d.project, &d.user, &d.managed] {
        std::fs::create_dir_all(dir).unwrap();
    }
    d
}

fn builder(d: &Dirs) -> HostBuilder {
    HostBuilder::new(&d.project)
        .user_dir(&d.user)
        .managed_dir(&d.managed)
}

/// The builder resolves with the filesystem's real paths (`resolve_options`): a
/// user hook whose directory grant is inside the managed ceiling as written, but is a
/// symlink to a place outside it, is refused when the host is built, naming the grant.
#[test]
fn a_grant_that_is_a_symlink_out_of_the_ceiling_is_refused_at_build() {
    let d = dirs();
    let src = d.project.join("src");
    std::fs::create_dir(&src).unwrap();
    std::os::unix::fs::symlink("/etc", src.join("link")).unwrap();
    std::fs::create_dir(src.join("lib")).unwrap();
    std::fs::write(
        d.managed.join("managed.json"),
        r#"{"ceilings": {"dirs": [{"path": "${workspace}/src", "mode": "ro"}]}}"#,
    )
    .unwrap();
    let hook = |dir: &str| {
        format!(
            r#"{{"hooks": {{"PreToolUse": [{{"hooks": [{{"type": "wasm", "id": "w",
                "plugin": "/nonexistent.wasm",
                "capabilities": {{"dirs": [{{"path": "${{workspace}}/src/{dir}"}}]}}}}]}}]}}}}"#
        )
    };
    let refusals = |dir: &str| {
        std::fs::write(d.user.join("hooks.json"), hook(dir)).unwrap();
        let host = builder(&d).build();
        host.policy()
            .errors
            .iter()
            .map(ToString::to_string)
            .filter(|e| e.contains("hook refused by managed policy"))
            .collect::<Vec<_>>()
    };
    let refused = refusals("link");
    assert!(
        refused.len() == 1 && refused[0].contains("`${workspace}/src/link` (ro) is above"),
        "{refused:?}"
    );
    assert_eq!(refusals("lib"), Vec::<String>::new());
}

/// The hooks that would run: `(id, skipped)`.
fn running(host: &Host) -> Vec<String> {
    host.policy()
        .hooks
        .iter()
        .filter(|h| h.skip.is_none())
        .map(|h| h.id.clone())
        .collect()
}

#[test]
fn a_daemon_keeps_the_last_good_version_of_a_broken_file_in_force() {
    let d = dirs();
    let file = d.user.join("hooks.json");
    std::fs::write(&file, GUARD).unwrap();
    let mut host = builder(&d).reload_of(None).build();
    assert_eq!(running(&host), ["guard"]);
    assert!(host.policy().notices.is_empty());
    let broken_versions = [
        "{ not json",
        r#"{"hooks": {"PreToolUse": {}}}"#,
        // Parses, but its hook cannot be built (an invalid regex matcher).
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": [
            {"type": "command", "id": "guard", "command": "true"}]}]}}"#,
    ];
    for broken in broken_versions {
        std::fs::write(&file, broken).unwrap();
        // The one-shot rule: no previous version, the file's hooks are skipped.
        let one_shot = builder(&d).build();
        assert!(running(&one_shot).is_empty(), "{broken}");
        assert!(
            one_shot.policy().notices[0].starts_with("config error, hooks skipped"),
            "{:?}",
            one_shot.policy().notices
        );
        host = host.rebuild(|previous| builder(&d).reload_of(Some(previous)).build());
        assert_eq!(running(&host), ["guard"], "{broken}");
        let notices = &host.policy().notices;
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].contains(&file.display().to_string())
                && notices[0].contains("previous version of this file")
                && notices[0].contains("stays in force"),
            "{notices:?}"
        );
    }
    // Fixed: the new version is in force and the notice is gone.
    std::fs::write(&file, GUARD.replace("\"guard\"", "\"guard-2\"")).unwrap();
    host = host.rebuild(|previous| builder(&d).reload_of(Some(previous)).build());
    assert_eq!(running(&host), ["guard-2"]);
    assert!(host.policy().notices.is_empty());
    // Removing the file removes its hooks: an absent file is not a broken one.
    std::fs::remove_file(&file).unwrap();
    host = host.rebuild(|previous| builder(&d).reload_of(Some(previous)).build());
    assert!(running(&host).is_empty());
}

/// A dispatch daemon whose requests alternate between projects builds each host with
/// the other project's host as its previous one: the user's file (shared) and each
/// project's own files keep their last good versions across the switches.
#[test]
fn last_good_versions_survive_switching_projects() {
    let d = dirs();
    let other = d.project.parent().unwrap().join("other");
    std::fs::create_dir_all(other.join(".hookhost")).unwrap();
    std::fs::create_dir_all(d.project.join(".hookhost")).unwrap();
    let of = |project: &std::path::Path| {
        HostBuilder::new(project)
            .user_dir(&d.user)
            .managed_dir(&d.managed)
            .workspace_trust(WorkspaceTrust::Explicit)
    };
    let user = d.user.join("hooks.json");
    let project_file = d.project.join(".hookhost/hooks.json");
    std::fs::write(&user, GUARD).unwrap();
    std::fs::write(
        &project_file,
        GUARD.replace("\"guard\"", "\"project-guard\""),
    )
    .unwrap();
    let a = of(&d.project).reload_of(None).build();
    let mut running_a = running(&a);
    running_a.sort();
    assert_eq!(running_a, ["guard", "project-guard"]);
    std::fs::write(&user, "{ broken").unwrap();
    std::fs::write(&project_file, "{ broken").unwrap();
    let b = of(&other).reload_of(Some(&a)).build();
    assert_eq!(
        running(&b),
        ["guard"],
        "the user's guard, in another project"
    );
    let a_again = of(&d.project).reload_of(Some(&b)).build();
    let mut running_a = running(&a_again);
    running_a.sort();
    assert_eq!(
        running_a,
        ["guard", "project-guard"],
        "the project's guard, after a request about another project"
    );
}

#[test]
fn broken_managed_policy_keeps_its_last_good_version_or_fails_closed() {
    let d = dirs();
    let managed = d.managed.join("managed.json");
    std::fs::write(&managed, r#"{"allowManagedHooksOnly": false}"#).unwrap();
    std::fs::write(d.user.join("hooks.json"), GUARD).unwrap();
    let host = builder(&d).reload_of(None).build();
    std::fs::write(&managed, r#"{"allowManagedHooksOnly": "no"}"#).unwrap();
    let reloaded = host.rebuild(|previous| builder(&d).reload_of(Some(previous)).build());
    assert_eq!(
        running(&reloaded),
        ["guard"],
        "the previous managed file is in force"
    );
    // A daemon that starts while managed policy is broken has no previous version.
    let fresh = builder(&d).reload_of(None).build();
    assert!(running(&fresh).is_empty());
    assert!(
        fresh.policy().hooks[0]
            .skip
            .as_deref()
            .unwrap()
            .starts_with("managed policy is broken")
    );
}

#[test]
fn a_rebuild_that_panics_keeps_the_previous_host_with_a_notice() {
    let d = dirs();
    std::fs::write(d.user.join("hooks.json"), GUARD).unwrap();
    let host = builder(&d).reload_of(None).build();
    let kept = host.rebuild(|_| panic!("boom"));
    assert_eq!(running(&kept), ["guard"]);
    assert_eq!(kept.policy().notices.len(), 1);
    assert!(
        kept.policy().notices[0].contains("config reload failed")
            && kept.policy().notices[0].contains("boom")
            && kept.policy().notices[0].contains("previous config stays in force"),
        "{:?}",
        kept.policy().notices
    );
    let again = kept.rebuild(|_| panic!("bang"));
    assert_eq!(again.policy().notices.len(), 1, "notices do not pile up");
    let recovered = again.rebuild(|previous| builder(&d).reload_of(Some(previous)).build());
    assert!(recovered.policy().notices.is_empty());
}

/// The trust store's directory is watched for who may write it, not for its entries:
/// sessions, daemons and caches created beside the store change nothing, a `chmod`
/// that makes the store untrusted does; so do the store and managed policy appearing.
#[test]
fn the_fingerprint_watches_the_store_directory_as_a_place() {
    use std::os::unix::fs::PermissionsExt;
    let d = dirs();
    let data = d.project.parent().unwrap().join("data");
    std::fs::create_dir(&data).unwrap();
    let store = data.join("trust.json");
    let host = builder(&d)
        .workspace_trust(WorkspaceTrust::Store(store.clone()))
        .build();
    let before = host.fingerprint();
    let mode = std::fs::metadata(&data).unwrap().permissions();
    std::fs::create_dir(data.join("sessions")).unwrap();
    std::fs::write(data.join("audit.jsonl"), "{}\n").unwrap();
    std::fs::write(d.managed.join("notes.txt"), "not policy").unwrap();
    assert_eq!(host.fingerprint(), before, "entries beside the store");
    assert!(host.fingerprint().is_settled());

    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let after = host.fingerprint();
    assert_eq!(
        after.changed_since(&before).into_iter().collect::<Vec<_>>(),
        std::slice::from_ref(&data)
    );
    std::fs::set_permissions(&data, mode).unwrap();
    assert_eq!(host.fingerprint(), before, "the mode set back");

    std::fs::write(&store, "{}").unwrap();
    std::fs::write(d.managed.join("managed.json"), "{}").unwrap();
    assert_eq!(
        host.fingerprint()
            .changed_since(&before)
            .into_iter()
            .collect::<Vec<_>>(),
        [store, d.managed.join("managed.json")]
    );
}

#[test]
fn the_fingerprint_sees_a_rewrite_of_the_same_size_and_mtime() {
    let d = dirs();
    let file = d.user.join("hooks.json");
    std::fs::write(&file, GUARD).unwrap();
    let host = builder(&d).build();
    let before = host.fingerprint();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&file, GUARD.replace("exit 2", "exit 0")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let after = host.fingerprint();
    assert_ne!(before, after);
    assert_eq!(
        after.changed_since(&before).into_iter().collect::<Vec<_>>(),
        [file]
    );
}
