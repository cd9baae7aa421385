//! `hookhost serve`: the daemon over a unix socket and stdio.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    TestEnv, bash_input, deny_dangerous_bash, hooks, process_running, wait_until,
};

/// A `hookhost serve` on a socket in the test's data directory.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) socket: PathBuf,
}

impl Daemon {
    pub(crate) fn start(env: &TestEnv) -> Daemon {
        Daemon::start_with(env, env.command())
    }

    pub(crate) fn start_with(env: &TestEnv, command: std::process::Command) -> Daemon {
        Daemon::start_at(env.data.join("hookhost.sock"), command)
    }

    /// `command serve --socket SOCKET`, once it answers on its socket.
    pub(crate) fn start_at(socket: PathBuf, command: std::process::Command) -> Daemon {
        Daemon::start_serving(socket, command, &[])
    }

    /// `command serve --socket SOCKET EXTRA…`, once it answers on its socket.
    pub(crate) fn start_serving(
        socket: PathBuf,
        mut command: std::process::Command,
        extra: &[&str],
    ) -> Daemon {
        let child = command
            .args(["serve", "--socket", socket.to_str().unwrap()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until("the socket to appear", || {
            socket.exists() && UnixStream::connect(&socket).is_ok()
        });
        Daemon { child, socket }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn client(&self) -> Client {
        let stream = UnixStream::connect(&self.socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    pub(crate) fn terminate(&mut self) -> i32 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "the daemon did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One connection to a `hookhost serve`.
pub(crate) struct Client {
    pub(crate) stream: UnixStream,
    pub(crate) reader: BufReader<UnixStream>,
}

impl Client {
    pub(crate) fn send(&mut self, line: &str) {
        self.stream.write_all(line.as_bytes()).unwrap();
        self.stream.write_all(b"\n").unwrap();
    }

    pub(crate) fn request(&mut self, id: Value, event: &str, input: Value) {
        self.send(&json!({"id": id, "event": event, "input": input}).to_string());
    }

    pub(crate) fn read(&mut self) -> Value {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad answer line {line:?}: {e}"))
    }

    pub(crate) fn call(&mut self, event: &str, input: Value) -> Value {
        self.request(json!("call"), event, input);
        let answer = self.read();
        assert_eq!(answer["id"], "call", "{answer}");
        answer["outcome"].clone()
    }
}

fn deny_hook(env: &TestEnv) {
    env.project_hooks(hooks("PreToolUse", "Bash", json!([{"type": "command", "command": "echo \"no $(cat /dev/stdin | wc -c)\" >&2; exit 2"}])));
}

#[test]
fn many_concurrent_clients_get_their_own_answers() {
    let env = TestEnv::new();
    deny_hook(&env);
    let daemon = Daemon::start(&env);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let mut client = daemon.client();
            std::thread::spawn(move || {
                for n in 0..10 {
                    client.request(
                        json!(format!("{t}-{n}")),
                        "PreToolUse",
                        bash_input(&format!("echo {t} {n}")),
                    );
                }
                let mut ids: Vec<String> = (0..10)
                    .map(|_| {
                        let answer = client.read();
                        assert_eq!(answer["outcome"]["decision"], "deny", "{answer}");
                        answer["id"].as_str().unwrap().to_string()
                    })
                    .collect();
                ids.sort();
                let mut expected: Vec<String> = (0..10).map(|n| format!("{t}-{n}")).collect();
                expected.sort();
                assert_eq!(ids, expected);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn malformed_requests_get_errors_and_the_daemon_keeps_serving() {
    let env = TestEnv::new();
    deny_hook(&env);
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.send("this is not json");
    let answer = client.read();
    assert_eq!(answer["id"], Value::Null);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .starts_with("bad request: "),
        "{answer}"
    );
    client.send(r#"{"id": 41, "evnt": "Stop"}"#);
    let answer = client.read();
    assert_eq!(answer["id"], 41);
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("unknown field `evnt`")
    );
    client.send(r#"{"id": 42}"#);
    assert_eq!(
        client.read(),
        json!({"id": 42, "error": "bad request: `event` is required"})
    );
    client.request(json!(43), "NoSuchEvent", json!({}));
    assert_eq!(client.read()["id"], 43);
    client.request(json!(44), "Stop", json!("not an object"));
    assert!(
        client.read()["error"]
            .as_str()
            .unwrap()
            .contains("must be a JSON object")
    );
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );
    // another client is unaffected too
    assert_eq!(
        daemon.client().call("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );
}

#[test]
fn session_state_is_kept_across_connections() {
    let env = TestEnv::new();
    env.project_hooks(json!({"stopBlockCap": 2, "hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": r#"echo '{"decision": "block", "reason": "again"}'"#}
    ]}]}}));
    let daemon = Daemon::start(&env);
    let stop = json!({"session_id": "long", "stop_hook_active": true});
    assert_eq!(
        daemon.client().call("Stop", stop.clone())["decision"],
        "block"
    );
    assert_eq!(
        daemon.client().call("Stop", stop.clone())["decision"],
        "block"
    );
    let capped = daemon.client().call("Stop", stop);
    assert_eq!(capped["decision"], "none", "{capped}");
}

#[test]
fn subscribers_get_async_results_and_wakeups_as_they_finish() {
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "slow-tests", "asyncRewake": true, "command": "sleep 0.2; echo 'tests failed' >&2; exit 2"}
    ]}]}}));
    let daemon = Daemon::start(&env);
    let mut watcher = daemon.client();
    watcher.send(r#"{"id": "w", "subscribe": "sub-1"}"#);
    assert_eq!(watcher.read(), json!({"id": "w", "subscribed": "sub-1"}));
    let started = daemon.client().call(
        "PostToolUse",
        json!({"session_id": "sub-1", "tool_name": "Bash"}),
    );
    assert_eq!(started["hooks"][0]["status"], "async");
    let push = watcher.read();
    assert_eq!(push["session"], "sub-1");
    assert_eq!(push["async"]["hook"], "slow-tests");
    assert_eq!(push["async"]["wake"], "tests failed");
    // The daemon's in-process async run is audited on its own line too.
    wait_until("the async run's audit line", || {
        env.audit_entries()
            .iter()
            .any(|e| e["async"] == true && e["hooks"][0]["id"] == "slow-tests")
    });
}

