//! The chain as writers make it and as `verify` reads it: each attack of issue 29 made on
//! a log the writer wrote, and what verify says of it.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use serde_json::{Value, json};

use super::*;
use crate::audit::AuditLog;

/// A log in a fresh directory with its key there too and a checkpoint every 4 seqs.
fn log_in(dir: &Path) -> AuditLog {
    AuditLog::new(dir.join("audit.jsonl"))
        .with_key_file(dir.join("audit.key"))
        .with_checkpoint_every(4)
}

fn host_key(dir: &Path) -> Option<TrustedKey> {
    crate::audit::key::public_key(&dir.join("audit.key"))
        .unwrap()
        .map(|key| TrustedKey {
            key,
            source: "host",
        })
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

fn check(dir: &Path, files: &[PathBuf]) -> Report {
    verify(files, host_key(dir)).unwrap()
}

fn problem(report: &Report) -> (&'static str, u64) {
    let p = report.problem.as_ref().expect("a break");
    (p.kind, p.at.line)
}

/// Writes `n` entries; returns the log file.
fn written(dir: &Path, n: u64) -> PathBuf {
    let log = log_in(dir);
    for i in 0..n {
        log.append(&json!({"n": i})).unwrap();
    }
    log.path().to_path_buf()
}

/// The writer's chain: a genesis, then one seq more each line, a signed checkpoint at
/// every multiple of the interval, `record`'s seq the line's; verify finds it intact.
#[test]
fn a_written_log_is_one_chain_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_in(dir.path());
    let mut seqs = Vec::new();
    for i in 0..10 {
        seqs.push(log.append(&json!({"n": i})).unwrap().unwrap());
    }
    // genesis 0, entries 1 2 3, checkpoint 4, entries 5 6 7, checkpoint 8, entries 9 …
    assert_eq!(seqs, [1, 2, 3, 5, 6, 7, 9, 10, 11, 13]);
    let all: Vec<Value> = lines(log.path())
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(all.len(), 14);
    for (i, line) in all.iter().enumerate() {
        assert_eq!(line["seq"], i as u64, "{line}");
    }
    assert_eq!(all[0]["kind"], "genesis");
    assert_eq!(all[0]["prev"], hex::encode(NO_PREV));
    assert_eq!(all[4]["kind"], "checkpoint");
    assert_eq!(all[4]["count"], 3);
    assert_eq!(all[12]["kind"], "checkpoint");
    let text = lines(log.path());
    assert_eq!(all[1]["prev"], hex::encode(hash(text[0].as_bytes())));
    let report = check(dir.path(), &[log.path().to_path_buf()]);
    assert!(report.intact, "{report:#?}");
    assert_eq!((report.signed, report.unsigned_tail), (4, 1));
    assert_eq!(report.last_seq, Some(13));
    // A shutdown checkpoint signs the tail; a second one has nothing more to sign.
    assert_eq!(log.checkpoint().unwrap(), Some(14));
    assert_eq!(log.checkpoint().unwrap(), Some(14));
    let report = check(dir.path(), &[log.path().to_path_buf()]);
    assert!(report.intact && report.unsigned_tail == 0, "{report:#?}");
}

#[test]
fn an_edited_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 10);
    let mut text = lines(&path);
    text[5] = text[5].replace("\"n\":3", "\"n\":33");
    write_lines(&path, &text);
    let report = check(dir.path(), &[path]);
    assert_eq!(problem(&report), ("edited", 6), "{report:#?}");
    assert_eq!(report.problem.unwrap().at.seq, Some(5));
}

#[test]
fn a_deleted_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 10);
    let mut text = lines(&path);
    text.remove(6);
    write_lines(&path, &text);
    let report = check(dir.path(), &[path]);
    assert_eq!(problem(&report), ("missing", 7), "{report:#?}");
}

#[test]
fn reordered_lines_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 10);
    let mut text = lines(&path);
    text.swap(5, 6);
    write_lines(&path, &text);
    let report = check(dir.path(), &[path]);
    assert_eq!(problem(&report), ("reordered", 6), "{report:#?}");
}

