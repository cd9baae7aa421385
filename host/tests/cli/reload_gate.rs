//! The reload gate (`hookhost::gate`), from the outside: while `hookhost serve` and the
//! dispatch daemon run with a guard that denies `rm -rf`, the guard's file is rewritten,
//! for each check of the gate (`gate::Check::ALL`, matched exhaustively: a check added
//! later fails to compile here until it has its case), into a config that drops the
//! guard and fails that check. The last good version stays in force (`rm -rf /` is still
//! denied), and the outcome's notices and the daemon's log name the file and what failed;
//! once the file is fixed, the new version is in force. A race: the file rewritten many
//! times in place, same size, as fast as possible, is enforced as it finally stands.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use hookhost::gate::Check;
use serde_json::{Value, json};

use crate::dispatch_daemon::{logs, sockets};
use crate::support::{TestEnv, bash_input, deny_dangerous_bash, hooks, wait_until};

/// The guard of `version`: denies `rm -rf`, says its version otherwise.
fn guard(version: &str) -> Value {
    json!({"type": "command", "id": "guard",
        "command": format!("input=$(cat); case \"$input\" in *'rm -rf'*) echo 'no rm -rf ({version})' >&2; exit 2;; esac; echo '{{\"systemMessage\": \"{version}\"}}'")})
}

/// What replaces the guard in a broken version: it lets everything through.
fn allow_all() -> Value {
    json!({"type": "command", "id": "allow-all", "command": "exit 0"})
}

fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// A file that is no component, in the home directory.
fn junk(env: &TestEnv) -> PathBuf {
    env.home.join("junk.wasm")
}

/// Managed policy for every case: a time ceiling of 30 s, and only the example plugin
/// `deny-dangerous-bash` and [`junk`] admitted.
fn managed(env: &TestEnv) {
    std::fs::write(junk(env), b"\0asm\x01\0\0\0 not a component").unwrap();
    env.managed(json!({
        "ceilings": {"timeout": 30},
        "requireAllowlistedPlugins": true,
        "pluginAllowlist": [
            {"sha256": sha256_of(deny_dangerous_bash())},
            {"sha256": sha256_of(&junk(env))}
        ]
    }));
}

/// A wasm hook of `plugin` with `extra` fields.
fn wasm(plugin: &Path, extra: Value) -> Value {
    let mut hook = json!({"type": "wasm", "id": "plugin-hook", "plugin": plugin});
    for (key, value) in extra.as_object().unwrap() {
        hook[key] = value.clone();
    }
    hook
}

