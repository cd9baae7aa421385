//! `hookhost install` never loses another writer's edit: while it installs and
//! uninstalls the drop-in over and over, writers (each an editor: read, edit, write a
//! temporary file, rename it over, or rewrite the file in place) add their own keys;
//! at the end every writer's key is there. A write of hookhost's that would have
//! replaced a changed file is refused, naming the file.
//!
//! One loss no writer that takes no lock can rule out: an editor's rename that lands in
//! the microseconds between hookhost's last look and its swap. Hookhost puts that file
//! back and says so ("was replaced as hookhost swapped"), but an editor that read the file
//! in that moment read hookhost's version. So a lost edit passes only where hookhost
//! reported that many undos; one without an undo (a write that overwrote without looking)
//! fails.

use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value};

use crate::support::TestEnv;

/// One editor's edit, under a lock the editors share (so that editors never lose each
/// other's edits: only hookhost could lose one, and it does not take that lock).
fn edit(settings: &Path, lock: &Path, key: &str, in_place: bool) {
    let guard = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock)
        .unwrap();
    guard.lock().unwrap();
    let text = std::fs::read_to_string(settings).unwrap();
    let mut value: Map<String, Value> = serde_json::from_str(&text).unwrap();
    value.insert(key.to_string(), Value::Bool(true));
    let new = serde_json::to_string_pretty(&value).unwrap() + "\n";
    if in_place {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(settings)
            .unwrap();
        file.write_all(new.as_bytes()).unwrap();
    } else {
        let tmp = settings.with_extension(format!("{key}.tmp"));
        std::fs::write(&tmp, new).unwrap();
        std::fs::rename(&tmp, settings).unwrap();
    }
    guard.unlock().unwrap();
}

#[test]
fn install_never_loses_a_concurrent_edit() {
    let env = TestEnv::new();
    let settings = env.home.join("claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{\n  \"model\": \"x\"\n}\n").unwrap();
    let lock = env.home.join("editors.lock");
    let file = settings.to_str().unwrap();
    let (writers, edits_each) = (4, 40);
    let (mut written, mut refused, mut undone) = (0, 0, 0);
    let edits: Vec<usize> = std::thread::scope(|scope| {
        let editors: Vec<_> = (0..writers)
            .map(|w| {
                let (settings, lock) = (&settings, &lock);
                scope.spawn(move || {
                    for n in 0..edits_each {
                        edit(settings, lock, &format!("w{w}-{n}"), (w + n) % 3 == 0);
                        // Paced, so that hookhost gets to write between edits too.
                        std::thread::sleep(std::time::Duration::from_millis(
                            10 + (7 * n + 3 * w) as u64 % 20,
                        ));
                    }
                    edits_each
                })
            })
            .collect();
        let mut installed = false;
        // Until every editor is done, and at least a few writes of hookhost's.
        for round in 0.. {
            if editors.iter().all(|e| e.is_finished()) && (written >= 4 || round > 400) {
                break;
            }
            let verb = if installed { "uninstall" } else { "install" };
            let run = env.run(&[verb, "--claude", "--file", file], "");
            if run.code == 0 {
                // An editor that read the file before hookhost wrote it may write it back
                // without the drop-in (editors do not compare): nothing to remove then.
                installed = !installed;
                if !run.stdout.contains("nothing changed") {
                    written += 1;
                }
            } else {
                // Refused: changed under it, or read half-rewritten in place.
                assert!(run.stderr.contains(file), "{verb}: {}", run.stderr);
                refused += 1;
                if run.stderr.contains("as hookhost swapped its version in") {
                    undone += 1;
                }
            }
        }
        editors.into_iter().map(|e| e.join().unwrap()).collect()
    });
    let value: Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    let lost: Vec<String> = edits
        .iter()
        .enumerate()
        .flat_map(|(w, &count)| (0..count).map(move |n| format!("w{w}-{n}")))
        .filter(|key| !value.contains_key(key))
        .collect();
    let total: usize = edits.iter().sum();
    assert!(
        lost.len() <= undone,
        "lost {} of {total} edits ({written} writes, {refused} refusals, {undone} of them \
         undone swaps): {lost:?}",
        lost.len()
    );
    assert!(written > 0, "install never wrote ({refused} refusals)");
    eprintln!(
        "{total} edits, {written} writes, {refused} refusals ({undone} undone swaps), {} lost",
        lost.len()
    );
}
