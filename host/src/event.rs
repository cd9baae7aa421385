//! The event catalogue: every event hookhost knows, as one data table.
//!
//! Each [`EventSpec`] says which input field its matcher tests, what exit code 2 does,
//! which decision pattern and output fields it honours and its default timeout. The
//! dispatcher and the merge read these attributes; no stage branches on event names.
//! The rows follow Claude Code's hooks reference (Aug 2026, v2.1.240), §1.3 and §1.9 of
//! `shared/reference/claude-code-hooks.md`, and its releases through 2.1.332
//! (PreModelSwitch, PostModelSwitch, PreSkillShellCommand). Embedders may add their own events with
//! [`EventCatalogue::register`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod invocation;
mod keys;
mod model_verdict;
mod sets;
pub use invocation::Invocation;
pub use model_verdict::{ModelVerdictRule, Refusal};

/// What exit code 2 (or an equivalent blocking error) does on an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit2 {
    /// Blocks the action; the reason is the JSON reason or else stderr.
    Blocks,
    /// Does not block; stderr is shown to the user as a hook error notice.
    Notice,
    /// Ignored entirely.
    Ignored,
}

/// How an event's hooks state a decision in their JSON output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionStyle {
    /// No decision: context or side effects only.
    None,
    /// Top-level `decision: "block"` with `reason`.
    Block,
    /// `hookSpecificOutput.permissionDecision` allow/deny/ask/defer (PreToolUse), plus the
    /// deprecated top-level `decision: "approve" | "block"`.
    Permission,
    /// `hookSpecificOutput.decision.behavior` allow/deny (PermissionRequest).
    PermissionRequest,
    /// Blocks only through exit 2 or `continue: false` (TeammateIdle, TaskCompleted).
    ContinueOnly,
}

/// Which matcher syntax an event accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatcherSyntax {
    /// Letters, digits, `_`, `-`, spaces, `,` and `|` are exact names; anything else is a
    /// regex.
    Standard,
    /// Only letters, digits, `_` and `|` are exact names (FileChanged, StopFailure).
    Narrow,
}

/// The attributes of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The event name as it appears in config and in `hook_event_name`.
    pub name: Cow<'static, str>,
    /// The input field the matcher tests, or `None` when matchers are ignored.
    pub matcher_field: Option<Cow<'static, str>>,
    /// Which matcher syntax applies.
    pub matcher_syntax: MatcherSyntax,
    /// What exit code 2 does.
    pub exit2: Exit2,
    /// How hooks state a decision.
    pub decision: DecisionStyle,
    /// The allow-list of `hookSpecificOutput` keys the event honours (besides
    /// `hookEventName`), each with who may set it ([`OutputKey`]). A key of a nested object
    /// is listed as `parent.key` (`decision.updatedPermissions`). Everything else a hook
    /// says there is dropped with a notice ([`EventSpec::admit`]).
    pub specific_outputs: Cow<'static, [OutputKey]>,
    /// Whether `continue: false` (and `stopReason`) is honoured.
    pub honours_continue: bool,
    /// Whether plain-text stdout on exit 0 becomes additional context.
    pub plain_stdout_is_context: bool,
    /// Whether the event carries a tool call (`tool_name`, `tool_input`): the `if` filter
    /// runs only on these.
    pub tool_event: bool,
    /// Whether command hooks get `CLAUDE_ENV_FILE`.
    pub env_file: bool,
    /// Whether the matcher tests the basename of the matcher field's value, not the whole
    /// value (FileChanged matchers name files: `.env`, not `/repo/.env`).
    pub matcher_tests_basename: bool,
    /// Whether consecutive blocks in a session are counted and capped (`stopBlockCap`):
    /// a hook that always blocks Stop would otherwise keep the agent from ever stopping.
    /// The blocks of every such event (and `asyncRewake` wake-ups) count together.
    pub caps_consecutive_blocks: bool,
    /// Whether the event going ahead ends the loop the cap counts (the agent stopped):
    /// the count starts again.
    pub ends_block_loop: bool,
    /// Whether the event ends the session: state kept for the session (plugin instances)
    /// is dropped after it.
    pub ends_session: bool,
    /// The default handler timeout.
    pub default_timeout: Duration,
}

