//! One session state for every host: the Stop cap's count and the queue of async results
//! live in the data directory's session store, which the one-shot CLI, the dispatch
//! daemon and any number of `serve` daemons share under a lock. The kinds of host are
//! enumerated from the CLI's code ([`every_file_that_builds_a_host_is_a_known_kind`]), and
//! each test runs every kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::dispatch_daemon::{daemon_pid, sockets, with_daemon};
use crate::serve::Daemon;
use crate::support::{Run, TestEnv, wait_until};

/// A kind of host that dispatches a session's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// `hookhost dispatch` in process (and `run-async`, its runner).
    OneShot,
    /// `hookhost dispatch` answered by the warm dispatch daemon.
    DispatchDaemon,
    /// `hookhost serve`.
    Serve,
}

/// Every file of the CLI that builds a host, with the kind of host it builds; `None`
/// for a host that dispatches no session's events (or the one builder the others use).
/// A file that starts building hosts must be added here, and its kind to the tests.
const BUILDERS: &[(&str, Option<Kind>)] = &[
    // `SourceArgs::builder`/`host_built`: `standard_sources`, the shared store.
    ("mod.rs", None),
    ("dispatch.rs", Some(Kind::OneShot)),
    ("dispatch_daemon/client.rs", Some(Kind::OneShot)),
    ("dispatch_daemon/server.rs", Some(Kind::DispatchDaemon)),
    ("serve.rs", Some(Kind::Serve)),
    // Listing, reading the audit log, trust, locking OCI plugins: no event is dispatched.
    ("hooks.rs", None),
    ("audit/mod.rs", None),
    ("trust.rs", None),
    ("oci.rs", None),
    // The demo's scripted session keeps its state in the demo's own data directory.
    ("demo/session.rs", None),
    ("demo/setup.rs", None),
];

/// What builds a host in the CLI's code.
const BUILDS_A_HOST: &[&str] = &[
    "HostBuilder::new(",
    ".builder(",
    ".host()",
    ".host(",
    ".host_for(",
    ".host_guarded(",
    ".host_unbound_lock(",
    ".host_with(",
    ".host_reloading(",
    "Server::new(",
    "Server::with_limits(",
];

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The files of `host/src/cli` that build a host, by what [`BUILDS_A_HOST`] finds.
fn files_that_build_hosts() -> Vec<String> {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
    let mut files = Vec::new();
    rust_files(&cli, &mut files);
    let mut found: Vec<String> = files
        .into_iter()
        .filter(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            text.lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .any(|line| BUILDS_A_HOST.iter().any(|call| line.contains(call)))
        })
        .map(|file| file.strip_prefix(&cli).unwrap().display().to_string())
        .collect();
    found.sort();
    found
}

