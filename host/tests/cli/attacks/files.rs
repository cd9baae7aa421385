//! Attacks through the files a repository (or anyone who can write a config path) puts
//! where hookhost reads config: symlinks to devices, FIFOs, huge files, dangling links,
//! odd bytes. Every read is of a regular file under a cap, opened without blocking,
//! before any trust decision; the tests bound each dispatch in time so that a hang fails
//! them instead of wedging the suite.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::managed::marking;
use crate::support::run_bounded;
use crate::support::{TestEnv, bash_input, hooks};

const LIMIT: Duration = Duration::from_secs(30);

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

type Plant = fn(&TestEnv, &Path);

/// What a repository can put where a config file is expected, and the words of the error.
fn plants() -> Vec<(&'static str, Plant, &'static str)> {
    vec![
        (
            "a symlink to /dev/zero",
            |_, p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            "a character device",
        ),
        (
            "a symlink to /dev/tty",
            |_, p| std::os::unix::fs::symlink("/dev/tty", p).unwrap(),
            "cannot read file",
        ),
        ("a FIFO with no writer", |_, p| mkfifo(p), "a FIFO"),
        (
            "a symlink to a FIFO",
            |_, p| {
                let fifo = p.with_extension("target-fifo");
                mkfifo(&fifo);
                std::os::unix::fs::symlink(&fifo, p).unwrap();
            },
            "a FIFO",
        ),
        (
            "a sparse 17 MiB file",
            |_, p| std::fs::File::create(p).unwrap().set_len(17 << 20).unwrap(),
            "above the cap",
        ),
        (
            "a dangling symlink",
            |_, p| std::os::unix::fs::symlink("/nonexistent/hooks.json", p).unwrap(),
            "a symlink to nothing",
        ),
        (
            "a directory",
            |_, p| std::fs::create_dir(p).unwrap(),
            "a directory",
        ),
    ]
}

/// `.hookhost/hooks.json` and `hooks.local.json` planted as devices, FIFOs, huge or
/// dangling files: the dispatch ends at once, in a trusted and in an untrusted
/// workspace (whose trust check fingerprints the files before deciding), with a notice
/// naming the file and what it is, and the other sources still run. Checked to hang (a
/// FIFO, `/dev/zero`) without the rule.
#[test]
fn repository_config_files_that_are_not_small_regular_files_are_refused_without_reading() {
    for name in ["hooks.json", "hooks.local.json"] {
        for (what, plant, words) in plants() {
            let env = TestEnv::new();
            env.user_hooks(hooks(
                "PreToolUse",
                "Bash",
                json!([marking("user", "user-ran")]),
            ));
            let path = env.project.join(".hookhost").join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            plant(&env, &path);
            for mut cmd in [env.command(), env.untrusted_command()] {
                let _ = std::fs::remove_file(env.project.join("user-ran"));
                let run = run_bounded(
                    cmd.args(["dispatch", "PreToolUse"]),
                    &bash_input("ls").to_string(),
                    LIMIT,
                )
                .unwrap_or_else(|| panic!("{name} as {what}: the dispatch hung"));
                assert_eq!(run.code, 0, "{name} as {what}: {}", run.stderr);
                let notices = run.json()["notices"].to_string();
                assert!(
                    notices.contains(&path.display().to_string()) && notices.contains(words),
                    "{name} as {what}: {notices}"
                );
                assert!(env.project.join("user-ran").exists(), "{name} as {what}");
            }
        }
    }
}

/// The user's own file and a `--settings FILE` planted the same way end the dispatch at
/// once too.
#[test]
fn settings_files_that_are_not_small_regular_files_are_refused_without_reading() {
    for (what, plant, words) in plants() {
        let env = TestEnv::new();
        let user = env.home.join("hooks.json");
        plant(&env, &user);
        let settings = env.home.join("settings-file.json");
        plant(&env, &settings);
        let run = run_bounded(
            env.command()
                .args(["dispatch", "PreToolUse", "--settings"])
                .arg(&settings),
            &bash_input("ls").to_string(),
            LIMIT,
        )
        .unwrap_or_else(|| panic!("{what}: the dispatch hung"));
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        let notices = run.json()["notices"].to_string();
        for file in [&user, &settings] {
            assert!(
                notices.contains(&file.display().to_string()),
                "{what}: {notices}"
            );
        }
        assert!(notices.contains(words), "{what}: {notices}");
    }
}

/// A plugin path of `/dev/zero` or a FIFO in an untrusted repository: computing the trust
/// fingerprint (which hashes every plugin the project references) ends at once, and so
/// does `hookhost trust`. Checked to hang without the rule (the fingerprint read
/// `/dev/zero` to the end).
#[test]
fn plugin_paths_that_are_devices_do_not_hang_the_trust_check() {
    let env = TestEnv::new();
    let fifo = env.project.join("plugins/fifo.wasm");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    mkfifo(&fifo);
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "wasm", "id": "zero", "plugin": "/dev/zero"},
            {"type": "wasm", "id": "fifo", "plugin": "../plugins/fifo.wasm"},
            marking("project", "project-ran")
        ]),
    ));
    let run = run_bounded(
        env.untrusted_command().args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
        LIMIT,
    )
    .expect("the untrusted dispatch hung on the fingerprint");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!env.project.join("project-ran").exists(), "untrusted");
    let status = run_bounded(
        env.untrusted_command().args(["trust", "--status"]),
        "",
        LIMIT,
    )
    .expect("hookhost trust --status hung");
    // Answered: not trusted yet (3), not an error (1).
    assert_eq!(status.code, 3, "{}", status.stderr);
    let trust =
        run_bounded(env.untrusted_command().arg("trust"), "", LIMIT).expect("hookhost trust hung");
    assert_eq!(trust.code, 0, "{}", trust.stderr);
    assert!(
        trust.stdout.contains("(absent)"),
        "unreadable plugins: {}",
        trust.stdout
    );
}

/// A managed `managed.d` entry whose name is not UTF-8 (or holds terminal escapes) and
/// whose content is broken: the dispatch does not panic, fails closed, and the outcome is
/// JSON that carries the name escaped.
#[test]
fn odd_bytes_in_managed_file_names_do_not_break_the_outcome() {
    let env = TestEnv::new();
    let dir = env.managed.join("managed.d");
    std::fs::create_dir_all(&dir).unwrap();
    let mut name = b"1\xff\x1b[31m".to_vec();
    name.extend_from_slice(b".json");
    let path = dir.join(std::ffi::OsStr::from_bytes(&name));
    std::fs::write(&path, "{ broken").unwrap();
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("user", "user-ran")]),
    ));
    let run = run_bounded(
        env.command().args(["dispatch", "PreToolUse"]),
        &bash_input("ls").to_string(),
        LIMIT,
    )
    .expect("the dispatch ends");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.contains('\u{1b}'),
        "raw ESC in the JSON: {}",
        run.stdout
    );
    let notices = run.json()["notices"].to_string();
    assert!(notices.contains("managed policy is broken"), "{notices}");
    assert!(!env.project.join("user-ran").exists());
}