impl EventSpec {
    /// Whether hooks on this event can block the action at all.
    pub fn can_block(&self) -> bool {
        self.exit2 == Exit2::Blocks
            || matches!(
                self.decision,
                DecisionStyle::Block | DecisionStyle::Permission | DecisionStyle::PermissionRequest
            )
    }

    /// Whether `onFailure: "block"` applies on this event: it can block, and it is not
    /// one where Claude Code ignores it so that a failing check cannot trap the agent in
    /// a loop (Stop, SubagentStop, TaskCompleted, TeammateIdle). The one rule for the
    /// merge of a failed hook, the config warning and what `hookhost install` writes.
    pub fn honours_on_failure(&self) -> bool {
        self.can_block() && !ON_FAILURE_IGNORED_EVENTS.contains(&self.name.as_ref())
    }

    /// Whether an `mcp_tool` hook's answer over 16 MiB refuses the action (PreToolUse, the
    /// event of permission decisions; Claude Code 2.1.321) instead of failing the hook.
    pub fn refuses_oversized_mcp(&self) -> bool {
        self.decision == DecisionStyle::Permission
    }

    /// Whether the event honours a `hookSpecificOutput` field (by any channel).
    pub fn honours(&self, field: &str) -> bool {
        self.output_key(field).is_some()
    }

    /// The allow-list entry of a `hookSpecificOutput` key (`parent.key` for a key of a
    /// nested object).
    pub fn output_key(&self, field: &str) -> Option<&OutputKey> {
        self.specific_outputs.iter().find(|k| k.name == field)
    }

    /// Whether a key of the allow-list has keys of its own listed (`decision` →
    /// `decision.behavior` …): its object value is checked key by key.
    pub fn has_nested_outputs(&self, field: &str) -> bool {
        self.specific_outputs.iter().any(|k| {
            k.name
                .strip_prefix(field)
                .is_some_and(|r| r.starts_with('.'))
        })
    }

    /// **The one rule of what a hook may say** (the book's threat model, `docs/book/src/threat-model.md`): whether
    /// the `hookSpecificOutput` key `field` (`parent.key` when nested), said through
    /// `channel` by a hook whose config grants the widening keys `granted`, is kept.
    /// Deny by default: a key not in the event's allow-list is dropped; a key the typed
    /// response fields own never comes through a plugin's `extras-json`; a key that
    /// grants, consents or widens is kept only from a hook's own answer (no plugin typed
    /// field carries one) and only when the hook's config grants it (`widens`).
    ///
    /// # Errors
    ///
    /// Why the key is dropped, for the notice that names the hook and the key.
    pub fn admit(&self, field: &str, channel: Channel, granted: &[String]) -> Result<(), String> {
        let Some(key) = self.output_key(field) else {
            return Err(format!("it is not an output of {}", self.name));
        };
        match (key.class, channel) {
            (KeyClass::Plain, _) | (KeyClass::Typed, Channel::Answer) => Ok(()),
            (KeyClass::Typed, Channel::Extras) => {
                Err("a typed response field decides it; `extras-json` may not set it".into())
            }
            (KeyClass::Widens, Channel::Extras) => Err(
                "it grants, consents or widens what the agent may do, and no typed response \
                 field carries it: a plugin cannot set it"
                    .into(),
            ),
            (KeyClass::Widens, Channel::Answer) if granted.iter().any(|g| g == field) => Ok(()),
            (KeyClass::Widens, Channel::Answer) => Err(format!(
                "it grants, consents or widens what the agent may do; the hook's config must \
                 grant it (`\"widens\": [\"{field}\"]`)"
            )),
        }
    }
}

pub use keys::{Channel, KeyClass, OutputKey};

/// Ten minutes: Claude Code's default for command, HTTP and MCP tool hooks since v2.1.3.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// One row of the built-in table, kept short so the table reads as a table.
struct Row {
    name: &'static str,
    matcher: Option<&'static str>,
    exit2: Exit2,
    decision: DecisionStyle,
    outputs: &'static [OutputKey],
    honours_continue: bool,
    plain_context: bool,
    timeout: Duration,
}

const fn row(
    name: &'static str,
    matcher: Option<&'static str>,
    exit2: Exit2,
    decision: DecisionStyle,
    outputs: &'static [OutputKey],
) -> Row {
    Row {
        name,
        matcher,
        exit2,
        decision,
        outputs,
        honours_continue: true,
        plain_context: false,
        timeout: DEFAULT_TIMEOUT,
    }
}

