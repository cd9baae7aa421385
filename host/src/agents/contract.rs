//! Each agent's output contract: what of an [`Outcome`] it can express for an event, and
//! how. [`render`] asks the agent's contract to express what it can, marking each
//! [`Field`] it expressed; every field the outcome sets that no contract expressed
//! becomes a notice, delivered in the agent's visible channel (`channel`). The
//! generating test (`agents::tests`) holds every mapped event and every field to that.
//!
//! The contracts (other-agents.md, measured with the real clients; Cursor from its
//! published reference):
//! - Codex 0.171.0: Claude Code's JSON at exit 0 (`permissionDecision`, `updatedInput`,
//!   `decision: "block"`, `additionalContext`, `systemMessage`, `continue`); no `ask`.
//! - Gemini CLI 0.61.0: top-level `decision` (`allow`/`deny`/`block`/`ask`) and
//!   `reason`, `hookSpecificOutput.tool_input` merged into the tool's arguments,
//!   `hookSpecificOutput.additionalContext`, `systemMessage`, `continue`/`stopReason`.
//! - Copilot CLI 1.0.102: only `preToolUse` is read: `permissionDecision`,
//!   `permissionDecisionReason`, `modifiedArgs`; an exit 2 loses its reason, so JSON.
//! - Cursor 1.7: `permission` (`allow`/`deny`/`ask`), `userMessage`, `agentMessage` for
//!   shell and MCP; `permission` (`allow`/`deny`) for file reads; `continue` for prompts.
//! - OpenCode 1.18.33: hookhost's plugin reads `{block, args, output, context, notices}`:
//!   it throws `block` (the call fails with that message), assigns `args`, replaces or
//!   appends to the tool's `output`, and prints `notices`.

use serde_json::{Map, Value, json};

use super::vocabulary::EventName;
use super::{Agent, AgentResponse, Call, tool_input_for};
use crate::outcome::{Decision, Outcome};
use crate::text::{escape, escape_multiline};

/// A part of an [`Outcome`] that an agent expresses or is told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `decision`.
    Decision,
    /// `reason`.
    Reason,
    /// `continue: false`.
    Continue,
    /// `stopReason`.
    StopReason,
    /// `additionalContext`.
    AdditionalContext,
    /// `systemMessages`.
    SystemMessages,
    /// `updatedInput`.
    UpdatedInput,
    /// `updatedToolOutput`.
    UpdatedToolOutput,
    /// `updatedPrompt`.
    UpdatedPrompt,
    /// `skip` and `skipResult`.
    Skip,
    /// `hookSpecificOutput`.
    HookSpecificOutput,
    /// `notices`.
    Notices,
}

impl Field {
    /// Every field.
    pub const ALL: [Field; 12] = [
        Field::Decision,
        Field::Reason,
        Field::Continue,
        Field::StopReason,
        Field::AdditionalContext,
        Field::SystemMessages,
        Field::UpdatedInput,
        Field::UpdatedToolOutput,
        Field::UpdatedPrompt,
        Field::Skip,
        Field::HookSpecificOutput,
        Field::Notices,
    ];

    /// Whether the outcome sets it.
    pub fn is_set(self, o: &Outcome) -> bool {
        match self {
            Field::Decision => o.decision != Decision::None,
            Field::Reason => o.reason.is_some(),
            Field::Continue => !o.continue_,
            Field::StopReason => o.stop_reason.is_some(),
            Field::AdditionalContext => !o.additional_context.is_empty(),
            Field::SystemMessages => !o.system_messages.is_empty(),
            Field::UpdatedInput => o.updated_input.is_some(),
            Field::UpdatedToolOutput => o.updated_tool_output.is_some(),
            Field::UpdatedPrompt => o.updated_prompt.is_some(),
            Field::Skip => o.skip,
            Field::HookSpecificOutput => !o.hook_specific_output.is_empty(),
            Field::Notices => !o.notices.is_empty(),
        }
    }

