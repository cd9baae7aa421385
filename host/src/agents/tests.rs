//! The adapters held to their tables: every event an adapter maps dispatches to an event
//! hookhost knows, and for every such event every field of an outcome is either
//! expressed in the agent's answer or noticed in its visible channel (a generating test:
//! a new event row or a new [`Field`] is covered without a new test).

use serde_json::{Value, json};

use super::contract::Field;
use super::vocabulary::{EVENTS, TOOLS};
use super::{Agent, AgentResponse, Call, render, to_canonical};
use crate::event::EventCatalogue;
use crate::outcome::{Decision, Notice, Outcome};

/// A token that a field's value carries, to find it in the answer.
const TOKEN: &str = "tok3n";

/// An outcome of `event` that sets `field` (and only what `field` needs).
fn outcome_with(event: &str, field: Field) -> Outcome {
    let mut o = Outcome::empty(event);
    match field {
        Field::Decision => o.decision = Decision::Deny,
        Field::Reason => o.reason = Some(format!("reason {TOKEN}")),
        Field::Continue => o.continue_ = false,
        Field::StopReason => {
            o.continue_ = false;
            o.stop_reason = Some(format!("stop {TOKEN}"));
        }
        Field::AdditionalContext => o.additional_context = vec![format!("context {TOKEN}")],
        Field::SystemMessages => o.system_messages = vec![format!("message {TOKEN}")],
        Field::UpdatedInput => o.updated_input = Some(json!({"command": TOKEN})),
        Field::UpdatedToolOutput => o.updated_tool_output = Some(json!(TOKEN)),
        Field::UpdatedPrompt => o.updated_prompt = Some(TOKEN.into()),
        Field::Skip => {
            o.skip = true;
            o.skip_result = Some(json!(TOKEN));
        }
        Field::HookSpecificOutput => {
            o.hook_specific_output
                .insert("sessionTitle".into(), json!(TOKEN));
        }
        Field::Notices => o.notices.push(Notice {
            hook: "h".into(),
            message: format!("notice {TOKEN}"),
        }),
    }
    o
}

/// Whether the answer says the call is denied or blocked, in the agent's words.
fn blocks(agent: Agent, r: &AgentResponse) -> bool {
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    match agent {
        Agent::Codex => {
            v["hookSpecificOutput"]["permissionDecision"] == "deny"
                || v["decision"] == "block"
                || v["hookSpecificOutput"]["decision"]["behavior"] == "deny"
        }
        Agent::Gemini => v["decision"] == "deny" || v["decision"] == "block",
        Agent::Copilot => v["permissionDecision"] == "deny",
        Agent::Cursor => v["permission"] == "deny" || v["continue"] == false,
        Agent::OpenCode => v["block"].is_string() || v["context"].is_array(),
    }
}

/// Whether the answer has a notice (in any channel) that mentions `what`.
fn noticed(r: &AgentResponse, what: &str) -> bool {
    let all = format!("{}\n{}", r.stdout, r.stderr);
    all.lines()
        .any(|l| l.contains("hookhost:") && l.contains(what))
}

#[test]
fn every_mapped_event_is_one_hookhost_knows() {
    let catalogue = EventCatalogue::default();
    for event in EVENTS {
        assert!(
            catalogue.get(event.canonical).is_some(),
            "{:?} {} maps to {}, which hookhost does not know",
            event.agent,
            event.name,
            event.canonical
        );
        if let Some(tool) = event.implied_tool {
            assert!(
                TOOLS
                    .iter()
                    .any(|t| t.agent == event.agent && t.canonical == tool),
                "{} implies {tool}, which its tool table lacks",
                event.name
            );
        }
    }
    for agent in Agent::ALL {
        assert!(
            EVENTS.iter().any(|e| e.agent == agent),
            "{agent:?} maps no event"
        );
        assert_eq!(Agent::from_id(agent.id()), Some(agent));
    }
}

