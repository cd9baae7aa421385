//! Issue 30's red team: the agent adapters (`dispatch --format
//! codex|gemini|copilot|cursor|opencode`, their drop-ins), attacked with members nobody
//! named. Each test is the attack and its control; what got through was fixed at its
//! chokepoint (named on the test).

use serde_json::{Value, json};

use crate::support::{TestEnv, hooks, run_bytes};

/// A guard that refuses any input naming a `.env` file.
const ENV_GUARD: &str = "input=$(cat); case \"$input\" in *.env*) \
                         echo 'no reading .env' >&2; exit 2;; esac; exit 0";

fn answer(run: &crate::support::Run) -> Value {
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {:?} (exit {}, {})",
            run.stdout, run.code, run.stderr
        )
    })
}

/// An input padded past the 64 MiB read limit (the model writes the command) is refused
/// unread. Under `--format claude` that blocks (the event read from the first 64 KiB);
/// under an agent's format the event was looked for only in a parsed input, so the
/// Codex, Gemini CLI, Cursor and OpenCode drop-ins, which name no event on their command
/// line, got the host error, exit 1: a non-blocking error to Gemini CLI and Codex, and
/// the padded `rm -rf` ran. Fixed at `cli/dispatch.rs` `agent_blocked`: the event is read
/// from the prefix in the agent's own event field (`dispatch::input::string_in_prefix`),
/// and an unread input whose event cannot be named blocks (exit 2), as for Claude Code.
#[test]
fn an_agents_input_padded_past_the_read_limit_is_not_let_through() {
    let env = TestEnv::new();
    let pad = " ".repeat(64 << 20);
    let cases = [
        (
            "gemini",
            r#"{"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"rm -rf /"#,
        ),
        (
            "codex",
            r#"{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf /"#,
        ),
        (
            "opencode",
            r#"{"event":"tool.execute.before","tool":"bash","args":{"command":"rm -rf /"#,
        ),
    ];
    for (agent, before) in cases {
        let stdin = format!("{before}{pad}\"}}}}");
        let run = run_bytes(
            env.command().args(["dispatch", "--format", agent]),
            stdin.as_bytes(),
        );
        assert_eq!(run.code, 0, "{agent}: {}", run.stderr);
        let v = answer(&run);
        let refused = v["decision"] == "deny"
            || v["hookSpecificOutput"]["permissionDecision"] == "deny"
            || v["block"].is_string();
        assert!(refused, "{agent}: {v}");
    }
    // The event after the padding: it cannot be named, and the call is blocked.
    let stdin = format!(
        r#"{{"tool_name":"run_shell_command","tool_input":{{"command":"rm -rf /{pad}"}},"hook_event_name":"BeforeTool"}}"#
    );
    let run = run_bytes(
        env.command().args(["dispatch", "--format", "gemini"]),
        stdin.as_bytes(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("blocked"), "{}", run.stderr);
}

/// The model writes the tool's arguments, and Gemini CLI 0.61 accepts one its schema
/// does not list: `read_file` with `file_path` (what 0.61 reads) and `absolute_path` (an
/// older Gemini's name, which the table maps to `file_path`). The rename overwrote
/// `file_path` with the harmless path; the guard saw `README` and Gemini read `.env`.
/// Fixed at `agents::to_canonical_args` (two arguments for one canonical name with
/// different values are refused) and `cli/dispatch.rs` (a refusal of the adapter blocks
/// where the event guards, not exit 1).
#[test]
fn a_read_naming_its_path_twice_does_not_slip_past_a_guard() {
    let env = TestEnv::new();
    env.user_hooks(hooks(
        "PreToolUse",
        "Read",
        json!([{"type": "command", "command": ENV_GUARD}]),
    ));
    let read = |args: Value| {
        let input = json!({"session_id": "s", "cwd": "/w", "hook_event_name": "BeforeTool",
                           "tool_name": "read_file", "tool_input": args});
        let run = env.run(&["dispatch", "--format", "gemini"], &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        if run.stdout.trim().is_empty() {
            Value::Null
        } else {
            answer(&run)
        }
    };
    // Controls: the guard refuses `.env`, lets README through.
    assert_eq!(read(json!({"file_path": "/w/.env"}))["decision"], "deny");
    assert_ne!(read(json!({"file_path": "/w/README"}))["decision"], "deny");
    // The attack.
    let v = read(json!({"file_path": "/w/.env", "absolute_path": "/w/README"}));
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(v["reason"].as_str().unwrap_or("").contains("twice"), "{v}");
}

/// A rewrite of a Gemini `read_file` call went back as `absolute_path` (the first table
/// row's name), which Gemini CLI 0.61 ignores when it merges the rewrite into the call:
/// the unrewritten file was read. Fixed at `agents::tool_input_for`: an argument goes
/// back under the name it came by.
#[test]
fn a_gemini_read_rewrite_lands_in_the_argument_gemini_reads() {
    let env = TestEnv::new();
    let rewrite = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "allow", "updatedInput": {"file_path": "/dev/null"}}});
    env.user_hooks(hooks(
        "PreToolUse",
        "Read",
        json!([{"type": "command", "command": format!("cat >/dev/null; echo '{rewrite}'")}]),
    ));
    let input = json!({"session_id": "s", "cwd": "/w", "hook_event_name": "BeforeTool",
                       "tool_name": "read_file", "tool_input": {"file_path": "/w/.env"}});
    let run = env.run(&["dispatch", "--format", "gemini"], &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = answer(&run);
    assert_eq!(
        v["hookSpecificOutput"]["tool_input"],
        json!({"file_path": "/dev/null"}),
        "{v}"
    );
}

