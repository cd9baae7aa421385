//! Issue 24.1 and 24.10: when hookhost cannot guard, the agent is not told "go ahead".
//!
//! - `hookhost install` writes `"onFailure": "block"` on exactly the events where Claude
//!   Code honours it (from the event table);
//! - a `hookhost dispatch` whose daemon is killed mid-request dispatches again in-process;
//! - a hook that cannot start (out of descriptors, processes, memory) is a named failure
//!   at once, which `onFailure: "block"` turns into a deny, for every handler kind;
//! - a dispatch that cannot run at all blocks under `--format claude`.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::dispatch_daemon::{daemon_pid, process_alive, sockets, with_daemon};
use crate::support::{
    Run, TestEnv, as_uid, bash_input, chown_tree, deny_dangerous_bash, hooks, run_until, wait_until,
};

/// `cmd` with `resource` limited to `limit` (soft and hard) from before `exec`.
fn limited(cmd: &mut Command, resource: libc::__rlimit_resource_t, limit: u64) -> &mut Command {
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let cap = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// The lowest descriptor limit a dynamically linked `hookhost` can be started at (the
/// loader opens its libraries on descriptor 3).
const LOWEST_NOFILE: u64 = 4;

/// Generous: a hook that cannot start must fail at once, and before the fix one at the
/// descriptor limit waited for its whole timeout (600 s by default) instead.
const BOUND: Duration = Duration::from_secs(120);

/// The handler types a settings file may name, from the config schema itself (so a type
/// added later is covered), each with a hook of that type for the tests below.
fn every_handler_kind(server: &str) -> Vec<(String, Value)> {
    let schema =
        serde_json::to_value(schemars::schema_for!(hookhost::config::schema::HandlerType)).unwrap();
    let names: Vec<String> = schema["oneOf"]
        .as_array()
        .or_else(|| schema["enum"].as_array())
        .expect("HandlerType's schema lists its values")
        .iter()
        .filter_map(|v| v["const"].as_str().or_else(|| v.as_str()))
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 3, "{schema}");
    names
        .into_iter()
        .map(|name| {
            use hookhost::config::schema::HandlerType as T;
            let kind: T = serde_json::from_value(json!(name)).unwrap();
            // Exhaustive: a new handler type does not compile until it has a hook here.
            let hook = match kind {
                // Holds its pipes for a while, so that the hooks started after it find
                // fewer descriptors left.
                T::Command => json!({"type": "command", "command": "sleep 0.2; echo '{}'"}),
                T::Http => json!({"type": "http", "url": format!("{server}/allow")}),
                T::Wasm => json!({"type": "wasm", "plugin": deny_dangerous_bash()}),
                // Against the smallest stdio MCP server (`MCP_SERVER`, `mcpServers` below).
                T::McpTool => json!({"type": "mcp_tool", "server": "s", "tool": "t"}),
                // Against the server's chat-completions answer (`modelProvider` below).
                T::Prompt => json!({"type": "prompt", "prompt": "is this safe?", "provider": "openai", "model": "m"}),
                T::Agent => json!({"type": "agent", "prompt": "is this safe?", "provider": "openai", "model": "m"}),
            };
            let mut hook = hook;
            hook["id"] = json!(name);
            hook["onFailure"] = json!("block");
            (name, hook)
        })
        .collect()
}