impl Row {
    const fn discards_continue(mut self) -> Self {
        self.honours_continue = false;
        self
    }
    const fn plain_stdout_context(mut self) -> Self {
        self.plain_context = true;
        self
    }
    const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

use DecisionStyle as D;
use Exit2::{Blocks, Ignored, Notice};
const fn t(name: &'static str) -> OutputKey {
    OutputKey::typed(name)
}
const fn p(name: &'static str) -> OutputKey {
    OutputKey::plain(name)
}
const fn w(name: &'static str) -> OutputKey {
    OutputKey::widens(name)
}

/// `additionalContext` alone, the output of most events.
const CONTEXT: &[OutputKey] = &[t("additionalContext")];

/// The 34 events of Claude Code's hooks reference, through 2.1.332.
#[rustfmt::skip]
const BUILT_IN: [Row; 34] = [
    row("SessionStart", Some("source"), Notice, D::None,
        &[t("additionalContext"), w("initialUserMessage"), p("sessionTitle"), p("watchPaths"), p("reloadSkills")])
        .plain_stdout_context(),
    row("Setup", Some("trigger"), Notice, D::None, CONTEXT),
    row("InstructionsLoaded", Some("load_reason"), Ignored, D::None, &[]).discards_continue(),
    // `updatedPrompt` (UserPromptSubmit) and `skip`/`skipResult` (PreToolUse) are hookhost's
    // own, for embedders (`outcome::rewrite`); `--format claude` reports them in a message.
    row("UserPromptSubmit", None, Blocks, D::Block,
        &[t("additionalContext"), p("sessionTitle"), p("suppressOriginalPrompt"), p("updatedPrompt")])
        .plain_stdout_context()
        .timeout(Duration::from_secs(30)),
    row("UserPromptExpansion", Some("command_name"), Blocks, D::Block, CONTEXT)
        .plain_stdout_context(),
    row("MessageDisplay", None, Notice, D::None, &[p("displayContent")])
        .discards_continue()
        .timeout(Duration::from_secs(10)),
    row("PreToolUse", Some("tool_name"), Blocks, D::Permission,
        &[t("permissionDecision"), t("permissionDecisionReason"), t("updatedInput"), t("additionalContext"),
          p("skip"), p("skipResult")]),
    row("PermissionRequest", Some("tool_name"), Ignored, D::PermissionRequest,
        &[t("decision"), t("decision.behavior"), t("decision.message"), t("decision.interrupt"),
          t("decision.updatedInput"), w("decision.updatedPermissions")]),
    row("PermissionDenied", Some("tool_name"), Ignored, D::None, &[w("retry")]),
    row("PostToolUse", Some("tool_name"), Blocks, D::Block,
        &[t("additionalContext"), w("classifierContext"), t("updatedToolOutput"), t("updatedMCPToolOutput")]),
    row("PostToolUseFailure", Some("tool_name"), Blocks, D::Block, CONTEXT),
    row("PostToolBatch", None, Blocks, D::Block, CONTEXT),
    row("Notification", Some("notification_type"), Ignored, D::None, &[]).discards_continue(),
    row("SubagentStart", Some("agent_type"), Notice, D::None, CONTEXT),
    row("SubagentStop", Some("agent_type"), Blocks, D::Block, CONTEXT),
    row("TaskCreated", None, Blocks, D::Block, &[]).discards_continue(),
    row("TaskCompleted", None, Blocks, D::ContinueOnly, &[]),
    row("Stop", None, Blocks, D::Block, CONTEXT),
    row("StopFailure", Some("error"), Ignored, D::None, &[]).discards_continue(),
    row("TeammateIdle", None, Blocks, D::ContinueOnly, &[]),
    row("ConfigChange", Some("source"), Blocks, D::Block, &[]).discards_continue(),
    row("CwdChanged", None, Notice, D::None, &[p("watchPaths")]).discards_continue(),
    row("DirectoryAdded", Some("source"), Notice, D::None, &[]).discards_continue(),
    row("FileChanged", Some("file_path"), Notice, D::None, &[p("watchPaths")]).discards_continue(),
    row("WorktreeCreate", None, Blocks, D::None, &[w("worktreePath")]).discards_continue(),
    row("WorktreeRemove", None, Notice, D::None, &[]),
    row("PreCompact", Some("trigger"), Blocks, D::Block, &[]).discards_continue(),
    row("PostCompact", Some("trigger"), Notice, D::None, &[]).discards_continue(),
    // `decision: "block"` declines, like exit 2 (Claude Code 2.1.284).
    row("Elicitation", Some("mcp_server_name"), Blocks, D::Block, &[w("action"), w("content")])
        .discards_continue(),
    row("ElicitationResult", Some("mcp_server_name"), Blocks, D::Block, &[w("action"), w("content")])
        .discards_continue(),
    // 2.1.251: deny > ask > allow; a timeout blocks the switch (`TIMEOUT_BLOCKS_EVENTS`).
    row("PreModelSwitch", Some("to_model"), Blocks, D::Permission,
        &[t("permissionDecision"), t("permissionDecisionReason")])
        .timeout(Duration::from_secs(30)),
    row("PostModelSwitch", Some("to_model"), Notice, D::None, CONTEXT)
        .plain_stdout_context()
        .timeout(Duration::from_secs(30)),
    // 2.1.332: a hook may only refuse (`REFUSE_ONLY_EVENTS`): every answer is read as
    // PreToolUse's or PermissionRequest's and reduced to a deny or nothing.
    row("PreSkillShellCommand", Some("tool_name"), Blocks, D::Permission,
        &[t("permissionDecision"), t("permissionDecisionReason")]),
    // SessionEnd hooks share a short budget in Claude Code (1.5 s, raised by explicit
    // timeouts); a per-hook default of 1.5 s keeps an agent's exit from hanging.
    row("SessionEnd", Some("reason"), Notice, D::None, &[]).timeout(Duration::from_millis(1500)),
];

/// Events whose command hooks get `CLAUDE_ENV_FILE`.
const ENV_FILE_EVENTS: [&str; 4] = ["SessionStart", "Setup", "CwdChanged", "FileChanged"];

/// Events whose matcher tests the basename of its field.
const BASENAME_MATCHER_EVENTS: [&str; 1] = ["FileChanged"];

/// Events whose consecutive blocks are capped, counted together per session.
const CAPPED_BLOCK_EVENTS: [&str; 2] = ["Stop", "SubagentStop"];

/// Events that end the loop the cap counts when they go ahead.
const LOOP_ENDING_EVENTS: [&str; 1] = ["Stop"];

/// Events that end the session.
const SESSION_ENDING_EVENTS: [&str; 1] = ["SessionEnd"];

/// Events where Claude Code ignores `onFailure: "block"` (2.1.295; reference 2.1.296 §2.2).
const ON_FAILURE_IGNORED_EVENTS: [&str; 4] =
    ["Stop", "SubagentStop", "TaskCompleted", "TeammateIdle"];

/// Events whose matcher uses the narrow exact-name set.
const NARROW_MATCHER_EVENTS: [&str; 2] = ["FileChanged", "StopFailure"];

impl From<&Row> for EventSpec {
    fn from(row: &Row) -> Self {
        EventSpec {
            name: Cow::Borrowed(row.name),
            matcher_field: row.matcher.map(Cow::Borrowed),
            matcher_syntax: if NARROW_MATCHER_EVENTS.contains(&row.name) {
                MatcherSyntax::Narrow
            } else {
                MatcherSyntax::Standard
            },
            exit2: row.exit2,
            decision: row.decision,
            specific_outputs: Cow::Borrowed(row.outputs),
            honours_continue: row.honours_continue,
            plain_stdout_is_context: row.plain_context,
            tool_event: matches!(row.matcher, Some("tool_name")),
            env_file: ENV_FILE_EVENTS.contains(&row.name),
            matcher_tests_basename: BASENAME_MATCHER_EVENTS.contains(&row.name),
            caps_consecutive_blocks: CAPPED_BLOCK_EVENTS.contains(&row.name),
            ends_block_loop: LOOP_ENDING_EVENTS.contains(&row.name),
            ends_session: SESSION_ENDING_EVENTS.contains(&row.name),
            default_timeout: row.timeout,
        }
    }
}

/// The set of events a host knows: the built-in table plus any custom events.
#[derive(Debug, Clone)]
pub struct EventCatalogue {
    events: HashMap<String, Arc<EventSpec>>,
}

impl Default for EventCatalogue {
    fn default() -> Self {
        let events = BUILT_IN
            .iter()
            .map(|row| (row.name.to_string(), Arc::new(EventSpec::from(row))))
            .collect();
        EventCatalogue { events }
    }
}

impl EventCatalogue {
    /// Looks an event up by its exact (case-sensitive) name.
    pub fn get(&self, name: &str) -> Option<&Arc<EventSpec>> {
        self.events.get(name)
    }