#[test]
fn every_outcome_field_is_expressed_or_noticed_for_every_mapped_event() {
    for event in EVENTS {
        for field in Field::ALL {
            let o = outcome_with(event.canonical, field);
            let r = render(event.agent, event, &Call::default(), &o);
            let what = format!("{:?} {} {field:?}", event.agent, event.name);
            assert_eq!(r.exit_code, 0, "{what}: JSON answers exit 0");
            if !r.stdout.is_empty() {
                let v: Value = serde_json::from_str(&r.stdout)
                    .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}): {}", r.stdout));
                assert!(v.is_object(), "{what}");
            }
            if field == Field::Decision {
                // A deny either blocks in the agent's words or is noticed.
                assert!(
                    blocks(event.agent, &r) || noticed(&r, "`deny`"),
                    "{what}: a deny neither blocks nor is noticed: {r:?}"
                );
            } else if field == Field::Continue {
                let v: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
                assert!(
                    v["continue"] == false || noticed(&r, "continue: false"),
                    "{what}: {r:?}"
                );
            } else {
                assert!(
                    r.stdout.contains(TOKEN) || r.stderr.contains(TOKEN),
                    "{what}: the value is neither expressed nor noticed: {r:?}"
                );
            }
        }
    }
}

#[test]
fn ask_and_defer_never_weaken_a_guard() {
    for event in EVENTS.iter().filter(|e| e.canonical == "PreToolUse") {
        for decision in [Decision::Ask, Decision::Defer] {
            let mut o = Outcome::empty("PreToolUse");
            o.decision = decision;
            let r = render(event.agent, event, &Call::default(), &o);
            let v: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
            let asks = v["decision"] == "ask"
                || v["permissionDecision"] == "ask"
                || v["permission"] == "ask";
            assert!(
                asks || blocks(event.agent, &r),
                "{:?} {} {decision:?}: neither asks nor denies: {r:?}",
                event.agent,
                event.name
            );
        }
    }
}

#[test]
fn inputs_come_in_as_claude_codes_words() {
    let cases = [
        (
            Agent::Gemini,
            None,
            json!({"hook_event_name": "BeforeTool", "session_id": "s", "cwd": "/w",
                   "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf /"}}),
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/w",
                   "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}),
        ),
        (
            Agent::Copilot,
            Some("preToolUse"),
            json!({"sessionId": "s", "timestamp": 1, "cwd": "/w", "toolName": "bash",
                   "toolArgs": "{\"command\":\"ls\",\"description\":\"d\"}"}),
            json!({"session_id": "s", "timestamp": 1, "cwd": "/w", "tool_name": "Bash",
                   "tool_input": {"command": "ls", "description": "d"},
                   "hook_event_name": "PreToolUse"}),
        ),
        (
            Agent::Cursor,
            None,
            json!({"hook_event_name": "beforeShellExecution", "conversation_id": "c",
                   "generation_id": "g", "command": "rm -rf ~", "cwd": "/w",
                   "workspace_roots": ["/w"]}),
            json!({"hook_event_name": "PreToolUse", "session_id": "c", "generation_id": "g",
                   "cwd": "/w", "workspace_roots": ["/w"], "tool_name": "Bash",
                   "tool_input": {"command": "rm -rf ~"}}),
        ),
        (
            Agent::Cursor,
            None,
            json!({"hook_event_name": "beforeMCPExecution", "conversation_id": "c",
                   "tool_name": "query", "tool_input": "{\"sql\":\"drop\"}", "url": "u"}),
            json!({"hook_event_name": "PreToolUse", "session_id": "c", "url": "u",
                   "tool_name": "mcp__cursor__query", "tool_input": {"sql": "drop"}}),
        ),
        (
            Agent::OpenCode,
            None,
            json!({"event": "tool.execute.before", "tool": "edit", "sessionID": "s",
                   "callID": "k", "directory": "/w",
                   "args": {"filePath": "/w/a", "oldString": "x", "newString": "y"}}),
            json!({"hook_event_name": "PreToolUse", "tool_name": "Edit", "session_id": "s",
                   "tool_use_id": "k", "cwd": "/w",
                   "tool_input": {"file_path": "/w/a", "old_string": "x", "new_string": "y"}}),
        ),
        (
            Agent::Codex,
            None,
            json!({"hook_event_name": "PreToolUse", "tool_name": "exec_command",
                   "tool_input": {"cmd": "ls"}}),
            json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                   "tool_input": {"command": "ls"}}),
        ),
    ];
    for (agent, named, input, expected) in cases {
        let c = to_canonical(agent, named, input).unwrap();
        let mut got = c.input.as_object().unwrap().clone();
        let mut want = expected.as_object().unwrap().clone();
        got.sort_keys();
        want.sort_keys();
        assert_eq!(got, want, "{agent:?}");
    }
    let e = to_canonical(Agent::Gemini, Some("Nope"), json!({})).unwrap_err();
    assert!(e.contains("BeforeTool"), "{e}");
    let e = to_canonical(Agent::Copilot, None, json!({})).unwrap_err();
    assert!(e.contains("name the"), "{e}");
}

