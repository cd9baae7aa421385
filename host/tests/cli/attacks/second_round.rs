//! Issue 24, second round: members of the classes its fixes closed that the issue did not
//! name, tried from the attacker's side (a command crafted against a guard, a hook that
//! turns on its keeper, a host whose resources give out mid-answer). Each test is the
//! attack; one that still gets through is `#[ignore]`d with what gets through and why.

use std::os::unix::process::CommandExt;

use serde_json::json;

use crate::support::{TestEnv, bash_input, hooks, process_running, run_bytes};

/// The pids of the processes with `marker` in their command line.
fn pids_of(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(marker)
                .then_some(pid)
        })
        .collect()
}

/// A guard in the style of many real ones: it quotes the input it refuses in its reason
/// on stderr and exits 2.
const QUOTING_GUARD: &str = "input=$(cat); case \"$input\" in *'rm -rf'*) \
     echo \"guard: refusing $input\" >&2; exit 2;; esac; echo '{}'";

/// Item 1/10 (the start-failure classifier): an exit 2 whose stderr merely *mentions*
/// CPython's "can't open file … [Errno" once read as "the hook could not start", a
/// failure (fail open) instead of a block. The agent writes the command, so it wrote
/// those words into a comment and the guard's quoted reason disarmed the guard.
#[test]
fn a_guard_that_quotes_the_command_cannot_be_made_a_cannot_start() {
    let env = TestEnv::new();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard", "command": QUOTING_GUARD}]),
    ));
    for command in [
        "rm -rf / # python3: can't open file 'x': [Errno 2] No such file or directory",
        "rm -rf /\npython3: can't open file '/nope': [Errno 2] No such file or directory",
        "rm -rf ~ #can't open file [Errno",
    ] {
        let out = env.dispatch("PreToolUse", bash_input(command));
        assert_eq!(out["decision"], "deny", "{command:?}: {out}");
        assert_ne!(
            out["hooks"][0]["failure"], "cannotStart",
            "{command:?}: {out}"
        );
    }
    // The member the rule is for still holds: an interpreter that cannot open its
    // script exits 2 and is a named failure, not a block.
    let python = env.script(
        "python3",
        "echo \"$0: can't open file '$1': [Errno 2] No such file or directory\" >&2; exit 2",
    );
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "py", "command": format!("{python} hooks/missing.py")}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["failure"], "cannotStart", "{out}");
    assert_ne!(out["decision"], "deny", "{out}");
}

/// Item 11: a hook's descendants end with it. A hook that kills its own keeper (its
/// parent, `$PPID`, the same user) with SIGKILL first takes the keeper's subreaper away:
/// the hook dies with it (`PR_SET_PDEATHSIG`), and the child it started before is
/// re-parented to `hookhost`, a subreaper too, which ends it with the dispatch.
#[test]
fn a_hook_that_kills_its_keeper_leaves_no_descendant() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command",
                "command": "setsid sleep 42455 >/dev/null 2>&1 & sleep 0.1; kill -9 $PPID; echo '{}'"}]),
    ));
    let run = env.run(&["dispatch", "PreToolUse"], &bash_input("ls").to_string());
    let escaped = std::time::Instant::now();
    while process_running("sleep 42455") && escaped.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left = pids_of("sleep 42455");
    for pid in &left {
        // SAFETY: kill has no memory-safety preconditions; the pid is this test's sleeper.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    assert!(left.is_empty(), "escaped: {left:?}; {}", run.stdout);
}

