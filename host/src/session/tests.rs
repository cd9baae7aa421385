//! Tests of the session store.

use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn result(hook: &str) -> AsyncResult {
    AsyncResult {
        hook: hook.into(),
        event: "PostToolUse".into(),
        additional_context: vec![format!("from {hook}")],
        system_messages: vec![],
        wake: None,
        error: None,
    }
}

fn exercise(store: &dyn SessionStore) {
    assert_eq!(store.stop_blocks("s1"), 0);
    store.set_stop_blocks("s1", 3);
    assert_eq!(store.stop_blocks("s1"), 3);
    assert_eq!(store.stop_blocks("s2"), 0);
    store.push_async("s1", result("a"));
    store.push_async("s1", result("b"));
    assert_eq!(store.take_async("s2"), vec![]);
    let taken: Vec<String> = store.take_async("s1").into_iter().map(|r| r.hook).collect();
    assert_eq!(taken, ["a", "b"]);
    assert!(store.take_async("s1").is_empty());
}

/// The store bounds each queue (dropping the oldest), hands out at most
/// [`MAX_RESULTS_PER_TAKE`] results per outcome, and removes an emptied queue.
#[test]
fn queues_are_bounded_and_emptied_queues_removed() {
    let dir = tempfile::tempdir().unwrap();
    let disk = DiskStore::new(dir.path());
    for n in 0..MAX_QUEUED_RESULTS + 10 {
        disk.push_async("s", result(&format!("r{n}")));
    }
    let first = disk.take_async("s");
    assert_eq!(first.len(), MAX_RESULTS_PER_TAKE);
    assert_eq!(first[0].hook, "r10", "the oldest were dropped");
    let mut rest = 0;
    loop {
        let taken = disk.take_async("s").len();
        if taken == 0 {
            break;
        }
        rest += taken;
    }
    assert_eq!(first.len() + rest, MAX_QUEUED_RESULTS);
    assert!(
        !disk.session_dir("s").join("async").exists(),
        "an emptied queue is removed"
    );
}

/// A write that fails (the target is a directory) names the target and leaves no
/// temporary file behind in the session's directory.
#[test]
fn a_failed_write_names_the_file_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("r.json");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), "x").unwrap();
    let error = write_atomically(&target, b"{}").unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("cannot write `{}`", target.display())),
        "{error}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["r.json"], "only the target remains");
}

/// The messages read as they did before the errors were typed.
#[test]
fn messages_put_the_path_in_the_sentence() {
    let error = |action| {
        StoreError::io(action, Path::new("/s/x"))(std::io::Error::other("boom")).to_string()
    };
    assert_eq!(error(StoreAction::Lock), "cannot lock `/s/x`: boom");
    assert_eq!(
        error(StoreAction::MakePrivate),
        "cannot make `/s/x` private: boom"
    );
}

#[test]
fn disk_store() {
    let dir = tempfile::tempdir().unwrap();
    exercise(&DiskStore::new(dir.path()));
}

/// Every id, however long or odd, is one fixed-length name inside the store.
#[test]
fn session_ids_become_fixed_length_names() {
    let long = "s".repeat(200);
    let ids = ["abc-123_x", "../etc", "", "a/b", "nul\0byte", &long, "é"];
    let mut names = std::collections::HashSet::new();
    for id in ids {
        let name = session_key(id);
        assert_eq!(name.len(), 64, "{id}");
        assert!(name.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        names.insert(name);
    }
    assert_eq!(names.len(), ids.len(), "distinct ids, distinct names");
    let store = DiskStore::new("/state");
    assert_eq!(
        store.session_dir("../x").parent(),
        Some(Path::new("/state"))
    );
}

#[test]
fn state_is_private_and_refuses_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path().join("sessions"));
    store.set_stop_blocks("s", 2);
    let session = store.session_dir("s");
    for path in [dir.path().join("sessions"), session.clone()] {
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", path.display());
    }
    let counter = session.join("stop-blocks");
    assert_eq!(std::fs::metadata(&counter).unwrap().mode() & 0o777, 0o600);

    // A planted symlink is refused, not followed.
    let elsewhere = dir.path().join("elsewhere");
    std::fs::write(&elsewhere, "7").unwrap();
    std::fs::remove_file(&counter).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &counter).unwrap();
    let error = store.update_stop_blocks("s", &mut |n| n + 1).unwrap_err();
    assert!(error.contains("symlink"), "{error}");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "7");

    // An env file is created 0600 in 0700 directories; a wider one is narrowed.
    let env = store.session_dir("t").join("env");
    prepare_env_file(&env).unwrap();
    assert_eq!(std::fs::metadata(&env).unwrap().mode() & 0o777, 0o600);
    std::fs::set_permissions(&env, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(
        env.parent().unwrap(),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    prepare_env_file(&env).unwrap();
    assert_eq!(std::fs::metadata(&env).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(env.parent().unwrap()).unwrap().mode() & 0o777,
        0o700
    );
}

/// Threads with their own file handles, as processes would have: no update is lost.
#[test]
fn concurrent_updates_are_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let path = path.clone();
            scope.spawn(move || {
                let store = DiskStore::new(&path);
                for _ in 0..25 {
                    store.update_stop_blocks("s", &mut |n| n + 1).unwrap();
                }
            });
        }
    });
    assert_eq!(DiskStore::new(&path).stop_blocks("s"), 200);
}

