//! Attacks on managed policy: an administrator's mistake in a managed file (each way a
//! file can break), a user shedding or moving managed policy through the environment, a
//! repository setting `HOOKHOST_*` variables through Claude Code's project `env` block.
//! Each test tries the attack and checks that governance holds.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    TestEnv, as_nobody, bash_input, chown_tree, copy_env, deny_dangerous_bash, hooks, run_bounded,
};

/// Whether the tests run as root; when not, prints the visible skip line.
pub(super) fn root_or_skip(test: &str, why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("SKIPPED: {test}: {why} needs root");
    false
}

/// A hook that leaves `marker` in the project when it runs.
pub(super) fn marking(id: &str, marker: &str) -> Value {
    json!({"type": "command", "id": id, "command": format!("touch {marker}")})
}

/// A command hook that denies `rm -rf` (exit 2) and allows anything else.
pub(super) fn rm_guard(id: &str) -> Value {
    json!({"type": "command", "id": id,
        "command": "input=$(cat); case \"$input\" in *'rm -rf'*) echo 'no rm -rf' >&2; exit 2;; esac; exit 0"})
}

/// The skip reason or status of each hook of an outcome, by id.
fn statuses(out: &Value) -> Vec<(String, String, String)> {
    out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["id"].as_str().unwrap_or_default().to_string(),
                h["status"].as_str().unwrap_or_default().to_string(),
                h["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `HOME` and the XDG directories inside the test's root, so that a refused variable's
/// default never touches the real user's files.
pub(super) fn isolated_home(env: &TestEnv, cmd: &mut Command) {
    let home = env.home.join("fake-home");
    std::fs::create_dir_all(&home).unwrap();
    cmd.env("HOME", &home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME");
}

/// Every way a managed file can break, in `managed.json`, a `managed.d` entry or
/// `managed.d` itself: no hook outside managed policy runs, managed hooks still do, and
/// every outcome names the file and the error. Checked to fail with the old rule (a
/// broken managed file was dropped and everything else ran).
#[test]
fn a_broken_managed_file_fails_closed_for_every_kind_of_breakage() {
    type Break = fn(&Path);
    let fifo: Break = |p| {
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    };
    // (what, where: `json` = managed.json, `d` = a managed.d entry, `dir` = managed.d, the breakage, words)
    let cases: &[(&str, &str, Break, &str)] = &[
        (
            "syntax",
            "json",
            |p| std::fs::write(p, "{").unwrap(),
            "invalid JSON",
        ),
        (
            "wrong type",
            "d",
            |p| std::fs::write(p, r#"{"requireAllowlistedPlugins": "yes"}"#).unwrap(),
            "expected a boolean",
        ),
        (
            "misspelt key",
            "json",
            |p| std::fs::write(p, r#"{"allowManagedHooksOnli": true}"#).unwrap(),
            "unknown field `allowManagedHooksOnli`",
        ),
        (
            "string ceiling",
            "d",
            |p| std::fs::write(p, r#"{"ceilings": {"timeout": "5"}}"#).unwrap(),
            "$.ceilings.timeout",
        ),
        (
            "device",
            "json",
            |p| std::os::unix::fs::symlink("/dev/zero", p).unwrap(),
            "a character device",
        ),
        ("fifo", "d", fifo, "a FIFO"),
        (
            "dangling symlink",
            "json",
            |p| std::os::unix::fs::symlink("/nonexistent/managed.json", p).unwrap(),
            "a symlink to nothing",
        ),
        (
            "not UTF-8",
            "d",
            |p| std::fs::write(p, b"{\"description\": \"\xff\"}").unwrap(),
            "not UTF-8",
        ),
        (
            "too large",
            "json",
            |p| {
                std::fs::File::create(p)
                    .unwrap()
                    .set_len((16 << 20) + 1)
                    .unwrap()
            },
            "above the cap",
        ),
        (
            "writable by others",
            "d",
            |p| {
                std::fs::write(p, "{}").unwrap();
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666)).unwrap();
            },
            "other users can write it",
        ),
        (
            "a guard that cannot be built",
            "d",
            |p| {
                std::fs::write(p, r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "exit 2", "if": "Bash("}]}]}}"#).unwrap()
            },
            "invalid `if` rule",
        ),
        (
            "managed.d is a file",
            "dir",
            |p| std::fs::write(p, "{}").unwrap(),
            "`managed.d` is a regular file",
        ),
    ];
    for (what, place, breakage, words) in cases {
        let env = TestEnv::new();
        let (guard_file, broken) = match *place {
            "json" => (
                env.managed.join("managed.d/00-guard.json"),
                env.managed.join("managed.json"),
            ),
            "d" => (
                env.managed.join("managed.json"),
                env.managed.join("managed.d/50-broken.json"),
            ),
            _ => (
                env.managed.join("managed.json"),
                env.managed.join("managed.d"),
            ),
        };
        std::fs::create_dir_all(env.managed.join("managed.d")).unwrap();
        if *place == "dir" {
            std::fs::remove_dir(&broken).unwrap();
        }
        let guard = hooks(
            "PreToolUse",
            "Bash",
            json!([marking("managed-guard", "managed-ran")]),
        );
        std::fs::write(&guard_file, guard.to_string()).unwrap();
        breakage(&broken);
        env.user_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([marking("user-hook", "user-ran")]),
        ));
        env.project_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([marking("project-hook", "project-ran")]),
        ));
        let run = run_bounded(
            env.command().args(["dispatch", "PreToolUse"]),
            &bash_input("ls").to_string(),
            Duration::from_secs(60),
        )
        .unwrap_or_else(|| panic!("{what}: the dispatch hung"));
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        let out = run.json();
        let got = statuses(&out);
        assert!(
            got.iter()
                .any(|(id, status, _)| id == "managed-guard" && status == "ok"),
            "{what}: managed hooks still run: {got:?}"
        );
        for id in ["user-hook", "project-hook"] {
            let (_, status, message) = got
                .iter()
                .find(|(i, ..)| i == id)
                .unwrap_or_else(|| panic!("{what}: {id} is listed: {got:?}"));
            assert_eq!(status, "skipped", "{what}: {id}");
            assert!(
                message.starts_with("managed policy is broken"),
                "{what}: {message}"
            );
        }
        assert!(env.project.join("managed-ran").exists(), "{what}");
        assert!(
            !env.project.join("user-ran").exists(),
            "{what}: the user hook ran"
        );
        assert!(
            !env.project.join("project-ran").exists(),
            "{what}: the project hook ran"
        );
        let notices = out["notices"].to_string();
        let shown = broken.display().to_string();
        assert!(
            notices.contains("managed policy is broken")
                && notices.contains(&shown)
                && notices.contains(words),
            "{what}: {notices}"
        );
    }
}