    /// Adds or replaces an event, for embedders with events of their own.
    pub fn register(&mut self, spec: EventSpec) {
        self.events.insert(spec.name.to_string(), Arc::new(spec));
    }

    /// All event names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.events.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// Names of the built-in events, in the order of the reference table.
pub fn built_in_names() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|row| row.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_the_34_events_of_the_reference() {
        let catalogue = EventCatalogue::default();
        assert_eq!(catalogue.names().len(), 34);
        assert_eq!(built_in_names().count(), 34);
    }

    #[test]
    fn per_event_behaviour_is_an_attribute_of_exactly_its_events() {
        let c = EventCatalogue::default();
        let having = |attribute: fn(&EventSpec) -> bool| -> Vec<&str> {
            let mut names: Vec<&str> = built_in_names()
                .filter(|name| attribute(c.get(name).unwrap()))
                .collect();
            names.sort_unstable();
            names
        };
        assert_eq!(having(|e| e.matcher_tests_basename), ["FileChanged"]);
        assert_eq!(
            having(|e| e.caps_consecutive_blocks),
            ["Stop", "SubagentStop"]
        );
        assert_eq!(having(|e| e.ends_block_loop), ["Stop"]);
        assert_eq!(having(|e| e.ends_session), ["SessionEnd"]);
        assert_eq!(having(|e| e.timeout_blocks()), ["PreModelSwitch"]);
        assert_eq!(having(|e| e.refuses_only()), ["PreSkillShellCommand"]);
        assert_eq!(
            having(|e| e.takes_defer()),
            ["PreSkillShellCommand", "PreToolUse"]
        );
        assert_eq!(
            having(|e| e.is_guard()),
            ["PermissionRequest", "PreSkillShellCommand", "PreToolUse"]
        );
        assert_eq!(
            having(|e| e.env_file),
            ["CwdChanged", "FileChanged", "SessionStart", "Setup"]
        );
    }

