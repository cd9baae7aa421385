//! Config size has a sane cost: the peak memory of a one-shot dispatch over thousands of
//! `if` rules (distinct long ones, the smallest distinct ones, identical ones; nested and
//! flat format) stays within a bound derived from the file's size (the book's matchers
//! chapter, "Limits on config size"),
//! measured by `/usr/bin/time -f %M`, against the same dispatch with no hooks, for a
//! command no rule names and for one whose program every rule names.

use std::path::Path;

use serde_json::json;

use crate::support::TestEnv;

/// Bytes of peak memory allowed per byte of the file (docs/book/src/matchers.md, "Limits on config size"),
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

/// Writes `count` rules in the nested format, or (`flat`) as as many rules of the flat
/// format (`hooks.flat.json`, the other file removed); the file's size.
fn write_rules(env: &TestEnv, count: usize, rule: &dyn Fn(usize) -> String, flat: bool) -> u64 {
    let hooks: Vec<_> = (0..count)
        .map(|n| json!({"type": "command", "command": "true", "if": rule(n)}))
        .collect();
    let (nested, flat_file) = (
        env.project.join(".hookhost/hooks.json"),
        env.project.join(".hookhost/hooks.flat.json"),
    );
    if flat {
        let _ = std::fs::remove_file(&nested);
        let rules: Vec<_> = hooks
            .into_iter()
            .map(|h| json!({"event": "PreToolUse", "matcher": "Bash", "handler": h}))
            .collect();
        env.write(
            ".hookhost/hooks.flat.json",
            &json!({"hooks": rules}).to_string(),
        );
        return std::fs::metadata(flat_file).unwrap().len();
    }
    let _ = std::fs::remove_file(&flat_file);
    env.project_hooks(json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": hooks}]}}));
    std::fs::metadata(nested).unwrap().len()
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
    for (what, count, rule, flat) in [
        (
            "distinct",
            5_000,
            &distinct as &dyn Fn(usize) -> String,
            false,
        ),
        ("smallest distinct", 4_000, &smallest, false),
        ("identical", 5_000, &identical, false),
        // The flat format: one rule (a group of its own) per hook.
        ("distinct flat", 5_000, &distinct, true),
        ("smallest distinct flat", 4_000, &smallest, true),
    ] {
        let size = write_rules(&env, count, rule, flat);
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

/// Bytes of peak memory `serve` may take per byte of the file over repeated reloads of
/// distinct rules (docs/book/src/matchers.md, "Limits on config size"): a reload holds the
/// old config while the new one builds, and a rule dropped leaves the interning table (before, every
/// reload left its rules' allocations there, and each reload on another pool thread kept
/// its own allocator heap: 180–220 bytes per byte here, growing with reloads). Measured
/// since: 100–115 for this test's 1.2 MB over a fixed part of about 30 MB (the
/// allocator's heaps of the daemon's threads, [`SERVE_FIXED`]). A regex per rule (before
/// the glob) would take another 240 bytes per byte of file here.
const SERVE_FACTOR: u64 = 150;
const SERVE_FIXED: u64 = 48 << 20;

/// `VmHWM` of a process, in bytes.
fn high_water_mark(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    kb * 1024
}

#[test]
fn serve_memory_over_reloads_is_proportional_to_the_file() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let env = TestEnv::new();
    env.project_hooks(json!({"hooks": {}}));
    let mut child = env
        .command()
        .args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap());
    let mut call = |command: &str| {
        let request =
            json!({"id": 1, "event": "PreToolUse", "input": crate::support::bash_input(command)});
        writeln!(input, "{request}").unwrap();
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        line
    };
    call("git status");
    let baseline = high_water_mark(child.id());
    let mut size = 0;
    for round in 0..3 {
        size = write_rules(&env, 20_000, &|n| format!("Bash(git r{round}a{n}*)"), false);
        crate::support::wait_until("the reload", || {
            call("git status").contains("config reloaded")
        });
    }
    let peak = high_water_mark(child.id());
    let _ = child.kill();
    let _ = child.wait();
    let bound = baseline + SERVE_FIXED + SERVE_FACTOR * size;
    eprintln!(
        "serve, 3 reloads of 20,000 distinct rules: file {size} B, peak {} KB (baseline {} KB, \
         bound {} KB)",
        peak / 1024,
        baseline / 1024,
        bound / 1024
    );
    assert!(
        peak <= bound,
        "serve after 3 reloads of {size} bytes: peak RSS {} KB, above {} KB (baseline {} KB + \
         {} KB + {SERVE_FACTOR} x the file)",
        peak / 1024,
        bound / 1024,
        baseline / 1024,
        SERVE_FIXED / 1024
    );
}
