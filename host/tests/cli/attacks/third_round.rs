//! Issue 24, third round: triggers the issue does not name against its session store
//! (item 3) and its run-once jobs (item 4), tried on the one store every host shares
//! ([`DiskStore`]), from the side of a corrupted or hostile data directory. Each test is
//! the attack; one that still gets through is `#[ignore]`d with what gets through and why.

use std::path::Path;
use std::sync::Arc;

use hookhost::session::{AsyncResult, DiskStore, SessionStore, session_key};

fn result(name: &str) -> AsyncResult {
    AsyncResult {
        hook: name.into(),
        event: "PostToolUse".into(),
        additional_context: Vec::new(),
        system_messages: vec![format!("from {name}")],
        wake: None,
        error: None,
    }
}

fn names(results: &[AsyncResult]) -> Vec<String> {
    results.iter().map(|r| r.hook.clone()).collect()
}

fn store() -> (tempfile::TempDir, DiskStore) {
    let root = tempfile::tempdir().unwrap();
    let store = DiskStore::new(root.path().join("sessions"));
    (root, store)
}

fn seq_file(store: &DiskStore, session: &str) -> std::path::PathBuf {
    store.session_dir(session).join("seq")
}

/// The session's sequence counter driven to its last value (`u64::MAX`, 20 digits, a
/// valid count): each later result must still be queued under a name of its own, never
/// over a result that waits (two results, two deliveries).
#[test]
fn a_sequence_counter_at_its_end_overwrites_no_queued_result() {
    let (_root, store) = store();
    store.push_async("s", result("first"));
    std::fs::write(seq_file(&store, "s"), u64::MAX.to_string()).unwrap();
    store.push_async("s", result("second"));
    store.push_async("s", result("third"));
    let taken = names(&store.take_async("s"));
    assert!(
        taken.contains(&"first".to_string()) && taken.contains(&"second".to_string()),
        "a queued result was overwritten: {taken:?}"
    );
}

/// The counter file corrupted (junk, truncated to nothing) while results wait: a result
/// queued after them is still delivered after them (the queue's order is the order of
/// queuing, not a counter that restarted at 1).
#[test]
fn a_corrupted_sequence_counter_does_not_reorder_the_queue() {
    for junk in ["", "garbage", "-5", "1e9"] {
        let (_root, store) = store();
        for name in ["one", "two", "three"] {
            store.push_async("s", result(name));
        }
        std::fs::write(seq_file(&store, "s"), junk).unwrap();
        store.push_async("s", result("four"));
        assert_eq!(
            names(&store.take_async("s")),
            ["one", "two", "three", "four"],
            "seq file {junk:?}"
        );
    }
}

/// A Stop counter file longer than the 20 digits the store writes over in place (24
/// zeros): after one block the count is 1, not the 20 new digits glued to the old file's
/// tail (`…0001` + `0000` = 10000, past any cap: the next block would be lifted).
/// Junk in the counter reads as 0 (the block stands: the safe side).
#[test]
fn a_long_stop_counter_is_not_read_glued_to_its_tail() {
    let (_root, store) = store();
    store.set_stop_blocks("s", 1);
    let counter = store.session_dir("s").join("stop-blocks");
    std::fs::write(&counter, "0".repeat(24)).unwrap();
    store.update_stop_blocks("s", &mut |n| n + 1).unwrap();
    assert_eq!(store.stop_blocks("s"), 1);
    std::fs::write(&counter, "junk").unwrap();
    assert_eq!(store.stop_blocks("s"), 0);
}