/// A line inserted in the middle: a copy of a line made to look like the next seq and
/// chained to the line before it, or a line that is no chain line at all.
#[test]
fn an_inserted_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 10);
    let mut text = lines(&path);
    let forged = text[6].replace("\"n\":4", "\"n\":44");
    text.insert(6, forged);
    write_lines(&path, &text);
    let report = check(dir.path(), std::slice::from_ref(&path));
    assert_eq!(problem(&report), ("inserted", 7), "{report:#?}");

    let mut text = lines(&path);
    text.remove(6);
    text.insert(
        6,
        "{\"event\":\"PreToolUse\",\"decision\":\"allow\"}".into(),
    );
    write_lines(&path, &text);
    let report = check(dir.path(), &[path]);
    assert_eq!(problem(&report), ("inserted", 7), "{report:#?}");
}

/// Lines cut after the last checkpoint leave a shorter chain that verifies (nothing in
/// the file tells); the next line written shows the cut, from the chain's record.
#[test]
fn a_truncated_tail_shows_at_the_next_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 10);
    let mut text = lines(&path);
    text.truncate(text.len() - 1); // the unsigned tail: seq 13
    write_lines(&path, &text);
    let report = check(dir.path(), std::slice::from_ref(&path));
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.unsigned_tail, 0);
    // The next writer (another process) continues from the record, not from the cut.
    log_in(dir.path()).append(&json!({"n": 10})).unwrap();
    let report = check(dir.path(), &[path]);
    assert_eq!(problem(&report), ("missing", 14), "{report:#?}");
}

/// A checkpoint signed with another key (the whole log rewritten and re-signed, or a
/// checkpoint added at the end) is refused against the host's key.
#[test]
fn a_checkpoint_signed_by_another_key_is_forged() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 6);
    let host = host_key(dir.path());
    // The attacker's log: the same lines, written with their own key.
    let other = tempfile::tempdir().unwrap();
    let forged = written(other.path(), 6);
    let report = verify(std::slice::from_ref(&forged), host).unwrap();
    assert_eq!(problem(&report), ("forged", 1), "{report:#?}");
    // Trusting the log's own key (no key known) passes it, and says so.
    let report = verify(std::slice::from_ref(&forged), None).unwrap();
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.key_source, Some("log"));

    // A checkpoint appended to the real log, signed with the attacker's key.
    let mut text = lines(&path);
    let last = text.last().unwrap().clone();
    let attacker = SigningKey::from_bytes(&[7; 32]);
    let seq = serde_json::from_str::<Value>(&last).unwrap()["seq"]
        .as_u64()
        .unwrap();
    let unsigned = format!(
        "{{\"seq\":{},\"prev\":\"{}\",\"kind\":\"checkpoint\",\"count\":3,\"every\":4,\"key\":\"{}\"}}",
        seq + 1,
        hex::encode(hash(last.as_bytes())),
        hex::encode(attacker.verifying_key().as_bytes())
    );
    use ed25519_dalek::Signer;
    let signature = hex::encode(attacker.sign(unsigned.as_bytes()).to_bytes());
    text.push(format!(
        "{},\"signature\":\"{signature}\"}}",
        unsigned.strip_suffix('}').unwrap()
    ));
    write_lines(&path, &text);
    let report = check(dir.path(), &[path]);
    assert_eq!(
        problem(&report),
        ("forged", text.len() as u64),
        "{report:#?}"
    );
}

/// A checkpoint whose content changed after it was signed.
#[test]
fn an_edited_checkpoint_fails_its_signature() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 6);
    let mut text = lines(&path);
    text[4] = text[4].replace("\"reason\":\"interval\"", "\"reason\":\"shutdown\"");
    write_lines(&path, &text);
    let report = check(dir.path(), &[path]);
    assert_eq!(problem(&report), ("badSignature", 5), "{report:#?}");
}

/// The log moved away (rotated): the new file's first line follows the old file's last,
/// seq and hash; the set verifies in order, the new file alone from where it starts.
#[test]
fn rotation_carries_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 5);
    let rotated = dir.path().join("audit.jsonl.1");
    std::fs::rename(&path, &rotated).unwrap();
    let log = log_in(dir.path());
    log.append(&json!({"n": "after"})).unwrap();
    let old = lines(&rotated);
    let new = lines(&path);
    let first: Value = serde_json::from_str(&new[0]).unwrap();
    let last: Value = serde_json::from_str(old.last().unwrap()).unwrap();
    assert_eq!(first["seq"], last["seq"].as_u64().unwrap() + 1);
    assert_eq!(
        first["prev"],
        hex::encode(hash(old.last().unwrap().as_bytes()))
    );
    let (set, compressed) = rotated_set(&path);
    assert_eq!(set, [rotated.clone(), path.clone()]);
    assert!(compressed.is_empty());
    let report = check(dir.path(), &set);
    assert!(report.intact, "{report:#?}");
    let report = check(dir.path(), std::slice::from_ref(&path));
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.warnings[0].kind, "startsAfterGenesis");
    // The files in the wrong order are a break.
    let report = check(dir.path(), &[path, rotated]);
    assert!(!report.intact, "{report:#?}");
}