#[test]
fn a_rewrite_goes_back_in_the_agents_argument_names() {
    let input = json!({"event": "tool.execute.before", "tool": "edit",
                       "args": {"filePath": "/w/a", "oldString": "x", "newString": "y"}});
    let c = to_canonical(Agent::OpenCode, None, input).unwrap();
    let mut o = Outcome::empty("PreToolUse");
    // `replace_all` came in under no name: it goes back through the table.
    o.updated_input = Some(
        json!({"file_path": "/w/b", "old_string": "x", "new_string": "z",
                                  "replace_all": true}),
    );
    let r = render(Agent::OpenCode, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["args"],
        json!({"filePath": "/w/b", "oldString": "x", "newString": "z", "replaceAll": true})
    );
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                       "tool_input": {"command": "rm -rf /"}});
    let c = to_canonical(Agent::Gemini, None, input).unwrap();
    o.updated_input = Some(json!({"command": "echo safe"}));
    let r = render(Agent::Gemini, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["tool_input"],
        json!({"command": "echo safe"})
    );
}

/// Red team (issue 30): a rewrite went back through the *first* table row of the
/// canonical tool, whatever name the agent had sent the argument by. Gemini CLI 0.61
/// sends `read_file`'s path as `file_path` and merges the rewrite into the call
/// (`Object.assign`, no schema rejects an unknown key): the rewrite came back as
/// `absolute_path`, which 0.61 ignores, and the unrewritten file was read. Codex's raw
/// `exec_command` (`cmd`) went back as `command` (the first Bash row's). Fixed at
/// `agents::tool_input_for`: an argument goes back under the name it came by.
#[test]
fn a_rewrite_goes_back_under_the_name_the_argument_came_by() {
    let mut o = Outcome::empty("PreToolUse");
    o.updated_input = Some(json!({"file_path": "/dev/null"}));
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "read_file",
                       "tool_input": {"file_path": "/w/.env"}});
    let c = to_canonical(Agent::Gemini, None, input).unwrap();
    let r = render(Agent::Gemini, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["tool_input"],
        json!({"file_path": "/dev/null"}),
        "{r:?}"
    );
    // An older Gemini's `absolute_path` goes back as `absolute_path`.
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "read_file",
                       "tool_input": {"absolute_path": "/w/.env"}});
    let c = to_canonical(Agent::Gemini, None, input).unwrap();
    let r = render(Agent::Gemini, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["tool_input"],
        json!({"absolute_path": "/dev/null"})
    );
    let input = json!({"hook_event_name": "PreToolUse", "tool_name": "exec_command",
                       "tool_input": {"cmd": "rm -rf /"}});
    let c = to_canonical(Agent::Codex, None, input).unwrap();
    o.updated_input = Some(json!({"command": "echo safe"}));
    let r = render(Agent::Codex, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["updatedInput"],
        json!({"cmd": "echo safe"})
    );
}