/// Session ids that are not names (`..`, `/`, NUL, a megabyte, ids that differ only in
/// case or Unicode normalization): each is one key of 64 hex digits inside the store, and
/// distinct ids never share a queue.
#[test]
fn hostile_session_ids_stay_inside_the_store_and_apart() {
    let (root, store) = store();
    let huge = "x".repeat(1 << 20);
    let ids = [
        "..",
        "../..",
        "a/b",
        "/etc",
        "\0",
        "a\0b",
        "A",
        "a",
        "\u{e9}",
        "e\u{301}",
        "",
        huge.as_str(),
    ];
    for id in ids {
        store.push_async(id, result(id));
    }
    for id in ids {
        let taken = names(&store.take_async(id));
        assert_eq!(taken, [id.to_string()], "id {:?}", id.get(..16));
    }
    let entries: Vec<String> = std::fs::read_dir(root.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        entries,
        ["sessions"],
        "something was written outside the store"
    );
    for entry in std::fs::read_dir(store.dir()).unwrap().flatten() {
        let name = entry.file_name().into_string().unwrap();
        assert!(
            name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}"
        );
    }
}

/// A session's directory swapped for a symlink to another session's: the store refuses
/// symlinks ("a symlink or another user's file is refused, not followed"), so the
/// session's next event must not take (and so steal from its owner) the other session's
/// queued results.
#[test]
fn a_session_dir_swapped_for_a_symlink_does_not_steal_another_sessions_results() {
    let (_root, store) = store();
    store.push_async("victim", result("victim's"));
    store.push_async("thief", result("thief's own"));
    let thief = store.session_dir("thief");
    std::fs::remove_dir_all(&thief).unwrap();
    std::os::unix::fs::symlink(store.session_dir("victim"), &thief).unwrap();
    let stolen = names(&store.take_async("thief"));
    assert!(
        stolen.is_empty(),
        "took another session's results: {stolen:?}"
    );
    assert_eq!(names(&store.take_async("victim")), ["victim's"]);
}

/// The same swap for the queue directory alone (`async` → another session's `async`).
#[test]
fn a_queue_dir_swapped_for_a_symlink_is_not_followed() {
    let (_root, store) = store();
    store.push_async("victim", result("victim's"));
    std::fs::create_dir_all(store.session_dir("thief")).unwrap();
    std::os::unix::fs::symlink(
        store.session_dir("victim").join("async"),
        store.session_dir("thief").join("async"),
    )
    .unwrap();
    let stolen = names(&store.take_async("thief"));
    assert!(
        stolen.is_empty(),
        "took another session's results: {stolen:?}"
    );
    assert_eq!(names(&store.take_async("victim")), ["victim's"]);
}

const ID: &str = "0123456789abcdef0123456789abcdef";
const DIGEST: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/// A job issued for one session, presented (same id, same bytes) by a runner of
/// another: its record is the issuing session's, so it runs nowhere else.
#[test]
fn a_job_of_one_session_runs_in_no_other() {
    let (_root, store) = store();
    store.issue_job("a", ID, DIGEST).unwrap();
    assert!(store.consume_job("b", ID, DIGEST).is_err());
    store.consume_job("a", ID, DIGEST).unwrap();
    assert!(store.consume_job("a", ID, DIGEST).is_err(), "ran twice");
}

/// Runners killed before they consumed their jobs (or a machine restarted): the records
/// of jobs issued and never run do not pile up without bound in a session's directory,
/// and the newest job still runs.
#[test]
fn records_of_jobs_never_run_are_bounded() {
    let (_root, store) = store();
    let max = hookhost::session::MAX_PENDING_JOBS;
    let ids: Vec<String> = (0..max + 40).map(|n| format!("{n:032x}")).collect();
    for id in &ids {
        store.issue_job("s", id, DIGEST).unwrap();
    }
    let records = std::fs::read_dir(store.session_dir("s").join("jobs"))
        .unwrap()
        .count();
    assert!(records <= max, "{records} records of jobs never run");
    store.consume_job("s", ids.last().unwrap(), DIGEST).unwrap();
}