/// The control of the test above: the same setup with a sound managed file runs every
/// hook (so the test can tell a broken file from a working one).
#[test]
fn a_sound_managed_file_lets_every_hook_run() {
    let env = TestEnv::new();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("managed-guard", "managed-ran")]),
    ));
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("user-hook", "user-ran")]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["notices"], json!([]));
    assert!(env.project.join("managed-ran").exists() && env.project.join("user-ran").exists());
}

/// A managed file that the user cannot read (another uid runs hookhost; the file is
/// root's, mode 0600) fails closed too, instead of being treated as absent.
#[test]
fn an_unreadable_managed_file_fails_closed() {
    if !root_or_skip(
        "an_unreadable_managed_file_fails_closed",
        "a second uid (setpriv)",
    ) {
        return;
    }
    let env = TestEnv::new();
    let root = env.project.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.managed(json!({"allowManagedHooksOnly": true}));
    std::fs::set_permissions(
        env.managed.join("managed.json"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("user-hook", "user-ran")]),
    ));
    for dir in [&env.project, &env.home, &env.data] {
        chown_tree(dir, 65534);
    }
    let run = run_bounded(
        &mut as_nobody(env.command().args(["dispatch", "PreToolUse"])),
        &bash_input("ls").to_string(),
        Duration::from_secs(60),
    )
    .expect("the dispatch ends");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert!(!env.project.join("user-ran").exists(), "{out}");
    let notices = out["notices"].to_string();
    assert!(
        notices.contains("managed policy is broken") && notices.contains("Permission denied"),
        "{notices}"
    );
}