/// Red team (issue 30): the model writes the arguments, and Gemini CLI 0.61 accepts an
/// unknown one: `read_file` with `file_path` (which 0.61 reads) and `absolute_path` (the
/// name the table maps to `file_path`) had the rename overwrite `file_path`, so a rule
/// saw the harmless path while Gemini read the secret one. Fixed at
/// `agents::to_canonical_args`: two arguments that take one canonical name with different
/// values are refused (the dispatch then blocks, `cli/dispatch.rs`).
#[test]
fn two_arguments_for_one_canonical_name_are_refused() {
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "read_file",
                       "tool_input": {"file_path": "/w/.env", "absolute_path": "/w/README"}});
    let e = to_canonical(Agent::Gemini, None, input).unwrap_err();
    assert!(e.contains("twice"), "{e}");
    // The same value under both names is one argument.
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "read_file",
                       "tool_input": {"file_path": "/w/a", "absolute_path": "/w/a"}});
    let c = to_canonical(Agent::Gemini, None, input).unwrap();
    assert_eq!(c.input["tool_input"], json!({"file_path": "/w/a"}));
    let input = json!({"event": "tool.execute.before", "tool": "edit",
                       "args": {"filePath": "/w/a", "file_path": "/w/b"}});
    assert!(to_canonical(Agent::OpenCode, None, input).is_err());
}

/// Red team (issue 30): JSON text arguments (Copilot's `toolArgs` as its reference
/// writes it, Cursor's MCP `tool_input`) were read with a plain `serde_json::from_str`,
/// which refuses a lone surrogate escape that the agent's `JSON.parse` reads: the text
/// stayed a string, and a rule saw no `command`. Fixed in `agents::to_canonical`: the
/// input's own reader (`dispatch::input::parse`, which repairs it) reads the text.
#[test]
fn json_text_arguments_are_read_as_the_input_is() {
    let input = json!({"sessionId": "s", "toolName": "bash",
                       "toolArgs": "{\"command\":\"rm -rf / #\\ud800\"}"});
    let c = to_canonical(Agent::Copilot, Some("preToolUse"), input).unwrap();
    let command = c.input["tool_input"]["command"]
        .as_str()
        .unwrap_or_default();
    assert!(command.starts_with("rm -rf / #"), "{}", c.input);
}

/// Red team (issue 30): the real clients' tool names, decided once each. Gemini CLI 0.61
/// names its grep tool `grep_search` (the table had only the legacy alias), OpenCode
/// offers GPT models `apply_patch`, Copilot has `grep` and `glob`; `agents_real` holds
/// the table to what each client offers.
#[test]
fn every_tool_is_mapped_or_kept_never_both() {
    use super::vocabulary::{OWN_NAMES, decided, tool_named};
    for &(agent, name) in OWN_NAMES {
        assert!(tool_named(agent, name).is_none(), "{agent:?} {name}: both");
    }
    for (agent, name, canonical) in [
        (Agent::Gemini, "grep_search", "Grep"),
        (Agent::OpenCode, "apply_patch", "Edit"),
        (Agent::Copilot, "grep", "Grep"),
    ] {
        assert!(decided(agent, name));
        assert_eq!(tool_named(agent, name).unwrap().canonical, canonical);
    }
    assert!(!decided(Agent::Gemini, "no_such_tool"));
}

