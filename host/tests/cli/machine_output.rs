//! `--json` on `validate`, `events`, `hooks` and `trust --status` (field names as
//! docs/book/src/json-output.md states them), `trust --status`'s exit status, and `--version`.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{TestEnv, hooks};

#[test]
fn validate_json_reports_the_verdict_and_each_problem() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "true"}]),
    ));
    let run = env.run(&["validate", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ok = run.json();
    assert_eq!(
        (&ok["ok"], &ok["hooks"], &ok["sources"]),
        (&json!(true), &json!(1), &json!(1)),
        "{ok}"
    );
    assert_eq!(ok["errors"], json!([]));
    assert!(ok["warnings"].is_array());

    env.project_hooks(json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command"}]}]}}));
    let run = env.run(&["validate", "--json"], "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    let bad = run.json();
    assert_eq!(bad["ok"], false);
    let error = &bad["errors"][0];
    assert!(
        error["location"].as_str().unwrap().ends_with("hooks.json")
            && error["path"]
                .as_str()
                .unwrap()
                .starts_with("$.hooks.PreToolUse")
            && error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{bad}"
    );
}

#[test]
fn events_json_lists_every_event_with_its_attributes() {
    let env = TestEnv::new();
    let run = env.run(&["events", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let events = run.json();
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), hookhost::event::built_in_names().count());
    let get = |name: &str| events.iter().find(|e| e["name"] == name).unwrap().clone();
    let pre = get("PreToolUse");
    assert_eq!(
        (
            &pre["matcherField"],
            &pre["exit2"],
            &pre["decision"],
            &pre["toolEvent"]
        ),
        (
            &json!("tool_name"),
            &json!("blocks"),
            &json!("permission"),
            &json!(true)
        ),
        "{pre}"
    );
    assert!(pre["defaultTimeoutSeconds"].as_f64().unwrap() > 0.0);
    assert!(
        pre["outputs"]
            .as_array()
            .unwrap()
            .contains(&json!("permissionDecision")),
        "{pre}"
    );
    for key in ["refusesOnly", "timeoutBlocks"] {
        assert!(pre[key].is_boolean(), "{key}: {pre}");
    }
    assert_eq!(get("SessionStart")["exit2"], "notice");
}

#[test]
fn hooks_json_names_each_hook_and_whether_it_runs() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "g", "command": "true"}]),
    ));
    let run = env.run(&["hooks", "--json"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let list = run.json();
    let hook = &list[0];
    for (key, want) in [
        ("id", json!("g")),
        ("source", json!("project")),
        ("event", json!("PreToolUse")),
        ("matcher", json!("Bash")),
        ("type", json!("command")),
        ("runs", json!(true)),
        ("whyNot", Value::Null),
    ] {
        assert_eq!(hook[key], want, "{key}: {hook}");
    }
    assert!(hook["file"].as_str().unwrap().ends_with("hooks.json"));
    assert!(hook["handler"].as_str().unwrap().contains("true"));
}

/// `trust --status` exits 3 while the workspace's hooks do not run, 0 once trusted,
/// with or without `--json`.
#[test]
fn trust_status_exits_non_zero_when_not_trusted() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "true"}]),
    ));
    let untrusted = env.run_untrusted(&["trust", "--status", "--json"], "");
    assert_eq!(untrusted.code, 3, "{}", untrusted.stderr);
    let status = untrusted.json();
    assert_eq!(status["state"], "untrusted");
    for key in [
        "workspace",
        "trustedBy",
        "trustedAt",
        "changes",
        "message",
        "store",
    ] {
        assert!(status.get(key).is_some(), "{key}: {status}");
    }
    assert_eq!(env.run_untrusted(&["trust", "--status"], "").code, 3);
    assert_eq!(env.run_untrusted(&["trust"], "").code, 0);
    let trusted = env.run_untrusted(&["trust", "--status", "--json"], "");
    assert_eq!(trusted.code, 0, "{}", trusted.stderr);
    assert_eq!(trusted.json()["state"], "trusted");
    // Changed since: not trusted any more.
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "false"}]),
    ));
    let changed = env.run_untrusted(&["trust", "--status", "--json"], "");
    assert_eq!(
        (changed.code, changed.json()["state"].clone()),
        (3, json!("changed"))
    );
}

/// `--version` names the WIT packages the host loads, which are those `wit/` declares,
/// and the wasmtime it links, which is the one `Cargo.lock` resolves.
#[test]
fn version_names_the_wit_packages_and_wasmtime_the_build_has() {
    let env = TestEnv::new();
    let run = env.run(&["--version"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let field = |name: &str| {
        run.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no `{name}:` in {}", run.stdout))
            .to_string()
    };
    assert!(
        run.stdout
            .starts_with(&format!("hookhost {}\n", env!("CARGO_PKG_VERSION"))),
        "{}",
        run.stdout
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut shown: Vec<String> = field("wit").split(", ").map(str::to_string).collect();
    let mut declared = wit_packages(&root.join("wit"));
    shown.sort();
    declared.sort();
    assert_eq!(shown, declared, "--version vs the `package` lines of wit/");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let locked = |name: &str| {
        lock.split("[[package]]")
            .find(|p| p.contains(&format!("\nname = \"{name}\"\n")))
            .and_then(|p| p.split("\nversion = \"").nth(1))
            .and_then(|v| v.split('"').next())
            .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"))
            .to_string()
    };
    assert_eq!(field("wasmtime"), locked("wasmtime"));
    assert_eq!(locked("wasmtime"), locked("wasmtime-environ"));
    // `-V` stays one line.
    let short = env.run(&["-V"], "");
    assert_eq!(
        short.stdout.trim(),
        format!("hookhost {}", env!("CARGO_PKG_VERSION"))
    );
}

/// Every `package hookhost:hook@X;` under `dir`.
fn wit_packages(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(wit_packages(&path));
        } else if path.extension().is_some_and(|e| e == "wit") {
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines() {
                if let Some(name) = line.trim().strip_prefix("package ") {
                    found.push(name.trim_end_matches(';').trim().to_string());
                }
            }
        }
    }
    assert!(!found.is_empty(), "no WIT packages under {}", dir.display());
    found
}

/// The binary prints the completion scripts and the manual page (their content is
/// checked against clap's command tree by the unit tests of `cli/completions.rs`).
#[test]
fn completions_and_the_man_page_are_printed() {
    let env = TestEnv::new();
    for (args, start) in [
        (vec!["completions", "bash"], "_hookhost()"),
        (vec!["completions", "zsh"], "#compdef hookhost"),
        (vec!["completions", "fish"], "# Print an optspec"),
        (vec!["man"], ".ie \\n(.g .ds Aq"),
    ] {
        let run = env.run(&args, "");
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        assert!(
            run.stdout.starts_with(start),
            "{args:?}: {}",
            &run.stdout[..200.min(run.stdout.len())]
        );
    }
    let bad = env.run(&["completions", "tcsh"], "");
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}