/// An invalid ceiling value is the strictest value, never absent: `timeout: 0` or `-1`
/// refuses every capped hook, wasm and command alike (it used to be ignored, so the hook
/// ran uncapped), and
/// a ceiling of the wrong type breaks the file, which fails closed.
#[test]
fn an_invalid_ceiling_is_the_strictest_value() {
    for invalid in [json!(0), json!(-1)] {
        let env = TestEnv::new();
        env.managed(json!({"ceilings": {"timeout": invalid}}));
        env.project_hooks(hooks(
            "PreToolUse",
            "Bash",
            json!([
                {"type": "wasm", "id": "capped", "plugin": "plugins/none.wasm"},
                marking("command-hook", "command-ran")
            ]),
        ));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        let notices = out["notices"].to_string();
        assert!(
            notices.contains("hook refused by managed policy")
                && notices.contains("`ceilings.timeout` is invalid"),
            "{invalid}: {notices}"
        );
        assert!(
            !statuses(&out).iter().any(|(id, ..)| id == "capped"),
            "{invalid}: the capped hook is refused: {out}"
        );
        // The time ceiling caps every handler type: the command hook is refused too.
        assert!(
            !statuses(&out).iter().any(|(id, ..)| id == "command-hook"),
            "{invalid}: the command hook is refused: {out}"
        );
        assert!(!env.project.join("command-ran").exists(), "{invalid}");
    }
}

/// A repository cannot become managed policy: with `HOOKHOST_MANAGED_DIR` empty,
/// relative or inside the workspace (values a repository can set through Claude Code's
/// project `env` block), the repository's own `managed.json` is not read. Checked to fail
/// without the rule: an empty value used to resolve to the working directory.
#[test]
fn the_repository_cannot_become_managed_policy_through_the_environment() {
    let env = TestEnv::new();
    let evil = json!({
        "trustedWorkspaces": ["/**"],
        "hooks": {"PreToolUse": [{"hooks": [marking("repo-managed", "repo-managed-ran")]}]}
    });
    env.write("managed.json", &evil.to_string());
    env.write("policy/managed.json", &evil.to_string());
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("project", "project-ran")]),
    ));
    let inside = env.project.join("policy").display().to_string();
    for value in ["", ".", "./", "policy", inside.as_str()] {
        let mut cmd = env.untrusted_command();
        cmd.env("HOOKHOST_MANAGED_DIR", value);
        isolated_home(&env, &mut cmd);
        let run = env.run_with(
            cmd.args(["dispatch", "PreToolUse"]),
            &bash_input("ls").to_string(),
        );
        assert_eq!(run.code, 0, "{value:?}: {}", run.stderr);
        let out = run.json();
        assert!(
            !env.project.join("repo-managed-ran").exists(),
            "{value:?}: {out}"
        );
        assert!(
            !env.project.join("project-ran").exists(),
            "{value:?}: pre-trusted itself"
        );
        if !value.is_empty() {
            assert!(
                out["notices"]
                    .to_string()
                    .contains("HOOKHOST_MANAGED_DIR `"),
                "{value:?}: {out}"
            );
        }
    }
    // Control: the same policy in a directory outside the workspace is managed policy
    // (no system policy exists here, so the variable is honoured).
    std::fs::write(env.managed.join("managed.json"), evil.to_string()).unwrap();
    let out = env.run_untrusted(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(env.project.join("repo-managed-ran").exists());
}