/// Item 1 (`--format claude` when the host cannot guard): an input larger than the
/// 64 MiB hookhost reads was refused as a host error, exit 1, a non-blocking error that
/// let the tool run. The agent writes the input: a command padded past 64 MiB reached no
/// guard. Fixed at `cli/dispatch.rs` `unreadable`: an input hookhost refuses to read is
/// "cannot guard" and blocks where the event can block, the event read from the
/// input's first 64 KiB (`dispatch/input.rs` `event_name_in_prefix`), or blocked when
/// none can be named. Members: the padding in the command, in another field, with the
/// event after the padding (not named: blocked), on PermissionRequest (a JSON deny).
#[test]
fn an_input_padded_past_the_read_limit_is_not_let_through() {
    let env = TestEnv::new();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard", "command": QUOTING_GUARD}]),
    ));
    let pad = " ".repeat(64 << 20);
    // Each input built in turn (64 MiB each): the padding between two halves.
    let halves = [
        (
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /"#,
            r#""}}"#,
        ),
        (
            r#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /","description":""#,
            r#""}}"#,
        ),
        (
            r#"{"tool_input":{"command":"rm -rf /"#,
            r#""},"hook_event_name":"PreToolUse","tool_name":"Bash"}"#,
        ),
    ];
    for (before, after) in halves {
        let stdin = format!("{before}{pad}{after}");
        let run = run_bytes(
            env.command().args(["dispatch", "--format", "claude"]),
            stdin.as_bytes(),
        );
        assert_eq!(run.code, 2, "{before}: {}", run.stderr);
        assert!(
            run.stderr.contains("67108864"),
            "the limit is named: {}",
            run.stderr
        );
    }
    let stdin = format!(
        r#"{{"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{{"command":"rm -rf /{pad}"}}}}"#
    );
    let run = run_bytes(
        env.command().args(["dispatch", "--format", "claude"]),
        stdin.as_bytes(),
    );
    let out: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        out["hookSpecificOutput"]["decision"]["behavior"], "deny",
        "{out}"
    );
    // An event that cannot block keeps the host error.
    let stdin = format!(r#"{{"hook_event_name":"SessionEnd","reason":"{pad}"}}"#);
    let run = run_bytes(
        env.command().args(["dispatch", "--format", "claude"]),
        stdin.as_bytes(),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
}

/// Item 5 (crash-only audit) and item 1: an audit append past `RLIMIT_FSIZE` raised
/// SIGXFSZ, whose default action killed the one-shot dispatch before it answered: a deny
/// lost as a crash (no decision), not "a line or a notice".
#[test]
fn an_audit_log_at_the_file_size_limit_costs_a_notice_not_the_answer() {
    let env = TestEnv::new();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard", "command": QUOTING_GUARD}]),
    ));
    // The log exists and is at the limit: the next line cannot fit.
    let limit: u64 = 4096;
    let log = env.data.join("audit.jsonl");
    std::fs::write(&log, format!("{}\n", "x".repeat(limit as usize - 1))).unwrap();
    let run = run_bytes(
        fsize_limited(&env, limit).args(["dispatch", "--format", "claude", "PreToolUse"]),
        bash_input("rm -rf /").to_string().as_bytes(),
    );
    assert_eq!(
        run.code, 2,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    assert!(run.stderr.contains("refusing"), "{}", run.stderr);
    // The Outcome: the deny, and the lost line as a notice naming the log.
    let run = run_bytes(
        fsize_limited(&env, limit).args(["dispatch", "PreToolUse"]),
        bash_input("rm -rf /").to_string().as_bytes(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out}");
    let notices = out["notices"].to_string();
    assert!(notices.contains("audit"), "{out}");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), limit);
    // Just under the limit: the part of the line that fits is written, then taken back,
    // so the log still ends with a whole line.
    std::fs::write(&log, format!("{}\n", "x".repeat(limit as usize - 41))).unwrap();
    let run = run_bytes(
        fsize_limited(&env, limit).args(["dispatch", "--format", "claude", "PreToolUse"]),
        bash_input("rm -rf /").to_string().as_bytes(),
    );
    assert_eq!(
        run.code, 2,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    let kept = std::fs::read(&log).unwrap();
    assert_eq!(kept.len(), limit as usize - 40);
    assert!(kept.ends_with(b"x\n"));
}