    /// The notice of a field the agent cannot express.
    fn unexpressed(self, o: &Outcome) -> String {
        let text = |v: &Value| cut(&v.to_string());
        match self {
            Field::Decision => format!("the decision `{}`", o.decision.as_str()),
            Field::Reason => format!("the reason: {}", o.reason.as_deref().unwrap_or("")),
            Field::Continue => "the request to stop the agent (`continue: false`)".into(),
            Field::StopReason => {
                format!(
                    "the stop reason: {}",
                    o.stop_reason.as_deref().unwrap_or("")
                )
            }
            Field::AdditionalContext => format!(
                "context for the model: {}",
                cut(&o.additional_context.join("\n\n"))
            ),
            Field::SystemMessages => o.system_messages.join("\n"),
            Field::UpdatedInput => format!(
                "a rewrite of the tool input: {}",
                o.updated_input.as_ref().map(text).unwrap_or_default()
            ),
            Field::UpdatedToolOutput => format!(
                "a rewrite of the tool output: {}",
                o.updated_tool_output.as_ref().map(text).unwrap_or_default()
            ),
            Field::UpdatedPrompt => format!(
                "a rewrite of the prompt: {}",
                cut(o.updated_prompt.as_deref().unwrap_or(""))
            ),
            Field::Skip => format!(
                "an answer in place of the tool (`skip`): {}",
                o.skip_result.as_ref().map(text).unwrap_or_default()
            ),
            Field::HookSpecificOutput => format!(
                "event-specific output: {}",
                text(&Value::Object(o.hook_specific_output.clone()))
            ),
            Field::Notices => o
                .notices
                .iter()
                .map(|n| format!("{}: {}", n.hook, n.message))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// The most characters of one value a notice shows.
const NOTICE_VALUE_CHARS: usize = 2_000;

fn cut(text: &str) -> String {
    match text.char_indices().nth(NOTICE_VALUE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// What a contract builds: the JSON answer, what it expressed, and notices of its own
/// (a decision it expressed differently, saying so).
#[derive(Debug, Default)]
pub struct Answer {
    /// The JSON object for stdout.
    pub json: Map<String, Value>,
    /// The fields expressed.
    pub expressed: Vec<Field>,
    /// Notices the contract adds.
    pub notices: Vec<String>,
}

impl Answer {
    fn set(&mut self, field: Field, key: &str, value: Value) {
        self.json.insert(key.into(), value);
        self.done(field);
    }

    fn done(&mut self, field: Field) {
        if !self.expressed.contains(&field) {
            self.expressed.push(field);
        }
    }

    fn specific(&mut self) -> &mut Map<String, Value> {
        self.json
            .entry("hookSpecificOutput")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("an object")
    }

    /// A blocking decision the agent can only express as a deny (an `ask` or `defer` it
    /// has no word for): the deny, and a notice saying why.
    fn denied_instead(&mut self, agent: Agent, o: &Outcome) {
        self.notices.push(format!(
            "{} hooks cannot `{}`; hookhost denied the call instead",
            agent.shown(),
            o.decision.as_str()
        ));
    }
}

/// Renders `outcome` for `event` of `agent` (`call`: how the tool call came in).
pub fn render(agent: Agent, event: &EventName, call: &Call, outcome: &Outcome) -> AgentResponse {
    let mut answer = Answer::default();
    match agent {
        Agent::Codex => codex(event, call, outcome, &mut answer),
        Agent::Gemini => gemini(event, call, outcome, &mut answer),
        Agent::Copilot => copilot(event, call, outcome, &mut answer),
        Agent::Cursor => cursor(event, outcome, &mut answer),
        Agent::OpenCode => opencode(event, call, outcome, &mut answer),
    }
    // A rewrite of a tool call the agent cannot take (Cursor's shell, MCP and read
    // events) would leave the call to run as it was, which the hook replaced: denied
    // instead, with the rewrite in a notice.
    if event.canonical == "PreToolUse"
        && Field::UpdatedInput.is_set(outcome)
        && !answer.expressed.contains(&Field::UpdatedInput)
        && !outcome.decision.is_blocking()
    {
        let mut denied = outcome.clone();
        denied.decision = Decision::Deny;
        denied.reason = Some(format!(
            "a hook rewrote this call, and {} cannot take a rewrite on {}: denied instead \
             of running the call as it was",
            agent.shown(),
            event.name
        ));
        return render(agent, event, call, &denied);
    }
    let mut notices = std::mem::take(&mut answer.notices);
    for field in Field::ALL {
        if field.is_set(outcome) && !answer.expressed.contains(&field) {
            let text = field.unexpressed(outcome);
            notices.push(match field {
                // The host's and the hooks' own words, as they are.
                Field::Notices | Field::SystemMessages => text,
                _ => format!("{} cannot take {} on {}", agent.shown(), text, event.name),
            });
        }
    }
    channel(agent, outcome, answer, notices)
}

/// Delivers `notices` where the agent shows them, and writes the answer.
fn channel(
    agent: Agent,
    outcome: &Outcome,
    mut answer: Answer,
    notices: Vec<String>,
) -> AgentResponse {
    let mut stderr = String::new();
    if !notices.is_empty() {
        // Shown on a terminal by every agent (its transcript, its stderr, the plugin's
        // `console.error`): escaped (on stderr, one line each).
        let lines: Vec<String> = notices
            .iter()
            .map(|n| escape_multiline(&format!("hookhost: {n}")).into_owned())
            .collect();
        let text = lines.join("\n");
        match agent {
            // Shown to the user in the transcript.
            Agent::Codex | Agent::Gemini => {
                let message = match answer.json.get("systemMessage").and_then(Value::as_str) {
                    Some(first) => format!("{first}\n{text}"),
                    None => text,
                };
                answer.json.insert("systemMessage".into(), json!(message));
            }
            // The message shown to the user where the event has one; Cursor's hook log
            // (stderr) elsewhere.
            Agent::Cursor if answer.json.contains_key("permission") => {
                let message = match answer.json.get("userMessage").and_then(Value::as_str) {
                    Some(first) => format!("{first}\n{text}"),
                    None => text,
                };
                answer.json.insert("userMessage".into(), json!(message));
            }
            // Copilot reads only preToolUse's answer: a deny carries them in its reason,
            // and stderr (its hook log) always has them.
            Agent::Copilot => {
                if let Some(Value::String(reason)) = answer.json.get_mut("permissionDecisionReason")
                    && outcome.decision.is_blocking()
                {
                    reason.push('\n');
                    reason.push_str(&text);
                }
                for line in &lines {
                    stderr.push_str(&escape(line));
                    stderr.push('\n');
                }
            }
            Agent::OpenCode => {
                answer.json.insert("notices".into(), json!(lines));
            }
            Agent::Cursor => {
                for line in &lines {
                    stderr.push_str(&escape(line));
                    stderr.push('\n');
                }
            }
        }
    }
    let stdout = if answer.json.is_empty() {
        String::new()
    } else {
        crate::text::escape_json(&Value::Object(answer.json).to_string()).into_owned()
    };
    AgentResponse {
        stdout,
        stderr,
        exit_code: 0,
    }
}

/// The reason of a blocking decision, with a default.
///
/// Escaped for the terminal: every agent here prints a hook's reason where the user
/// reads it, as it is (measured: Copilot CLI 1.0.102 prints "Denied by preToolUse hook:
/// REASON" with a hook's ESC sequences and bidi overrides raw), and JSON escaping is
/// undone by the agent's parser.
fn reason(o: &Outcome) -> String {
    let text = o.reason.as_deref().unwrap_or("blocked by hookhost");
    escape_multiline(text).into_owned()
}

/// `continue: false` and `stopReason`, `systemMessage`: the top-level fields Codex and
/// Gemini read on every event.
fn common_top(o: &Outcome, a: &mut Answer) {
    if !o.continue_ {
        a.set(Field::Continue, "continue", json!(false));
        if let Some(stop) = &o.stop_reason {
            a.set(
                Field::StopReason,
                "stopReason",
                json!(escape_multiline(stop)),
            );
        }
    }
    if !o.system_messages.is_empty() {
        a.set(
            Field::SystemMessages,
            "systemMessage",
            json!(escape_multiline(&o.system_messages.join("\n"))),
        );
    }
}

/// Codex 0.171.0: Claude Code's shape.
fn codex(event: &EventName, call: &Call, o: &Outcome, a: &mut Answer) {
    common_top(o, a);
    let name = event.canonical;
    let honours_context = matches!(
        name,
        "SessionStart" | "UserPromptSubmit" | "PostToolUse" | "SubagentStart"
    );
    match name {
        "PreToolUse" => {
            let word = match o.decision {
                Decision::None => None,
                Decision::Allow => Some("allow"),
                Decision::Deny | Decision::Block => Some("deny"),
                Decision::Ask | Decision::Defer => {
                    a.denied_instead(Agent::Codex, o);
                    Some("deny")
                }
            };
            if let Some(word) = word {
                a.specific()
                    .insert("permissionDecision".into(), json!(word));
                a.done(Field::Decision);
                if o.reason.is_some() || o.decision.is_blocking() {
                    a.specific()
                        .insert("permissionDecisionReason".into(), json!(reason(o)));
                    a.done(Field::Reason);
                }
            }
            if let Some(input) = &o.updated_input {
                // Codex 0.171 fails a hook whose `updatedInput` comes without a
                // `permissionDecision: "allow"` (measured): a rewrite with no decision is
                // an allow of the rewritten call.
                if word.is_none() {
                    a.specific()
                        .insert("permissionDecision".into(), json!("allow"));
                }
                a.specific()
                    .insert("updatedInput".into(), tool_input_for(call, input));
                a.done(Field::UpdatedInput);
            }
        }
        "PermissionRequest" => {
            if let Some(decision) = o.hook_specific_output.get("decision") {
                // The hook's own object; its message is shown like any reason.
                let mut decision = decision.clone();
                if let Some(Value::String(message)) = decision.get_mut("message") {
                    *message = escape_multiline(message).into_owned();
                }
                a.specific().insert("decision".into(), decision);
                a.done(Field::HookSpecificOutput);
                a.done(Field::Decision);
                a.done(Field::Reason);
            } else if o.decision.is_blocking() {
                a.specific().insert(
                    "decision".into(),
                    json!({"behavior": "deny", "message": reason(o)}),
                );
                a.done(Field::Decision);
                a.done(Field::Reason);
            }
        }
        "PostToolUse" | "UserPromptSubmit" | "Stop" | "SubagentStop"
            if o.decision == Decision::Block =>
        {
            block_decision(o, a);
        }
        _ => {}
    }
    context_and_event_name(event, o, a, honours_context);
}

/// `decision: "block"` with its reason, Claude Code's words for a block outside
/// PreToolUse (Codex's and Gemini CLI's too).
fn block_decision(o: &Outcome, a: &mut Answer) {
    a.set(Field::Decision, "decision", json!("block"));
    a.set(Field::Reason, "reason", json!(reason(o)));
}

/// `hookSpecificOutput.additionalContext` (when the event takes it: `takes_context`)
/// and `hookSpecificOutput.hookEventName` in the agent's own event name, as Claude Code
/// shapes them (Codex and Gemini CLI read the same).
fn context_and_event_name(event: &EventName, o: &Outcome, a: &mut Answer, takes_context: bool) {
    if takes_context && !o.additional_context.is_empty() {
        a.specific().insert(
            "additionalContext".into(),
            json!(o.additional_context.join("\n\n")),
        );
        a.done(Field::AdditionalContext);
    }
    if let Some(Value::Object(specific)) = a.json.get_mut("hookSpecificOutput") {
        specific.insert("hookEventName".into(), json!(event.name));
    }
}

/// The decision in the words of an agent that knows allow, ask and deny: a block is a
/// deny, and `defer`, which it cannot express, a deny with a notice.
fn allow_ask_deny(agent: Agent, o: &Outcome, a: &mut Answer) -> Option<&'static str> {
    match o.decision {
        Decision::None => None,
        Decision::Allow => Some("allow"),
        Decision::Ask => Some("ask"),
        Decision::Deny | Decision::Block => Some("deny"),
        Decision::Defer => {
            a.denied_instead(agent, o);
            Some("deny")
        }
    }
}

/// Gemini CLI 0.61.0.
fn gemini(event: &EventName, call: &Call, o: &Outcome, a: &mut Answer) {
    common_top(o, a);
    let name = event.canonical;
    match name {
        "PreToolUse" => {
            let word = allow_ask_deny(Agent::Gemini, o, a);
            if let Some(word) = word {
                a.set(Field::Decision, "decision", json!(word));
                if o.reason.is_some() || o.decision.is_blocking() {
                    a.set(Field::Reason, "reason", json!(reason(o)));
                }
            }
            if let Some(input) = &o.updated_input {
                a.specific()
                    .insert("tool_input".into(), tool_input_for(call, input));
                a.done(Field::UpdatedInput);
            }
        }
        "PostToolUse" | "UserPromptSubmit" | "Stop" if o.decision == Decision::Block => {
            block_decision(o, a);
        }
        _ => {}
    }
    let takes_context = matches!(name, "SessionStart" | "UserPromptSubmit" | "PostToolUse");
    context_and_event_name(event, o, a, takes_context);
}

/// Copilot CLI 1.0.102: only `preToolUse`'s answer is read.
fn copilot(event: &EventName, call: &Call, o: &Outcome, a: &mut Answer) {
    if event.canonical != "PreToolUse" {
        return;
    }
    let word = allow_ask_deny(Agent::Copilot, o, a);
    if let Some(word) = word {
        a.set(Field::Decision, "permissionDecision", json!(word));
        if o.reason.is_some() || o.decision.is_blocking() {
            a.set(Field::Reason, "permissionDecisionReason", json!(reason(o)));
        }
    }
    // A rewrite alone is no approval (Claude Code's rule): `modifiedArgs` without a
    // decision is applied and the call still goes through Copilot's own permission
    // (measured, 1.0.102: with `permissionDecision: "allow"` added, a rewritten command
    // ran where Copilot would have asked, and `-p` without `--allow-all-tools` denied it).
    if let Some(input) = &o.updated_input {
        a.set(
            Field::UpdatedInput,
            "modifiedArgs",
            tool_input_for(call, input),
        );
    }
}

/// Cursor 1.7's hooks reference.
fn cursor(event: &EventName, o: &Outcome, a: &mut Answer) {
    match event.name {
        "beforeShellExecution" | "beforeMCPExecution" | "beforeReadFile" => {
            let can_ask = event.name != "beforeReadFile";
            let word = match o.decision {
                Decision::None => None,
                Decision::Allow => Some("allow"),
                Decision::Ask if can_ask => Some("ask"),
                Decision::Deny | Decision::Block => Some("deny"),
                Decision::Ask | Decision::Defer => {
                    a.denied_instead(Agent::Cursor, o);
                    Some("deny")
                }
            };
            if let Some(word) = word {
                a.set(Field::Decision, "permission", json!(word));
            }
            if can_ask && (o.reason.is_some() || o.decision.is_blocking()) {
                a.json.insert("userMessage".into(), json!(reason(o)));
                a.set(Field::Reason, "agentMessage", json!(reason(o)));
            }
        }
        "beforeSubmitPrompt" if o.decision.is_blocking() || !o.continue_ => {
            a.set(Field::Decision, "continue", json!(false));
            a.done(Field::Continue);
        }
        _ => {}
    }
}

/// OpenCode 1.18.33, through hookhost's plugin (`install --opencode`).
fn opencode(event: &EventName, call: &Call, o: &Outcome, a: &mut Answer) {
    match event.canonical {
        "PreToolUse" => {
            match o.decision {
                // The plugin throws it: OpenCode prints the error on the terminal.
                Decision::Deny | Decision::Block => {
                    a.set(Field::Decision, "block", json!(reason(o)));
                    a.done(Field::Reason);
                }
                Decision::Ask | Decision::Defer => {
                    a.denied_instead(Agent::OpenCode, o);
                    a.set(Field::Decision, "block", json!(reason(o)));
                    a.done(Field::Reason);
                }
                // The call goes ahead: nothing to say.
                Decision::Allow => a.done(Field::Decision),
                Decision::None => {}
            }
            if let Some(input) = &o.updated_input {
                a.set(Field::UpdatedInput, "args", tool_input_for(call, input));
            }
        }
        "PostToolUse" => {
            if let Some(output) = &o.updated_tool_output {
                let text = match output {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                a.set(Field::UpdatedToolOutput, "output", json!(text));
            }
            // What reaches the model: appended to the tool's output.
            let mut context = Vec::new();
            if o.decision == Decision::Block {
                context.push(format!("hookhost: {}", reason(o)));
                a.done(Field::Decision);
                a.done(Field::Reason);
            }
            if !o.additional_context.is_empty() {
                context.extend(o.additional_context.iter().cloned());
                a.done(Field::AdditionalContext);
            }
            if !context.is_empty() {
                a.json.insert("context".into(), json!(context));
            }
        }
        _ => {}
    }
}