#[test]
fn config_changes_are_reloaded_with_a_notice() {
    let env = TestEnv::new();
    deny_hook(&env);
    let daemon = Daemon::start(&env);
    let mut client = daemon.client();
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["decision"],
        "deny"
    );
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "true"}]),
    ));
    let mut reloaded = Value::Null;
    wait_until("the reload", || {
        reloaded = client.call("PreToolUse", bash_input("ls"));
        reloaded["decision"] == "none"
    });
    let notice = reloaded["notices"][0]["message"].as_str().unwrap();
    assert!(
        notice.starts_with("config reloaded") && notice.contains("hooks.json"),
        "{reloaded}"
    );
    assert_eq!(
        client.call("PreToolUse", bash_input("ls"))["notices"],
        json!([]),
        "the notice comes once"
    );
}

#[test]
fn sigterm_finishes_in_flight_requests() {
    let env = TestEnv::new();
    env.project_hooks(hooks("PreToolUse", "Bash", json!([
        {"type": "command", "command": "touch started; sleep 1; echo 'slow but sure' >&2; exit 2"}
    ])));
    let mut daemon = Daemon::start(&env);
    let mut client = daemon.client();
    client.request(json!("inflight"), "PreToolUse", bash_input("ls"));
    wait_until("the hook to start", || env.project.join("started").exists());
    let code = daemon.terminate();
    let answer = client.read();
    assert_eq!(answer["id"], "inflight");
    assert_eq!(answer["outcome"]["reason"], "slow but sure");
    assert_eq!(code, 0);
    assert!(!daemon.socket.exists(), "the socket file is removed");
}

#[test]
fn a_client_that_disconnects_mid_request_leaks_no_process() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "touch started; sleep 3171"}]),
    ));
    let daemon = Daemon::start(&env);
    {
        let mut client = daemon.client();
        client.request(json!(1), "PreToolUse", bash_input("ls"));
        wait_until("the hook to start", || env.project.join("started").exists());
        assert!(process_running("sleep 3171"));
    } // the client goes away
    wait_until("the hook's process to be killed", || {
        !process_running("sleep 3171")
    });
    let still_serving = daemon.client().call("Stop", json!({"session_id": "after"}));
    assert_eq!(still_serving["event"], "Stop");
}