/// Every agent prints a hook's reason and hookhost's notices where the user reads them,
/// after its JSON parser has given back every character JSON escaping hid (measured:
/// Copilot CLI 1.0.102 prints "Denied by preToolUse hook: REASON" with a hook's ESC
/// sequences, OSC title and bidi override raw; the OpenCode plugin prints `notices` with
/// `console.error` and OpenCode prints the thrown `block`). Only Copilot's and Cursor's
/// stderr lines were escaped. Fixed at `agents::contract`: the reason, stop reason and
/// system message (`reason`, `common_top`) and every notice line (`channel`) are escaped
/// for the terminal whatever the channel.
#[test]
fn reasons_and_notices_reach_every_agents_terminal_escaped() {
    let env = TestEnv::new();
    let output = json!({"systemMessage": "\u{1b}[2J\u{1b}]0;owned\u{7}cleared",
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "no \u{1b}[31mred\u{202e}txt"}});
    let file = env.home.join("answer.json");
    std::fs::write(&file, output.to_string()).unwrap();
    let permission = json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
        "decision": {"behavior": "deny", "message": "no \u{1b}[31mred\u{202e}"}},
        "systemMessage": "\u{1b}[2Jcleared"});
    let permission_file = env.home.join("permission.json");
    std::fs::write(&permission_file, permission.to_string()).unwrap();
    let answering = |file: &std::path::Path| {
        json!([{"matcher": "Bash", "hooks": [{"type": "command",
            "command": format!("cat >/dev/null; cat '{}'", file.display())}]}])
    };
    env.user_hooks(json!({"hooks": {"PreToolUse": answering(&file),
                                    "PermissionRequest": answering(&permission_file)}}));
    let calls = [
        (
            "codex",
            None,
            json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                               "tool_input": {"command": "ls"}}),
        ),
        (
            "codex",
            None,
            json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                               "tool_input": {"command": "ls"}}),
        ),
        (
            "gemini",
            None,
            json!({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                                "tool_input": {"command": "ls"}}),
        ),
        (
            "copilot",
            Some("preToolUse"),
            json!({"toolName": "bash", "toolArgs": {"command": "ls"}}),
        ),
        (
            "cursor",
            None,
            json!({"hook_event_name": "beforeShellExecution", "command": "ls"}),
        ),
        (
            "opencode",
            None,
            json!({"event": "tool.execute.before", "tool": "bash",
                                  "args": {"command": "ls"}}),
        ),
    ];
    fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
            Value::Object(o) => o.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    for (agent, event, input) in calls {
        let mut args = vec!["dispatch", "--format", agent];
        args.extend(event);
        let run = env.run(&args, &input.to_string());
        assert_eq!(run.code, 0, "{agent}: {}", run.stderr);
        let v = answer(&run);
        let all = format!("{v}\n{}", run.stderr);
        assert!(all.contains("red"), "{agent}: the reason is shown: {all}");
        assert!(
            all.contains("cleared"),
            "{agent}: the message is shown: {all}"
        );
        let mut texts = vec![run.stderr.as_str()];
        strings(&v, &mut texts);
        for text in texts {
            assert!(
                !text.contains(['\u{1b}', '\u{7}', '\u{202e}']),
                "{agent}: raw for the terminal: {text:?}"
            );
        }
    }
}