/// Sixteen runners given the same job at once (the job file replayed in parallel):
/// exactly one may run it.
#[test]
fn racing_runners_of_one_job_run_it_once() {
    let (_root, store) = store();
    store.issue_job("s", ID, DIGEST).unwrap();
    let store = Arc::new(store);
    let barrier = Arc::new(std::sync::Barrier::new(16));
    let runs: Vec<_> = (0..16)
        .map(|_| {
            let (store, barrier) = (store.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                store.consume_job("s", ID, DIGEST).is_ok()
            })
        })
        .collect();
    let ran = runs
        .into_iter()
        .filter(|_| true)
        .map(|t| t.join().unwrap())
        .filter(|ok| *ok)
        .count();
    assert_eq!(ran, 1);
}

/// A job's record replaced by a symlink to a file that holds the right digest, or its
/// id spelled with a path in it: neither runs.
#[test]
fn a_forged_job_record_runs_nothing() {
    let (root, store) = store();
    store.issue_job("s", ID, DIGEST).unwrap();
    let record = store.session_dir("s").join("jobs").join(ID);
    let elsewhere = root.path().join("forged");
    std::fs::write(&elsewhere, DIGEST).unwrap();
    std::fs::remove_file(&record).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &record).unwrap();
    assert!(
        store.consume_job("s", ID, DIGEST).is_err(),
        "followed a symlinked record"
    );
    for id in [
        "../../forged",
        "0123456789ABCDEF0123456789ABCDEF",
        "0123456789abcdef0123456789abcde/",
    ] {
        assert!(store.consume_job("s", id, DIGEST).is_err(), "{id}");
    }
    assert!(Path::new(&elsewhere).exists());
}

/// A process that holds a session's lock and never lets go (stopped with SIGSTOP, or
/// hung): a Stop that must update the count does not wait with it; it gets an error
/// naming the file (and the cap lets the block stand, as when the store cannot be
/// written), and so do queuing a result and consuming a job.
#[test]
fn a_lock_held_forever_does_not_hang_a_stop() {
    let (_root, store) = store();
    store.set_stop_blocks("s", 1);
    store.push_async("s", result("queued"));
    let held = std::fs::File::open(store.session_dir("s").join("stop-blocks")).unwrap();
    held.lock().unwrap();
    let seq = std::fs::File::open(seq_file(&store, "s")).unwrap();
    seq.lock().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let stop = store.update_stop_blocks("s", &mut |n| n + 1);
        let job = store.issue_job("s", ID, DIGEST);
        let _ = tx.send((stop, job));
    });
    // A liveness bound, not a timing: a dispatch's deadline is far below a minute.
    let (stop, job) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the store still waits for the lock");
    let stop = stop.unwrap_err();
    assert!(
        stop.contains("stop-blocks") && stop.contains("locked"),
        "{stop}"
    );
    let job = job.unwrap_err();
    assert!(job.contains("seq") && job.contains("locked"), "{job}");
    drop((held, seq));
}

/// The key of a session is the sha256 of its id (the layout this file's tests rely on).
#[test]
fn the_session_dir_is_named_by_the_key() {
    let (_root, store) = store();
    assert!(store.session_dir("s").ends_with(session_key("s")));
}