/// Half a line from a writer killed mid-line is chained over (a warning); a last line
/// without its newline is in progress, not a break.
#[test]
fn torn_and_unfinished_lines_are_not_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 3);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    use std::io::Write;
    file.write_all(b"{\"seq\":99,\"prev\":\"ab").unwrap();
    log_in(dir.path()).append(&json!({"n": 3})).unwrap();
    let report = check(dir.path(), std::slice::from_ref(&path));
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.warnings[0].kind, "torn");
    file.write_all(b"{\"seq\":6,\"pr").unwrap();
    let report = check(dir.path(), std::slice::from_ref(&path));
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.in_progress.as_ref().unwrap().line, 8);
}

/// Writers with their own handles (as processes would be) keep one linear chain.
#[test]
fn concurrent_writers_keep_one_chain() {
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        for w in 0..6 {
            let dir = dir.path();
            scope.spawn(move || {
                let log = log_in(dir);
                for n in 0..30 {
                    log.append(&json!({"w": w, "n": n})).unwrap();
                }
            });
        }
    });
    let path = dir.path().join("audit.jsonl");
    let seqs: Vec<u64> = lines(&path)
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
    let report = check(dir.path(), &[path]);
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.key_source, Some("host"));
}

/// A log whose lines predate the chain: the chain starts after them, committing to the
/// last one; verify says they are not covered.
#[test]
fn a_log_from_before_the_chain_gets_a_genesis() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{\"event\":\"old\"}\n{\"event\":\"older\"}\n").unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let log = log_in(dir.path());
    assert_eq!(log.append(&json!({"n": 0})).unwrap(), Some(1));
    let text = lines(&path);
    let genesis: Value = serde_json::from_str(&text[2]).unwrap();
    assert_eq!(genesis["kind"], "genesis");
    assert_eq!(genesis["prev"], hex::encode(hash(text[1].as_bytes())));
    let report = check(dir.path(), &[path]);
    assert!(report.intact, "{report:#?}");
    assert_eq!(report.warnings[0].kind, "beforeChain");
}

/// A line over the cap is hashed while read, never held, and named: here an inserted one.
#[test]
fn a_huge_line_is_a_finding_not_a_load() {
    let dir = tempfile::tempdir().unwrap();
    let path = written(dir.path(), 3);
    let mut text = lines(&path);
    text.insert(2, format!("{{\"pad\":\"{}\"}}", "x".repeat(LINE_CAP + 10)));
    write_lines(&path, &text);
    let report = check(dir.path(), std::slice::from_ref(&path));
    assert_eq!(problem(&report), ("inserted", 3), "{:?}", report.problem);
    assert_eq!(report.warnings[0].kind, "tooLong");
}

/// The rotated set: `NAME.N` highest first, then `NAME-SUFFIX` sorted, then the log;
/// compressed files named apart; other names left out.
#[test]
fn the_rotated_set_is_ordered_as_logrotate_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    for name in [
        "audit.jsonl",
        "audit.jsonl.1",
        "audit.jsonl.10",
        "audit.jsonl.2",
        "audit.jsonl-20261201",
        "audit.jsonl-20261130",
        "audit.jsonl.3.gz",
        "audit.jsonl.bak",
        ".audit.jsonl.chain",
    ] {
        std::fs::write(dir.path().join(name), "").unwrap();
    }
    let (set, compressed) = rotated_set(&log);
    let names: Vec<String> = set
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "audit.jsonl.10",
            "audit.jsonl.2",
            "audit.jsonl.1",
            "audit.jsonl-20261130",
            "audit.jsonl-20261201",
            "audit.jsonl"
        ]
    );
    assert_eq!(compressed, [dir.path().join("audit.jsonl.3.gz")]);
}