/// Writes over `file` a version that drops the guard and fails `check`; returns words
/// the notice of that failure must contain besides the file.
fn break_by(env: &TestEnv, file: &Path, check: Check) -> Vec<String> {
    let _ = std::fs::remove_file(file);
    let with = |hook: Value| hooks("PreToolUse", "Bash", json!([allow_all(), hook])).to_string();
    let (text, words): (String, Vec<String>) = match check {
        Check::Read => {
            std::os::unix::fs::symlink("/dev/zero", file).unwrap();
            return vec!["a character device".into()];
        }
        Check::Parse => (
            format!(
                "{{\"hooks\": {{\"PreToolUse\": [{{\"hooks\": [{}]",
                allow_all()
            ),
            vec!["invalid JSON".into()],
        ),
        Check::Build => (
            json!({"hooks": {"PreToolUse": [
                {"matcher": "Bash", "hooks": [allow_all()]},
                {"matcher": "Bash(", "hooks": [allow_all()]}
            ]}})
            .to_string(),
            vec!["$.hooks.PreToolUse[1].matcher".into()],
        ),
        Check::Grant => (
            with(wasm(
                deny_dangerous_bash(),
                json!({"capabilities": {"dirs": [{"path": env.data, "mode": "rw"}]}}),
            )),
            vec![
                "$.hooks.PreToolUse[0].hooks[1]".into(),
                "hook refused".into(),
                "capabilities.dirs[0]".into(),
            ],
        ),
        Check::Ceiling => (
            with(json!({"type": "command", "id": "slow", "command": "true", "timeout": 60})),
            vec![
                "$.hooks.PreToolUse[0].hooks[1]".into(),
                "refused by managed policy".into(),
                "ceilings.timeout".into(),
            ],
        ),
        Check::PluginFile => (
            with(wasm(&env.home.join("missing.wasm"), json!({}))),
            vec![
                "$.hooks.PreToolUse[0].hooks[1].plugin".into(),
                "hook `plugin-hook`".into(),
                "missing.wasm".into(),
            ],
        ),
        Check::PluginDigest => (
            with(wasm(
                deny_dangerous_bash(),
                json!({"sha256": "00".repeat(32)}),
            )),
            vec![
                "$.hooks.PreToolUse[0].hooks[1].sha256".into(),
                "hook `plugin-hook`".into(),
            ],
        ),
        Check::PluginAllowlist => {
            let other = Path::new(hookhost_test_plugins::plugins::TEST_GATE);
            (
                with(wasm(other, json!({}))),
                vec![
                    "$.hooks.PreToolUse[0].hooks[1].plugin".into(),
                    "hook `plugin-hook`".into(),
                ],
            )
        }
        Check::PluginLoad => (
            with(wasm(&junk(env), json!({}))),
            vec![
                "$.hooks.PreToolUse[0].hooks[1].plugin".into(),
                "hook `plugin-hook`".into(),
                "not a WebAssembly component".into(),
            ],
        ),
    };
    let mut words = words;
    words.push(check_words(check));
    std::fs::write(file, text).unwrap();
    words
}

/// The gate's own words for the checks it makes itself (the others are the loader's and
/// the policy's, asserted above).
fn check_words(check: Check) -> String {
    match check {
        Check::PluginFile | Check::PluginDigest | Check::PluginAllowlist | Check::PluginLoad => {
            check.words().to_string()
        }
        _ => "stays in force".into(),
    }
}

fn fix(file: &Path, version: &str) {
    let _ = std::fs::remove_file(file);
    std::fs::write(
        file,
        hooks("PreToolUse", "Bash", json!([guard(version)])).to_string(),
    )
    .unwrap();
}

fn previous_in_force(out: &Value) -> bool {
    out["notices"].to_string().contains("stays in force")
}

/// For each check: break the file, see the last good version enforced with its notice
/// (and in `log`, a daemon's), fix it, see the fix enforced.
fn each_check_keeps_the_last_good(
    env: &TestEnv,
    file: &Path,
    call: &mut dyn FnMut(&str) -> Value,
    log: Option<&dyn Fn() -> String>,
) {
    assert_eq!(call("rm -rf /")["decision"], "deny", "the guard is armed");
    for (n, check) in Check::ALL.into_iter().enumerate() {
        let words = break_by(env, file, check);
        let mut out = Value::Null;
        wait_until(&format!("the daemon to judge {check:?}"), || {
            out = call("rm -rf /");
            previous_in_force(&out)
        });
        assert_eq!(out["decision"], "deny", "{check:?}: {out}");
        let notices = out["notices"].to_string();
        for word in words.iter().chain([&file.display().to_string()]) {
            assert!(
                notices.contains(word.as_str()),
                "{check:?}: `{word}` in {notices}"
            );
        }
        if let Some(log) = log {
            wait_until(&format!("the log to name {check:?}"), || {
                let log = log();
                log.contains(&file.display().to_string()) && log.contains(&words[0])
            });
        }
        let version = format!("v{n}");
        fix(file, &version);
        wait_until(&format!("the daemon to see the fix of {check:?}"), || {
            call("ls")["systemMessages"].to_string().contains(&version)
        });
        let out = call("rm -rf /");
        assert_eq!(out["decision"], "deny", "{check:?} fixed: {out}");
        assert!(!previous_in_force(&out), "{check:?} fixed: {out}");
    }
}