/// The kinds of host the CLI builds, from its code.
fn kinds() -> Vec<Kind> {
    let mut kinds: Vec<Kind> = BUILDERS.iter().filter_map(|(_, kind)| *kind).collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The class: every file that builds a host is classified (a new one fails here until
/// its kind is known to the tests below), and every classified file still builds one.
#[test]
fn every_file_that_builds_a_host_is_a_known_kind() {
    let found = files_that_build_hosts();
    let known: BTreeMap<&str, Option<Kind>> = BUILDERS.iter().copied().collect();
    let unknown: Vec<&String> = found
        .iter()
        .filter(|f| !known.contains_key(f.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "{unknown:?} build a host: add them to BUILDERS with their kind, and the kind to \
         the session-store tests"
    );
    let stale: Vec<&&str> = known
        .keys()
        .filter(|f| !found.iter().any(|g| g == *f))
        .collect();
    assert!(stale.is_empty(), "{stale:?} no longer build a host");
    assert_eq!(
        kinds(),
        [Kind::OneShot, Kind::DispatchDaemon, Kind::Serve],
        "a kind of host without a runner in `Hosts::dispatch`"
    );
}

/// The Stop cap of these tests.
const CAP: usize = 4;

/// One host of each kind, two `serve` daemons, on one data directory.
struct Hosts<'a> {
    env: &'a TestEnv,
    serves: Vec<Daemon>,
    /// The pid of the dispatch daemon of each event (the daemon is per command line).
    daemons: std::cell::RefCell<BTreeMap<String, u32>>,
    /// (kind, which of its kind) in the order the events go round.
    order: Vec<(Kind, usize)>,
}

impl<'a> Hosts<'a> {
    fn start(env: &'a TestEnv) -> Hosts<'a> {
        let mut order = Vec::new();
        let mut serves = Vec::new();
        for kind in kinds() {
            match kind {
                Kind::OneShot | Kind::DispatchDaemon => order.push((kind, 0)),
                Kind::Serve => {
                    for n in 0..2 {
                        let socket = env.data.join(format!("serve-{n}.sock"));
                        serves.push(Daemon::start_at(socket, command(env)));
                        order.push((kind, n));
                    }
                }
            }
        }
        Hosts {
            env,
            serves,
            daemons: Default::default(),
            order,
        }
    }

    /// Dispatches `event` with `input` on the host `(kind, n)`; returns the outcome and
    /// the pid of the process that dispatched it (the parent of its hooks' keeper, `$PPID`).
    fn dispatch(&self, (kind, n): (Kind, usize), event: &str, input: &Value) -> (Value, u32) {
        match kind {
            Kind::OneShot => {
                let run = one_shot(self.env, event, input);
                (run.json(), run.pid)
            }
            Kind::DispatchDaemon => {
                let daemon = self.daemon(event);
                let mut cmd = with_daemon(self.env, 120);
                add_cap(&mut cmd);
                let run = self
                    .env
                    .run_with(cmd.args(["dispatch", event]), &input.to_string());
                assert_eq!(run.code, 0, "{}", run.stderr);
                (run.json(), daemon)
            }
            Kind::Serve => {
                let daemon = &self.serves[n];
                (daemon.client().call(event, input.clone()), daemon.pid())
            }
        }
    }
}

impl Hosts<'_> {
    /// The pid of the dispatch daemon of `dispatch EVENT`, started on first use.
    fn daemon(&self, event: &str) -> u32 {
        if let Some(pid) = self.daemons.borrow().get(event) {
            return *pid;
        }
        let pid = start_dispatch_daemon(self.env, event);
        self.daemons.borrow_mut().insert(event.to_string(), pid);
        pid
    }
}

fn add_cap(cmd: &mut std::process::Command) {
    cmd.env("HOOKHOST_STOP_BLOCK_CAP", CAP.to_string());
}

/// The test's command, with the cap of these tests.
fn command(env: &TestEnv) -> std::process::Command {
    let mut cmd = env.command();
    add_cap(&mut cmd);
    cmd
}

fn one_shot(env: &TestEnv, event: &str, input: &Value) -> Run {
    let run = env.run_with(command(env).args(["dispatch", event]), &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run
}

/// Starts the dispatch daemon of `dispatch EVENT` with the test's environment (its
/// first call, of another session, dispatches in process and starts it); returns its pid.
fn start_dispatch_daemon(env: &TestEnv, event: &str) -> u32 {
    let before = sockets(env);
    let mut cmd = with_daemon(env, 120);
    add_cap(&mut cmd);
    let first = env.run_with(
        cmd.args(["dispatch", event]),
        &json!({"session_id": "warm-up"}).to_string(),
    );
    assert_eq!(first.code, 0, "{}", first.stderr);
    let started = || sockets(env).into_iter().find(|s| !before.contains(s));
    wait_until("the dispatch daemon to listen", || {
        started().is_some_and(|socket| {
            std::fs::read_to_string(socket.with_extension("log"))
                .is_ok_and(|log| log.contains(": serving until"))
        })
    });
    daemon_pid(&started().unwrap())
}

/// A Stop hook that always blocks and names the process that ran it.
fn blocking_stop_hook(env: &TestEnv) {
    env.project_hooks(json!({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "id": "never-done", "command": "echo \"stop $(awk '{print $4}' /proc/$PPID/stat)\" >&2; exit 2"}
    ]}]}}));
}