/// `hookhost` with `RLIMIT_FSIZE` at `limit` bytes.
fn fsize_limited(env: &TestEnv, limit: u64) -> std::process::Command {
    let mut cmd = env.command();
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(move || {
            let cap = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &cap) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Item 6 (caps in bytes): a hook's stdout is kept up to 1 MiB; a guard that denies in
/// JSON and quotes the command in its reason printed more than that for a command padded
/// past it, and the cut JSON read as invalid output, a failure (fail open) instead of its
/// deny. NUL bytes, six bytes each once the guard's JSON escapes them, get there with a
/// sixth of the padding.
#[test]
fn a_guard_denying_in_json_cannot_be_disarmed_by_a_long_command() {
    let env = TestEnv::new();
    let guard = "jq -c 'if (.tool_input.command | test(\"rm -rf\")) then \
                 {hookSpecificOutput: {hookEventName: \"PreToolUse\", permissionDecision: \"deny\", \
                 permissionDecisionReason: (\"refusing \" + .tool_input.command)}} else {} end'";
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard", "command": guard}]),
    ));
    for pad in ["x".repeat(1 << 20), "\0".repeat(200_000)] {
        let out = env.dispatch("PreToolUse", bash_input(&format!("rm -rf / #{pad}")));
        let shown = out.to_string();
        assert_eq!(
            out["decision"],
            "deny",
            "{}",
            &shown[..shown.len().min(2000)]
        );
        assert!(shown.len() < 200_000, "{} bytes", shown.len());
    }
}

/// The same through an HTTP guard: its body is kept up to 1 MiB too, and a longer deny
/// was "answered more than 1048576 bytes; ignored".
#[test]
fn an_http_guard_denying_in_json_cannot_be_disarmed_by_a_long_command() {
    let env = TestEnv::new();
    let server = crate::support::TestServer::start(|req| {
        let input: serde_json::Value = serde_json::from_str(&req.body).unwrap();
        let answer = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": format!("refusing {}", input["tool_input"]["command"]),
            "updatedInput": {"command": input["tool_input"]["command"]}}});
        (200, answer.to_string(), std::time::Duration::ZERO)
    });
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "http", "id": "guard", "url": format!("{}/guard", server.url)}]),
    ));
    let out = env.dispatch(
        "PreToolUse",
        bash_input(&format!("rm -rf / #{}", "\0".repeat(200_000))),
    );
    let shown = out.to_string();
    assert_eq!(
        out["decision"],
        "deny",
        "{}",
        &shown[..shown.len().min(2000)]
    );
    assert!(shown.len() < 200_000, "{} bytes", shown.len());
    assert!(
        out["updatedInput"].is_null(),
        "a cut value is never applied"
    );
}

