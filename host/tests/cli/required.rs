//! Issue 29.1 and 29.5: a required hook that matches but gives no verdict fails the event
//! closed, whatever kept it from answering: its plugin deleted, replaced or made a FIFO,
//! its workspace untrusted, a hang past its timeout, a handler type managed policy does
//! not allow, `disableAllHooks` from a repository. Each attack has its control: the same
//! hook without `required` lets the action through. And 29.4: the decision receipt, in
//! the Outcome format and the audit line, never in Claude Code's output.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::Digest;

use crate::support::{TestEnv, bash_input, deny_dangerous_bash, hooks};

/// A copy of the example plugin in the user's home, and its sha256 (hex).
fn user_plugin(env: &TestEnv) -> (PathBuf, String) {
    let path = env.home.join("guard.wasm");
    std::fs::copy(deny_dangerous_bash(), &path).unwrap();
    (
        path,
        sha256_hex(&std::fs::read(deny_dangerous_bash()).unwrap()),
    )
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The user's PreToolUse `Bash` group with one wasm hook `guard` on `plugin`.
fn user_guard(env: &TestEnv, plugin: &Path, sha: Option<&str>, required: bool) {
    let mut hook = json!({"type": "wasm", "id": "guard", "plugin": plugin});
    if let Some(sha) = sha {
        hook["sha256"] = json!(sha);
    }
    if required {
        hook["required"] = json!(true);
    }
    env.user_hooks(hooks("PreToolUse", "Bash", json!([hook])));
}

/// Asserts that `out` denies, naming the required hook `id` of `source` and `why`.
fn assert_closed(out: &Value, id: &str, source: &str, why: &str) {
    assert_eq!(out["decision"], "deny", "{out}");
    let reason = out["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("required hook `{id}` ({source}) gave no verdict"))
            && reason.contains(why),
        "the reason names the hook and why ({why}): {out}"
    );
    let report = out["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id)
        .unwrap();
    assert_eq!(report["required"], true, "{out}");
}

fn assert_through(out: &Value) {
    assert!(
        !matches!(out["decision"].as_str(), Some("deny" | "block")),
        "the action goes through: {out}"
    );
}

#[test]
fn a_required_plugin_deleted_or_made_a_fifo_fails_closed_and_without_required_does_not() {
    for required in [true, false] {
        let env = TestEnv::new();
        let (plugin, sha) = user_plugin(&env);
        user_guard(&env, &plugin, Some(&sha), required);
        // Present: it runs and answers.
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        assert_eq!(out["hooks"][0]["status"], "ok", "{out}");
        assert_through(&out);

        std::fs::remove_file(&plugin).unwrap();
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        match required {
            true => assert_closed(&out, "guard", "user", "failed"),
            false => assert_through(&out),
        }

        let made = std::process::Command::new("mkfifo")
            .arg(&plugin)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer ever opens the FIFO: a loader that blocked on it would hang here.
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        match required {
            true => assert_closed(&out, "guard", "user", "failed"),
            false => assert_through(&out),
        }
    }
}

#[test]
fn a_required_plugin_replaced_fails_closed_naming_the_mismatch() {
    let env = TestEnv::new();
    let (plugin, sha) = user_plugin(&env);
    user_guard(&env, &plugin, Some(&sha), true);
    let mut bytes = std::fs::read(&plugin).unwrap();
    bytes.extend_from_slice(b"\0swapped");
    std::fs::write(&plugin, &bytes).unwrap();
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_closed(&out, "guard", "user", "failed");
    assert!(out["reason"].as_str().unwrap().contains(&sha), "{out}");
    // `hookhost hooks` says so before any event.
    let listed = env.run(&["hooks", "--json"], "").json();
    assert_eq!(listed[0]["required"], true, "{listed}");
    assert_eq!(listed[0]["runs"], false, "{listed}");
    assert!(
        listed[0]["whyNot"]
            .as_str()
            .unwrap()
            .contains("is not the `sha256` pin")
    );
}

#[test]
fn a_required_plugin_not_admitted_by_the_allowlist_fails_closed() {
    let env = TestEnv::new();
    let (plugin, sha) = user_plugin(&env);
    env.managed(json!({"requireAllowlistedPlugins": true,
        "pluginAllowlist": [{"sha256": "0".repeat(64)}]}));
    user_guard(&env, &plugin, Some(&sha), true);
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_closed(&out, "guard", "user", "failed");
    let listed = env.run(&["hooks", "--json"], "").json();
    assert_eq!(listed[0]["runs"], false, "{listed}");
}

#[test]
fn a_users_required_hook_on_a_plugin_in_an_untrusted_repository_fails_closed() {
    for required in [true, false] {
        let env = TestEnv::new();
        // The user's hook names a plugin inside the repository, which the repository
        // removed; the workspace is not trusted.
        let plugin = env.project.join("tools/guard.wasm");
        user_guard(&env, &plugin, None, required);
        let run = env.run_untrusted(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
        let out = run.json();
        match required {
            true => assert_closed(&out, "guard", "user", "No such file"),
            false => assert_through(&out),
        }
    }
}

#[test]
fn a_project_files_required_is_ignored_in_an_untrusted_workspace_and_validate_says_so() {
    let env = TestEnv::new();
    env.project_hooks(
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "required": true,
        "hooks": [{"type": "command", "id": "repo", "command": "exit 1"}]}]}}),
    );
    let run = env.run_untrusted(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    let out = run.json();
    assert_through(&out);
    assert_eq!(out["hooks"][0]["status"], "skipped", "{out}");
    assert!(out["hooks"][0].get("required").is_none(), "{out}");
    let run = env.run_untrusted(&["validate", "--json"], "");
    let report = run.json();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("`required` is ignored: the workspace is not trusted"),
        "{report}"
    );
    // Trusted, the same file's `required` counts: the failing hook denies.
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_closed(&out, "repo", "project", "failed");
}