/// `hookhost serve --stdio`, one PreToolUse request at a time.
struct Serve {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Serve {
    fn start(env: &crate::support::TestEnv) -> Serve {
        use std::process::Stdio;
        let mut child = env
            .command()
            .args(["serve", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Serve {
            input: child.stdin.take().unwrap(),
            output: std::io::BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    fn call(&mut self, command: &str) -> serde_json::Value {
        use std::io::{BufRead, Write};
        let input = crate::support::bash_input(command);
        let request = serde_json::json!({"id": 1, "event": "PreToolUse", "input": input});
        writeln!(self.input, "{request}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let answer: serde_json::Value = serde_json::from_str(&line).unwrap();
        answer["outcome"].clone()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config file never changes; the admitted plugin it names is overwritten in place
/// (with bytes managed policy does not admit) after the daemon admitted and loaded it.
/// The guard the config names can no longer be enforced as admitted: `rm -rf /` must not
/// be allowed by the daemon that still serves that config.
#[test]
fn a_plugin_swapped_after_admission_lets_nothing_through_with_on_failure_block() {
    plugin_swapped_after_admission(serde_json::json!({"onFailure": "block"}));
}

/// The same swap, the guard without `onFailure`: the plugin is admitted again at its
/// load (every load), refused as `notAdmitted`, and a plugin that is not admitted fails
/// closed whatever `onFailure` says (`FailureKind::fails_closed`).
#[test]
fn a_plugin_swapped_after_admission_lets_nothing_through() {
    plugin_swapped_after_admission(serde_json::json!({}));
}

fn plugin_swapped_after_admission(extra: serde_json::Value) {
    use serde_json::json;
    let env = crate::support::TestEnv::new();
    let plugin = env.home.join("guard.wasm");
    std::fs::copy(crate::support::deny_dangerous_bash(), &plugin).unwrap();
    let digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(&plugin).unwrap()))
    };
    env.managed(
        json!({"requireAllowlistedPlugins": true, "pluginAllowlist": [{"sha256": digest}]}),
    );
    let mut guard = json!({"type": "wasm", "id": "guard", "plugin": plugin});
    for (key, value) in extra.as_object().unwrap() {
        guard[key] = value.clone();
    }
    env.user_hooks(crate::support::hooks("PreToolUse", "Bash", json!([guard])));
    let mut serve = Serve::start(&env);
    assert_eq!(
        serve.call("rm -rf /")["decision"],
        "deny",
        "the guard is armed"
    );
    // Same size, other bytes: not admitted.
    let mut bytes = std::fs::read(&plugin).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&plugin, &bytes).unwrap();
    for n in 0..3 {
        let out = serve.call("rm -rf /");
        assert!(
            out["decision"] == "deny" || out["decision"] == "block",
            "call {n}: `rm -rf /` not denied: {out}"
        );
    }
}

/// The daemon restarted (killed, or the dispatch daemon's idle exit) after the guard's
/// file was replaced by a version the gate refuses (the guard dropped, a hook naming a
/// missing plugin): the last good version is on disk (`last-good/` in the data
/// directory), and the new daemon keeps it in force.
#[test]
fn a_restarted_daemon_keeps_the_last_good_config() {
    use serde_json::json;
    let env = crate::support::TestEnv::new();
    let guard = json!({"type": "command", "id": "guard",
        "command": "case \"$(cat)\" in *'rm -rf'*) echo no >&2; exit 2;; esac"});
    env.user_hooks(crate::support::hooks("PreToolUse", "Bash", json!([guard])));
    {
        let mut serve = Serve::start(&env);
        assert_eq!(
            serve.call("rm -rf /")["decision"],
            "deny",
            "the guard is armed"
        );
        let missing = env.home.join("missing.wasm");
        env.user_hooks(crate::support::hooks(
            "PreToolUse",
            "Bash",
            json!([{"type": "wasm", "id": "gone", "plugin": missing}]),
        ));
        let out = serve.call("rm -rf /");
        assert_eq!(
            out["decision"], "deny",
            "the running daemon keeps the guard: {out}"
        );
    }
    let mut serve = Serve::start(&env);
    let out = serve.call("rm -rf /");
    assert_eq!(out["decision"], "deny", "after a restart: {out}");
}

/// A session's state once it holds nothing (its Stop count back to 0, its queue taken,
/// its jobs run): its directory goes, so that sessions ids (any string a client sends)
/// do not leave a directory each in the data directory for good.
#[test]
fn a_session_that_holds_nothing_leaves_no_directory() {
    let (_root, store) = store();
    store.set_stop_blocks("s", 1);
    store.set_stop_blocks("s", 0);
    store.push_async("s", result("r"));
    assert_eq!(store.take_async("s").len(), 1);
    store.issue_job("s", ID, DIGEST).unwrap();
    store.consume_job("s", ID, DIGEST).unwrap();
    assert!(
        !store.session_dir("s").exists(),
        "the empty session's directory stays"
    );
}

/// The user's hooks file is a symlink, and the file it points to is rewritten (the link
/// itself unchanged): the daemon notices (its stamps are of what it read, not of the
/// link) and enforces the new version; a broken one keeps the last good.
#[test]
fn a_symlinked_config_whose_target_changes_is_reloaded() {
    use serde_json::json;
    let env = crate::support::TestEnv::new();
    let target = env.home.join("real-hooks.json");
    let version = |v: &str| {
        let guard = json!({"type": "command", "id": "guard",
            "command": format!("case \"$(cat)\" in *'rm -rf'*) echo no >&2; exit 2;; esac; \
                                echo '{{\"systemMessage\": \"{v}\"}}'")});
        crate::support::hooks("PreToolUse", "Bash", json!([guard])).to_string()
    };
    std::fs::write(&target, version("v1")).unwrap();
    std::os::unix::fs::symlink(&target, env.home.join("hooks.json")).unwrap();
    let mut serve = Serve::start(&env);
    let first = serve.call("ls");
    assert_eq!(first["systemMessages"], json!(["v1"]), "{first}");
    std::fs::write(&target, version("v2")).unwrap();
    crate::support::wait_until("the daemon to enforce v2", || {
        serve.call("ls")["systemMessages"] == json!(["v2"])
    });
    let broken = crate::support::hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "id": "gone", "plugin": env.home.join("missing.wasm")}]),
    );
    std::fs::write(&target, broken.to_string()).unwrap();
    let mut out = serde_json::Value::Null;
    crate::support::wait_until("the daemon to judge the broken version", || {
        out = serve.call("rm -rf /");
        out["notices"].to_string().contains("stays in force")
    });
    assert_eq!(out["decision"], "deny", "{out}");
}

