//! Config size has a sane cost: the peak memory of a one-shot dispatch over thousands of
//! `if` rules (distinct long ones, the smallest distinct ones, identical ones) stays
//! within a bound derived from the file's size (README, "Limits on config size"),
//! measured by `/usr/bin/time -f %M`, against the same dispatch with no hooks, for a
//! command no rule names and for one whose program every rule names.

use std::path::Path;

use serde_json::json;

use crate::support::TestEnv;

/// Bytes of peak memory allowed per byte of the file (README, "Limits on config size"),
/// whatever the command: measured at 26–42 in a debug build, for a command no rule
/// names and for one whose program every rule names (a rule's word glob answers on
/// ASCII text; before it, each rule compiled regexes then: 250–550 bytes per byte).
const FACTOR: u64 = 60;

/// Peak RSS in bytes of `hookhost dispatch PreToolUse` for a Bash call of `command`.
fn peak_rss(env: &TestEnv, command: &str) -> u64 {
    let mut cmd = std::process::Command::new("/usr/bin/time");
    crate::support::copy_env(&env.command(), &mut cmd);
    cmd.current_dir(&env.project)
        .args(["-f", "peak-rss-kb=%M", env!("CARGO_BIN_EXE_hookhost")])
        .args(["dispatch", "PreToolUse"]);
    let input = json!({"session_id": "s", "tool_name": "Bash",
        "tool_input": {"command": command}});
    let run = env.run_with(&mut cmd, &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let kb: u64 = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("peak-rss-kb="))
        .unwrap_or_else(|| panic!("no peak RSS in {}", run.stderr))
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

fn write_rules(env: &TestEnv, count: usize, rule: &dyn Fn(usize) -> String) -> u64 {
    let hooks: Vec<_> = (0..count)
        .map(|n| json!({"type": "command", "command": "true", "if": rule(n)}))
        .collect();
    env.project_hooks(json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": hooks}]}}));
    std::fs::metadata(env.project.join(".hookhost/hooks.json"))
        .unwrap()
        .len()
}

#[test]
fn memory_for_if_rules_is_proportional_to_the_file() {
    let test = "config_size::memory_for_if_rules_is_proportional_to_the_file";
    if !Path::new("/usr/bin/time").exists() {
        crate::skip::skipped(test, "/usr/bin/time is not installed (.ci/run installs it)");
        return;
    }
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {}}));
    // Quoted text, so that every rule is tested against the commands and the literals.
    let other = "ls -la \"some quoted text\" && echo 'more'";
    let same = "git push origin \"git push origin x\"";
    let baseline = peak_rss(&env, other).max(peak_rss(&env, same));
    let distinct = |n| format!("Bash(git push origin branch-{n} *)");
    // The smallest distinct rules: the most rules per byte of file.
    let smallest = |n| format!("Bash(git a{n}*)");
    let identical = |_| "Bash(git push origin main *)".to_string();
    for (what, count, rule) in [
        ("distinct", 5_000, &distinct as &dyn Fn(usize) -> String),
        ("smallest distinct", 4_000, &smallest),
        ("identical", 5_000, &identical),
    ] {
        let size = write_rules(&env, count, rule);
        for command in [other, same, "git status"] {
            let factor = FACTOR;
            let peak = peak_rss(&env, command);
            let bound = baseline + factor * size;
            eprintln!(
                "{what}, `{command}`: file {size} B, peak {} KB (baseline {} KB, bound {} KB)",
                peak / 1024,
                baseline / 1024,
                bound / 1024
            );
            assert!(
                peak <= bound,
                "{count} {what} rules ({size} bytes), `{command}`: peak RSS {} KB, above {} KB \
                 (baseline {} KB + {factor} x the file)",
                peak / 1024,
                bound / 1024,
                baseline / 1024
            );
        }
    }
}