#[test]
fn a_required_hook_that_hangs_past_its_timeout_fails_closed() {
    for required in [true, false] {
        let env = TestEnv::new();
        let mut hook =
            json!({"type": "command", "id": "slow", "command": "sleep 30", "timeout": 1});
        if required {
            hook["required"] = json!(true);
        }
        env.user_hooks(hooks("PreToolUse", "Bash", json!([hook])));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        assert_eq!(out["hooks"][0]["status"], "timeout", "{out}");
        match required {
            true => assert_closed(&out, "slow", "user", "timeout"),
            false => assert_through(&out),
        }
    }
}

#[test]
fn a_required_hook_of_a_type_managed_policy_does_not_allow_fails_closed() {
    for required in [true, false] {
        let env = TestEnv::new();
        env.managed(json!({"ceilings": {"handlerTypes": {"user": ["wasm"]}}}));
        // On the group: every hook of it is required.
        let mut group = json!({"matcher": "Bash",
            "hooks": [{"type": "command", "id": "cmd", "command": "echo '{}'"}]});
        if required {
            group["required"] = json!(true);
        }
        env.user_hooks(json!({"hooks": {"PreToolUse": [group]}}));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        assert_eq!(out["hooks"][0]["status"], "skipped", "{out}");
        match required {
            true => assert_closed(&out, "cmd", "user", "managed policy does not allow"),
            false => assert_through(&out),
        }
    }
}

#[test]
fn a_repository_that_disables_all_hooks_cannot_turn_off_a_users_required_hook() {
    let env = TestEnv::new();
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "mine", "command": "echo '{}'", "required": true}]),
    ));
    env.project_hooks(json!({"disableAllHooks": true}));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_closed(&out, "mine", "user", "`disableAllHooks` is set");
    // A tool the matcher does not name: the hook did not match, nothing fails.
    let mut read = bash_input("x");
    read["tool_name"] = json!("Read");
    assert_through(&env.dispatch("PreToolUse", read));
}

