//! Red team (stop 38): `install --codex` writing Codex's hook trust
//! (`cli/install/codex_trust.rs`), attacked with members nobody named. Trust is Codex's
//! security boundary: hookhost must never make Codex trust a hook the user did not
//! install through hookhost, nor run a `codex` (or what it runs) that someone else
//! placed. Each test is the attack and its control; the chokepoint fixed is named on it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::skip::skipped;
use crate::support::{Run, TestEnv, run_bytes};

/// The drop-in command the tests install (`--command`, so no PATH lookup of hookhost).
const COMMAND: &str = "hookhost dispatch --format codex";

/// A Codex directory beside the test's project, and `bin`, a directory holding `codex`
/// (`script`, mode 0755, the directory `dir_mode`).
struct Codex {
    home: PathBuf,
    bin: PathBuf,
}

fn codex(env: &TestEnv, script: &str, dir_mode: u32) -> Codex {
    let base = env.project.parent().unwrap();
    let home = base.join("codex-home");
    let bin = base.join("codex-bin");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    let program = bin.join("codex");
    std::fs::write(&program, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(dir_mode)).unwrap();
    Codex { home, bin }
}

/// `hookhost install --codex --command COMMAND` (the user's file, `$CODEX_HOME`) in the
/// project, with `path` as the PATH.
fn install(env: &TestEnv, codex: &Codex, path: &str) -> Run {
    let mut cmd = env.command();
    cmd.args(["install", "--codex", "--command", COMMAND])
        .env("CODEX_HOME", &codex.home)
        .env("HOME", env.project.parent().unwrap())
        .env("PATH", path);
    run_bytes(&mut cmd, b"")
}

/// A hook as `hooks/list` lists it: hookhost's command in `hooks_json` at the key
/// position `at` (`pre_tool_use:0:0`), untrusted, with `hash`.
fn listed(hooks_json: &Path, at: &str, hash: &str) -> Value {
    json!({"key": format!("{}:{at}", hooks_json.display()), "command": COMMAND,
           "sourcePath": hooks_json.display().to_string(), "currentHash": hash,
           "trustStatus": "untrusted"})
}

/// The script of a `codex` that answers `hooks/list` with `hooks`.
fn answering(hooks: &[Value]) -> String {
    let answer = json!({"jsonrpc": "2.0", "id": 2, "result": {"data": [{"hooks": hooks}]}});
    format!(
        "while IFS= read -r line; do case \"$line\" in *'\"id\":2'*) printf '%s\\n' '{answer}'; \
         exit 0;; esac; done"
    )
}

fn config(codex: &Codex) -> String {
    std::fs::read_to_string(codex.home.join("config.toml")).unwrap_or_default()
}