/// A guard on `Edit` with a path rule, `Edit(.env)`: OpenCode 1.18 offers GPT models
/// `apply_patch` (`patchText`) instead of `edit` and `write` (measured with the model id
/// `gpt-5.1-codex`), a tool the table did not know, so the matcher `Edit` never saw the
/// patch that rewrote `.env`; and mapped to `Edit`, the call has no `file_path`, so the
/// path rule skipped the hook. Fixed at the table (`agents/vocabulary.rs`, held complete
/// against the real clients' offered tools by `agents_real`) and at the `if` rule
/// (`matcher/if_rule/mod.rs`: a call of the rule's tool without a path is not
/// understood, so the hook runs, as a Bash call without a command already did).
#[test]
fn an_opencode_patch_does_not_slip_past_an_edit_guard() {
    let env = TestEnv::new();
    env.user_hooks(hooks(
        "PreToolUse",
        "Edit",
        json!([{"type": "command", "if": "Edit(.env)",
                "command": "echo 'no edits to .env' >&2; exit 2"}]),
    ));
    let call = |tool: &str, args: Value| {
        let input = json!({"event": "tool.execute.before", "tool": tool, "sessionID": "s",
                           "callID": "k", "args": args, "directory": "/w"});
        let run = env.run(&["dispatch", "--format", "opencode"], &input.to_string());
        assert_eq!(run.code, 0, "{}", run.stderr);
        if run.stdout.trim().is_empty() {
            Value::Null
        } else {
            answer(&run)
        }
    };
    // Controls: the rule tells an edit of `.env` from one of README.
    assert!(
        call(
            "edit",
            json!({"filePath": "/w/.env", "oldString": "a", "newString": "b"})
        )["block"]
            .is_string()
    );
    assert!(
        !call(
            "edit",
            json!({"filePath": "/w/README", "oldString": "a", "newString": "b"})
        )["block"]
            .is_string()
    );
    // The attack.
    let patch = "*** Begin Patch\n*** Update File: .env\n@@\n-A=1\n+A=2\n*** End Patch";
    let v = call("apply_patch", json!({"patchText": patch}));
    assert!(v["block"].as_str().unwrap_or("").contains(".env"), "{v}");
}

/// `install --AGENT` writes the small client, `hookhost-dispatch --format AGENT`, when
/// it sits beside `hookhost`. When it cannot run `hookhost` (none beside it, the child
/// killed: out of memory), it blocked only under `--format claude`; every agent's format
/// got exit 1, which Gemini CLI and Codex read as "go ahead", and the call ran
/// unguarded. Fixed at `dispatch_client.rs` `unanswered`: the agent's guarding events
/// (`key::AGENT_BLOCKING_EVENTS`, held to the adapters' table by a test) and an event
/// that cannot be told block (exit 2); the others keep the host error.
#[test]
fn the_small_client_that_cannot_run_hookhost_blocks_for_every_agent() {
    let env = TestEnv::new();
    let alone = env.home.join("bin");
    std::fs::create_dir_all(&alone).unwrap();
    let copy = alone.join("hookhost-dispatch");
    std::fs::copy(env!("CARGO_BIN_EXE_hookhost-dispatch"), &copy).unwrap();
    let lone = |args: &[&str], input: &str| {
        let mut cmd = std::process::Command::new(&copy);
        crate::support::copy_env(&env.command(), &mut cmd);
        cmd.current_dir(&env.project).args(args);
        let run = run_bytes(&mut cmd, input.as_bytes());
        assert!(
            run.stderr.contains("no `hookhost` beside"),
            "{}",
            run.stderr
        );
        run.code
    };
    let before_tool = json!({"session_id": "s", "hook_event_name": "BeforeTool",
        "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf /"}})
    .to_string();
    assert_eq!(lone(&["--format", "gemini"], &before_tool), 2);
    assert_eq!(
        lone(
            &["--format=codex"],
            &before_tool.replace("BeforeTool", "PreToolUse")
        ),
        2
    );
    assert_eq!(lone(&["--format", "copilot", "preToolUse"], "{}"), 2);
    // No event to be told: blocked.
    assert_eq!(lone(&["--format", "cursor"], "{not json"), 2);
    // Controls: an event that guards nothing keeps the host error, as the Outcome format.
    let start = json!({"session_id": "s", "hook_event_name": "SessionStart"}).to_string();
    assert_eq!(lone(&["--format", "gemini"], &start), 1);
    assert_eq!(lone(&["PreToolUse"], &before_tool), 1);
}