#[test]
fn on_stop_a_required_hook_without_a_verdict_is_a_notice_not_a_loop() {
    let env = TestEnv::new();
    env.user_hooks(json!({"hooks": {"Stop": [{"required": true,
        "hooks": [{"type": "command", "id": "gate", "command": "exit 1"}]}]}}));
    let out = env.dispatch("Stop", json!({"session_id": "s1"}));
    assert_eq!(out["decision"], "none", "{out}");
    assert!(
        out["notices"]
            .to_string()
            .contains("required hook `gate` (user) gave no verdict"),
        "{out}"
    );
    // `--format claude`: exit 0, the agent stops as asked.
    let run = env.run(
        &["dispatch", "Stop", "--format", "claude"],
        &json!({"session_id": "s1"}).to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn validate_warns_about_a_required_hook_that_can_never_match() {
    let env = TestEnv::new();
    env.user_hooks(json!({"hooks": {
        "PreToolUse": [{"matcher": "bash", "required": true,
            "hooks": [{"type": "command", "command": "true"}]}],
        "PreToolUze": [{"required": true, "hooks": [{"type": "command", "command": "true"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": "true", "required": true,
            "if": "Bash(git *)"}]}]
    }}));
    let report = env.run(&["validate", "--json"], "").json();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("names none of the tools of `PreToolUse`"),
        "{report}"
    );
    assert!(
        warnings.contains("unknown event `PreToolUze`; its hooks are skipped (a required one too"),
        "{report}"
    );
    assert!(warnings.contains("`required` has no effect"), "{report}");
}

/// The receipt: in the Outcome format with the digest of the bytes received and the
/// policy's; in the audit line; never in Claude Code's output.
#[test]
fn the_receipt_names_the_input_the_policy_and_each_hook_and_stays_out_of_claudes_output() {
    let env = TestEnv::new();
    let (plugin, sha) = user_plugin(&env);
    user_guard(&env, &plugin, Some(&sha), true);
    // Bytes as an agent sends them: spacing that a parse and re-serialization would lose.
    let input = format!(
        "{}\n",
        serde_json::to_string_pretty(&bash_input("rm -rf /")).unwrap()
    );
    let run = env.run(&["dispatch", "PreToolUse"], &input);
    let out = run.json();
    let receipt = &out["receipt"];
    assert_eq!(
        receipt["input"],
        format!("sha256:{}", sha256_hex(input.as_bytes())),
        "{receipt}"
    );
    assert_eq!(receipt["decision"], "deny");
    assert_eq!(receipt["decision"], out["decision"]);
    assert_eq!(receipt["hooks"][0]["id"], "guard");
    assert_eq!(receipt["hooks"][0]["type"], "wasm");
    assert_eq!(receipt["hooks"][0]["status"], "blocked");
    assert_eq!(receipt["hooks"][0]["required"], true);
    assert_eq!(receipt["hooks"][0]["plugin"], format!("sha256:{sha}"));
    let policy = &receipt["policy"];
    assert!(policy["digest"].as_str().unwrap().starts_with("sha256:"));
    let user_file = std::fs::read(env.home.join("hooks.json")).unwrap();
    let source = policy["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "user")
        .unwrap_or_else(|| panic!("the user's file is a source: {policy}"));
    assert_eq!(
        source["sha256"],
        format!("sha256:{}", sha256_hex(&user_file))
    );
    // `seq` is the audit line's: the chain numbers every line (issue 29.2).
    let line = env.audit_entries().pop().expect("an audit line");
    assert!(receipt["seq"].is_u64(), "{receipt}");
    assert_eq!(receipt.get("seq"), line.get("seq"), "{receipt} {line}");

    // Another input, another digest; the same policy.
    let other = env.dispatch("PreToolUse", bash_input("ls"));
    assert_ne!(other["receipt"]["input"], receipt["input"]);
    assert_eq!(other["receipt"]["policy"]["digest"], policy["digest"]);

    // A settings file changed: another policy digest.
    let mut config: Value = serde_json::from_slice(&user_file).unwrap();
    config["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = json!(30);
    env.user_hooks(config);
    let edited = env.dispatch("PreToolUse", bash_input("ls"));
    assert_ne!(edited["receipt"]["policy"]["digest"], policy["digest"]);

    // `--format claude`: no receipt reaches the agent.
    let run = env.run(&["dispatch", "PreToolUse", "--format", "claude"], &input);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!run.stdout.contains("receipt") && !run.stderr.contains("receipt"));
    assert!(!run.stdout.contains("sha256:") && !run.stderr.contains("sha256:"));
}

#[test]
fn the_audit_line_carries_the_receipt() {
    let env = TestEnv::new();
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "mine", "command": "exit 1", "required": true}]),
    ));
    let input = bash_input("ls").to_string();
    let run = env.run(&["dispatch", "PreToolUse", "--format", "claude"], &input);
    assert_eq!(
        run.code, 2,
        "the required hook failed: denied: {}",
        run.stderr
    );
    assert!(!run.stdout.contains("receipt"));
    let lines = env.audit_entries();
    let line = lines.last().expect("an audit line");
    let receipt = &line["receipt"];
    assert_eq!(
        receipt["input"],
        format!("sha256:{}", sha256_hex(input.as_bytes()))
    );
    assert_eq!(receipt["decision"], "deny");
    assert_eq!(receipt["hooks"][0]["id"], "mine");
    assert_eq!(receipt["hooks"][0]["status"], "failed");
    assert_eq!(line["hooks"][0]["required"], true);
    // The line's receipt has no `seq` of its own: the line's is the one.
    assert!(receipt.get("seq").is_none(), "{receipt}");
    assert_eq!(
        receipt["policy"]["digest"],
        env.dispatch("PreToolUse", bash_input("ls"))["receipt"]["policy"]["digest"]
    );
}