/// The smallest stdio MCP server: answers `initialize` with the client's protocol
/// version, lists one tool `t`, and answers every call with the hook output `{}`.
const MCP_SERVER: &str = r#"import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "t", "version": "1"}}
    elif method == "tools/list":
        r = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        r = {"content": [{"type": "text", "text": "{}"}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
"#;

/// What a limited dispatch showed about one hook.
#[derive(Debug, PartialEq)]
enum Seen {
    /// It ran and answered.
    Ran,
    /// It could not start: a named failure, and the event was denied.
    CouldNotStart,
    /// hookhost does not run this type; the report says so.
    Skipped,
}

/// Checks one outcome of a limited dispatch for hook `id`: it is reported, and a failure
/// is a named "could not start" with the OS error that denied the call.
fn judge(run: &Run, id: &str) -> Option<Seen> {
    let out: Value = serde_json::from_str(&run.stdout).ok()?;
    let hooks = out["hooks"].as_array().unwrap();
    // A config the host could not read for want of descriptors is a host error (no
    // outcome, exit 1), never an outcome of a config whose hooks were skipped.
    let notices = out["notices"].to_string();
    assert!(
        !notices.contains("hooks skipped") && !notices.contains("managed policy is broken"),
        "a source unreadable for want of descriptors was taken for a broken file: {out}"
    );
    let report = hooks
        .iter()
        .find(|h| h["id"] == id)
        .unwrap_or_else(|| panic!("hook `{id}` is missing from the report: {out}"));
    Some(match report["status"].as_str().unwrap() {
        "ok" => Seen::Ran,
        "skipped" => {
            assert!(report["message"].as_str().is_some_and(|m| !m.is_empty()));
            Seen::Skipped
        }
        status => {
            let message = report["message"].as_str().unwrap_or_default();
            assert_eq!(status, "failed", "{id}: {report}");
            assert_eq!(report["failure"], "cannotStart", "{id}: {report}");
            assert!(
                message.contains("os error") && !message.contains("timed out"),
                "{id}: the OS error is named: {report}"
            );
            assert_eq!(
                out["decision"], "deny",
                "{id}: onFailure block denies: {out}"
            );
            Seen::CouldNotStart
        }
    })
}

#[test]
fn a_hook_that_cannot_start_for_want_of_descriptors_fails_at_once_named_and_blocks() {
    let server = crate::support::TestServer::start(|req| {
        let body = match req.path.ends_with("/chat/completions") {
            true => json!({"choices": [{"message": {"role": "assistant",
                "content": r#"{"ok": true, "reason": "", "impossible": false}"#}}]})
            .to_string(),
            false => "{}".into(),
        };
        (200, body, Duration::ZERO)
    });
    let env = TestEnv::new();
    let kinds = every_handler_kind(&server.url);
    // One parallel group of every kind: each hook that starts holds descriptors while
    // the next starts, so some limit leaves the later ones none.
    let group: Vec<Value> = kinds.iter().map(|(_, hook)| hook.clone()).collect();
    let mut config = hooks("PreToolUse", "Bash", Value::Array(group));
    config["modelProvider"] = json!({"kind": "openai", "baseUrl": format!("{}/v1", server.url)});
    let mcp = env.home.join("mcp_server.py");
    std::fs::write(&mcp, MCP_SERVER).unwrap();
    config["mcpServers"] = json!({"s": {"command": "python3", "args": [mcp]}});
    env.project_hooks(config);
    // The plugin is compiled once, without limits (the cache serves the limited runs).
    let warm = env.run(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert_eq!(warm.code, 0, "{}", warm.stderr);

    let mut reached: Vec<(String, Seen)> = Vec::new();
    let mut config_unread = 0;
    for limit in LOWEST_NOFILE..=48 {
        let mut cmd = env.command();
        limited(
            cmd.args(["dispatch", "PreToolUse"]),
            libc::RLIMIT_NOFILE,
            limit,
        );
        let run = run_until(&mut cmd, &bash_input("ls").to_string(), BOUND)
            .unwrap_or_else(|| panic!("at {limit} descriptors the dispatch hung"));
        assert_ne!(run.code, 101, "{limit}: panicked: {}", run.stderr);
        if run.code != 0 {
            // No outcome at all: the dispatch could not run (no runtime, or its config
            // could not be read); a host error.
            assert!(
                run.stderr.starts_with("hookhost: error: "),
                "{}",
                run.stderr
            );
            if run.stderr.contains("could not read its config") {
                assert!(
                    run.stderr.contains(".json`") && run.stderr.contains("os error 24"),
                    "{limit}: the error names the file and the OS error: {}",
                    run.stderr
                );
                config_unread += 1;
            }
            continue;
        }
        for (id, _) in &kinds {
            if let Some(seen) = judge(&run, id) {
                reached.push((id.clone(), seen));
            }
        }
    }
    assert!(
        config_unread > 0,
        "no limit kept the config from being read (the config stage's member of the class)"
    );
    let has = |id: &str, seen: Seen| reached.iter().any(|(i, s)| i == id && *s == seen);
    // The HTTP hook's socket is never the one that runs out here: a process spawn needs
    // more descriptors at once than it keeps (the processes test covers HTTP).
    assert!(
        has("command", Seen::CouldNotStart),
        "no limit kept the command hook from starting: {reached:?}"
    );
    for (id, _) in &kinds {
        assert!(
            has(id, Seen::Ran) || has(id, Seen::Skipped),
            "`{id}` never ran: {reached:?}"
        );
    }
}

#[test]
fn a_wasm_instance_that_cannot_be_created_is_a_named_failure_that_blocks() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "id": "wasm", "plugin": deny_dangerous_bash(), "onFailure": "block"}]),
    ));
    let warm = env.run(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    assert_eq!(warm.code, 0, "{}", warm.stderr);
    // 2 GiB of address space: the host runs, a linear memory's reservation does not fit.
    let mut cmd = env.command();
    limited(
        cmd.args(["dispatch", "PreToolUse"]),
        libc::RLIMIT_AS,
        2 << 30,
    );
    let run = run_until(&mut cmd, &bash_input("ls").to_string(), BOUND).unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        judge(&run, "wasm"),
        Some(Seen::CouldNotStart),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("could not create an instance"),
        "{}",
        run.stdout
    );
}

/// A uid of its own for the processes of one test: `RLIMIT_NPROC` counts every process
/// of the real uid, so no other test's processes may share it.
fn scratch_uid() -> u32 {
    64_000 + std::process::id() % 1_000
}

#[test]
fn a_hook_that_cannot_start_for_want_of_processes_is_a_named_failure_that_blocks() {
    // The kernel does not hold root to RLIMIT_NPROC: the dispatch runs as another uid,
    // which needs root to switch to.
    if !crate::skip::is_root_or_skip(
        "a_hook_that_cannot_start_for_want_of_processes_is_a_named_failure_that_blocks",
        "RLIMIT_NPROC binds only a uid other than root; switching to one needs root",
    ) {
        return;
    }
    let server = crate::support::TestServer::start(|_| (200, "{}".into(), Duration::ZERO));
    // By name: resolving it takes a thread.
    let url = server.url.replace("127.0.0.1", "localhost");
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "command", "id": "command", "command": "echo '{}'", "onFailure": "block"},
            {"type": "wasm", "id": "wasm", "plugin": deny_dangerous_bash(), "onFailure": "block"},
            {"type": "http", "id": "http", "url": format!("{url}/allow"), "onFailure": "block"}
        ]),
    ));
    let uid = scratch_uid();
    chown_tree(env.project.parent().unwrap(), uid);
    // One process and no thread more: no hook process, no thread of the wasm engine.
    let mut cmd = as_uid(
        env.command()
            .args(["dispatch", "PreToolUse"])
            .current_dir(&env.project),
        uid,
    );
    limited(&mut cmd, libc::RLIMIT_NPROC, 1);
    let run = run_until(&mut cmd, &bash_input("ls").to_string(), BOUND).unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    for id in ["command", "wasm", "http"] {
        assert_eq!(judge(&run, id), Some(Seen::CouldNotStart), "{}", run.stdout);
    }
    assert!(
        run.stdout.contains("os error 11"),
        "EAGAIN named: {}",
        run.stdout
    );
}