/// Red team (issue 30): the Copilot contract added `permissionDecision: "allow"` to every
/// rewrite without a decision, so a hook that only rewrote (Claude Code: no approval)
/// approved the call past Copilot's own permission prompt (measured with Copilot CLI
/// 1.0.102 without `--allow-all-tools`: the rewritten command ran where the same call
/// with no hook answer was denied, "no one to approve"; `modifiedArgs` alone is applied).
/// Fixed at `contract::copilot`.
#[test]
fn a_rewrite_alone_approves_nothing_on_copilot() {
    let event = super::vocabulary::event(Agent::Copilot, "preToolUse").unwrap();
    let mut o = Outcome::empty("PreToolUse");
    o.updated_input = Some(json!({"command": "ls -la"}));
    let r = render(Agent::Copilot, event, &Call::default(), &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["modifiedArgs"], json!({"command": "ls -la"}));
    assert!(v.get("permissionDecision").is_none(), "{v}");
    o.decision = Decision::Allow;
    let r = render(Agent::Copilot, event, &Call::default(), &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["permissionDecision"], "allow");
}

/// Red team (issue 30): Gemini CLI 0.61 names an MCP tool `mcp_SERVER_TOOL`, so a matcher
/// written once as Claude Code's `mcp__github__.*` never saw a Gemini MCP call. Its input
/// carries `mcp_context` (`server_name`, `tool_name`): the adapter names the call
/// `mcp__SERVER__TOOL` (`agents::mcp_name`).
#[test]
fn a_gemini_mcp_call_takes_claude_codes_mcp_name() {
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "mcp_github_delete_repo",
                       "tool_input": {"repo": "r"},
                       "mcp_context": {"server_name": "github", "tool_name": "delete_repo",
                                       "command": "npx"}});
    let c = to_canonical(Agent::Gemini, None, input).unwrap();
    assert_eq!(c.input["tool_name"], "mcp__github__delete_repo");
    assert_eq!(c.input["tool_input"], json!({"repo": "r"}));
    // A built-in tool is not touched.
    let input = json!({"hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                       "tool_input": {"command": "ls"}});
    let c = to_canonical(Agent::Gemini, None, input).unwrap();
    assert_eq!(c.input["tool_name"], "Bash");
}

/// Red team (issue 30): Copilot CLI 1.0.102's `write_bash` types text into a running
/// `bash` session (`bash` with `mode: "async"` starts one): a command a `Bash(rm -rf *)`
/// guard never saw under its own name. Mapped to `Bash`, its `input` read as `command`,
/// and a rewrite goes back as `input`.
#[test]
fn text_typed_into_a_copilot_shell_is_a_bash_call() {
    let input = json!({"sessionId": "s", "toolName": "write_bash",
                       "toolArgs": {"shellId": "1", "input": "rm -rf ~\n"}});
    let c = to_canonical(Agent::Copilot, Some("preToolUse"), input).unwrap();
    assert_eq!(c.input["tool_name"], "Bash");
    assert_eq!(c.input["tool_input"]["command"], "rm -rf ~\n");
    let mut o = Outcome::empty("PreToolUse");
    o.updated_input = Some(json!({"shellId": "1", "command": "echo no\n"}));
    let r = render(Agent::Copilot, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["modifiedArgs"],
        json!({"shellId": "1", "input": "echo no\n"})
    );
}

/// A shell command sent as an argument vector (Codex's raw `shell`) is one command line
/// for the guards, each word quoted: `Bash(rm -rf *)` sees `rm -rf /` inside `bash -lc`;
/// a rewrite goes back as the vector's own shell running the new line, an unchanged line
/// as the vector that came; a word that is not text is refused.
#[test]
fn a_shell_argument_vector_is_one_command_line() {
    let input = json!({"hook_event_name": "PreToolUse", "tool_name": "shell",
                       "tool_input": {"command": ["bash", "-lc", "rm -rf /"], "workdir": "/w"}});
    let c = to_canonical(Agent::Codex, None, input).unwrap();
    assert_eq!(c.input["tool_name"], "Bash");
    assert_eq!(c.input["tool_input"]["command"], "bash -lc 'rm -rf /'");
    let rule = crate::matcher::IfRule::parse("Bash(rm -rf *)", None).unwrap();
    assert!(rule.matches(
        "Bash",
        &c.input["tool_input"],
        std::path::Path::new("/w"),
        std::path::Path::new("/w")
    ));
    let mut o = Outcome::empty("PreToolUse");
    o.updated_input = Some(json!({"command": "echo safe", "workdir": "/w"}));
    let r = render(Agent::Codex, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["updatedInput"]["command"],
        json!(["bash", "-lc", "echo safe"])
    );
    o.updated_input = Some(json!({"command": "bash -lc 'rm -rf /'", "workdir": "/x"}));
    let r = render(Agent::Codex, c.event, &c.call, &o);
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["updatedInput"]["command"],
        json!(["bash", "-lc", "rm -rf /"])
    );
    let input = json!({"hook_event_name": "PreToolUse", "tool_name": "shell",
                       "tool_input": {"command": ["bash", 1]}});
    assert!(to_canonical(Agent::Codex, None, input).is_err());
}