/// The queue is ordered by the sequence number the store keeps, not by time: results
/// whose files say they are older (a clock stepped back between two pushes, files
/// touched since) are still delivered in the order they were queued, also across two
/// store handles (two processes) pushing in turn.
#[test]
fn the_queue_keeps_creation_order_whatever_the_clock_says() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (DiskStore::new(dir.path()), DiskStore::new(dir.path()));
    let hooks: Vec<String> = (0..12).map(|n| format!("r{n}")).collect();
    for (n, hook) in hooks.iter().enumerate() {
        let store = if n % 2 == 0 { &a } else { &b };
        store.push_async("s", result(hook));
    }
    // Every later file is made to look older than the one before it.
    let queue = a.session_dir("s").join("async");
    let mut files: Vec<_> = std::fs::read_dir(&queue)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), hooks.len());
    // Named by the sequence number the session's lock hands out, nothing else.
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let numbered: Vec<String> = (1..=hooks.len()).map(|n| format!("{n:020}.json")).collect();
    assert_eq!(names, numbered);
    let base = std::time::SystemTime::now();
    for (n, file) in files.iter().enumerate() {
        let back = std::time::Duration::from_secs(3600 * (n as u64 + 1));
        let when = base - back;
        let opened = std::fs::File::options().write(true).open(file).unwrap();
        opened
            .set_times(
                std::fs::FileTimes::new()
                    .set_modified(when)
                    .set_accessed(when),
            )
            .unwrap();
    }
    let taken: Vec<String> = b.take_async("s").into_iter().map(|r| r.hook).collect();
    assert_eq!(taken, hooks, "creation order");
    // The sequence goes on after the queue was emptied and removed.
    a.push_async("s", result("later"));
    b.push_async("s", result("last"));
    let taken: Vec<String> = a.take_async("s").into_iter().map(|r| r.hook).collect();
    assert_eq!(taken, ["later", "last"]);
}

const JOB: &str = "0123456789abcdef0123456789abcdef";

/// A job runs once: issued by its dispatch, consumed by its first runner; the same job
/// again, a job never issued, a job with other bytes or an id that is not one are
/// refused, each with its reason.
#[test]
fn a_job_is_consumed_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    store.issue_job("s", JOB, "digest").unwrap();
    let changed = store.consume_job("s", JOB, "other").unwrap_err();
    assert!(
        changed.contains("not the one its dispatch issued"),
        "{changed}"
    );
    let other_session = store.consume_job("t", JOB, "digest").unwrap_err();
    assert!(other_session.contains("already ran"), "{other_session}");
    store.consume_job("s", JOB, "digest").unwrap();
    let again = store.consume_job("s", JOB, "digest").unwrap_err();
    assert!(again.contains("already ran"), "{again}");
    for bad in ["../../x", "", "0123456789ABCDEF0123456789ABCDEF"] {
        let error = store.consume_job("s", bad, "digest").unwrap_err();
        assert!(error.contains("is not a job id"), "{bad}: {error}");
        assert!(store.issue_job("s", bad, "digest").is_err(), "{bad}");
    }
    // A withdrawn job (its runner never started) cannot run either.
    store.issue_job("s", JOB, "digest").unwrap();
    store.withdraw_job("s", JOB);
    assert!(store.consume_job("s", JOB, "digest").is_err());
}

/// Runners racing for one job (threads with their own handles, as processes would
/// have): exactly one wins.
#[test]
fn racing_consumers_run_a_job_once() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let session = format!("s{round}");
        DiskStore::new(dir.path())
            .issue_job(&session, JOB, "d")
            .unwrap();
        let won = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    if DiskStore::new(dir.path())
                        .consume_job(&session, JOB, "d")
                        .is_ok()
                    {
                        won.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(won.into_inner(), 1, "round {round}");
    }
}

/// A store of its own lives in a private directory that goes with the store.
#[test]
fn a_store_of_its_own_is_private_and_removed_with_it() {
    let store = DiskStore::of_its_own().unwrap();
    let dir = store.dir().to_path_buf();
    store.set_stop_blocks("s", 2);
    assert_eq!(store.clone().stop_blocks("s"), 2);
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    drop(store);
    assert!(!dir.exists());
}

/// A count is rewritten in place, never truncated (a truncated and rewritten file is
/// flushed on close by ext4), and a shorter count covers a longer one whole.
#[test]
fn counts_are_rewritten_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskStore::new(dir.path());
    store.set_stop_blocks("s", 1);
    let file = store.session_dir("s").join("stop-blocks");
    // A count written by an older version, shorter than 20 digits.
    std::fs::write(&file, "123456").unwrap();
    assert_eq!(store.stop_blocks("s"), 123_456);
    store.update_stop_blocks("s", &mut |n| n + 1).unwrap();
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "00000000000000123457"
    );
    store.update_stop_blocks("s", &mut |_| 7).unwrap();
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 20);
    // Back to 0 the session holds nothing: its directory goes (`disk/collect.rs`).
    store.set_stop_blocks("s", 0);
    assert_eq!(store.stop_blocks("s"), 0);
    assert!(!store.session_dir("s").exists());
}