/// The pid in the blocking hook's message (`stop PID`).
fn ran_in(outcome: &Value) -> u32 {
    let message = outcome["hooks"][0]["message"].as_str().unwrap_or_default();
    message
        .strip_prefix("stop ")
        .and_then(|pid| pid.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {outcome}"))
}

/// Every kind of host (two `serve` daemons among them) takes its turn at the Stops of
/// one session: the blocks count together, so the cap overrides exactly every
/// (CAP+1)th Stop, whichever host serves it; each host serves an override in turn.
#[test]
fn the_stop_cap_holds_at_exactly_n_across_every_host_kind() {
    let env = TestEnv::new();
    blocking_stop_hook(&env);
    let hosts = Hosts::start(&env);
    let rounds = hosts.order.len() * (CAP + 1);
    let mut overridden_by = Vec::new();
    for n in 0..rounds {
        let host = hosts.order[n % hosts.order.len()];
        let (outcome, pid) = hosts.dispatch(host, "Stop", &json!({"session_id": "one"}));
        assert_eq!(ran_in(&outcome), pid, "{host:?} served Stop {n}: {outcome}");
        let want_override = (n + 1) % (CAP + 1) == 0;
        let overridden = outcome["decision"] == "none";
        assert_eq!(
            overridden, want_override,
            "Stop {n} on {host:?}: the cap is {CAP} blocks in a row in all hosts: {outcome}"
        );
        if overridden {
            assert!(
                outcome["notices"]
                    .to_string()
                    .contains(&format!("blocked {CAP} times in a row")),
                "{outcome}"
            );
            overridden_by.push(host);
        } else {
            assert_eq!(outcome["decision"], "block", "{outcome}");
        }
    }
    let mut every_host = overridden_by.clone();
    every_host.sort();
    every_host.dedup();
    assert_eq!(
        every_host.len(),
        hosts.order.len(),
        "each host served an override: {overridden_by:?}"
    );
}

/// When the count cannot be kept (the store's directory is a file), the cap fails
/// closed on every kind of host: the hook's block stands, with a notice naming the
/// store, however many Stops there are.
#[test]
fn the_cap_fails_closed_when_the_store_cannot_be_written() {
    let env = TestEnv::new();
    blocking_stop_hook(&env);
    std::fs::write(env.data.join("sessions"), "not a directory").unwrap();
    let hosts = Hosts::start(&env);
    for n in 0..hosts.order.len() * (CAP + 1) {
        let host = hosts.order[n % hosts.order.len()];
        let (outcome, _) = hosts.dispatch(host, "Stop", &json!({"session_id": "closed"}));
        assert_eq!(
            outcome["decision"], "block",
            "Stop {n} on {host:?}: {outcome}"
        );
        let notices = outcome["notices"].to_string();
        assert!(
            notices.contains("the Stop loop cap could not be applied")
                && notices.contains("sessions"),
            "Stop {n} on {host:?}: {notices}"
        );
        assert!(notices.contains("a block stands"), "{notices}");
    }
}

/// The session's queue of async results.
fn queue(env: &TestEnv, session: &str) -> PathBuf {
    env.data
        .join("sessions")
        .join(hookhost::session::session_key(session))
        .join("async")
}

fn queued(env: &TestEnv, session: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(queue(env, session))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// Async results queued by different hosts (a one-shot dispatch's detached runner, a
/// `serve` daemon) reach the session's next outcome on a third host, in the order they
/// were queued, even when their files' times say the opposite.
#[test]
fn async_results_arrive_in_creation_order_from_every_host() {
    let env = TestEnv::new();
    // Each async hook waits for its gate, then says its name: the test decides the
    // order in which the results are queued.
    let gated = |name: &str| {
        json!({"matcher": name, "hooks": [{"type": "command", "id": name, "async": true,
            "command": format!(
                "while [ ! -e '{gates}/go-{name}' ]; do sleep 0.02; done; \
                 echo '{{\"systemMessage\": \"from {name}\"}}'",
                gates = env.data.display())}]})
    };
    env.project_hooks(json!({"hooks": {"PostToolUse": [gated("Read"), gated("Write")]}}));
    let hosts = Hosts::start(&env);
    for (first, second) in [("Read", "Write"), ("Write", "Read")] {
        let session = format!("order-{first}");
        let input = |tool: &str| json!({"session_id": session, "tool_name": tool});
        // `Read` starts in a one-shot dispatch (a detached runner), `Write` in a serve.
        let started = one_shot(&env, "PostToolUse", &input("Read")).json();
        assert_eq!(started["hooks"][0]["status"], "async", "{started}");
        let (started, _) = hosts.dispatch((Kind::Serve, 0), "PostToolUse", &input("Write"));
        assert_eq!(started["hooks"][0]["status"], "async", "{started}");
        for (n, gate) in [first, second].into_iter().enumerate() {
            std::fs::write(env.data.join(format!("go-{gate}")), "").unwrap();
            wait_until(&format!("result {n} of {session}"), || {
                queued(&env, &session).len() == n + 1
            });
        }
        // The later result's file is made to look an hour older than the first's.
        let files = queued(&env, &session);
        let now = std::time::SystemTime::now();
        for (file, age) in files.iter().zip([0, 3600]) {
            let when = now - std::time::Duration::from_secs(age);
            std::fs::File::options()
                .write(true)
                .open(file)
                .unwrap()
                .set_times(std::fs::FileTimes::new().set_modified(when))
                .unwrap();
        }
        let (next, _) = hosts.dispatch(
            (Kind::DispatchDaemon, 0),
            "Notification",
            &json!({"session_id": session}),
        );
        assert_eq!(
            next["systemMessages"],
            json!([format!("from {first}"), format!("from {second}")]),
            "{next}"
        );
        for gate in ["Read", "Write"] {
            std::fs::remove_file(env.data.join(format!("go-{gate}"))).unwrap();
        }
    }
}