#[test]
fn stdio_answers_every_request_before_exiting() {
    let env = TestEnv::new();
    deny_hook(&env);
    let requests: String = (0..5)
        .map(|n| {
            json!({"id": n, "event": "PreToolUse", "input": bash_input("ls")}).to_string() + "\n"
        })
        .collect();
    let run = env.run(&["serve", "--stdio"], &requests);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut ids: Vec<i64> = run
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, [0, 1, 2, 3, 4]);
}

#[test]
fn the_python_and_node_clients_work() {
    let env = TestEnv::new();
    env.project_hooks(hooks("PreToolUse", "Bash", json!([
        {"type": "command", "command": "grep -q 'rm -rf /' && { echo never >&2; exit 2; }; exit 0"}
    ])));
    let daemon = Daemon::start(&env);
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
    let expected = [
        json!({"command": "ls -la", "decision": "none", "reason": null}),
        json!({"command": "rm -rf /", "decision": "deny", "reason": "never"}),
    ];
    // The daemon's socket is where `hookhost serve` listens by default without
    // `$XDG_RUNTIME_DIR`: each client is run with it named and with its default.
    assert_eq!(daemon.socket, env.data.join("hookhost.sock"));
    for (program, script, named) in [
        ("python3", "hookhost_client.py", true),
        ("python3", "hookhost_client.py", false),
        ("node", "hookhost-client.mjs", true),
        ("node", "hookhost-client.mjs", false),
    ] {
        let mut client = std::process::Command::new(program);
        client
            .arg(examples.join(script))
            .env_remove("XDG_RUNTIME_DIR")
            .env("HOOKHOST_DATA_DIR", &env.data);
        if named {
            client.arg(&daemon.socket);
        }
        let out = client
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[..2], expected, "{script}");
        assert!(
            lines[2]["error"]
                .as_str()
                .unwrap()
                .contains("unknown event `NoSuchEvent`"),
            "{script}: {stdout}"
        );
    }
}