/// Peak RSS in bytes of `hookhost dispatch PreToolUse` for `input`.
fn peak_rss(env: &TestEnv, input: &serde_json::Value) -> u64 {
    let mut cmd = std::process::Command::new("/usr/bin/time");
    crate::support::copy_env(&env.command(), &mut cmd);
    cmd.current_dir(&env.project)
        .args(["-f", "peak-rss-kb=%M", env!("CARGO_BIN_EXE_hookhost")])
        .args(["dispatch", "PreToolUse"]);
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

/// Item 9 (config size): a file may be 16 MiB (`CONFIG_CAP`), and the smallest distinct
/// members of each shape cost the most per byte of it: extrapolated to the cap, the peak
/// of one dispatch must stay under 2 GiB. Before: 4,000 `Bash(git aN*)` rules cost 253
/// bytes per byte of the file (a regex per rule; a word glob since: 43); 4,000
/// `Read(./a/N/**)` rules 213 (a compiled glob per rule); 4,000 groups with regex
/// matchers `ToolN.*` 268 (a compiled regex per group); 4,000 identical hooks (each
/// skipped as a duplicate of the first) 240 (a dispatch task of 7 KB per skipped hook).
/// Globs and regex matchers are now compiled when an event reaches them, into a cache
/// of 256; a skipped hook takes no task.
#[test]
fn the_smallest_distinct_rules_at_the_config_cap_have_a_sane_cost() {
    if !std::path::Path::new("/usr/bin/time").exists() {
        return;
    }
    let env = TestEnv::new();
    let read = |path: &str| {
        json!({"session_id": "s", "tool_name": "Read",
               "tool_input": {"file_path": path}})
    };
    let hook = |rule: Option<String>| match rule {
        Some(rule) => json!({"type": "command", "command": "true", "if": rule}),
        None => json!({"type": "command", "command": "true"}),
    };
    let one_group = |matcher: &str, hooks: Vec<serde_json::Value>| {
        let group = json!({"matcher": matcher, "hooks": hooks});
        json!({"hooks": {"PreToolUse": [group]}})
    };
    let n = 4_000;
    let shapes: Vec<(&str, serde_json::Value, serde_json::Value)> = vec![
        (
            "Bash(git aN*)",
            one_group(
                "Bash",
                (0..n)
                    .map(|i| hook(Some(format!("Bash(git a{i}*)"))))
                    .collect(),
            ),
            bash_input("git status"),
        ),
        (
            "Read(./a/N/**), a Bash call",
            one_group(
                "*",
                (0..n)
                    .map(|i| hook(Some(format!("Read(./a/{i}/**)"))))
                    .collect(),
            ),
            bash_input("git status"),
        ),
        (
            "Read(./a/N/**), a Read call every rule's tool names",
            one_group(
                "*",
                (0..n)
                    .map(|i| hook(Some(format!("Read(./a/{i}/**)"))))
                    .collect(),
            ),
            read("b/1/x"),
        ),
        (
            "groups with exact matchers ToolN",
            json!({"hooks": {"PreToolUse": (0..n)
                .map(|i| json!({"matcher": format!("Tool{i}"), "hooks": [hook(None)]}))
                .collect::<Vec<_>>()}}),
            bash_input("git status"),
        ),
        (
            "groups with regex matchers ToolN.*",
            json!({"hooks": {"PreToolUse": (0..n)
                .map(|i| json!({"matcher": format!("Tool{i}.*"), "hooks": [hook(None)]}))
                .collect::<Vec<_>>()}}),
            bash_input("git status"),
        ),
        (
            "distinct long ids",
            one_group(
                "Bash",
                (0..n)
                    .map(|i| {
                        let mut h = hook(Some("Bash(rm *)".into()));
                        h["id"] =
                            json!(format!("a-long-hook-identifier-{i:06}-{}", "x".repeat(40)));
                        h
                    })
                    .collect(),
            ),
            bash_input("git status"),
        ),
        (
            "identical hooks (each but the first skipped)",
            one_group("Bash", (0..n).map(|_| hook(None)).collect()),
            bash_input("git status"),
        ),
    ];
    let mut over = Vec::new();
    for (what, config, input) in shapes {
        env.project_hooks(json!({"hooks": {}}));
        let baseline = peak_rss(&env, &input);
        env.project_hooks(config);
        let size = std::fs::metadata(env.project.join(".hookhost/hooks.json"))
            .unwrap()
            .len();
        let peak = peak_rss(&env, &input);
        let per_byte = peak.saturating_sub(baseline) / size;
        let at_cap = per_byte * (16 << 20);
        eprintln!(
            "{what}: {n} hooks, {size} B: peak {} KB over {} KB; {per_byte} B per byte; {} MB \
             at the cap",
            peak / 1024,
            baseline / 1024,
            at_cap >> 20
        );
        if at_cap > 2 << 30 {
            over.push(format!("{what}: {} MB at the 16 MiB cap", at_cap >> 20));
        }
    }
    assert!(over.is_empty(), "{over:#?}");
}

/// Item 1/10: guards that cannot start for reasons the issue did not name — a script
/// without execute permission, one without a `#!` line (`ENOEXEC`), a `#!` naming a
/// missing interpreter or a directory, a directory as the program, a plugin file replaced
/// by a directory — each through the exec form and the shell form: every one is a named
/// `cannotStart`, and `onFailure: "block"` denies.
#[test]
fn a_guard_that_cannot_start_for_any_reason_is_named_and_blocks() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let file = |name: &str, text: &str, mode: u32| {
        let path = env.write(format!("guards/{name}"), text);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    };
    let programs = [
        (
            "not executable",
            file("plain", "#!/bin/sh\nexit 0\n", 0o644),
        ),
        (
            "no #! line",
            file("noshebang", "\u{7f}ELF not really\n", 0o755),
        ),
        (
            "missing interpreter",
            file("nointerp", "#!/nonexistent/python3\n", 0o755),
        ),
        (
            "interpreter is a directory",
            file("dirinterp", "#!/tmp\n", 0o755),
        ),
        (
            "a directory",
            env.project.join("guards").display().to_string(),
        ),
    ];
    let wasm_dir = env.project.join("plugin.wasm");
    std::fs::create_dir_all(&wasm_dir).unwrap();
    for (why, program) in &programs {
        for (form, hook) in [
            (
                "exec",
                json!({"type": "command", "command": program, "args": []}),
            ),
            (
                "shell",
                json!({"type": "command", "command": format!("'{program}'")}),
            ),
        ] {
            let mut hook = hook;
            hook["id"] = json!("guard");
            hook["onFailure"] = json!("block");
            env.managed(hooks("PreToolUse", "Bash", json!([hook])));
            let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
            assert_eq!(out["decision"], "deny", "{why}, {form} form: {out}");
            assert_eq!(
                out["hooks"][0]["failure"], "cannotStart",
                "{why}, {form}: {out}"
            );
        }
    }
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "wasm", "id": "guard", "plugin": wasm_dir, "onFailure": "block"}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("rm -rf /"));
    assert_eq!(
        out["decision"], "deny",
        "a plugin that is a directory: {out}"
    );
    // Named (as a refused plugin file, not `cannotStart`), with the file.
    assert!(out["hooks"][0]["failure"].is_string(), "{out}");
    let message = out["hooks"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("plugin.wasm") && message.contains("directory"),
        "{out}"
    );
}