/// `hookhost serve --stdio`, its log in a file.
struct Serve {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Serve {
    fn start(env: &TestEnv) -> Serve {
        let log = env.data.join("serve.log");
        // No cap on the address space: the wasm engine reserves its instance pool.
        let mut child = env
            .command()
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Serve {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            child,
            log,
        }
    }

    fn call(&mut self, command: &str) -> Value {
        let request = json!({"id": 1, "event": "PreToolUse", "input": bash_input(command)});
        writeln!(self.input, "{request}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        answer["outcome"].clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn daemon_dispatch(env: &TestEnv, command: &str) -> Value {
    let mut cmd: Command = env.command();
    cmd.env_remove("HOOKHOST_DISPATCH_DAEMON")
        .env("HOOKHOST_DISPATCH_DAEMON_IDLE_SECS", "120");
    let run = env.run_with(
        cmd.args(["dispatch", "PreToolUse"]),
        &bash_input(command).to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

fn stop_daemons(env: &TestEnv) {
    for socket in sockets(env) {
        let _ = std::fs::remove_file(socket);
    }
}

fn read_logs(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

#[test]
fn serve_keeps_the_last_good_config_for_every_check_of_the_gate() {
    let env = TestEnv::new();
    managed(&env);
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    let mut serve = Serve::start(&env);
    let log = serve.log.clone();
    each_check_keeps_the_last_good(
        &env,
        &file,
        &mut |c| serve.call(c),
        Some(&|| std::fs::read_to_string(&log).unwrap_or_default()),
    );
}

/// The last good versions are on disk (`last-good/` in the data directory): a `serve`
/// started after the file broke (each call here is a new daemon) enforces the last good
/// version too, for every check of the gate.
#[test]
fn a_restarted_serve_keeps_the_last_good_config_for_every_check_of_the_gate() {
    let env = TestEnv::new();
    managed(&env);
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    each_check_keeps_the_last_good(&env, &file, &mut |c| Serve::start(&env).call(c), None);
}

/// The one-shot `hookhost dispatch` keeps the same guard as the daemons: each process
/// enforces the last good version stored on disk while the file fails a check of the
/// gate (the plugin checks made whenever a file's bytes are not its stored version).
#[test]
fn the_one_shot_dispatch_keeps_the_last_good_config_for_every_check_of_the_gate() {
    let env = TestEnv::new();
    managed(&env);
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    each_check_keeps_the_last_good(
        &env,
        &file,
        &mut |c| env.dispatch("PreToolUse", bash_input(c)),
        None,
    );
}

#[test]
fn the_dispatch_daemon_keeps_the_last_good_config_for_every_check_of_the_gate() {
    let env = TestEnv::new();
    managed(&env);
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    daemon_dispatch(&env, "ls");
    wait_until("the dispatch daemon to listen", || {
        !sockets(&env).is_empty()
    });
    each_check_keeps_the_last_good(
        &env,
        &file,
        &mut |c| daemon_dispatch(&env, c),
        Some(&|| read_logs(&logs(&env))),
    );
    stop_daemons(&env);
}

/// Rewrites `file` in place (same inode, same size) `times` times as fast as it can, then
/// once more with the final version; every version denies `rm -rf`.
fn churn(file: &Path, times: usize) {
    let write = |version: &str| {
        let text = hooks("PreToolUse", "Bash", json!([guard(version)])).to_string();
        let mut f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    for n in 0..times {
        write(&format!("v{n:05}"));
        if n % 7 == 0 {
            // And now and then replaced by rename, as editors do.
            let tmp = file.with_extension("tmp");
            std::fs::write(
                &tmp,
                hooks("PreToolUse", "Bash", json!([guard(&format!("r{n:05}"))])).to_string(),
            )
            .unwrap();
            std::fs::rename(&tmp, file).unwrap();
        }
    }
    write("finalx");
}

#[test]
fn serve_enforces_a_file_replaced_just_after_it_was_read() {
    let env = TestEnv::new();
    let file = env.home.join("hooks.json");
    fix(&file, "v00000");
    let mut serve = Serve::start(&env);
    assert_eq!(serve.call("rm -rf /")["decision"], "deny");
    for round in 0..5 {
        churn(&file, 300);
        wait_until(
            &format!("serve to enforce the final version (round {round})"),
            || {
                serve.call("ls")["systemMessages"]
                    .to_string()
                    .contains("finalx")
            },
        );
        assert_eq!(serve.call("rm -rf /")["decision"], "deny");
        fix(&file, "v00000");
    }
}

#[test]
fn the_dispatch_daemon_enforces_a_file_replaced_just_after_it_was_read() {
    let env = TestEnv::new();
    let file = env.home.join("hooks.json");
    fix(&file, "v00000");
    daemon_dispatch(&env, "ls");
    wait_until("the dispatch daemon to listen", || {
        !sockets(&env).is_empty()
    });
    for round in 0..3 {
        let churner = {
            let file = file.clone();
            std::thread::spawn(move || churn(&file, 300))
        };
        // Dispatches while the file churns: each is denied or a clear answer, never an
        // allow of `rm -rf`.
        while !churner.is_finished() {
            let out = daemon_dispatch(&env, "rm -rf /");
            assert_ne!(out["decision"], "allow", "{out}");
        }
        churner.join().unwrap();
        wait_until(
            &format!("the daemon to enforce the final version (round {round})"),
            || {
                daemon_dispatch(&env, "ls")["systemMessages"]
                    .to_string()
                    .contains("finalx")
            },
        );
        assert_eq!(daemon_dispatch(&env, "rm -rf /")["decision"], "deny");
        fix(&file, "v00000");
    }
    stop_daemons(&env);
}

/// A version refused because its plugin is missing is let in once the plugin appears: the
/// daemon watches the plugins of the versions it refused, not only those in force.
fn a_plugin_that_appears_later_lets_its_version_in(
    env: &TestEnv,
    file: &Path,
    call: &mut dyn FnMut(&str) -> Value,
) {
    assert_eq!(call("rm -rf /")["decision"], "deny", "the guard is armed");
    let plugin = env.home.join("later.wasm");
    let later = json!({"type": "wasm", "id": "later", "plugin": plugin});
    std::fs::write(
        file,
        hooks("PreToolUse", "Bash", json!([allow_all(), later])).to_string(),
    )
    .unwrap();
    let mut out = Value::Null;
    wait_until(
        "the daemon to refuse the version without its plugin",
        || {
            out = call("rm -rf /");
            previous_in_force(&out)
        },
    );
    assert_eq!(out["decision"], "deny", "{out}");
    // Past the stamps' granularity, so that no rebuild for a fresh file (the gate's
    // `dirty`) happens to see the plugin: only watching it can.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    call("ls");
    std::fs::copy(deny_dangerous_bash(), &plugin).unwrap();
    wait_until("the daemon to let the version in", || {
        out = call("rm -rf /");
        !previous_in_force(&out)
    });
    let ids = crate::support::hook_fields(&out, "id", "status");
    assert!(ids.iter().any(|id| id.starts_with("later:")), "{out}");
    assert_eq!(out["decision"], "deny", "the plugin denies it: {out}");
}

#[test]
fn serve_lets_a_refused_version_in_once_its_plugin_appears() {
    let env = TestEnv::new();
    managed(&env);
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    let mut serve = Serve::start(&env);
    a_plugin_that_appears_later_lets_its_version_in(&env, &file, &mut |c| serve.call(c));
}

#[test]
fn the_dispatch_daemon_lets_a_refused_version_in_once_its_plugin_appears() {
    let env = TestEnv::new();
    managed(&env);
    let file = env.home.join("hooks.json");
    fix(&file, "v-start");
    daemon_dispatch(&env, "ls");
    wait_until("the dispatch daemon to listen", || {
        !sockets(&env).is_empty()
    });
    a_plugin_that_appears_later_lets_its_version_in(&env, &file, &mut |c| daemon_dispatch(&env, c));
    stop_daemons(&env);
}
