//! The tools' confinement, generated from the code's own lists: every tool, every private
//! file ([`PRIVATE_FILES`]), every kind of special file and every way out.

use std::os::unix::fs::symlink;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::policy::places::{HostPlace, PRIVATE_FILES};

fn call(name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        input,
    }
}

/// The input of tool `name` that names `path`.
fn naming(name: &str, path: &str) -> Value {
    match name {
        "Read" => json!({"file_path": path}),
        "Grep" | "Glob" => json!({"pattern": "x", "path": path}),
        _ => json!({"path": path}),
    }
}

#[test]
fn every_tool_refuses_every_way_out_and_every_hidden_file() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap();
    std::fs::write(outside.path().join("secret"), "SECRET").unwrap();
    symlink(outside.path(), ws.join("dir-out")).unwrap();
    symlink(outside.path().join("secret"), ws.join("file-out")).unwrap();
    // A host-owned place inside the workspace that refuses every grant.
    std::fs::create_dir(ws.join("owned")).unwrap();
    std::fs::write(ws.join("owned/key"), "KEY").unwrap();
    // Named through a symlink, as a data directory may be: compared by real path.
    symlink(&ws, outside.path().join("alias")).unwrap();
    let places = Arc::new(vec![HostPlace::new(
        outside.path().join("alias/owned"),
        "the trust store",
        Guard::Any,
    )]);
    let mut hidden: Vec<String> = vec!["owned".into(), "owned/key".into()];
    for (dir, file, _) in PRIVATE_FILES {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
        std::fs::write(ws.join(dir).join(file), "PRIVATE").unwrap();
        hidden.push(format!("{dir}/{file}"));
    }
    let outside_path = outside.path().join("secret").display().to_string();
    let mut ways_out = vec![
        "/etc".to_string(),
        "/etc/passwd".into(),
        outside_path,
        "..".into(),
        "../x".into(),
        "a/../../x".into(),
        "dir-out".into(),
        "dir-out/secret".into(),
        "file-out".into(),
    ];
    ways_out.extend(hidden.iter().cloned());
    let mut workspace = Workspace::open(&ws, places).unwrap();
    for def in defs() {
        for path in &ways_out {
            let result = workspace.call(&call(&def.name, naming(&def.name, path)));
            assert!(result.is_error, "{} {path}: {result:?}", def.name);
            assert!(
                result.content.starts_with("refused"),
                "{} {path}: {result:?}",
                def.name
            );
        }
    }
    // Walks from the top see none of it.
    for (name, input) in [
        ("Grep", json!({"pattern": "SECRET|PRIVATE|KEY"})),
        ("Glob", json!({"pattern": "**/*"})),
        ("LS", json!({"path": "."})),
    ] {
        let result = workspace.call(&call(name, input));
        assert!(!result.is_error, "{name}: {result:?}");
        for word in ["SECRET", "PRIVATE", "KEY", "secret", "local.json", "owned/"] {
            assert!(
                !result.content.contains(word),
                "{name} shows {word}: {result:?}"
            );
        }
    }
}

#[test]
fn only_regular_files_are_read() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap();
    // A FIFO nobody writes to (a blocking open would hang), a socket, a directory, and a
    // device reached by a symlink (out of the workspace as well).
    assert!(
        std::process::Command::new("mkfifo")
            .arg(ws.join("fifo"))
            .status()
            .unwrap()
            .success()
    );
    let _socket = std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
    std::fs::create_dir(ws.join("dir")).unwrap();
    symlink("/dev/zero", ws.join("zero")).unwrap();
    let mut workspace = Workspace::open(&ws, Arc::default()).unwrap();
    for name in ["fifo", "sock", "dir", "zero"] {
        let result = workspace.call(&call("Read", json!({"file_path": name})));
        assert!(
            result.is_error && result.content.starts_with("refused"),
            "{name}: {result:?}"
        );
    }
    assert_eq!(workspace.log.len(), 4);
    assert!(workspace.log.iter().all(|l| l.ends_with("(refused)")));
}

#[test]
fn reads_are_capped_per_call_and_per_run() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().canonicalize().unwrap();
    let line = "x".repeat(999) + "\n";
    std::fs::write(ws.join("big"), line.repeat(2000)).unwrap();
    let mut workspace = Workspace::open(&ws, Arc::default()).unwrap();
    let mut total = 0;
    loop {
        let result = workspace.call(&call("Read", json!({"file_path": "big"})));
        if result.is_error {
            assert!(result.content.contains("has read its"), "{result:?}");
            break;
        }
        assert!(
            result.content.len() <= READ_LIMIT + 100,
            "{}",
            result.content.len()
        );
        total += result.content.len();
        assert!(total <= HOOK_READ_LIMIT + 100 * 64, "{total}");
    }
    assert!(total >= HOOK_READ_LIMIT / 2, "{total}");
}