/// A `codex` that answers a forged `hooks/list`: hookhost's exact command, from the
/// file it wrote, but under the key of the user's own hook before it (`./mine` at
/// `pre_tool_use:0:0`), with a hash of the forger's choosing. hookhost wrote that key's
/// `trusted_hash`: Codex would run whatever hook later sits there with that hash. Fixed
/// at `codex_trust.rs` `trust` (`is_ours`): a listed key must be Codex's key of a
/// position where the file hookhost wrote has its exact drop-in (`exact_drop_ins`).
#[test]
fn a_forged_listing_cannot_trust_another_hooks_key() {
    let env = TestEnv::new();
    let base = env.project.parent().unwrap();
    let hooks_json = base.join("codex-home/hooks.json");
    let script = answering(&[
        listed(&hooks_json, "pre_tool_use:0:0", "sha256:forged"),
        listed(&hooks_json, "pre_tool_use:1:0", "sha256:ours"),
    ]);
    let codex = codex(&env, &script, 0o755);
    std::fs::write(
        &hooks_json,
        json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "./mine"}]}]}})
            .to_string(),
    )
    .unwrap();
    let run = install(
        &env,
        &codex,
        &format!("{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let config = config(&codex);
    assert!(
        !config.contains("forged"),
        "a forged key is trusted:\n{config}\n{}",
        run.stdout
    );
    // Control: the key of hookhost's own drop-in is trusted.
    assert!(config.contains("sha256:ours"), "{config}\n{}", run.stdout);
}

/// A `codex` in a directory others can write (mode 0777, not sticky: anyone can put
/// their own `codex` there) was run: only the file's owner and mode were judged. Fixed
/// at `codex_trust.rs` `codex_program`: every directory up to `/` is held to
/// `Rule::Holder`.
#[test]
fn a_codex_in_a_directory_others_can_write_is_not_run() {
    let env = TestEnv::new();
    let marker = env.project.join("CODEX-RAN");
    let codex = codex(&env, &format!("touch '{}'", marker.display()), 0o777);
    let run = install(
        &env,
        &codex,
        &format!("{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!marker.exists(), "ran it: {}", run.stdout);
    assert!(
        run.stdout.contains("no `codex` on the PATH"),
        "{}",
        run.stdout
    );
    // Control: the same `codex` in a directory only its owner writes runs.
    std::fs::set_permissions(&codex.bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = install(
        &env,
        &codex,
        &format!("{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert!(marker.exists(), "control: {}", run.stdout);
}

/// `codex_program` skips the PATH's relative entries, so that `install` in a repository
/// never runs the repository's `./codex`; but the `codex` it then ran inherited the whole
/// PATH, and the npm package's `codex` is `#!/usr/bin/env node`: a relative entry before
/// node's directory ran the repository's `node` (here: its `rt38probe`). Fixed at
/// `codex_trust.rs` `list_hooks`: the app server's PATH is the absolute entries only.
#[test]
fn the_codex_it_runs_finds_nothing_in_a_relative_path_entry() {
    let env = TestEnv::new();
    let marker = env.project.join("REPOSITORY-PROGRAM-RAN");
    env.write(
        "probe-bin/rt38probe",
        &format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    );
    std::fs::set_permissions(
        env.project.join("probe-bin/rt38probe"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let ran = env.project.join("CODEX-RAN");
    let codex = codex(
        &env,
        &format!("touch '{}'; rt38probe; exit 1", ran.display()),
        0o755,
    );
    let run = install(
        &env,
        &codex,
        &format!("probe-bin:{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(ran.exists(), "control: codex ran: {}", run.stdout);
    assert!(
        !marker.exists(),
        "the repository's program ran: {}",
        run.stdout
    );
}

/// The real Codex 0.171 (`.ci/run` installs it): a repository whose `.codex/hooks.json`
/// is a link to the user's `$CODEX_HOME/hooks.json`. `install --codex` (the user's
/// file) from inside it asks Codex for the hooks of that project, and Codex lists the
/// project's file too (by the link's path, with the same hash): hookhost compared files
/// through symlinks and trusted the key `<repository>/.codex/hooks.json:pre_tool_use:…`,
/// which the repository can later fill with a file of its own. Fixed at `codex_trust.rs`
/// `trust` (`is_ours`): the listed source must be the path hookhost wrote, or its
/// canonical path.
#[test]
fn a_repositorys_link_to_the_users_hooks_json_is_not_trusted() {
    let test = "a_repositorys_link_to_the_users_hooks_json_is_not_trusted";
    let real = PathBuf::from(env!("CARGO_BIN_EXE_hookhost"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("agents/codex/node_modules/.bin/codex");
    if !real.exists() {
        skipped(
            test,
            "@openai/codex@0.171.0 is not installed (.ci/run installs it)",
        );
        return;
    }
    let env = TestEnv::new();
    let codex = codex(&env, "exit 1", 0o755);
    std::fs::write(
        codex.home.join("config.toml"),
        format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
            env.project.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(env.project.join(".git")).unwrap();
    std::fs::create_dir_all(env.project.join(".codex")).unwrap();
    std::os::unix::fs::symlink(
        codex.home.join("hooks.json"),
        env.project.join(".codex/hooks.json"),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        real.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = install(&env, &codex, &path);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let config = config(&codex);
    let user_key = format!(
        "{}:pre_tool_use:0:0",
        codex.home.join("hooks.json").display()
    );
    assert!(
        config.contains(&user_key),
        "control: {config}\n{}",
        run.stdout
    );
    let repo_key = format!("{}/.codex/hooks.json:", env.project.display());
    assert!(
        !config.contains(&repo_key),
        "the repository's key is trusted:\n{config}\n{}",
        run.stdout
    );
}

/// A `codex` that answers and leaves a process of its own behind (holding the app
/// server's output): it outlived `install`, re-parented to init. Fixed at
/// `codex_trust.rs` `list_hooks`: once the app server is gone, what it left (adopted by
/// `hookhost`, a child subreaper) is ended (`descendants::end_adopted`).
#[test]
fn what_codex_leaves_behind_does_not_outlive_install() {
    let env = TestEnv::new();
    let marker = format!("{}/left-behind", env.project.display());
    let answer = json!({"jsonrpc": "2.0", "id": 2, "result": {"data": []}});
    let script = format!(
        "sh -c 'sleep 300; :' '{marker}' &\n\
         while IFS= read -r line; do case \"$line\" in *'\"id\":2'*) printf '%s\\n' '{answer}'; \
         exit 0;; esac; done"
    );
    let codex = codex(&env, &script, 0o755);
    let run = install(
        &env,
        &codex,
        &format!("{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("does not list it"),
        "control: {}",
        run.stdout
    );
    let left = crate::support::process_running(&marker);
    if left {
        // Not left to the next test run: ended by its pid.
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&marker) {
                let _ = std::process::Command::new("kill")
                    .arg(entry.file_name())
                    .status();
            }
        }
    }
    assert!(!left, "a process of `codex` outlived install");
}

/// Without a `codex` on the PATH `install --codex` writes the drop-in untrusted and
/// `hookhost validate` says to run `install --codex` again with `codex` on the PATH;
/// but the second run found the drop-in there, printed "nothing changed" and returned
/// before asking Codex: the advice could never work. Fixed at `cli/install/mod.rs`
/// `install`: a Codex drop-in already there is trusted too (`trust_codex`).
#[test]
fn a_second_install_trusts_the_drop_in_the_first_could_not() {
    let env = TestEnv::new();
    let hooks_json = env.project.parent().unwrap().join("codex-home/hooks.json");
    let script = answering(&[listed(&hooks_json, "pre_tool_use:0:0", "sha256:ours")]);
    let codex = codex(&env, &script, 0o755);
    let first = install(&env, &codex, "/usr/bin:/bin");
    assert!(
        first.stdout.contains("no `codex` on the PATH"),
        "{}",
        first.stdout
    );
    assert!(!config(&codex).contains("sha256:ours"));
    let second = install(
        &env,
        &codex,
        &format!("{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        config(&codex).contains("sha256:ours"),
        "not trusted on the second run: {}",
        second.stdout
    );
}

/// `$CODEX_HOME` in the workspace (a repository's directory) is refused by hookhost, and
/// `install --codex --project` then wrote the trust into `~/.codex/config.toml`, while the
/// `codex` it asked (and the user's) read `$CODEX_HOME`: it said "trusted" and Codex
/// still skipped the hook. Fixed at `codex_trust.rs` `codex_home` (the refusal is an
/// error, never `~/.codex` in its place) and `list_hooks` (the `codex` asked reads the
/// directory hookhost writes).
#[test]
fn a_refused_codex_home_is_not_replaced_by_the_users() {
    let env = TestEnv::new();
    let hooks_json = env.project.join(".codex/hooks.json");
    let script = answering(&[listed(&hooks_json, "pre_tool_use:0:0", "sha256:ours")]);
    let codex = codex(&env, &script, 0o755);
    let in_workspace = env.project.join("codex-home");
    std::fs::create_dir_all(&in_workspace).unwrap();
    let users = env.project.parent().unwrap().join(".codex");
    std::fs::create_dir_all(&users).unwrap();
    let mut cmd = env.command();
    cmd.args(["install", "--codex", "--project", "--command", COMMAND])
        .env("CODEX_HOME", &in_workspace)
        .env("HOME", env.project.parent().unwrap())
        .env("PATH", format!("{}:/usr/bin:/bin", codex.bin.display()));
    let run = run_bytes(&mut cmd, b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(hooks_json.exists(), "control: {}", run.stdout);
    let written = std::fs::read_to_string(users.join("config.toml")).unwrap_or_default();
    assert!(
        !written.contains("sha256:ours"),
        "trust written where Codex does not read it: {}",
        run.stdout
    );
    assert!(run.stdout.contains("CODEX_HOME"), "{}", run.stdout);
}

/// Codex's `config.toml` as a symlink (it could point anywhere) or a FIFO (a read that
/// never ends): the trust is not written through it, and `install` does not hang; it
/// says what to approve. Held (`settings::read_text`).
#[test]
fn config_toml_as_a_link_or_a_fifo_is_not_written_through() {
    let env = TestEnv::new();
    let hooks_json = env.project.parent().unwrap().join("codex-home/hooks.json");
    let script = answering(&[listed(&hooks_json, "pre_tool_use:0:0", "sha256:ours")]);
    let codex = codex(&env, &script, 0o755);
    let elsewhere = env.project.join("elsewhere.toml");
    std::fs::write(&elsewhere, "model = \"m\"\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, codex.home.join("config.toml")).unwrap();
    let path = format!("{}:/usr/bin:/bin", codex.bin.display());
    let run = install(&env, &codex, &path);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&elsewhere).unwrap(),
        "model = \"m\"\n"
    );
    assert!(run.stdout.contains("/hooks"), "{}", run.stdout);
    std::fs::remove_file(codex.home.join("config.toml")).unwrap();
    std::fs::remove_file(&hooks_json).unwrap();
    let fifo = std::ffi::CString::new(
        codex
            .home
            .join("config.toml")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let run = install(&env, &codex, &path);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("/hooks"), "{}", run.stdout);
}

/// Codex's raw shell call as an argument vector that is not `bash -lc LINE` (the program
/// itself, `env bash -c`, a shell with `$1`, a newline): the sandboxed
/// `deny-dangerous-bash` and a `Bash(rm -rf *)` condition see what runs, and refuse it.
/// Held (`agents/mod.rs` `argv_line`); control: a harmless vector passes.
#[test]
fn argument_vectors_that_are_not_bash_lc_are_refused_by_the_guards() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [
            {"type": "wasm", "plugin": crate::support::deny_dangerous_bash()}]},
        {"matcher": "Bash", "hooks": [
            {"type": "command", "if": "Bash(rm -rf *)", "command": "echo 'no rm' >&2; exit 2"}]}]}}));
    let ask = |argv: serde_json::Value| {
        let input = json!({"hook_event_name": "PreToolUse", "tool_name": "shell",
                           "session_id": "s", "cwd": env.project.display().to_string(),
                           "tool_input": {"command": argv}});
        let run = run_bytes(
            env.command().args(["dispatch", "--format", "codex"]),
            input.to_string().as_bytes(),
        );
        let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap_or_default();
        v["hookSpecificOutput"]["permissionDecision"] == "deny" || v["decision"] == "block"
    };
    for argv in [
        json!(["rm", "-rf", "/"]),
        json!(["env", "bash", "-c", "rm -rf /"]),
        json!(["bash", "-c", "rm -rf \"$1\"", "_", "/"]),
        json!(["/bin/sh", "-c", "echo ok\nrm -rf /"]),
    ] {
        assert!(ask(argv.clone()), "{argv} was let through");
    }
    assert!(!ask(json!(["bash", "-lc", "echo ok"])), "control");
}

/// `$CODEX_HOME` through a link (a `~/.codex` kept in a dotfiles repository): Codex
/// names its hooks by the resolved path, so `install --codex` trusted
/// `<target>/hooks.json:…`, while `uninstall --codex` removed `<link>/hooks.json:…`
/// (nothing: the trust stayed behind the removed drop-in) and `validate` warned that a
/// trusted drop-in was not. Fixed at `codex_trust.rs` `keys_by_every_name` (uninstall)
/// and `warnings`: both names of the file.
#[test]
fn trust_under_a_linked_codex_home_is_removed_and_seen() {
    let env = TestEnv::new();
    let codex = codex(&env, "exit 1", 0o755);
    let link = env.project.parent().unwrap().join("codex-link");
    std::os::unix::fs::symlink(&codex.home, &link).unwrap();
    let resolved = codex.home.join("hooks.json");
    std::fs::write(
        &resolved,
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": COMMAND}]}]}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        codex.home.join("config.toml"),
        format!(
            "model = \"m\"\n\n[hooks.state.\"{}:stop:0:0\"]\ntrusted_hash = \"sha256:x\"\n",
            resolved.display()
        ),
    )
    .unwrap();
    let hookhost = |args: &[&str]| {
        let mut cmd = env.command();
        cmd.args(args)
            .env("CODEX_HOME", &link)
            .env("HOME", env.project.parent().unwrap())
            .env("PATH", "/usr/bin:/bin");
        run_bytes(&mut cmd, b"")
    };
    let validated = hookhost(&["validate"]);
    assert!(
        !validated.stdout.contains("not trusted") && !validated.stderr.contains("not trusted"),
        "a trusted drop-in is said not to be: {}{}",
        validated.stdout,
        validated.stderr
    );
    let run = hookhost(&["uninstall", "--codex", "--command", COMMAND]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let left = config(&codex);
    assert!(
        !left.contains("trusted_hash"),
        "left behind: {left}\n{}",
        run.stdout
    );
    assert!(left.contains("model = \"m\""), "{left}");
}

/// A repository's `.codex/hooks.json` with hookhost's command behind a matcher no tool
/// has (a decoy): `install --codex --project` took the event as installed, added no
/// drop-in there, and (rightly, now) trusted nothing there, without a word: the user
/// believed `PreToolUse` guarded. Fixed at `codex_trust.rs` `trust` (`not_the_drop_in`):
/// the event is named, with what to do.
#[test]
fn a_decoy_drop_in_in_a_repository_is_named() {
    let env = TestEnv::new();
    env.write(
        ".codex/hooks.json",
        &json!({"hooks": {"PreToolUse": [{"matcher": "NoSuchTool",
            "hooks": [{"type": "command", "command": COMMAND}]}]}})
        .to_string(),
    );
    let codex = codex(&env, "exit 1", 0o755);
    let mut cmd = env.command();
    cmd.args(["install", "--codex", "--project", "--command", COMMAND])
        .env("CODEX_HOME", &codex.home)
        .env("HOME", env.project.parent().unwrap())
        .env("PATH", "/usr/bin:/bin");
    let run = run_bytes(&mut cmd, b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("not trusted: the hookhost hook of PreToolUse is not the drop-in"),
        "{}",
        run.stdout
    );
}

/// A `codex` whose output is far over the cap (20 MB on one line, no answer) and that
/// then stays: `install` ends the app server (5 s after its input closed), writes no
/// trust and says what to approve instead. (That it holds at most the 16 MiB cap
/// meanwhile is `list_hooks`' `take`, not seen from here.)
#[test]
fn an_app_server_that_floods_and_stalls_is_ended_without_trust() {
    let env = TestEnv::new();
    let script = "head -c 20000000 /dev/zero | tr '\\0' x; exec sleep 60";
    let codex = codex(&env, script, 0o755);
    let run = install(
        &env,
        &codex,
        &format!("{}:/usr/bin:/bin", codex.bin.display()),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("did not list the hooks") && run.stdout.contains("type `/hooks`"),
        "{}",
        run.stdout
    );
    assert!(
        !config(&codex).contains("trusted_hash"),
        "{}",
        config(&codex)
    );
}