/// Red team (stop 38): argument vectors that are not `bash -lc LINE` still show the
/// guard what runs (`Bash(rm -rf *)` sees `rm -rf /` whatever the vector's program or
/// shape), and a rewrite of a vector whose program merely takes a `-c` (`python3 -c
/// CODE`) runs the hook's line in a shell, not as that program's argument: it went back
/// as `["python3", "-c", LINE]` (Python running the shell line as code). Fixed at
/// `argv_back`: only a shell's `-c`/`-lc` is kept.
#[test]
fn vectors_that_are_not_bash_lc_are_seen_and_rewritten_as_written() {
    let rule = crate::matcher::IfRule::parse("Bash(rm -rf *)", None).unwrap();
    let canonical = |argv: Value| {
        let input = json!({"hook_event_name": "PreToolUse", "tool_name": "shell",
                           "tool_input": {"command": argv}});
        to_canonical(Agent::Codex, None, input).unwrap()
    };
    for argv in [
        json!(["rm", "-rf", "/"]),
        json!(["env", "bash", "-c", "rm -rf /"]),
        json!(["/bin/sh", "-c", "echo ok\nrm -rf /"]),
        json!(["sh", "-c", "rm -rf /", "arg0"]),
        json!(["bash", "-c", "rm -rf \"$1\"", "_", "/"]),
        json!(["/usr/bin/env", "-S", "bash -c 'rm -rf /'"]),
        json!(["rm", "-rf", "/\n"]),
        json!(["bash", "-lc", "echo 'it''s'; rm -rf /"]),
    ] {
        let c = canonical(argv.clone());
        assert!(
            rule.matches(
                "Bash",
                &c.input["tool_input"],
                std::path::Path::new("/w"),
                std::path::Path::new("/w")
            ),
            "{argv} as {}",
            c.input["tool_input"]["command"]
        );
    }
    let back = |argv: Value, line: &str| {
        let c = canonical(argv);
        let mut o = Outcome::empty("PreToolUse");
        o.updated_input = Some(json!({"command": line}));
        let r = render(Agent::Codex, c.event, &c.call, &o);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        v["hookSpecificOutput"]["updatedInput"]["command"].clone()
    };
    assert_eq!(
        back(json!(["python3", "-c", "print(1)"]), "echo hi"),
        json!(["bash", "-lc", "echo hi"])
    );
    assert_eq!(
        back(json!(["git", "-c", "x=y"]), "git status"),
        json!(["bash", "-lc", "git status"])
    );
    assert_eq!(
        back(json!(["/bin/sh", "-c", "rm -rf /"]), "echo hi"),
        json!(["/bin/sh", "-c", "echo hi"])
    );
    assert_eq!(
        back(json!([]), "echo hi"),
        json!(["bash", "-lc", "echo hi"])
    );
}