/// A hook over a managed ceiling is refused at load (an error; without `required` it is
/// gone and the action goes through). A required one stays, skipped with the refusal,
/// and fails closed.
#[test]
fn a_required_hook_over_a_managed_ceiling_stays_and_fails_closed() {
    for required in [true, false] {
        let env = TestEnv::new();
        env.managed(json!({"ceilings": {"timeout": 5}}));
        let mut hook =
            json!({"type": "command", "id": "long", "command": "echo '{}'", "timeout": 10});
        if required {
            hook["required"] = json!(true);
        }
        env.user_hooks(hooks("PreToolUse", "Bash", json!([hook])));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        match required {
            true => {
                assert_closed(&out, "long", "user", "above the managed ceiling");
                assert_eq!(out["hooks"][0]["status"], "skipped", "{out}");
            }
            false => {
                assert_through(&out);
                assert_eq!(out["hooks"], json!([]), "{out}");
            }
        }
    }
}

/// What a required hook without a verdict does on `spec`: the fail-closed table of
/// docs/book/src/required-hooks.md, from the event's facts (the merge's rule,
/// `outcome/required.rs`).
fn closes_with(spec: &hookhost::EventSpec) -> &'static str {
    use hookhost::event::DecisionStyle;
    match (spec.honours_on_failure(), spec.decision) {
        (true, DecisionStyle::Permission | DecisionStyle::PermissionRequest) => "deny",
        (true, _) => "block",
        (false, _) if spec.can_block() => "notice (cannot fail closed: a block would loop)",
        (false, _) => "notice (cannot block)",
    }
}

/// The table in docs/book/src/required-hooks.md is the event table's: a row per event (a new
/// event, or a changed fact, fails here until the doc says it).
#[test]
fn the_documented_fail_closed_table_is_the_event_tables() {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/book/src/required-hooks.md");
    let doc = std::fs::read_to_string(doc).unwrap();
    let catalogue = hookhost::EventCatalogue::default();
    let mut expected = String::new();
    for name in hookhost::event::built_in_names() {
        let spec = catalogue.get(name).unwrap();
        expected.push_str(&format!("| `{name}` | {} |\n", closes_with(spec)));
    }
    assert!(
        doc.contains(&expected),
        "docs/book/src/required-hooks.md must hold this table:\n{expected}"
    );
}

/// A required entry that cannot be built (a field missing, a matcher that is no regex) is
/// not dropped: it stays as a skipped hook and fails closed; the same entries without
/// `required` are config errors and the action goes through.
#[test]
fn a_required_hook_that_cannot_be_built_fails_closed() {
    let message = |out: &Value, id: &str| {
        let hooks = out["hooks"].as_array().unwrap();
        let report = hooks.iter().find(|h| h["id"] == id).unwrap();
        report["message"].as_str().unwrap().to_string()
    };
    for required in [true, false] {
        // The user's file: an entry without its `command`, a group whose matcher is no
        // regex.
        let env = TestEnv::new();
        let mut broken = json!({"type": "command", "id": "typo"});
        let mut group = json!({"matcher": "Bash(",
            "hooks": [{"type": "command", "id": "bad-matcher", "command": "true"}]});
        if required {
            broken["required"] = json!(true);
            group["required"] = json!(true);
        }
        // And an entry that does not even read (a timeout that is no number).
        let mut unread =
            json!({"type": "wasm", "id": "unread", "plugin": "x.wasm", "timeout": "ten"});
        if required {
            unread["required"] = json!(true);
        }
        env.user_hooks(json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [broken.clone(), unread]}, group]}}));
        let out = env.dispatch("PreToolUse", bash_input("ls"));
        // Managed policy: the same entry.
        let managed = TestEnv::new();
        managed.managed(hooks("PreToolUse", "Bash", json!([broken])));
        let managed_out = managed.dispatch("PreToolUse", bash_input("ls"));
        if !required {
            assert_through(&out);
            assert_through(&managed_out);
            continue;
        }
        assert_closed(&out, "typo", "user", "need `command`");
        assert!(
            message(&out, "typo")
                .contains("cannot be built: hooks of type `command` need `command`")
        );
        assert_closed(&out, "bad-matcher", "user", "matcher cannot be read");
        assert_closed(&out, "unread", "user", "invalid type");
        assert!(message(&out, "unread").contains("cannot be built"), "{out}");
        assert!(message(&out, "bad-matcher").contains("its group's matcher cannot be read"));
        // A guard entry of managed policy that cannot be built disables its file's hooks
        // (Claude Code's rule): the required one among them fails closed.
        assert_closed(&managed_out, "typo", "managed", "cannot be loaded");
        let listed = env.run(&["hooks", "--json"], "").json();
        let typo = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["id"] == "typo")
            .unwrap();
        assert_eq!(
            (&typo["required"], &typo["runs"]),
            (&json!(true), &json!(false))
        );
        assert_eq!(typo["type"], "command", "{typo}");
    }
}
