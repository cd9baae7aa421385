//! `hookhost audit` for people: `--summary`, the filters, and `--tail` reading the log
//! backward (a log larger than the forward reader's cap still answers).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use serde_json::{Value, json};

use crate::support::{TestEnv, bash_input, hooks};

/// A project whose PreToolUse hooks are `guard` (denies `rm`) and `note` (fails on
/// `fail`), and a log of four dispatches by them: two denied, one failure.
fn logged(env: &TestEnv) {
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([
            {"type": "command", "id": "guard",
             "command": "grep -q '\"rm ' && { echo 'no rm' >&2; exit 2; }; exit 0"},
            {"type": "command", "id": "note",
             "command": "grep -q fail && exit 7; exit 0"}
        ]),
    ));
    for command in ["ls", "rm -rf /", "echo fail", "rm x"] {
        let run = env.run(
            &["dispatch", "PreToolUse"],
            &bash_input(command).to_string(),
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
}

/// The whitespace-separated cells of the line that starts with `start`.
fn row(table: &str, start: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no row `{start}` in:\n{table}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_summary_counts_decisions_and_failures_per_day_and_per_hook() {
    let env = TestEnv::new();
    logged(&env);
    let run = env.run(&["audit", "--summary"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let table = &run.stdout;
    assert!(table.starts_with("4 entries, "), "{table}");
    let entries = env.audit_entries();
    let today = &entries[0]["time"].as_str().unwrap()[..10];
    // Day, events, none allow ask defer deny block, hook runs, failures.
    assert_eq!(
        row(table, today)[1..],
        ["4", "2", "0", "0", "0", "2", "0", "8", "1"],
        "{table}"
    );
    // Hook, source, type, runs, ok blocked failed timeout skipped async.
    assert_eq!(
        row(table, "guard ")[1..],
        ["project", "command", "4", "2", "2", "0", "0", "0", "0"]
    );
    assert_eq!(
        row(table, "note ")[1..],
        ["project", "command", "4", "3", "0", "1", "0", "0", "0"]
    );
    assert!(table.contains("SLOWEST HOOKS"), "{table}");

    // The filters: `--decision deny` keeps the two denied entries; `--hook note` keeps
    // only note's rows.
    let denied = env.run(&["audit", "--summary", "--decision", "deny"], "");
    assert!(
        denied.stdout.starts_with("2 entries, "),
        "{}",
        denied.stdout
    );
    let note = env
        .run(&["audit", "--summary", "--hook", "note"], "")
        .stdout;
    assert!(!note.contains("\nguard "), "{note}");
    assert_eq!(row(&note, "note ")[3], "4");
}

#[test]
fn the_filters_pick_entries_by_event_hook_decision_and_time() {
    let env = TestEnv::new();
    logged(&env);
    env.project_hooks(hooks(
        "UserPromptSubmit",
        "",
        json!([{"type": "command", "id": "prompt", "command": "true"}]),
    ));
    let run = env.run(&["dispatch", "UserPromptSubmit"], r#"{"prompt": "hi"}"#);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let count = |args: &[&str]| {
        let mut all = vec!["audit", "--json"];
        all.extend(args);
        let run = env.run(&all, "");
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        let entries: Vec<Value> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        entries.len()
    };
    assert_eq!(count(&[]), 5);
    assert_eq!(count(&["--event", "PreToolUse"]), 4);
    assert_eq!(count(&["--event", "UserPromptSubmit"]), 1);
    assert_eq!(count(&["--hook", "prompt"]), 1);
    assert_eq!(count(&["--decision", "deny"]), 2);
    assert_eq!(count(&["--decision", "deny", "--tail", "1"]), 1);
    assert_eq!(count(&["--since", "1h"]), 5);
    assert_eq!(count(&["--since", "2999-01-01"]), 0);
    assert_eq!(count(&["--until", "2000-01-01T00:00Z"]), 0);
    assert_eq!(
        count(&["--until", "2999-01-01", "--since", "2000-01-01"]),
        5
    );
    let bad = env.run(&["audit", "--since", "yesterday"], "");
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("is not a time"), "{}", bad.stderr);
}

/// A log over the forward reader's cap (1 GiB, sparse here) that ends with three
/// entries: `hookhost audit` refuses it whole, `--tail 2` reads its last two, since it
/// reads backward from the end.
#[test]
fn the_tail_of_a_log_larger_than_the_cap_is_read_from_the_end() {
    let env = TestEnv::new();
    let path = env.data.join("audit.jsonl");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    file.set_len(hookhost::audit::READ_CAP + (1 << 20)).unwrap();
    let mut end = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap(),
    );
    end.write_all(b"\n").unwrap();
    for n in 0..3 {
        let line = json!({"time": "2026-12-01T10:00:00.000Z", "session": format!("s{n}"),
            "event": "Stop", "decision": "none", "hooks": []});
        writeln!(end, "{line}").unwrap();
    }
    drop(end);
    file.flush().unwrap();
    let whole = env.run(&["audit", "--json"], "");
    assert_ne!(whole.code, 0, "the forward reader took a log over its cap");
    assert!(whole.stderr.contains("above the cap"), "{}", whole.stderr);
    let tail = env.run(&["audit", "--json", "--tail", "2"], "");
    assert_eq!(tail.code, 0, "{}", tail.stderr);
    let sessions: Vec<Value> = tail
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["session"].clone())
        .collect();
    assert_eq!(sessions, [json!("s1"), json!("s2")]);
    // The summary of the tail, likewise.
    let summary = env.run(&["audit", "--summary", "--tail", "3"], "");
    assert!(
        summary.stdout.starts_with("3 entries"),
        "{}",
        summary.stdout
    );
}

/// Names from the log reach the terminal escaped, and cut to their column.
#[test]
fn the_summary_escapes_and_bounds_what_the_log_holds() {
    let env = TestEnv::new();
    let path = env.data.join("audit.jsonl");
    let id = format!("evil\u{1b}[2J\r{}", "x".repeat(10_000));
    let line = json!({"time": "2026-12-01T10:00:00.000Z", "session": "s", "event": "Stop",
        "decision": "none", "hooks": [{"id": id, "source": "p\u{202e}x", "type": "command",
        "status": "ok", "durationMs": 1.0}]});
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    writeln!(file, "{line}").unwrap();
    let run = env.run(&["audit", "--summary"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.contains('\u{1b}')
            && !run.stdout.contains('\r')
            && !run.stdout.contains('\u{202e}'),
        "{:?}",
        run.stdout
    );
    assert!(run.stdout.contains(r"evil\x1b[2J\r"), "{}", run.stdout);
    assert!(
        run.stdout.lines().all(|l| l.chars().count() < 200),
        "{}",
        run.stdout
    );
}