/// A repository cannot make its own hooks "user" hooks (which run without workspace
/// trust) by pointing `HOOKHOST_HOME` at itself; an empty value is unset.
#[test]
fn the_repository_cannot_pass_its_hooks_off_as_the_users() {
    let env = TestEnv::new();
    let evil = hooks(
        "PreToolUse",
        "Bash",
        json!([marking("repo-as-user", "repo-ran")]),
    );
    env.write("hooks.json", &evil.to_string());
    env.write("cfg/hooks.json", &evil.to_string());
    let inside = env.project.join("cfg").display().to_string();
    for value in ["", ".", "cfg", inside.as_str()] {
        let mut cmd = env.untrusted_command();
        cmd.env("HOOKHOST_HOME", value);
        isolated_home(&env, &mut cmd);
        let run = env.run_with(
            cmd.args(["dispatch", "PreToolUse"]),
            &bash_input("ls").to_string(),
        );
        assert_eq!(run.code, 0, "{value:?}: {}", run.stderr);
        assert!(
            !env.project.join("repo-ran").exists(),
            "{value:?}: {}",
            run.stdout
        );
    }
    // Control: the same file as the real user's config runs.
    env.user_hooks(evil);
    env.run_untrusted(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert!(env.project.join("repo-ran").exists());
}

/// `HOOKHOST_TRUST_WORKSPACE` trusts only when exactly `1`; managed policy can forbid the
/// switch (`forbidEnvironmentTrust`) while `--trust-workspace` still works.
#[test]
fn the_trust_switch_is_exactly_1_and_managed_policy_can_forbid_it() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("project", "project-ran")]),
    ));
    let marker = env.project.join("project-ran");
    let dispatch = |value: &[u8], extra: &[&str]| {
        let _ = std::fs::remove_file(&marker);
        let mut cmd = env.untrusted_command();
        cmd.env(
            "HOOKHOST_TRUST_WORKSPACE",
            std::ffi::OsStr::from_bytes(value),
        );
        let run = env.run_with(
            cmd.args(["dispatch", "PreToolUse"]).args(extra),
            &bash_input("ls").to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
        (marker.exists(), run.json())
    };
    for value in [
        &b" 1"[..],
        b"1\n",
        b"1 ",
        b"\t1",
        b"01",
        b"true",
        b"yes",
        b"",
        b"\xff",
    ] {
        assert!(
            !dispatch(value, &[]).0,
            "{:?} trusted",
            String::from_utf8_lossy(value)
        );
    }
    assert!(dispatch(b"1", &[]).0, "exactly 1 trusts");
    env.managed(json!({"forbidEnvironmentTrust": true}));
    let (ran, out) = dispatch(b"1", &[]);
    assert!(!ran, "managed policy forbids the switch");
    assert!(
        out["hooks"].to_string().contains("forbidEnvironmentTrust"),
        "{out}"
    );
    assert!(
        dispatch(b"", &["--trust-workspace"]).0,
        "the flag still trusts"
    );
}

/// Managed policy fixes where the audit log goes: `HOOKHOST_AUDIT_LOG=/dev/null` does not
/// silence it. Without the managed key, a log path inside the workspace is refused (the
/// default is used) with a notice.
#[test]
fn the_audit_log_cannot_be_moved_off_when_managed_policy_fixes_it() {
    let env = TestEnv::new();
    let logs = env.home.join("audit-logs");
    std::fs::create_dir_all(&logs).unwrap();
    env.managed(json!({"auditLog": format!("{}/${{uid}}.jsonl", logs.display())}));
    let mut cmd = env.command();
    cmd.env("HOOKHOST_AUDIT_LOG", "/dev/null");
    let run = env.run_with(cmd.args(["dispatch", "Stop"]), "{}");
    assert_eq!(run.code, 0, "{}", run.stderr);
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let log = std::fs::read_to_string(logs.join(format!("{uid}.jsonl"))).unwrap_or_default();
    assert_eq!(
        log.lines().filter(|l| !l.contains("\"kind\":")).count(),
        1,
        "the dispatch is recorded where managed policy says (beside the chain's genesis)"
    );

    let env = TestEnv::new();
    for value in ["audit.jsonl", "./x/audit.jsonl"] {
        let mut cmd = env.command();
        cmd.env("HOOKHOST_AUDIT_LOG", value);
        let run = env.run_with(cmd.args(["dispatch", "Stop"]), "{}");
        assert!(
            run.json()["notices"]
                .to_string()
                .contains("HOOKHOST_AUDIT_LOG `"),
            "{value}: {}",
            run.stdout
        );
        assert!(!env.project.join("audit.jsonl").exists() && !env.project.join("x").exists());
    }
    assert_eq!(
        env.audit_entries().len(),
        2,
        "recorded in the default log instead"
    );
}

