//! The one place where each agent's words meet hookhost's (Claude Code's): event names,
//! the tool an event implies, tool names, and the field names of the input and of each
//! tool's arguments. Both directions read these tables: [`super::to_canonical`] maps the
//! agent's words to the canonical ones, and [`super::render`] maps a rewritten tool input
//! back to the agent's argument names. A name no table lists passes through unchanged,
//! so a matcher may still name an agent's own tool.
//!
//! Versions followed (other-agents.md, measured 2026-12-01): Codex CLI 0.171.0, Gemini
//! CLI 0.61.0, GitHub Copilot CLI 1.0.102, OpenCode 1.18.33 (through hookhost's plugin),
//! Cursor's published hooks reference (Cursor 1.7, hooks beta).

use super::Agent;

/// One event of an agent: its name, the canonical event, and the tool it implies when
/// the agent's input names none (Cursor's `beforeShellExecution` is a `Bash` call).
#[derive(Debug, Clone, Copy)]
pub struct EventName {
    /// The agent.
    pub agent: Agent,
    /// The agent's event name.
    pub name: &'static str,
    /// hookhost's (Claude Code's) event name.
    pub canonical: &'static str,
    /// The canonical tool the event is about, when the input has no tool name.
    pub implied_tool: Option<&'static str>,
}

const fn ev(agent: Agent, name: &'static str, canonical: &'static str) -> EventName {
    EventName {
        agent,
        name,
        canonical,
        implied_tool: None,
    }
}

const fn tool_ev(
    agent: Agent,
    name: &'static str,
    canonical: &'static str,
    tool: &'static str,
) -> EventName {
    EventName {
        agent,
        name,
        canonical,
        implied_tool: Some(tool),
    }
}

use Agent::{Codex, Copilot, Cursor, Gemini, OpenCode};

/// Every event an adapter maps.
pub const EVENTS: &[EventName] = &[
    // Codex 0.171.0: Claude Code's names.
    ev(Codex, "SessionStart", "SessionStart"),
    ev(Codex, "UserPromptSubmit", "UserPromptSubmit"),
    ev(Codex, "PreToolUse", "PreToolUse"),
    ev(Codex, "PermissionRequest", "PermissionRequest"),
    ev(Codex, "PostToolUse", "PostToolUse"),
    ev(Codex, "PreCompact", "PreCompact"),
    ev(Codex, "PostCompact", "PostCompact"),
    ev(Codex, "SubagentStart", "SubagentStart"),
    ev(Codex, "SubagentStop", "SubagentStop"),
    ev(Codex, "Stop", "Stop"),
    // Gemini CLI 0.61.0.
    ev(Gemini, "SessionStart", "SessionStart"),
    ev(Gemini, "SessionEnd", "SessionEnd"),
    ev(Gemini, "BeforeAgent", "UserPromptSubmit"),
    ev(Gemini, "AfterAgent", "Stop"),
    ev(Gemini, "BeforeTool", "PreToolUse"),
    ev(Gemini, "AfterTool", "PostToolUse"),
    ev(Gemini, "PreCompress", "PreCompact"),
    ev(Gemini, "Notification", "Notification"),
    // GitHub Copilot CLI 1.0.102.
    ev(Copilot, "sessionStart", "SessionStart"),
    ev(Copilot, "sessionEnd", "SessionEnd"),
    ev(Copilot, "userPromptSubmitted", "UserPromptSubmit"),
    ev(Copilot, "preToolUse", "PreToolUse"),
    ev(Copilot, "postToolUse", "PostToolUse"),
    ev(Copilot, "errorOccurred", "StopFailure"),
    // Cursor (hooks reference, Cursor 1.7).
    tool_ev(Cursor, "beforeShellExecution", "PreToolUse", "Bash"),
    ev(Cursor, "beforeMCPExecution", "PreToolUse"),
    tool_ev(Cursor, "beforeReadFile", "PreToolUse", "Read"),
    tool_ev(Cursor, "afterFileEdit", "PostToolUse", "Edit"),
    ev(Cursor, "beforeSubmitPrompt", "UserPromptSubmit"),
    ev(Cursor, "stop", "Stop"),
    // OpenCode 1.18.33, through the plugin `hookhost install --opencode` writes.
    ev(OpenCode, "tool.execute.before", "PreToolUse"),
    ev(OpenCode, "tool.execute.after", "PostToolUse"),
    ev(OpenCode, "session.idle", "Stop"),
];