#[test]
fn trusting_the_workspace_reaches_a_running_daemon() {
    let env = TestEnv::new();
    deny_hook(&env);
    let daemon = Daemon::start_with(&env, env.untrusted_command());
    let mut client = daemon.client();
    let before = client.call("PreToolUse", bash_input("ls"));
    assert_eq!(before["decision"], "none");
    assert_eq!(before["hooks"][0]["status"], "skipped", "{before}");
    let trusted = env.run_untrusted(&["trust", env.project.to_str().unwrap()], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    wait_until("the daemon to see the trust", || {
        client.call("PreToolUse", bash_input("ls"))["decision"] == "deny"
    });
}

/// Where the instance pool's address space (about 4 TiB of reservations) cannot be had,
/// as under `ulimit -v`, the daemon (which uses the pool) allocates per instance and
/// plugins still run.
#[test]
fn plugins_run_without_the_instance_pool_under_an_address_space_limit() {
    use std::os::unix::process::CommandExt;
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    let settings = json!({"hooks": {"PreToolUse": [
        {"hooks": [{"type": "wasm", "plugin": plugin}]}
    ]}});
    let mut cmd = env.command();
    cmd.args(["serve", "--stdio", "--settings", &settings.to_string()]);
    // 64 GiB: room for one instance's 4 GiB reservation, not for a pool of them.
    let limit = 64 << 30;
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &rlimit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let request = json!({"id": 1, "event": "PreToolUse", "input": bash_input("rm -rf /")});
    let run = env.run_with(&mut cmd, &format!("{request}\n"));
    assert_eq!(run.code, 0, "{}", run.stderr);
    let answer: Value = serde_json::from_str(run.stdout.trim()).expect("one answer line");
    assert_eq!(answer["outcome"]["decision"], "deny", "{answer}");
    if hookhost::handlers::wasm::instance_pool_available() {
        assert!(
            run.stderr.contains("allocating per instance"),
            "the pool was tried first: {}",
            run.stderr
        );
    }
}

/// The epoch ticker of an idle daemon is not woken every tick: between events it idles
/// (about once a second), and the next wasm event wakes it (a deny still comes back; that
/// a call still yields and meets its deadline at every tick is the spinning-plugin test of
/// the dispatch daemon).
#[test]
fn an_idle_daemon_does_not_tick() {
    let env = TestEnv::new();
    let plugin = deny_dangerous_bash().to_str().unwrap();
    env.project_hooks(json!({"hooks": {"PreToolUse": [
        {"hooks": [{"type": "wasm", "plugin": plugin}]}
    ]}}));
    let daemon = Daemon::start(&env);
    let deny = |daemon: &Daemon| {
        let answer = daemon.client().call("PreToolUse", bash_input("rm -rf /"));
        assert_eq!(answer["decision"], "deny", "{answer}");
    };
    deny(&daemon);
    let tasks = format!("/proc/{}/task", daemon.pid());
    let ticker = std::fs::read_dir(&tasks)
        .unwrap()
        .flatten()
        .map(|task| task.path())
        .find(|task| {
            std::fs::read_to_string(task.join("comm")).is_ok_and(|c| c.trim() == "hookhost-epoch")
        })
        .expect("the daemon has an epoch ticker thread");
    let wakes = || {
        let status = std::fs::read_to_string(ticker.join("status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    // The ticker stays awake for a tick or two after the last call (its grace).
    std::thread::sleep(Duration::from_millis(100));
    let before = wakes();
    std::thread::sleep(Duration::from_secs(2));
    let idle = wakes() - before;
    // Ticking every 5 ms, it would have woken about 400 times.
    assert!(idle <= 5, "the idle ticker woke {idle} times in 2 s");
    deny(&daemon);
}

/// `hookhost serve ARGS` run with `cmd`, expected to fail: its stderr.
fn serve_fails(mut cmd: std::process::Command, args: &[&str]) -> String {
    let out = cmd
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("serving on"), "claimed to serve: {stderr}");
    stderr
}

#[test]
fn serve_says_why_it_cannot_bind_before_it_claims_to_serve() {
    let env = TestEnv::new();
    let missing = env.data.join("no/such/dir/hookhost.sock");
    let stderr = serve_fails(env.command(), &["--socket", missing.to_str().unwrap()]);
    assert!(
        stderr.contains(&format!(
            "{}: the directory does not exist",
            env.data.join("no/such/dir").display()
        )),
        "{stderr}"
    );
    let long = env.data.join(format!("{}.sock", "x".repeat(120)));
    let stderr = serve_fails(env.command(), &["--socket", long.to_str().unwrap()]);
    assert!(stderr.contains("at most 107 bytes"), "{stderr}");
    let daemon = Daemon::start(&env);
    let stderr = serve_fails(
        env.command(),
        &["--socket", daemon.socket.to_str().unwrap()],
    );
    assert!(stderr.contains("a daemon already listens"), "{stderr}");
    assert_eq!(daemon.client().call("Stop", json!({}))["event"], "Stop");
}

#[test]
fn serve_without_a_path_listens_in_the_runtime_dir_else_the_data_dir() {
    let env = TestEnv::new();
    let runtime = env.data.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    // `$XDG_RUNTIME_DIR` when it is an absolute directory.
    for args in [&[][..], &["--socket"][..]] {
        let mut cmd = env.command();
        cmd.env("XDG_RUNTIME_DIR", &runtime)
            .args(["serve"])
            .args(args);
        let socket = runtime.join("hookhost.sock");
        let mut daemon = spawned(cmd, socket.clone());
        assert_eq!(daemon.client().call("Stop", json!({}))["event"], "Stop");
        assert_eq!(daemon.terminate(), 0);
        assert!(!socket.exists());
    }
    // Unset, empty, relative or missing: the data directory (created if need be).
    let data = env.data.join("fresh-data");
    for value in [
        None,
        Some(""),
        Some("relative/dir"),
        Some("/no/such/runtime/dir"),
    ] {
        let mut cmd = env.command();
        cmd.env("HOOKHOST_DATA_DIR", &data);
        match value {
            None => cmd.env_remove("XDG_RUNTIME_DIR"),
            Some(v) => cmd.env("XDG_RUNTIME_DIR", v),
        };
        cmd.arg("serve");
        let mut daemon = spawned(cmd, data.join("hookhost.sock"));
        assert_eq!(daemon.client().call("Stop", json!({}))["event"], "Stop");
        assert_eq!(daemon.terminate(), 0);
    }
}

/// A `hookhost serve` started by `cmd` (its arguments included), serving on `socket`.
fn spawned(mut cmd: std::process::Command, socket: PathBuf) -> Daemon {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the socket to appear", || {
        UnixStream::connect(&socket).is_ok()
    });
    Daemon { child, socket }
}
