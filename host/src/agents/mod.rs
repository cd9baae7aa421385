//! Adapters for agents other than Claude Code: `hookhost dispatch --format
//! codex|gemini|copilot|cursor|opencode`. In: the agent's hook input, its event, tool and
//! field names mapped into hookhost's canonical (Claude Code) vocabulary
//! ([`to_canonical`], by the tables of [`vocabulary`]), so that a matcher `Bash` or an
//! `if` rule `Bash(rm -rf *)` means the same whichever agent calls. Out: the merged
//! [`Outcome`] in the agent's own output contract ([`render`], by [`contract`]); whatever
//! the outcome says that the agent cannot express becomes a notice in the channel the
//! agent shows (never dropped in silence).
//!
//! This room sits beside the pipeline, not in it: the CLI calls [`to_canonical`] before a
//! dispatch and [`render`] after it; it reads the event table and the outcome, nothing
//! reads it.
//!
//! Versions followed: Codex CLI 0.171.0, Gemini CLI 0.61.0, GitHub Copilot CLI 1.0.102,
//! OpenCode 1.18.33, Cursor's published hooks reference (Cursor 1.7). `docs/book/src/agents/`
//! describes each.

pub mod contract;
#[cfg(test)]
mod tests;
pub mod vocabulary;

use serde_json::{Map, Value};

use crate::outcome::Outcome;
use vocabulary::EventName;

/// An agent hookhost adapts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// OpenAI Codex CLI 0.171.0.
    Codex,
    /// Google Gemini CLI 0.61.0.
    Gemini,
    /// GitHub Copilot CLI 1.0.102.
    Copilot,
    /// Cursor (hooks reference of Cursor 1.7).
    Cursor,
    /// OpenCode 1.18.33, through hookhost's plugin.
    OpenCode,
}

impl Agent {
    /// Every agent, in the order the docs list them.
    pub const ALL: [Agent; 5] = [
        Agent::Codex,
        Agent::Gemini,
        Agent::Copilot,
        Agent::Cursor,
        Agent::OpenCode,
    ];

    /// The name `--format` takes and the audit line records.
    pub fn id(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::Copilot => "copilot",
            Agent::Cursor => "cursor",
            Agent::OpenCode => "opencode",
        }
    }

    /// The agent's name for people, with the version its adapter follows.
    pub fn shown(self) -> &'static str {
        match self {
            Agent::Codex => "Codex 0.171",
            Agent::Gemini => "Gemini CLI 0.61",
            Agent::Copilot => "Copilot CLI 1.0.102",
            Agent::Cursor => "Cursor 1.7",
            Agent::OpenCode => "OpenCode 1.18",
        }
    }

    /// The agent named `id` (as [`Agent::id`] writes it).
    pub fn from_id(id: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.id() == id)
    }
}

/// An agent's input in hookhost's vocabulary.
#[derive(Debug, Clone)]
pub struct Canonical {
    /// The agent's event and its canonical name.
    pub event: &'static EventName,
    /// The input, with canonical event, tool and field names.
    pub input: Value,
    /// How the call's arguments came in, for a rewrite to go back the same way.
    pub call: Call,
}

/// How a tool call's arguments came into hookhost's vocabulary: the tool the agent named
/// and, for each argument it sent, its name and the canonical one. A rewrite
/// (`updatedInput`) goes back through exactly these names ([`tool_input_for`]), so an
/// argument goes back under the name the agent sent it by (Gemini CLI 0.61 sends
/// `read_file`'s `file_path`, not the `absolute_path` of older versions, and merges what
/// it gets back into the call: a rewrite under the other name would be ignored and the
/// unrewritten call run).
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// The agent's tool row the call came through, if the table maps it.
    pub tool: Option<&'static vocabulary::ToolName>,
    /// Each argument the agent sent, `(agent's name, canonical name)`.
    pub arrived: Vec<(String, String)>,
    /// A shell command the agent sent as an argument vector, and the one command line
    /// hookhost made of it (each word quoted for the shell).
    pub argv: Option<(Vec<String>, String)>,
}