    #[test]
    fn attributes_follow_the_reference_table() {
        let c = EventCatalogue::default();
        // (event, matcher field, exit 2, decision, default timeout in ms)
        let rows: &[(&str, Option<&str>, Exit2, DecisionStyle, u128)] = &[
            (
                "PreToolUse",
                Some("tool_name"),
                Blocks,
                D::Permission,
                600_000,
            ),
            (
                "PermissionRequest",
                Some("tool_name"),
                Ignored,
                D::PermissionRequest,
                600_000,
            ),
            ("UserPromptSubmit", None, Blocks, D::Block, 30_000),
            ("Stop", None, Blocks, D::Block, 600_000),
            ("SessionStart", Some("source"), Notice, D::None, 600_000),
            (
                "Notification",
                Some("notification_type"),
                Ignored,
                D::None,
                600_000,
            ),
            ("TeammateIdle", None, Blocks, D::ContinueOnly, 600_000),
            ("MessageDisplay", None, Notice, D::None, 10_000),
            ("SessionEnd", Some("reason"), Notice, D::None, 1_500),
            ("FileChanged", Some("file_path"), Notice, D::None, 600_000),
            (
                "PreModelSwitch",
                Some("to_model"),
                Blocks,
                D::Permission,
                30_000,
            ),
            ("PostModelSwitch", Some("to_model"), Notice, D::None, 30_000),
            (
                "PreSkillShellCommand",
                Some("tool_name"),
                Blocks,
                D::Permission,
                600_000,
            ),
            (
                "Elicitation",
                Some("mcp_server_name"),
                Blocks,
                D::Block,
                600_000,
            ),
        ];
        for &(name, field, exit2, decision, timeout) in rows {
            let spec = c.get(name).unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(spec.matcher_field.as_deref(), field, "{name} matcher field");
            assert_eq!(spec.exit2, exit2, "{name} exit 2");
            assert_eq!(spec.decision, decision, "{name} decision");
            assert_eq!(spec.default_timeout.as_millis(), timeout, "{name} timeout");
        }
    }

