//! Async jobs run once: a `run-async` job carries an id its dispatch records in the
//! session store, and the runner consumes the record before it runs anything. The same
//! job again (run twice, from a copy, two runners racing) runs nothing and says so.
//!
//! The job is captured as a dispatch hands it to its runner: a library host whose
//! detached launcher is `sh -c 'cat > job.json'` instead of `hookhost run-async`, on
//! the test's data directory; the real runner is then given the captured bytes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::support::{Run, TestEnv, wait_until};

/// The test's environment with a user hook `bg` (async, on PostToolUse) that appends a
/// line to `marks` each time it runs.
fn env_with_marking_hook() -> (TestEnv, PathBuf) {
    let env = TestEnv::new();
    let marks = env.data.join("marks");
    env.user_hooks(json!({"hooks": {"PostToolUse": [{"hooks": [
        {"type": "command", "id": "bg", "async": true,
         "command": format!("echo ran >> '{}'", marks.display())}
    ]}]}}));
    (env, marks)
}

/// The runs of the hook so far.
fn runs(marks: &Path) -> usize {
    std::fs::read_to_string(marks)
        .unwrap_or_default()
        .lines()
        .count()
}

/// Dispatches PostToolUse of `session` through a library host on the test's files whose
/// runner writes its job to `file`; returns the job's bytes once written whole.
fn capture_job(env: &TestEnv, session: &str, file: &Path) -> Vec<u8> {
    use hookhost::{AsyncLauncher, HostBuilder};
    let host = HostBuilder::new(&env.project)
        .user_dir(&env.home)
        .managed_dir(&env.managed)
        .session_store(Arc::new(hookhost::session::DiskStore::new(
            env.data.join("sessions"),
        )))
        .async_launcher(AsyncLauncher::Detached {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                format!("cat > '{0}.part' && mv '{0}.part' '{0}'", file.display()).into(),
            ],
        })
        .build();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let outcome = runtime
        .block_on(host.dispatch(
            "PostToolUse",
            json!({"session_id": session, "tool_name": "Bash"}),
        ))
        .unwrap();
    assert_eq!(
        serde_json::to_value(&outcome).unwrap()["hooks"][0]["status"],
        "async",
        "{outcome:?}"
    );
    wait_until("the captured job", || file.exists());
    let job = std::fs::read(file).unwrap();
    let parsed: Value = serde_json::from_slice(&job).unwrap();
    assert_eq!(
        parsed["id"].as_str().map(str::len),
        Some(hookhost::session::JOB_ID_LEN),
        "{parsed}"
    );
    job
}

fn runner(env: &TestEnv) -> std::process::Command {
    let mut cmd = env.command();
    cmd.args(["run-async", "--project"]).arg(&env.project);
    cmd
}

fn run_job(env: &TestEnv, job: &[u8]) -> Run {
    crate::support::run_bytes(&mut runner(env), job)
}

/// The session's next outcome (a one-shot dispatch) and the audit log's lines of
/// async runs.
fn said(env: &TestEnv, session: &str) -> (String, Vec<Value>) {
    let next = env.dispatch("Notification", json!({"session_id": session}));
    let audited = env
        .audit_entries()
        .into_iter()
        .filter(|e| e["async"] == true && e["session"] == session)
        .collect();
    (next["notices"].to_string(), audited)
}

/// The same job file run twice, then a copy of it: the hook runs once; each replay is
/// refused on the runner's stderr, in the audit log and in the session's next outcome.
#[test]
fn a_job_run_twice_or_copied_runs_once() {
    let (env, marks) = env_with_marking_hook();
    let file = env.data.join("job.json");
    let job = capture_job(&env, "replay", &file);
    assert_eq!(runs(&marks), 0, "the captured job did not run yet");

    let first = run_job(&env, &job);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(runs(&marks), 1);

    let again = run_job(&env, &std::fs::read(&file).unwrap());
    let copy = env.data.join("copy-of-job.json");
    std::fs::copy(&file, &copy).unwrap();
    let copied = run_job(&env, &std::fs::read(&copy).unwrap());
    for replay in [&again, &copied] {
        assert_eq!(replay.code, 1, "{}", replay.stderr);
        assert!(
            replay.stderr.contains("refused to run the async job")
                && replay.stderr.contains("already ran")
                && replay.stderr.contains("nothing ran"),
            "{}",
            replay.stderr
        );
    }
    assert_eq!(runs(&marks), 1, "a replayed job ran its hook again");

    let (notices, audited) = said(&env, "replay");
    assert_eq!(
        notices
            .matches("refused to run the async hook `bg`: the job")
            .count(),
        2,
        "each replay is in the next outcome: {notices}"
    );
    let ran = audited
        .iter()
        .filter(|e| e["hooks"][0]["status"] != "skipped")
        .count();
    let refused: Vec<&Value> = audited
        .iter()
        .filter(|e| {
            e["hooks"][0]["status"] == "skipped"
                && e["hooks"][0]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("already ran"))
        })
        .collect();
    assert_eq!((ran, refused.len()), (1, 2), "{audited:?}");
    assert_eq!(refused[0]["hooks"][0]["id"], "bg");
}

/// Two runners given the same job at once: exactly one runs it; the other refuses.
/// Repeated, since which one wins is up to the scheduler.
#[test]
fn two_runners_racing_for_a_job_run_it_once() {
    let (env, marks) = env_with_marking_hook();
    for round in 0..3 {
        let job = capture_job(
            &env,
            &format!("race-{round}"),
            &env.data.join(format!("job-{round}.json")),
        );
        let mut racers: Vec<Child> = (0..2)
            .map(|_| {
                runner(&env)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for racer in &mut racers {
            racer.stdin.take().unwrap().write_all(&job).unwrap();
        }
        let mut codes: Vec<i32> = racers
            .into_iter()
            .map(|r| r.wait_with_output().unwrap().status.code().unwrap_or(-1))
            .collect();
        codes.sort();
        assert_eq!(codes, [0, 1], "round {round}: one runs, one refuses");
        assert_eq!(runs(&marks), round + 1, "round {round}");
    }
}

/// A job whose bytes changed (same id) is refused without using up the id: the job its
/// dispatch issued still runs, once. A job without an id, or one no dispatch issued,
/// runs nothing.
#[test]
fn a_changed_or_unissued_job_runs_nothing() {
    let (env, marks) = env_with_marking_hook();
    let job = capture_job(&env, "changed", &env.data.join("job.json"));
    let mut edited: Value = serde_json::from_slice(&job).unwrap();
    edited["input"]["tool_name"] = json!("Write");
    let refused = run_job(&env, edited.to_string().as_bytes());
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("not the one its dispatch issued"),
        "{}",
        refused.stderr
    );
    let mut unissued = edited.clone();
    unissued["id"] = json!("00000000000000000000000000000000");
    let mut no_id = edited.clone();
    no_id.as_object_mut().unwrap().remove("id");
    for forged in [unissued, no_id] {
        let run = run_job(&env, forged.to_string().as_bytes());
        assert_eq!(run.code, 1, "{}", run.stderr);
    }
    assert_eq!(runs(&marks), 0);
    let genuine = run_job(&env, &job);
    assert_eq!(genuine.code, 0, "{}", genuine.stderr);
    assert_eq!(runs(&marks), 1);
}
