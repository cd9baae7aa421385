//! Attacks on redaction: one credential-name rule decides what command hooks do not see
//! in their environment and what the audit log does not write in clear. A name that the
//! scrubber hides must not reach the log through `NAME=value`, a JSON key, a URL query or
//! a hook's rewrite of the input.

use serde_json::json;

use crate::support::{TestEnv, bash_input, hooks};

/// Credential names the audit log once wrote in clear, and a few the old rule missed.
const NAMES: &[&str] = &[
    "ENCRYPTION_KEY",
    "SIGNING_KEY",
    "SSH_KEY",
    "MASTER_KEY",
    "GCP_PROJECT_CREDS",
    "GITHUB_PAT",
    "BASIC_AUTH",
    "DB_PASS",
    "SENTRY_DSN",
];

fn secret(name: &str) -> String {
    format!("s3cr3t-{}-value", name.to_ascii_lowercase())
}

#[test]
fn the_scrubber_and_the_audit_log_share_one_rule() {
    let env = TestEnv::new();
    let dump = env.project.join("env-dump");
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "dump", "command": format!("env > '{}'", dump.display())}]),
    ));
    let assignments: Vec<String> = NAMES
        .iter()
        .map(|name| format!("{name}={}", secret(name)))
        .collect();
    let mut input = bash_input(&format!(
        "{} ./deploy.sh && curl 'https://api.example.com/x?key={}&page=2&access_token={}'",
        assignments.join(" "),
        secret("query-key"),
        secret("query-token"),
    ));
    for name in NAMES {
        input["tool_input"][name.to_ascii_lowercase()] = json!(secret(&format!("json-{name}")));
    }
    let mut cmd = env.command();
    cmd.args(["dispatch", "PreToolUse"]);
    for name in NAMES {
        cmd.env(name, secret(&format!("env-{name}")));
    }
    cmd.env("INNOCENT_SETTING", "kept");
    let run = env.run_with(&mut cmd, &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);

    let seen = std::fs::read_to_string(&dump).unwrap();
    for name in NAMES {
        assert!(
            !seen.contains(&format!("{name}=")),
            "{name} reached the hook"
        );
    }
    assert!(
        seen.contains("INNOCENT_SETTING=kept"),
        "the scrubber is too wide"
    );

    let log = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    assert!(!log.contains("s3cr3t"), "a secret in the audit log: {log}");
    let entry = &env.audit_entries()[0];
    let command = entry["toolInput"]["command"].as_str().unwrap();
    for name in NAMES {
        assert!(command.contains(&format!("{name}=[REDACTED]")), "{command}");
        assert_eq!(entry["toolInput"][name.to_ascii_lowercase()], "[REDACTED]");
    }
    assert!(
        command.contains("?key=[REDACTED]&page=2&access_token=[REDACTED]"),
        "{command}"
    );
}

/// A hook that rewrites the input is auditable: the line records the rewrite (redacted)
/// and which hook's rewrite won.
#[test]
fn a_rewrite_is_audited_redacted_with_its_author() {
    let env = TestEnv::new();
    let rewrite = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {"command": "SIGNING_KEY=rewritten-secret make release", "api_key": "k-secret"}}});
    env.project_hooks(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "rewriter", "command": format!("echo '{rewrite}'")}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("make release"));
    assert_eq!(out["updatedInputBy"], "rewriter", "{out}");
    let entry = &env.audit_entries()[0];
    assert_eq!(entry["updatedInputBy"], "rewriter", "{entry}");
    assert_eq!(
        entry["updatedInput"]["command"],
        "SIGNING_KEY=[REDACTED] make release"
    );
    assert_eq!(entry["updatedInput"]["api_key"], "[REDACTED]");
    let text = entry.to_string();
    assert!(
        !text.contains("rewritten-secret") && !text.contains("k-secret"),
        "{text}"
    );
}