/// A host error before the hooks could answer (here the agent's working directory was
/// removed under it, and its input's `cwd` with it, so no project can be found) was
/// exit 1 under every format. Claude Code's drop-in blocks on it (`onFailure: "block"`);
/// Gemini CLI and Codex have no such key and go ahead on exit 1, so every later call
/// of the session ran unguarded. Fixed at `cli/dispatch.rs` `dispatch_stdin`: under an
/// agent's format every host error is the agent's own block where its event guards.
#[test]
fn a_host_error_under_an_agents_format_is_the_agents_block() {
    let env = TestEnv::new();
    let gone = env.home.join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    let input = json!({"session_id": "s", "cwd": gone, "hook_event_name": "BeforeTool",
        "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf ~"}});
    let mut cmd = std::process::Command::new("/bin/sh");
    crate::support::copy_env(&env.command(), &mut cmd);
    cmd.arg("-c")
        .arg("cd \"$1\" && rmdir \"$1\" && exec \"$2\" dispatch --format gemini")
        .args(["sh", gone.to_str().unwrap(), env!("CARGO_BIN_EXE_hookhost")]);
    let run = run_bytes(&mut cmd, input.to_string().as_bytes());
    assert!(!gone.exists());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = answer(&run);
    assert_eq!(v["decision"], "deny", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap_or("")
            .contains("current directory"),
        "{v}"
    );
}

/// Cursor's hooks cannot rewrite a call (its reference has no such field): a hook's
/// `updatedInput` on `beforeShellExecution` became a notice, and the command ran as it
/// was, the one the hook had replaced. Fixed at `agents::contract::render`: a rewrite of a
/// PreToolUse call that the agent cannot take denies the call, with the rewrite in the
/// notice.
#[test]
fn a_rewrite_cursor_cannot_take_does_not_let_the_original_run() {
    let env = TestEnv::new();
    let rewrite = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "updatedInput": {"command": "rm -rf ./build --dry-run"}}});
    env.user_hooks(hooks(
        "PreToolUse",
        "Bash",
        json!([{"type": "command", "command": format!("cat >/dev/null; echo '{rewrite}'")}]),
    ));
    let input = json!({"conversation_id": "c", "hook_event_name": "beforeShellExecution",
                       "command": "rm -rf ./build", "cwd": "/w"});
    let run = env.run(&["dispatch", "--format", "cursor"], &input.to_string());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = answer(&run);
    assert_eq!(v["permission"], "deny", "{v}");
    assert!(
        v["userMessage"]
            .as_str()
            .unwrap_or("")
            .contains("--dry-run"),
        "the rewrite is shown: {v}"
    );
    // Control: Gemini takes the rewrite.
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                       "tool_input": {"command": "rm -rf ./build"}});
    let run = env.run(&["dispatch", "--format", "gemini"], &input.to_string());
    let v = answer(&run);
    assert_ne!(v["decision"], "deny", "{v}");
    assert_eq!(
        v["hookSpecificOutput"]["tool_input"]["command"],
        "rm -rf ./build --dry-run"
    );
}