/// A tool of an agent, its canonical name, and its argument names that differ
/// (`(agent's, canonical)`).
#[derive(Debug, Clone, Copy)]
pub struct ToolName {
    /// The agent.
    pub agent: Agent,
    /// The agent's tool name.
    pub name: &'static str,
    /// The canonical (Claude Code) tool name.
    pub canonical: &'static str,
    /// Argument renames, agent's name first.
    pub args: &'static [(&'static str, &'static str)],
}

const fn tool(
    agent: Agent,
    name: &'static str,
    canonical: &'static str,
    args: &'static [(&'static str, &'static str)],
) -> ToolName {
    ToolName {
        agent,
        name,
        canonical,
        args,
    }
}

/// Every tool an adapter maps. The first row of an agent for a canonical tool is the one
/// a rewrite goes back through.
pub const TOOLS: &[ToolName] = &[
    // Codex: hooks already see `Bash` with `command` for its shell tools; the raw names
    // are mapped too.
    tool(Codex, "Bash", "Bash", &[]),
    tool(Codex, "exec_command", "Bash", &[("cmd", "command")]),
    tool(Codex, "shell", "Bash", &[]),
    tool(Codex, "local_shell", "Bash", &[]),
    tool(Codex, "apply_patch", "Edit", &[]),
    // Gemini: snake_case arguments like Claude Code's.
    tool(Gemini, "run_shell_command", "Bash", &[]),
    tool(Gemini, "write_file", "Write", &[]),
    tool(Gemini, "replace", "Edit", &[]),
    tool(
        Gemini,
        "read_file",
        "Read",
        &[("absolute_path", "file_path")],
    ),
    tool(Gemini, "glob", "Glob", &[]),
    // 0.61's name; `search_file_content` is its legacy alias.
    tool(Gemini, "grep_search", "Grep", &[]),
    tool(Gemini, "search_file_content", "Grep", &[]),
    tool(Gemini, "list_directory", "LS", &[]),
    tool(Gemini, "web_fetch", "WebFetch", &[]),
    tool(Gemini, "google_web_search", "WebSearch", &[]),
    tool(Gemini, "write_todos", "TodoWrite", &[]),
    // Copilot CLI.
    tool(Copilot, "bash", "Bash", &[]),
    // Text typed into a running `bash` session (`shellId`, `input`; 1.0.102 checks it
    // as a shell call, `subtype: "write_shell"`): what a Bash guard must see too.
    tool(Copilot, "write_bash", "Bash", &[("input", "command")]),
    tool(
        Copilot,
        "edit",
        "Edit",
        &[
            ("path", "file_path"),
            ("old_str", "old_string"),
            ("new_str", "new_string"),
        ],
    ),
    tool(
        Copilot,
        "create",
        "Write",
        &[("path", "file_path"), ("file_text", "content")],
    ),
    tool(Copilot, "view", "Read", &[("path", "file_path")]),
    tool(Copilot, "grep", "Grep", &[]),
    tool(Copilot, "glob", "Glob", &[]),
    // Cursor: the tool is implied by the event (table above); the arguments are the
    // input's own top-level fields, listed here.
    tool(Cursor, "shell", "Bash", &[("command", "command")]),
    tool(
        Cursor,
        "read",
        "Read",
        &[("file_path", "file_path"), ("content", "content")],
    ),
    tool(
        Cursor,
        "edit",
        "Edit",
        &[("file_path", "file_path"), ("edits", "edits")],
    ),
    // OpenCode: camelCase arguments.
    tool(OpenCode, "bash", "Bash", &[]),
    tool(
        OpenCode,
        "edit",
        "Edit",
        &[
            ("filePath", "file_path"),
            ("oldString", "old_string"),
            ("newString", "new_string"),
            ("replaceAll", "replace_all"),
        ],
    ),
    tool(OpenCode, "write", "Write", &[("filePath", "file_path")]),
    // Offered instead of `edit` and `write` to GPT models (measured with `gpt-5.1-codex`):
    // an edit, its patch as is (`patchText`), as Codex's.
    tool(OpenCode, "apply_patch", "Edit", &[]),
    tool(OpenCode, "read", "Read", &[("filePath", "file_path")]),
    tool(OpenCode, "glob", "Glob", &[]),
    tool(OpenCode, "grep", "Grep", &[]),
    tool(OpenCode, "list", "LS", &[]),
    tool(OpenCode, "webfetch", "WebFetch", &[]),
    tool(OpenCode, "todowrite", "TodoWrite", &[]),
    tool(OpenCode, "task", "Task", &[]),
];