/// Under `--format claude`, a dispatch that cannot run at all (no runtime at the lowest
/// descriptor limits, a config it cannot read for want of descriptors) blocks a guarded
/// event instead of exiting 1 ("go ahead" without `onFailure` in the agent's settings);
/// an event that cannot block keeps the host error. At every limit, `rm -rf /` under a
/// guard that refuses it is blocked: by the guard, its failed start, or the host (a
/// trust store it cannot read included: the workspace is not untrusted for that).
#[test]
fn a_dispatch_that_cannot_run_blocks_under_format_claude() {
    let env = TestEnv::new();
    let guard = r#"case "$(cat)" in *'rm -rf'*) echo refused >&2; exit 2;; esac"#;
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": guard, "onFailure": "block"}]),
    ));
    // Trusted explicitly, and trusted by the record in the trust store (which a limit
    // may keep the host from reading: that is no untrusted workspace either).
    let project = env.project.display().to_string();
    let trusted = env.run(&["trust", &project], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    let mut blocked = 0;
    let mut config_unread = 0;
    let mut store_unread = 0;
    for (limit, recorded) in (LOWEST_NOFILE..=24).flat_map(|l| [(l, false), (l, true)]) {
        for (event, input) in [
            ("PreToolUse", bash_input("rm -rf /")),
            (
                "Stop",
                json!({"session_id": "s", "hook_event_name": "Stop"}),
            ),
        ] {
            let mut cmd = if recorded {
                env.untrusted_command()
            } else {
                env.command()
            };
            limited(
                cmd.args(["dispatch", "--format", "claude"]),
                libc::RLIMIT_NOFILE,
                limit,
            );
            let run = run_until(&mut cmd, &input.to_string(), BOUND).unwrap();
            assert!(
                (0..=2).contains(&run.code),
                "{limit} {event}: {}",
                run.stderr
            );
            if event == "Stop" {
                if run.code == 0 {
                    continue; // it dispatched (no Stop hook): an answer
                }
                assert_eq!(run.code, 1, "Stop is never blocked by a failure");
                continue;
            }
            assert_eq!(run.code, 2, "{limit}: rm -rf / went ahead: {}", run.stderr);
            if !run
                .stderr
                .contains("hookhost could not check this action: ")
            {
                continue; // the guard (or its failed start) blocked it
            }
            let out: Value = serde_json::from_str(&run.stdout).unwrap();
            assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
            if run.stderr.contains("could not read its config") {
                config_unread += 1;
            }
            if run.stderr.contains("trust store") {
                store_unread += 1;
            }
            blocked += 1;
        }
    }
    assert!(blocked > 0, "no limit kept the dispatch from running");
    assert!(
        store_unread > 0,
        "no limit kept the trust store from being read (trust's member of the class)"
    );
    assert!(
        config_unread > 0,
        "no limit kept the config from being read (the config stage's member of the class)"
    );
}