/// `HOOKHOST_STOP_BLOCK_CAP` cannot lower a cap managed policy sets, and a value that is
/// not digits is ignored with a notice.
#[test]
fn the_environment_cannot_lower_a_managed_stop_cap() {
    let env = TestEnv::new();
    let block = json!({"type": "command", "command": "echo 'keep working' >&2; exit 2"});
    let stop = json!({"session_id": "cap", "hook_event_name": "Stop", "stop_hook_active": false});
    let stops = |cmd: &dyn Fn() -> Command| -> Vec<String> {
        (0..3)
            .map(|_| {
                let run = env.run_with(cmd().args(["dispatch", "Stop"]), &stop.to_string());
                run.json()["decision"].as_str().unwrap().to_string()
            })
            .collect()
    };
    let managed = json!({"stopBlockCap": 8, "hooks": {"Stop": [{"hooks": [block]}]}});
    env.managed(managed);
    let with_cap = || {
        let mut cmd = env.command();
        cmd.env("HOOKHOST_STOP_BLOCK_CAP", "1");
        cmd
    };
    assert_eq!(stops(&with_cap), ["block", "block", "block"]);
    let bad = {
        let mut cmd = env.command();
        cmd.env("HOOKHOST_STOP_BLOCK_CAP", " 2");
        env.run_with(cmd.args(["dispatch", "Stop"]), &stop.to_string())
    };
    assert!(
        bad.json()["notices"]
            .to_string()
            .contains("HOOKHOST_STOP_BLOCK_CAP ` 2` is not a number"),
        "{}",
        bad.stdout
    );
    // Control: without the managed cap, the environment's cap applies.
    let env2 = TestEnv::new();
    env2.managed(
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "exit 2"}]}]}}),
    );
    let runs: Vec<String> = (0..2)
        .map(|_| {
            let mut cmd = env2.command();
            cmd.env("HOOKHOST_STOP_BLOCK_CAP", "1");
            let run = env2.run_with(cmd.args(["dispatch", "Stop"]), &stop.to_string());
            run.json()["decision"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(runs, ["block", "none"]);
}

/// Compiled plugins are native code: a repository cannot point the compile cache into
/// itself (relative or inside the workspace), where it could plant an artifact.
#[test]
fn the_compile_cache_is_never_in_the_workspace() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "plugin": plugin.display().to_string()}]),
    ));
    let inside = env.project.join("cache-abs").display().to_string();
    for value in ["cache-rel", inside.as_str()] {
        let mut cmd = env.command();
        cmd.env("HOOKHOST_CACHE_DIR", value);
        isolated_home(&env, &mut cmd);
        let run = env.run_with(
            cmd.args(["dispatch", "PreToolUse"]),
            &bash_input("rm -rf /").to_string(),
        );
        assert_eq!(run.json()["decision"], "deny", "{value}: {}", run.stdout);
        assert!(
            !env.project.join("cache-rel").exists() && !env.project.join("cache-abs").exists(),
            "{value}: the cache was written into the workspace"
        );
    }
}

/// Values that are not UTF-8 in every `HOOKHOST_*` variable never make dispatch panic,
/// and a managed guard (a wasm plugin, whose environment is not the command hooks') still
/// blocks.
#[test]
fn values_that_are_not_utf8_never_disarm_a_managed_guard() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "plugin": plugin.display().to_string()}]),
    ));
    let odd = |prefix: &Path, bytes: &[u8]| -> std::ffi::OsString {
        let mut path = prefix.as_os_str().as_bytes().to_vec();
        path.extend_from_slice(bytes);
        std::ffi::OsStr::from_bytes(&path).to_os_string()
    };
    let mut cmd = env.command();
    cmd.env("HOOKHOST_HOME", odd(&env.home, b"/\xff"))
        .env("HOOKHOST_AUDIT_LOG", odd(&env.data, b"/\xfe.jsonl"))
        .env(
            "HOOKHOST_STOP_BLOCK_CAP",
            std::ffi::OsStr::from_bytes(b"\xff"),
        )
        .env(
            "HOOKHOST_TRUST_WORKSPACE",
            std::ffi::OsStr::from_bytes(b"\xff"),
        )
        .env("HOOKHOST_CACHE_DIR", odd(&env.data, b"/cache\xff"));
    let run = env.run_with(
        cmd.args(["dispatch", "PreToolUse"]),
        &bash_input("rm -rf /").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["decision"], "deny", "{}", run.stdout);
}

/// The system's managed policy (`/etc/hookhost`, here in a private mount namespace over
/// a copy-on-write `/etc`) cannot be moved or shed by `HOOKHOST_MANAGED_DIR`, and a
/// broken system file fails closed.
#[test]
fn system_policy_cannot_be_moved_or_shed_by_the_environment() {
    if !root_or_skip(
        "system_policy_cannot_be_moved_or_shed_by_the_environment",
        "a private mount namespace (unshare -m)",
    ) {
        return;
    }
    let env = TestEnv::new();
    let policy = json!({
        "allowManagedHooksOnly": true,
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [rm_guard("system-guard")]}]}
    });
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("user", "user-ran")]),
    ));
    let empty = env.home.join("empty-policy");
    std::fs::create_dir_all(&empty).unwrap();
    for value in [Some(empty.as_os_str()), Some("".as_ref()), None] {
        let out = in_system_policy(&env, &policy.to_string(), value, "rm -rf /");
        assert_eq!(out["decision"], "deny", "{value:?}: {out}");
        assert!(!env.project.join("user-ran").exists(), "{value:?}");
        if value == Some(empty.as_os_str()) {
            assert!(
                out["notices"]
                    .to_string()
                    .contains("is ignored: the system's managed policy `/etc/hookhost` exists"),
                "{out}"
            );
        }
    }
    let out = in_system_policy(&env, "{ broken", Some(empty.as_os_str()), "ls");
    assert!(!env.project.join("user-ran").exists(), "{out}");
    assert!(
        out["notices"]
            .to_string()
            .contains("managed policy is broken")
            && out["notices"]
                .to_string()
                .contains("/etc/hookhost/managed.json"),
        "{out}"
    );
    assert!(
        std::fs::symlink_metadata("/etc/hookhost").is_err(),
        "nothing leaked to the real /etc"
    );
}