/// Item 5: lines longer than `PIPE_BUF` (4 KiB, the most a pipe writes atomically)
/// written by many processes at once: each is whole, none glued to another.
#[test]
fn long_lines_from_many_processes_at_once_stay_whole() {
    let env = TestEnv::new();
    // Each hook has its entry in the line: 40 hooks make it about 10 KB.
    let many: Vec<_> = (0..40)
        .map(|n| {
            json!({"type": "command", "id": format!("guard-{n}-{}", "z".repeat(100)),
                        "command": "cat >/dev/null; echo '{}'"})
        })
        .collect();
    env.managed(hooks("PreToolUse", "Bash", json!(many)));
    let callers: Vec<_> = (0..8)
        .map(|n| {
            let mut cmd = env.command();
            cmd.args(["dispatch", "PreToolUse"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = cmd.spawn().unwrap();
            let input = bash_input(&format!("echo {n} {}", "y".repeat(64 << 10))).to_string();
            let mut stdin = child.stdin.take().unwrap();
            std::thread::spawn(move || std::io::Write::write_all(&mut stdin, input.as_bytes()));
            child
        })
        .collect();
    for mut child in callers {
        assert!(child.wait().unwrap().success());
    }
    let text = std::fs::read_to_string(env.data.join("audit.jsonl")).unwrap();
    // The dispatches' lines (the chain's genesis is no dispatch's).
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains("\"kind\":")).collect();
    assert_eq!(lines.len(), 8, "{} lines", lines.len());
    for line in lines {
        assert!(
            line.len() > 4096,
            "a short line: {}",
            &line[..line.len().min(200)]
        );
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

/// Item 11: a hook that times out, whose child left the group (`setsid`) and ignores
/// SIGTERM and SIGHUP: the keeper ends it with SIGKILL all the same.
#[test]
fn a_descendant_that_ignores_sigterm_and_leaves_the_group_ends_at_the_timeout() {
    let env = TestEnv::new();
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "timeout": 1,
                "command": "setsid sh -c 'trap \"\" TERM HUP INT; exec sleep 42466' \
                            >/dev/null 2>&1 </dev/null & sleep 30"}]),
    ));
    let out = env.dispatch("PreToolUse", bash_input("ls"));
    assert_eq!(out["hooks"][0]["failure"], "timeout", "{out}");
    crate::support::wait_until("the SIGTERM-proof descendant to be gone", || {
        !process_running("sleep 42466")
    });
}

