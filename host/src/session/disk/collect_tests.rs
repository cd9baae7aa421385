//! Tests of collecting session directories.

use std::time::{Duration, SystemTime};

use super::super::DiskStore;
use super::{SESSION_MAX_IDLE, still_linked};
use crate::session::{AsyncResult, SessionStore};

const JOB: &str = "0123456789abcdef0123456789abcdef";

fn result(hook: &str) -> AsyncResult {
    AsyncResult {
        hook: hook.into(),
        event: "PostToolUse".into(),
        additional_context: vec![],
        system_messages: vec![],
        wake: None,
        error: None,
    }
}

/// Sets the times of a session's directory and of everything in it to `when`.
fn age(dir: &std::path::Path, when: SystemTime) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            age(&path, when);
        } else {
            std::fs::File::options()
                .append(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
    }
    std::fs::File::open(dir)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

/// Every kind of state a session holds, and each way it ends: once it holds nothing,
/// its directory is gone.
#[test]
fn each_kind_of_state_leaves_no_directory_once_it_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    store.set_stop_blocks("s", 2);
    assert!(store.session_dir("s").exists());
    store.set_stop_blocks("s", 0);
    assert!(!store.session_dir("s").exists(), "a Stop count back to 0");
    store.push_async("s", result("r"));
    assert_eq!(store.take_async("s").len(), 1);
    assert!(!store.session_dir("s").exists(), "a queue taken");
    store.issue_job("s", JOB, "d").unwrap();
    store.consume_job("s", JOB, "d").unwrap();
    assert!(!store.session_dir("s").exists(), "a job run");
    // A consumer of a job never issued leaves nothing either.
    assert!(store.consume_job("t", JOB, "d").is_err());
    assert!(!store.session_dir("t").exists(), "a refused job");
    // A session that still holds something keeps it.
    store.set_stop_blocks("s", 1);
    store.push_async("s", result("r"));
    store.set_stop_blocks("s", 0);
    assert!(store.session_dir("s").exists(), "its queue waits");
    assert_eq!(store.take_async("s").len(), 1);
    assert!(!store.session_dir("s").exists());
}

/// `SessionEnd`: the session's count, queue and env file go with its directory; jobs of
/// its async hooks not run yet stay (their runner runs them once), and the last one run
/// takes the directory.
#[test]
fn a_session_that_ends_leaves_only_its_pending_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    store.set_stop_blocks("s", 3);
    store.push_async("s", result("r"));
    std::fs::write(store.session_dir("s").join("env"), "export A=1\n").unwrap();
    store.end_session("s");
    assert!(!store.session_dir("s").exists());

    store.set_stop_blocks("s", 3);
    store.push_async("s", result("r"));
    store.issue_job("s", JOB, "d").unwrap();
    store.end_session("s");
    let left: Vec<_> = std::fs::read_dir(store.session_dir("s"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        left.contains(&"jobs".to_string()) && !left.contains(&"async".to_string()),
        "{left:?}"
    );
    store.consume_job("s", JOB, "d").unwrap();
    assert!(!store.session_dir("s").exists());
}

/// The sweep removes sessions untouched past the bound, and no others; each sweep looks
/// at a bounded number of them.
#[test]
fn the_sweep_removes_idle_sessions_a_bounded_number_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    let old = SystemTime::now() - SESSION_MAX_IDLE - Duration::from_secs(3600);
    for n in 0..10 {
        let session = format!("old{n}");
        store.set_stop_blocks(&session, 1);
        age(&store.session_dir(&session), old);
    }
    store.set_stop_blocks("fresh", 1);
    // A directory that is not a session's is not touched.
    std::fs::create_dir(dir.path().join("not-a-session")).unwrap();
    let mut swept = 0;
    while swept < 10 {
        let gone = store.sweep(SESSION_MAX_IDLE, 4);
        assert!(gone > 0 && gone <= 4, "{gone}");
        swept += gone;
    }
    assert_eq!(store.sweep(SESSION_MAX_IDLE, 4), 0);
    assert_eq!(store.stop_blocks("fresh"), 1);
    assert!(dir.path().join("not-a-session").exists());
}

/// A session whose lock (or Stop count) another process holds is left for later.
#[test]
fn a_session_in_use_is_not_collected() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    for file in ["seq", "stop-blocks"] {
        store.set_stop_blocks("s", 1);
        let path = store.session_dir("s").join(file);
        let held = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap();
        held.lock().unwrap();
        age(&store.session_dir("s"), SystemTime::UNIX_EPOCH);
        assert_eq!(store.sweep(SESSION_MAX_IDLE, 32), 0, "{file}");
        store.end_session("s");
        assert!(store.session_dir("s").exists(), "{file}");
        drop(held);
        store.end_session("s");
        assert!(!store.session_dir("s").exists(), "{file}");
    }
}

/// A lock file removed between its open and its lock is known as such: the locker
/// opens it again rather than holding a lock no other process can see.
#[test]
fn a_lock_on_a_removed_file_is_not_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seq");
    let file = std::fs::File::create(&path).unwrap();
    assert!(still_linked(&file, &path));
    std::fs::remove_file(&path).unwrap();
    assert!(!still_linked(&file, &path));
    std::fs::File::create(&path).unwrap();
    assert!(!still_linked(&file, &path), "another file at the path");
}