/// A shell command sent as an argument vector (Codex's raw `shell` and `local_shell`:
/// `["bash", "-lc", "…"]`) as one command line, each word quoted for the shell: what
/// `Bash(rm -rf *)` and a plugin reading `command` must see. `None` when a word is not
/// text.
fn argv_line(words: &[Value]) -> Option<(Vec<String>, String)> {
    let words: Vec<String> = words
        .iter()
        .map(|w| w.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    let line = words
        .iter()
        .map(|w| crate::text::shell_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    Some((words, line))
}

/// The shells whose `-c`/`-lc` runs the next word as a command line, as a rewrite sends
/// it back.
const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh"];

/// The argument vector to send back for the command line `line` of a call that came as
/// `argv` (its line `was`): the vector as it came when the line is unchanged, else the
/// line run by the vector's own shell (`bash -lc LINE`) when it came as a shell's
/// (`[SHELL, -c|-lc, …]`, [`SHELLS`]), else by `bash -lc`. Another program's `-c`
/// (`python3 -c CODE`, `git -c NAME=VALUE`) is not a shell's: the line given to it would
/// not be what the hook wrote.
fn argv_back(argv: &[String], was: &str, line: &str) -> Value {
    if line == was {
        return Value::from(argv.to_vec());
    }
    let is_shell = |program: &str| {
        let name = program.rsplit('/').next().unwrap_or(program);
        SHELLS.contains(&name)
    };
    let shell = match argv {
        [shell, flag, _] if (flag == "-c" || flag == "-lc") && is_shell(shell) => {
            [shell.as_str(), flag.as_str()]
        }
        _ => ["bash", "-lc"],
    };
    Value::from(vec![shell[0], shell[1], line])
}

/// Maps `input`, the hook input `agent` sent for its event `named` (else the one its input
/// names), into hookhost's vocabulary: `hook_event_name`, `tool_name` and the fields of
/// `tool_input` become Claude Code's; every other field stays as the agent wrote it.
///
/// # Errors
///
/// An input that is not an object, an event the adapter does not map (the message lists
/// the ones it does).
pub fn to_canonical(agent: Agent, named: Option<&str>, input: Value) -> Result<Canonical, String> {
    let Value::Object(mut fields) = input else {
        return Err(format!(
            "the {} hook input is not a JSON object",
            agent.shown()
        ));
    };
    let from_input = vocabulary::event_field(agent)
        .and_then(|f| fields.get(f))
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(name) = named.map(str::to_string).or(from_input) else {
        return Err(format!(
            "name the {} event (`hookhost dispatch --format {} EVENT`): its input names none",
            agent.shown(),
            agent.id()
        ));
    };
    let Some(event) = vocabulary::event(agent, &name) else {
        let known: Vec<&str> = vocabulary::EVENTS
            .iter()
            .filter(|e| e.agent == agent)
            .map(|e| e.name)
            .collect();
        return Err(format!(
            "`{}` is not a {} event hookhost maps (it maps {})",
            crate::text::escape(&name),
            agent.shown(),
            known.join(", ")
        ));
    };
    for &(theirs, ours) in vocabulary::input_fields(agent) {
        if let Some(value) = fields.shift_remove(theirs) {
            fields.insert(ours.to_string(), value);
        }
    }
    if let Some(field) = vocabulary::event_field(agent)
        && field != "hook_event_name"
    {
        fields.shift_remove(field);
    }
    // An argument object sent as JSON text (Copilot's `toolArgs` in its reference,
    // Cursor's MCP `tool_input`) is read as the object, by the reader of the input itself
    // (a lone surrogate, which the agent's JavaScript reads, must not leave the text
    // unread: a rule would see no `command` where the agent runs one).
    if let Some(Value::String(text)) = fields.get("tool_input")
        && let Ok(args) = crate::dispatch::input::parse(text.as_bytes())
    {
        fields.insert("tool_input".into(), args.value);
    }
    let mut call = Call::default();
    match event.implied_tool {
        // The tool is the event's; its arguments are the input's own fields.
        Some(canonical) => {
            let mut args = Map::new();
            if let Some(tool) = vocabulary::tool_for(agent, canonical) {
                for &(theirs, ours) in tool.args {
                    if let Some(value) = fields.shift_remove(theirs) {
                        args.insert(ours.to_string(), value);
                        call.arrived.push((theirs.into(), ours.into()));
                    }
                }
                call.tool = Some(tool);
            }
            fields.insert("tool_name".into(), Value::String(canonical.into()));
            fields.insert("tool_input".into(), Value::Object(args));
        }
        None => {
            let named_tool = fields
                .get("tool_name")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(name) = named_tool {
                if let Some(mcp) = mcp_name(agent, &fields) {
                    // An MCP tool in Claude Code's form, `mcp__SERVER__TOOL`, so that one
                    // matcher names it for every agent.
                    fields.insert("tool_name".into(), Value::String(mcp));
                } else if agent == Agent::Cursor {
                    // Cursor names the MCP tool alone; Claude Code's form is
                    // `mcp__SERVER__TOOL`, and Cursor's input names no server.
                    fields.insert(
                        "tool_name".into(),
                        Value::String(format!("mcp__cursor__{name}")),
                    );
                } else if let Some(tool) = vocabulary::tool_named(agent, &name) {
                    fields.insert("tool_name".into(), Value::String(tool.canonical.into()));
                    call.tool = Some(tool);
                    if let Some(Value::Object(args)) = fields.get_mut("tool_input") {
                        call.arrived = to_canonical_args(agent, &name, tool, args)?;
                    }
                }
            }
        }
    }
    if fields.get("tool_name").and_then(Value::as_str) == Some("Bash")
        && let Some(Value::Object(args)) = fields.get_mut("tool_input")
        && let Some(Value::Array(words)) = args.get("command")
    {
        let Some((words, line)) = argv_line(words) else {
            return Err(format!(
                "the {} shell call's `command` is an argument vector with a word that is \
                 not text",
                agent.shown()
            ));
        };
        args.insert("command".into(), Value::String(line.clone()));
        call.argv = Some((words, line));
    }
    fields.insert(
        "hook_event_name".into(),
        Value::String(event.canonical.into()),
    );
    Ok(Canonical {
        event,
        input: Value::Object(fields),
        call,
    })
}

/// Claude Code's name of an MCP call, `mcp__SERVER__TOOL`, where the agent's input says
/// which server and tool it is: Gemini CLI 0.61 names an MCP tool `mcp_SERVER_TOOL` (a
/// name that cannot be split back where the server's name has a `_`) and sends
/// `mcp_context` with `server_name` and `tool_name`.
fn mcp_name(agent: Agent, fields: &Map<String, Value>) -> Option<String> {
    if agent != Agent::Gemini {
        return None;
    }
    let context = fields.get("mcp_context")?;
    let server = context.get("server_name")?.as_str()?;
    let tool = context.get("tool_name")?.as_str()?;
    Some(format!("mcp__{server}__{tool}"))
}

/// Renames the arguments `args` of the agent's tool `name` (row `tool`) to the canonical
/// names, and returns how each came in. Two arguments that would take one canonical name
/// with different values (Gemini's `read_file` given `file_path` and `absolute_path`,
/// which the model writes: the agent reads one, and which one depends on its version)
/// are refused: a rule would check one path while the agent reads the other.
fn to_canonical_args(
    agent: Agent,
    name: &str,
    tool: &vocabulary::ToolName,
    args: &mut Map<String, Value>,
) -> Result<Vec<(String, String)>, String> {
    let mut arrived: Vec<(String, String)> = Vec::new();
    let mut renamed = Map::new();
    for (key, value) in std::mem::take(args) {
        let ours = tool
            .args
            .iter()
            .find(|&&(theirs, _)| theirs == key)
            .map_or(key.as_str(), |&(_, ours)| ours)
            .to_string();
        if let Some(before) = renamed.get(&ours) {
            if *before != value {
                let first = arrived
                    .iter()
                    .find(|(_, o)| *o == ours)
                    .map_or(ours.as_str(), |(t, _)| t.as_str());
                return Err(format!(
                    "the {} call of `{}` names its argument `{}` twice with different values \
                     (`{}` and `{}`): which one {} uses cannot be told",
                    agent.shown(),
                    crate::text::escape(name),
                    crate::text::escape(&ours),
                    crate::text::escape(first),
                    crate::text::escape(&key),
                    agent.shown()
                ));
            }
            continue;
        }
        renamed.insert(ours.clone(), value);
        arrived.push((key, ours));
    }
    *args = renamed;
    Ok(arrived)
}

/// A rewritten tool input (canonical names) in the agent's argument names, for the call
/// that came in as `call`: an argument the agent sent goes back under the name it came
/// by, one the rewrite adds through the table row of the agent's tool, any other as is.
pub fn tool_input_for(call: &Call, input: &Value) -> Value {
    let Value::Object(args) = input else {
        return input.clone();
    };
    let back = |key: &str| -> String {
        if let Some((theirs, _)) = call.arrived.iter().find(|(_, ours)| ours == key) {
            return theirs.clone();
        }
        call.tool
            .and_then(|tool| tool.args.iter().find(|&&(_, ours)| ours == key))
            .map_or(key, |&(theirs, _)| theirs)
            .to_string()
    };
    Value::Object(
        args.iter()
            .map(|(k, v)| match (&call.argv, k.as_str(), v) {
                (Some((argv, was)), "command", Value::String(line)) => {
                    (back(k), argv_back(argv, was, line))
                }
                _ => (back(k), v.clone()),
            })
            .collect(),
    )
}

/// What the agent's hook prints and returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentResponse {
    /// stdout (JSON, or empty).
    pub stdout: String,
    /// stderr (notices where the agent has no other channel).
    pub stderr: String,
    /// The exit status.
    pub exit_code: i32,
}

/// The outcome of `event` (an event of `agent`, dispatched for the tool call that came
/// in as `call`) in the agent's output contract.
pub fn render(agent: Agent, event: &EventName, call: &Call, outcome: &Outcome) -> AgentResponse {
    contract::render(agent, event, call, outcome)
}