/// The tools the real clients offer their model that keep their own name in hooks:
/// hookhost has no canonical tool that means the same, so only a matcher naming the
/// agent's tool sees them. With [`TOOLS`], every tool each client offers is decided:
/// `agents_real`'s control runs read the tools the client sends the model server and fail
/// on one that is in neither (a client upgrade that renames its grep tool, or adds a
/// patch tool, must not leave a guard on `Grep` or `Edit` silently unmatched).
pub const OWN_NAMES: &[(Agent, &str)] = &[
    // Codex 0.171 names its shell `Bash` in hooks; `write_stdin` (input to a running
    // `exec_command` session) reaches no hook at all: docs/book/src/agents/codex.md.
    (Codex, "write_stdin"),
    (Codex, "request_user_input"),
    (Codex, "view_image"),
    (Codex, "multi_agent_v1"),
    (Codex, "get_goal"),
    (Codex, "create_goal"),
    (Codex, "update_goal"),
    (Codex, "web_search"),
    (Gemini, "update_topic"),
    (Gemini, "list_background_processes"),
    (Gemini, "read_background_output"),
    (Gemini, "enter_plan_mode"),
    (Gemini, "invoke_agent"),
    (Gemini, "activate_skill"),
    (Copilot, "read_bash"),
    (Copilot, "stop_bash"),
    (Copilot, "list_bash"),
    (Copilot, "fetch_copilot_cli_documentation"),
    (Copilot, "skill"),
    (Copilot, "sql"),
    (Copilot, "session_store_sql"),
    (Copilot, "read_agent"),
    (Copilot, "list_agents"),
    (Copilot, "write_agent"),
    (Copilot, "task"),
    (OpenCode, "skill"),
];

/// Whether the agent's tool `name` is decided: mapped ([`TOOLS`]) or kept under its own
/// name ([`OWN_NAMES`]).
pub fn decided(agent: Agent, name: &str) -> bool {
    tool_named(agent, name).is_some() || OWN_NAMES.contains(&(agent, name))
}

/// Top-level input fields whose names differ, `(agent's, canonical)`.
pub fn input_fields(agent: Agent) -> &'static [(&'static str, &'static str)] {
    match agent {
        Codex | Gemini => &[],
        Copilot => &[
            ("sessionId", "session_id"),
            ("toolName", "tool_name"),
            ("toolArgs", "tool_input"),
            ("toolResult", "tool_response"),
        ],
        Cursor => &[("conversation_id", "session_id")],
        OpenCode => &[
            ("sessionID", "session_id"),
            ("tool", "tool_name"),
            ("args", "tool_input"),
            ("callID", "tool_use_id"),
            ("directory", "cwd"),
            ("output", "tool_response"),
        ],
    }
}

/// The field of the input that names the agent's event (Copilot's input names none: the
/// drop-in passes it on the command line).
pub fn event_field(agent: Agent) -> Option<&'static str> {
    match agent {
        Codex | Gemini | Cursor => Some("hook_event_name"),
        OpenCode => Some("event"),
        Copilot => None,
    }
}

/// The agent's event of that name.
pub fn event(agent: Agent, name: &str) -> Option<&'static EventName> {
    EVENTS.iter().find(|e| e.agent == agent && e.name == name)
}

/// The agent's tool of that name.
pub fn tool_named(agent: Agent, name: &str) -> Option<&'static ToolName> {
    TOOLS.iter().find(|t| t.agent == agent && t.name == name)
}

/// The agent's tool for a canonical tool name (the first row), for the way back.
pub fn tool_for(agent: Agent, canonical: &str) -> Option<&'static ToolName> {
    TOOLS
        .iter()
        .find(|t| t.agent == agent && t.canonical == canonical)
}