    #[test]
    fn derived_attributes() {
        let c = EventCatalogue::default();
        let tool_events: Vec<&str> = built_in_names()
            .filter(|n| c.get(n).unwrap().tool_event)
            .collect();
        assert_eq!(
            tool_events,
            [
                "PreToolUse",
                "PermissionRequest",
                "PermissionDenied",
                "PostToolUse",
                "PostToolUseFailure",
                "PreSkillShellCommand"
            ]
        );
        assert!(c.get("CwdChanged").unwrap().env_file);
        assert!(!c.get("PreToolUse").unwrap().env_file);
        assert_eq!(
            c.get("StopFailure").unwrap().matcher_syntax,
            MatcherSyntax::Narrow
        );
        assert!(c.get("UserPromptSubmit").unwrap().plain_stdout_is_context);
        assert!(!c.get("Notification").unwrap().honours_continue);
        assert!(c.get("PreToolUse").unwrap().honours("updatedInput"));
        assert!(!c.get("Stop").unwrap().honours("updatedInput"));
    }

    /// The rule of `admit`, class by channel by grant.
    #[test]
    fn admit_decides_by_class_channel_and_grant() {
        let c = EventCatalogue::default();
        let granted = |k: &str| vec![k.to_string()];
        // (event, key, channel, granted, kept)
        let rows: &[(&str, &str, Channel, bool, bool)] = &[
            ("PreToolUse", "updatedInput", Channel::Answer, false, true),
            ("PreToolUse", "updatedInput", Channel::Extras, false, false),
            ("PreToolUse", "retry", Channel::Answer, true, false),
            ("SessionStart", "sessionTitle", Channel::Extras, false, true),
            ("SessionStart", "sessionTitle", Channel::Answer, false, true),
            (
                "SessionStart",
                "initialUserMessage",
                Channel::Answer,
                false,
                false,
            ),
            (
                "SessionStart",
                "initialUserMessage",
                Channel::Answer,
                true,
                true,
            ),
            (
                "SessionStart",
                "initialUserMessage",
                Channel::Extras,
                true,
                false,
            ),
            ("PermissionDenied", "retry", Channel::Answer, false, false),
            ("PermissionDenied", "retry", Channel::Answer, true, true),
            (
                "PermissionRequest",
                "decision",
                Channel::Answer,
                false,
                true,
            ),
            (
                "PermissionRequest",
                "decision",
                Channel::Extras,
                false,
                false,
            ),
            (
                "PermissionRequest",
                "decision.updatedPermissions",
                Channel::Answer,
                false,
                false,
            ),
            (
                "PermissionRequest",
                "decision.updatedPermissions",
                Channel::Answer,
                true,
                true,
            ),
            (
                "PermissionRequest",
                "updatedPermissions",
                Channel::Answer,
                true,
                false,
            ),
            ("Stop", "hookEventName", Channel::Extras, false, false),
            ("Stop", "", Channel::Answer, false, false),
        ];
        for &(event, key, channel, grant, kept) in rows {
            let spec = c.get(event).unwrap();
            let grants = if grant { granted(key) } else { Vec::new() };
            assert_eq!(
                spec.admit(key, channel, &grants).is_ok(),
                kept,
                "{event} {key} {channel:?} granted={grant}"
            );
        }
        assert!(
            c.get("PermissionRequest")
                .unwrap()
                .has_nested_outputs("decision")
        );
        assert!(
            !c.get("PreToolUse")
                .unwrap()
                .has_nested_outputs("updatedInput")
        );
    }

    #[test]
    fn custom_events_can_be_registered() {
        let mut c = EventCatalogue::default();
        let mut spec = c.get("Stop").unwrap().as_ref().clone();
        spec.name = Cow::Owned("BeforeDeploy".into());
        spec.matcher_field = Some(Cow::Owned("target".into()));
        c.register(spec);
        assert_eq!(
            c.get("BeforeDeploy").unwrap().matcher_field.as_deref(),
            Some("target")
        );
    }
}