/// The system's managed policy belongs to root: a `/etc/hookhost/managed.json` owned by
/// the very user who runs hookhost (who could then rewrite it to shed its guards) is
/// refused, and refused policy fails closed. (In an override directory, for tests and
/// unmanaged machines, the user's own files are accepted.) Checked to fail when the
/// system directory accepted the running user as an owner: the user's hook ran.
#[test]
fn system_policy_owned_by_the_user_is_refused() {
    if !root_or_skip(
        "system_policy_owned_by_the_user_is_refused",
        "a private mount namespace (unshare -m) and a second uid (setpriv)",
    ) {
        return;
    }
    let env = TestEnv::new();
    let root = env.project.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([marking("user", "user-ran")]),
    ));
    for dir in [&env.project, &env.home, &env.data] {
        chown_tree(dir, 65534);
    }
    let out = in_system_policy_owned_by(&env, "{}", None, "ls", 65534);
    assert!(!env.project.join("user-ran").exists(), "{out}");
    let notices = out["notices"].to_string();
    assert!(
        notices.contains("managed policy is broken")
            && notices.contains("/etc/hookhost/managed.json")
            && notices.contains("refused"),
        "{out}"
    );
    // Root's own file with the same content lets the user's hook run.
    chown_tree(&env.project, 0);
    let out = in_system_policy(&env, "{}", None, "ls");
    assert!(env.project.join("user-ran").exists(), "{out}");
}

/// Dispatches a Bash `command` with `managed_json` as `/etc/hookhost/managed.json` in a
/// private mount namespace: `/etc` is an overlay whose upper layer is in the test's
/// temp dir, so the real `/etc` is never written.
fn in_system_policy(
    env: &TestEnv,
    managed_json: &str,
    managed_dir: Option<&std::ffi::OsStr>,
    command: &str,
) -> Value {
    in_system_policy_owned_by(env, managed_json, managed_dir, command, 0)
}

/// [`in_system_policy`] with `/etc/hookhost/managed.json` owned by `owner`, and hookhost
/// run as `owner` (through `setpriv` inside the namespace) when it is not root.
fn in_system_policy_owned_by(
    env: &TestEnv,
    managed_json: &str,
    managed_dir: Option<&std::ffi::OsStr>,
    command: &str,
    owner: u32,
) -> Value {
    let layers = tempfile::tempdir().unwrap();
    let (upper, work): (PathBuf, PathBuf) = (layers.path().join("up"), layers.path().join("work"));
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let policy = layers.path().join("managed.json");
    std::fs::write(&policy, managed_json).unwrap();
    let script = r#"set -e
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc
mkdir -m 0755 /etc/hookhost
cp "$3" /etc/hookhost/managed.json
chmod 0644 /etc/hookhost/managed.json
chown "$4:$4" /etc/hookhost/managed.json
owner=$4
shift 4
if [ "$owner" = 0 ]; then exec "$@"; fi
exec setpriv --reuid="$owner" --regid="$owner" --clear-groups -- "$@""#;
    let inner = env.command();
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(&upper)
    .arg(&work)
    .arg(&policy)
    .arg(owner.to_string())
    .arg(inner.get_program())
    .args(["dispatch", "PreToolUse"])
    .current_dir(&env.project);
    copy_env(&inner, &mut cmd);
    match managed_dir {
        Some(dir) => cmd.env("HOOKHOST_MANAGED_DIR", dir),
        None => cmd.env_remove("HOOKHOST_MANAGED_DIR"),
    };
    let run = run_bounded(
        &mut cmd,
        &bash_input(command).to_string(),
        Duration::from_secs(60),
    )
    .expect("the dispatch ends");
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}