/// Item 1 with caps: an input nested as deep as hookhost passes on (100 levels), echoed
/// by a guard inside its deny, still parses (serde's limit is 128): the deny stands.
#[test]
fn a_deny_that_echoes_the_deepest_input_still_counts() {
    let env = TestEnv::new();
    let guard = "jq -c '{hookSpecificOutput: {hookEventName: \"PreToolUse\", \
                 permissionDecision: \"deny\", permissionDecisionReason: \"no\", \
                 seen: .tool_input}}'";
    env.managed(hooks(
        "PreToolUse",
        "*",
        json!([{"type": "command", "id": "guard", "command": guard}]),
    ));
    let deep = format!("{}1{}", "[".repeat(150), "]".repeat(150));
    let stdin =
        format!(r#"{{"session_id":"s1","tool_name":"mcp__x__y","tool_input":{{"a":{deep}}}}}"#);
    let run = run_bytes(
        env.command().args(["dispatch", "PreToolUse"]),
        stdin.as_bytes(),
    );
    let out = run.json();
    assert_eq!(out["decision"], "deny", "{out}");
}

/// Item 1: a project hook (the same user as hookhost) that kills the dispatching
/// `hookhost` itself — its keeper's parent — while a managed guard denies: the one-shot
/// dies before it answers, so the deny is lost; only Claude Code's `onFailure: "block"`
/// (which `install` writes) turns that into a block.
#[test]
#[ignore = "gets through without the drop-in's onFailure: a hook can SIGKILL the dispatching \
            hookhost (`kill -9 $(ps -o ppid= -p $PPID)`), which dies with no answer (killed by \
            signal, a non-blocking error for an agent without onFailure:block); the same uid \
            can always do it, hookhost cannot answer after SIGKILL"]
fn a_hook_that_kills_the_host_does_not_let_the_command_through() {
    let env = TestEnv::new();
    env.managed(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "id": "guard", "command": QUOTING_GUARD}]),
    ));
    env.project_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": "kill -9 $(ps -o ppid= -p $PPID); sleep 5"}]),
    ));
    let run = run_bytes(
        env.command()
            .args(["dispatch", "--format", "claude", "PreToolUse"]),
        bash_input("rm -rf /").to_string().as_bytes(),
    );
    assert_eq!(
        run.code, 2,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
}

/// Item 7: `settings.json` bind-mounted over (a container's single-file mount, a
/// dotfiles manager): the swap cannot replace a mount point. `install` must then say so,
/// naming the file, and leave the file as it was — or write through; never leave it
/// half-done or lose what it held.
#[test]
fn install_over_a_bind_mounted_settings_file_refuses_or_writes_whole() {
    let usable = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !usable {
        return;
    }
    let env = TestEnv::new();
    let settings = env.home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{}\n").unwrap();
    let source = env.home.join("mounted-settings.json");
    let original = "{\n  \"model\": \"opus\"\n}\n";
    std::fs::write(&source, original).unwrap();
    let script = format!(
        "mount --bind '{}' '{}' && \"$@\"; echo \"status=$?\"; cat '{}'",
        source.display(),
        settings.display(),
        settings.display()
    );
    let mut cmd = std::process::Command::new("unshare");
    crate::support::copy_env(&env.command(), &mut cmd);
    cmd.env("HOME", &env.home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["-rm", "sh", "-c", &script, "sh"])
        .arg(env!("CARGO_BIN_EXE_hookhost"))
        .args(["install", "--claude"])
        .current_dir(&env.project);
    let run = env.run_with(&mut cmd, "");
    let kept = std::fs::read_to_string(&source).unwrap();
    if run.stdout.contains("status=0") {
        // Written through the mount: the whole drop-in, the user's key kept.
        let value: serde_json::Value = serde_json::from_str(&kept).unwrap();
        assert_eq!(value["model"], "opus", "{kept}");
        assert!(kept.contains("dispatch --format claude"), "{kept}");
    } else {
        assert_eq!(kept, original, "the file changed on a failed install");
        assert!(run.stderr.contains("settings.json"), "{}", run.stderr);
    }
}
