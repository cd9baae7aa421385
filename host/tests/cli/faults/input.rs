//! Faults: hostile input sizes and depths, one-shot and through `hookhost serve`. Each is
//! answered (never exit 101, never a lost answer), the daemon keeps answering its other
//! clients, and where the `if` filter's parser gives up the guard hook runs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::serve::Daemon;
use crate::support::{TestEnv, bash_input, hooks};

/// A guard that blocks every command it sees, filtered to `rm`.
fn guard(env: &TestEnv, rule: &str) {
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo guard ran >&2; exit 2", "if": rule}]),
    ));
}

fn nested_substitutions(levels: usize) -> String {
    format!("echo {}rm -rf /{}", "$(".repeat(levels), ")".repeat(levels))
}

fn multi_megabyte_command() -> String {
    format!("{}rm -rf /", "ls -la; ".repeat(3 << 17))
}

fn deep_json(levels: usize) -> String {
    let mut input = bash_input("rm -rf /");
    input["tool_input"]["extra"] = json!("PLACEHOLDER");
    input.to_string().replace(
        "\"PLACEHOLDER\"",
        &format!("{}1{}", "[".repeat(levels), "]".repeat(levels)),
    )
}

/// `hookhost serve` (the shared [`Daemon`]), with the checks these faults share.
struct Faults(Daemon);

impl Faults {
    fn start(env: &TestEnv) -> Faults {
        Faults(Daemon::start(env))
    }

    /// Sends one raw request line on a fresh connection and reads its answer; a huge
    /// input is given more time than the shared client's default.
    fn ask(&self, line: &str) -> Value {
        let mut client = self.0.client();
        client
            .stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        client.send(line);
        client.read()
    }

    fn call(&self, input: &Value) -> Value {
        let answer = self.ask(&json!({"id": 1, "event": "PreToolUse", "input": input}).to_string());
        assert_eq!(answer["id"], 1, "{answer}");
        answer["outcome"].clone()
    }

    fn assert_alive(&mut self) {
        assert!(
            self.0.child.try_wait().unwrap().is_none(),
            "the daemon exited"
        );
        // Another client is still served, and the filter still skips what it should.
        let out = self.call(&bash_input("ls"));
        assert_eq!(out["decision"], "none", "{out}");
    }
}

/// Commands the parser gives up on: the guard runs, one-shot and in the daemon.
#[test]
fn deep_and_huge_commands_run_the_guard() {
    let env = TestEnv::new();
    guard(&env, "Bash(rm *)");
    let commands = [
        ("20,000 nested $( )", nested_substitutions(20_000)),
        ("100,000 nested $( )", nested_substitutions(100_000)),
        ("a multi-MB command", multi_megabyte_command()),
        (
            "100,000 nested groups",
            format!("{}rm x{}", "{ ".repeat(100_000), "; }".repeat(100_000)),
        ),
        (
            "100,000 unclosed $(",
            format!("rm {}", "$(".repeat(100_000)),
        ),
    ];
    for (what, command) in &commands {
        let run = env.run(
            &["dispatch", "PreToolUse"],
            &bash_input(command).to_string(),
        );
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert_eq!(run.json()["decision"], "deny", "{what}: the guard must run");
    }
    // The filter still skips a plain command that is not `rm`.
    assert_eq!(
        env.dispatch("PreToolUse", bash_input("ls"))["decision"],
        "none"
    );

    let mut daemon = Faults::start(&env);
    for (what, command) in &commands {
        let out = daemon.call(&bash_input(command));
        assert_eq!(out["decision"], "deny", "{what}: the guard must run: {out}");
        daemon.assert_alive();
    }
}

/// Tool input nested deeper than the JSON parser allows is an error answer, not a crash.
#[test]
fn deeply_nested_json_input_is_an_error_answer() {
    let env = TestEnv::new();
    guard(&env, "Bash(rm *)");
    for levels in [10_000, 100_000] {
        let input = deep_json(levels);
        let run = env.run(&["dispatch", "PreToolUse"], &input);
        assert_ne!(run.code, 101, "{levels}: panicked: {}", run.stderr);
        assert!(
            run.code == 0 || !run.stderr.is_empty(),
            "{levels}: failed without saying why"
        );
    }
    let mut daemon = Faults::start(&env);
    for levels in [10_000, 100_000] {
        let line = format!(
            r#"{{"id": 7, "event": "PreToolUse", "input": {}}}"#,
            deep_json(levels)
        );
        let answer = daemon.ask(&line);
        assert!(
            answer.get("error").is_some() || answer["outcome"]["decision"] == "deny",
            "{levels}: {answer}"
        );
        daemon.assert_alive();
    }
}

/// `if` patterns far above the limits are config errors naming the file, the hook and the
/// (cut) pattern; the other hooks still run, and nothing panics.
#[test]
fn huge_if_patterns_are_config_errors_not_crashes() {
    let env = TestEnv::new();
    let literal = format!("Bash({})", "a".repeat(3 << 20));
    let stars = format!("Bash({})", "*".repeat(100_000));
    let many_star_matcher = format!("Bash|{}", "*".repeat(100_000));
    env.project_hooks(json!({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [
            {"type": "command", "command": "true", "if": literal},
            {"type": "command", "command": "true", "if": stars},
            {"type": "command", "command": "echo guard ran >&2; exit 2", "if": "Bash(rm *)"}
        ]},
        {"matcher": many_star_matcher, "hooks": [{"type": "command", "command": "true"}]}
    ]}}));
    let project = env
        .project
        .join(".hookhost/hooks.json")
        .display()
        .to_string();
    let check = |notices: &Value| {
        let all: Vec<&str> = notices
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n["message"].as_str())
            .collect();
        let joined = all.join("\n");
        assert!(
            joined.len() < 4000,
            "patterns are not cut: {} bytes",
            joined.len()
        );
        for expected in [
            format!("{project}: $.hooks.PreToolUse[0].hooks[0]"),
            "longer than 1024 bytes".to_string(),
            format!("{project}: $.hooks.PreToolUse[0].hooks[1]"),
            "wildcards".to_string(),
            format!("{project}: $.hooks.PreToolUse[1].matcher"),
            "Bash(aaaa".to_string(),
        ] {
            assert!(
                joined.contains(&expected),
                "missing {expected:?} in {joined}"
            );
        }
    };
    let run = env.run(
        &["dispatch", "PreToolUse"],
        &bash_input("rm -rf /").to_string(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["decision"], "deny", "the valid guard still runs: {out}");
    check(&out["notices"]);

    let run = env.run(&["validate"], "");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.len() < 8000, "validate does not cut patterns");

    let mut daemon = Faults::start(&env);
    let out = daemon.call(&bash_input("rm -rf /"));
    assert_eq!(out["decision"], "deny", "{out}");
    check(&out["notices"]);
    daemon.assert_alive();
}

/// The most wildcards a rule may have, against the longest command the filter parses:
/// answered well within the hook's timeout, and the guard runs.
#[test]
fn many_wildcards_against_a_long_command_is_bounded() {
    let env = TestEnv::new();
    let rule = format!(
        "Bash(rm{} x)",
        " *a".repeat(hookhost::matcher::MAX_WILDCARDS - 1)
    );
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "echo guard ran >&2; exit 2", "if": rule, "timeout": 30}]),
    ));
    let command = format!("rm {} x", "a ".repeat(30_000));
    let started = std::time::Instant::now();
    let out = env.dispatch("PreToolUse", bash_input(&command));
    assert_eq!(out["decision"], "deny", "{out}");
    // A wide margin: a super-linear match would take minutes.
    assert!(started.elapsed() < Duration::from_secs(30));
}