/// A second source (managed policy) rewritten in place, same size, right after the daemon
/// read it, while the user's file stays unchanged: the daemon enforces managed policy as
/// it finally stands (here: the user's guard is let in only while managed allows it).
#[test]
fn a_second_source_rewritten_in_place_is_enforced_as_it_stands() {
    use std::io::{Seek, Write};

    use serde_json::json;
    let env = crate::support::TestEnv::new();
    let guard = json!({"type": "command", "id": "guard",
        "command": "echo '{\"systemMessage\": \"user guard\"}'"});
    env.user_hooks(crate::support::hooks("PreToolUse", "Bash", json!([guard])));
    // Two versions of one size: managed hooks only (the user's hook is not run), or not.
    let only = json!({"allowManagedHooksOnly": true}).to_string();
    let not = json!({"allowManagedHooksOnly": false}).to_string();
    let only = format!("{only:<width$}", width = not.len());
    assert_eq!(only.len(), not.len());
    env.managed(serde_json::from_str(&not).unwrap());
    let file = env.managed.join("managed.json");
    std::fs::write(&file, &not).unwrap();
    let mut serve = Serve::start(&env);
    assert_eq!(serve.call("ls")["systemMessages"], json!(["user guard"]));
    let mut opened = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    for n in 0..200 {
        let text = if n % 2 == 0 { &only } else { &not };
        opened.rewind().unwrap();
        opened.write_all(text.as_bytes()).unwrap();
        if n % 20 == 0 {
            serve.call("ls");
        }
    }
    opened.rewind().unwrap();
    opened.write_all(only.as_bytes()).unwrap();
    drop(opened);
    crate::support::wait_until("the daemon to enforce the final managed policy", || {
        serve.call("ls")["systemMessages"] == json!([])
    });
    // It stays so (the last read is of the final version, not of one in between).
    for _ in 0..5 {
        let out = serve.call("ls");
        assert_eq!(out["systemMessages"], json!([]), "{out}");
    }
}