#[test]
fn install_writes_on_failure_block_on_exactly_the_events_that_honour_it() {
    let env = TestEnv::new();
    let file = env.home.join("settings.json");
    let install = |agent: &str, file: &Path| {
        let run = env.run(&["install", agent, "--file", file.to_str().unwrap()], "");
        assert_eq!(run.code, 0, "{}", run.stderr);
        serde_json::from_str::<Value>(&std::fs::read_to_string(file).unwrap()).unwrap()
    };
    let settings = install("--claude", &file);
    let catalogue = hookhost::event::EventCatalogue::default();
    let mut with = Vec::new();
    // Every event of the table: the drop-in carries onFailure exactly where Claude Code
    // honours it (the table's rule), and only there.
    for event in hookhost::event::built_in_names() {
        let Some(groups) = settings["hooks"][event].as_array() else {
            continue;
        };
        let handler = &groups[0]["hooks"][0];
        let expected = catalogue.get(event).unwrap().honours_on_failure();
        assert_eq!(
            handler.get("onFailure").and_then(Value::as_str),
            expected.then_some("block"),
            "{event}: {handler}"
        );
        if expected {
            with.push(event);
        }
    }
    assert!(with.contains(&"PreToolUse") && with.contains(&"PermissionRequest"));
    assert!(settings["hooks"]["Stop"].is_array(), "Stop is installed");

    // A drop-in installed before `onFailure` existed gets it on the next install.
    let mut old = settings.clone();
    for groups in old["hooks"].as_object_mut().unwrap().values_mut() {
        groups[0]["hooks"][0]
            .as_object_mut()
            .unwrap()
            .remove("onFailure");
    }
    std::fs::write(&file, serde_json::to_string_pretty(&old).unwrap()).unwrap();
    assert_eq!(install("--claude", &file), settings);

    // Codex has no such key.
    let codex = env.home.join("hooks.json");
    let written = install("--codex", &codex).to_string();
    assert!(!written.contains("onFailure"), "{written}");
}

/// The guard of the daemon test: waits for the test's gate (so that every call is in
/// the daemon when it is killed), then blocks `rm -rf` with exit 2.
pub(crate) fn gated_guard(started: &Path, gate: &Path) -> String {
    format!(
        r#"input=$(cat); touch '{}'/$$; while [ ! -e '{}' ]; do sleep 0.05; done; case "$input" in *'rm -rf'*) echo 'rm -rf is not allowed' >&2; exit 2;; esac; echo '{{}}'"#,
        started.display(),
        gate.display()
    )
}

#[test]
fn a_daemon_killed_while_sixteen_callers_wait_lets_none_of_them_through() {
    let env = TestEnv::new();
    let started = env.project.join("started");
    let gate = env.project.join("gate");
    std::fs::create_dir_all(&started).unwrap();
    std::fs::write(&gate, "").unwrap();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": gated_guard(&started, &gate)}]),
    ));
    let claude = || {
        let mut cmd = with_daemon(&env, 120);
        cmd.args(["dispatch", "--format", "claude"]);
        cmd
    };
    // The first call dispatches in-process and starts the daemon.
    let first = env.run_with(&mut claude(), &bash_input("ls").to_string());
    assert_eq!(first.code, 0, "{}", first.stderr);
    wait_until("the dispatch daemon to listen", || {
        sockets(&env).first().is_some_and(|socket| {
            std::fs::read_to_string(socket.with_extension("log"))
                .is_ok_and(|log| log.contains(": serving until"))
        })
    });
    let daemon = daemon_pid(&sockets(&env)[0]);
    std::fs::remove_file(&gate).unwrap();
    for entry in std::fs::read_dir(&started).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }

    let callers: Vec<_> = (0..16)
        .map(|_| {
            let mut child = claude()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let input = bash_input("rm -rf /").to_string();
            std::io::Write::write_all(&mut child.stdin.take().unwrap(), input.as_bytes()).unwrap();
            child
        })
        .collect();
    wait_until("16 guards running in the daemon", || {
        std::fs::read_dir(&started).unwrap().count() >= 16
    });
    assert!(
        Command::new("kill")
            .args(["-KILL", &daemon.to_string()])
            .status()
            .unwrap()
            .success()
    );
    wait_until("the daemon to die", || !process_alive(daemon));
    std::fs::write(&gate, "").unwrap();

    let mut allowed = Vec::new();
    for child in callers {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        // Claude Code: exit 2 blocks; exit 0 or 1 (a non-blocking error) lets it run.
        if out.status.code() != Some(2) {
            allowed.push((out.status.code(), stderr));
            continue;
        }
        assert!(stderr.contains("rm -rf is not allowed"), "{stderr}");
    }
    assert!(allowed.is_empty(), "callers let through: {allowed:?}");
}
