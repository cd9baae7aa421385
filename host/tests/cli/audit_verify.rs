//! The audit log's chain through the binary (issue 29, items 2, 3 and the attacks of 5
//! on the log; docs/book/src/audit-chain.md): what `hookhost dispatch` and `hookhost serve` write, and
//! what `hookhost audit verify` says of it, intact and attacked.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input};

/// Every line of the log, parsed (all must be whole JSON).
fn chain(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn verify_json(env: &TestEnv, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["audit", "verify", "--json"];
    all.extend_from_slice(args);
    let run = env.run(&all, "");
    let report = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", run.stdout, run.stderr));
    (run.code, report)
}

/// `--json`: the fields docs/json-output.md names; exit 0 intact, 1 on an edited line,
/// which the report names by file and line; the text form says the same.
#[test]
fn verify_reports_intact_and_edited_logs() {
    let env = TestEnv::new();
    for n in 0..3 {
        env.dispatch("Stop", json!({"session_id": format!("s{n}")}));
    }
    let log = env.data.join("audit.jsonl");
    let (code, report) = verify_json(&env, &[]);
    assert_eq!(code, 0, "{report}");
    for field in [
        "intact",
        "problem",
        "warnings",
        "files",
        "lines",
        "firstSeq",
        "lastSeq",
        "signed",
        "lastSigned",
        "unsignedTail",
        "inProgress",
        "key",
        "keySource",
    ] {
        assert!(report.get(field).is_some(), "no `{field}`: {report}");
    }
    assert_eq!(report["intact"], true);
    assert_eq!(report["lines"], 4, "a genesis and three dispatches");
    assert_eq!(
        (report["firstSeq"].clone(), report["lastSeq"].clone()),
        (json!(0), json!(3))
    );
    assert_eq!(report["signed"], 1);
    assert_eq!(report["unsignedTail"], 3);
    assert_eq!(report["keySource"], "host");
    assert_eq!(report["files"][0]["file"], log.display().to_string());

    let text = std::fs::read_to_string(&log).unwrap();
    let edited = text.replacen("\"session\":\"s1\"", "\"session\":\"s9\"", 1);
    assert_ne!(edited, text);
    std::fs::write(&log, edited).unwrap();
    let (code, report) = verify_json(&env, &[]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["intact"], false);
    let problem = &report["problem"];
    assert_eq!(problem["kind"], "edited", "{report}");
    assert_eq!(problem["line"], 3, "{report}");
    assert_eq!(problem["seq"], 2, "{report}");
    assert_eq!(problem["file"], log.display().to_string());
    let run = env.run(&["audit", "verify"], "");
    assert_eq!(run.code, 1);
    assert!(run.stdout.contains("BROKEN at"), "{}", run.stdout);
    assert!(run.stdout.contains(":3 (seq 2): edited"), "{}", run.stdout);
    // `hookhost audit` still lists the dispatches, not the chain's own lines.
    let run = env.run(&["audit", "--json"], "");
    assert_eq!(run.stdout.lines().count(), 3, "{}", run.stdout);
}

/// Eight one-shot dispatches at once while a `serve` client sends events to the same
/// log: one linear chain (seq 0..n, each `prev` the line before), and the daemon's
/// SIGTERM leaves it signed to the end.
#[test]
fn concurrent_one_shots_and_a_daemon_keep_one_chain() {
    let env = TestEnv::new();
    let mut daemon = Daemon::start(&env);
    let mut client = daemon.client();
    let serving = std::thread::spawn(move || {
        for n in 0..30 {
            client.call("PreToolUse", bash_input(&format!("echo daemon {n}")));
        }
    });
    let children: Vec<_> = (0..8)
        .map(|n| {
            let mut child = env
                .command()
                .args(["dispatch", "PreToolUse"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let input = bash_input(&format!("echo one-shot {n}"));
            let mut stdin = child.stdin.take().unwrap();
            std::thread::spawn(move || {
                use std::io::Write;
                stdin.write_all(input.to_string().as_bytes()).unwrap();
            });
            child
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    serving.join().unwrap();
    assert_eq!(daemon.terminate(), 0);

    let log = env.data.join("audit.jsonl");
    let lines = chain(&log);
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        seqs,
        (0..lines.len() as u64).collect::<Vec<_>>(),
        "no gap, no fork"
    );
    let entries = lines.iter().filter(|l| l.get("kind").is_none()).count();
    assert_eq!(entries, 38);
    let last = lines.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["reason"].as_str()),
        (Some("checkpoint"), Some("shutdown")),
        "{last}"
    );
    let (code, report) = verify_json(&env, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["unsignedTail"], 0, "{report}");
}

/// The log moved away (rotated) between dispatches: the new file goes on with the
/// chain, and verify reads the rotated set in order, by default or as named.
#[test]
fn rotation_carries_the_chain_and_verify_reads_the_set() {
    let env = TestEnv::new();
    env.dispatch("Stop", json!({"session_id": "a"}));
    env.dispatch("Stop", json!({"session_id": "b"}));
    let log = env.data.join("audit.jsonl");
    let rotated = env.data.join("audit.jsonl.1");
    std::fs::rename(&log, &rotated).unwrap();
    env.dispatch("Stop", json!({"session_id": "c"}));
    let old = chain(&rotated);
    let new = chain(&log);
    assert_eq!(new[0]["seq"], 3, "{new:?}");
    assert_ne!(new[0]["kind"], "genesis");
    let last = std::fs::read_to_string(&rotated).unwrap();
    let last = last.lines().last().unwrap();
    assert_eq!(new[0]["prev"], hex::encode(sha256(last.as_bytes())));
    assert_eq!(old.len(), 3);

    let (code, report) = verify_json(&env, &[]);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["files"].as_array().unwrap().len(), 2, "{report}");
    let (r, l) = (rotated.display().to_string(), log.display().to_string());
    let (code, _) = verify_json(&env, &[&r, &l]);
    assert_eq!(code, 0);
    let (code, report) = verify_json(&env, &[&l, &r]);
    assert_eq!(code, 1, "the wrong order is a break: {report}");
}

/// A public key that is not the host's.
fn other_key() -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    hex::encode(key.verifying_key().as_bytes())
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// The key is created 0600; a key file others may read, or a symlink, is refused: the
/// genesis then says why it is unsigned, and verify breaks on it.
#[test]
fn the_key_is_private_and_a_loose_or_linked_key_is_refused() {
    let env = TestEnv::new();
    env.dispatch("Stop", json!({}));
    let key = env.data.join("audit.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let loose = TestEnv::new();
    std::fs::create_dir_all(&loose.data).unwrap();
    let key = loose.data.join("audit.key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    loose.dispatch("Stop", json!({}));
    let genesis = &chain(&loose.data.join("audit.jsonl"))[0];
    let why = genesis["keyError"].as_str().unwrap_or_default();
    assert!(why.contains("refusing the audit key"), "{genesis}");
    assert!(genesis.get("signature").is_none(), "{genesis}");
    let (code, report) = verify_json(&loose, &["--key", &other_key()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["problem"]["kind"], "unsigned", "{report}");

    let linked = TestEnv::new();
    std::fs::create_dir_all(&linked.data).unwrap();
    let target = linked.home.join("elsewhere.key");
    std::fs::create_dir_all(&linked.home).unwrap();
    std::fs::write(&target, format!("{}\n", "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&target, linked.data.join("audit.key")).unwrap();
    linked.dispatch("Stop", json!({}));
    let genesis = &chain(&linked.data.join("audit.jsonl"))[0];
    let why = genesis["keyError"].as_str().unwrap_or_default();
    assert!(why.contains("symlink"), "{genesis}");
}

/// A log signed by another key than the one a collector holds fails `--key`; a key file
/// names the key as well as its text.
#[test]
fn verify_against_a_given_key() {
    let env = TestEnv::new();
    env.dispatch("Stop", json!({}));
    let (_, report) = verify_json(&env, &[]);
    let ours = report["key"].as_str().unwrap().to_string();
    let file = env.write("collector.pub", &format!("{ours}\n"));
    let (code, report) = verify_json(&env, &["--key", file.to_str().unwrap()]);
    assert_eq!(
        (code, report["keySource"].as_str()),
        (0, Some("option")),
        "{report}"
    );
    let (code, report) = verify_json(&env, &["--key", &other_key()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["problem"]["kind"], "forged", "{report}");
}

/// The dispatch daemon signs what it wrote when it exits (idle): the log ends with a
/// shutdown checkpoint.
#[test]
fn the_dispatch_daemon_signs_its_lines_when_it_exits() {
    let env = TestEnv::new();
    for n in 0..3 {
        let mut input = bash_input("ls");
        input["session_id"] = json!(format!("d{n}"));
        let run = crate::dispatch_daemon::dispatch(
            &env,
            crate::dispatch_daemon::with_daemon(&env, 1),
            &["PreToolUse"],
            &input,
        );
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    // Its lock goes last, after the checkpoint (the socket goes first, at idle).
    crate::support::wait_until("the dispatch daemon to exit when idle", || {
        crate::dispatch_daemon::daemon_files(&env, "lock").is_empty()
    });
    let lines = chain(&env.data.join("audit.jsonl"));
    let last = lines.last().unwrap();
    assert_eq!(
        (last["kind"].as_str(), last["reason"].as_str()),
        (Some("checkpoint"), Some("shutdown")),
        "{lines:?}"
    );
    let (code, report) = verify_json(&env, &[]);
    assert_eq!(
        (code, report["unsignedTail"].as_u64()),
        (0, Some(0)),
        "{report}"
    );
}

/// A key file of another user is refused (it could have been put there to be used).
#[test]
fn a_key_file_of_another_user_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED: a_key_file_of_another_user_is_refused: needs root to make a file of a second uid"
        );
        return;
    }
    let env = TestEnv::new();
    std::fs::create_dir_all(&env.data).unwrap();
    let key = env.data.join("audit.key");
    std::fs::write(&key, format!("{}\n", "ab".repeat(32))).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&key, Some(65534), Some(65534)).unwrap();
    env.dispatch("Stop", json!({}));
    let genesis = &chain(&env.data.join("audit.jsonl"))[0];
    let why = genesis["keyError"].as_str().unwrap_or_default();
    assert!(why.contains("owned by uid 65534"), "{genesis}");
    let run = env.run(&["audit", "verify"], "");
    assert_eq!(run.code, 1, "{} {}", run.stdout, run.stderr);
}
