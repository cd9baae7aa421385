//! The drop-in itself: which handler commands are hookhost's (the forms `install` writes,
//! and any that hands events to it), and adding it to or removing it from the `hooks`
//! object of a settings value, leaving every other handler, key and order as it was.

use std::path::Path;

use serde_json::{Map, Value, json};

use hookhost::text::escape;

use super::Agent;

/// The command the drop-in runs, after the program (Claude Code's format).
#[cfg(test)]
pub(super) const DISPATCH_ARGS: &str = "dispatch --format claude";

/// The `--format` of every drop-in `install` writes (one per agent).
const FORMATS: &[&str] = &["claude", "codex", "gemini", "copilot", "cursor", "opencode"];

/// Events whose input has a tool name, so that their matcher group gets a matcher
/// (`"*"`; Gemini's matchers are regular expressions: `".*"`).
const TOOL_EVENTS: &[&str] = &[
    "PreToolUse",
    "PermissionRequest",
    "PreSkillShellCommand",
    "PostToolUse",
    "PostToolUseFailure",
    "BeforeTool",
    "AfterTool",
];
/// Whether the drop-in of `event` carries `"onFailure": "block"`: for Claude Code, on
/// every event where Claude Code honours it for command hooks (2.1.295), by the event
/// table's own rule ([`hookhost::event::EventSpec::honours_on_failure`]). Then a
/// `hookhost dispatch` that cannot answer (killed, out of memory, exit 1 for a host
/// error) blocks the action instead of letting it go ahead. Codex has no such key.
pub(super) fn blocks_on_failure(agent: Agent, event: &str) -> bool {
    agent == Agent::Claude
        && hookhost::event::EventCatalogue::default()
            .get(event)
            .is_some_and(|spec| spec.honours_on_failure())
}

/// Whether `command` is a drop-in `install` writes: `hookhost dispatch --format F` or
/// the small client's `hookhost-dispatch --format F` ([`super::program`]), for any
/// agent's format F (Copilot's with its event after it), each by its plain name or by an
/// absolute path to a program of that name (quoted or not), or exactly `custom`.
pub(super) fn is_installed_form(command: &str, custom: Option<&str>) -> bool {
    if custom.is_some_and(|c| c == command) {
        return true;
    }
    // Copilot's drop-in names its event last (its input names none).
    let command = match command.rsplit_once(' ') {
        Some((head, event))
            if (head.ends_with("--format copilot") || custom == Some(head))
                && hookhost::agents::vocabulary::event(hookhost::agents::Agent::Copilot, event)
                    .is_some() =>
        {
            head
        }
        _ => command,
    };
    if custom.is_some_and(|c| c == command) {
        return true;
    }
    FORMATS.iter().any(|format| {
        runs(command, "hookhost", &format!("dispatch --format {format}"))
            || runs(
                command,
                super::program::CLIENT,
                &format!("--format {format}"),
            )
    })
}

/// Whether `command` is `NAME ARGS` or `/…/NAME ARGS` (quoted for the shell or not).
fn runs(command: &str, name: &str, args: &str) -> bool {
    let Some(program) = command.strip_suffix(args) else {
        return false;
    };
    let Some(program) = program.strip_suffix(' ') else {
        return false;
    };
    if program == name {
        return true;
    }
    let unquoted = program
        .strip_prefix('\'')
        .and_then(|p| p.strip_suffix('\''))
        .map(|p| p.replace(r"'\''", "'"))
        .unwrap_or_else(|| program.to_string());
    unquoted.starts_with('/') && Path::new(&unquoted).file_name() == Some(name.as_ref())
}

/// Whether a handler already hands its events to hookhost in `format` (any form,
/// including one the user wrote, like `HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch
/// --format claude`; the small client's `hookhost-dispatch --format claude` contains
/// `dispatch --format claude` too).
fn is_any_drop_in(command: &str, custom: Option<&str>, format: &str) -> bool {
    let args = format!("--format {format}");
    // A `--command` is the drop-in as is, or with Copilot's event after it.
    let custom_form = custom.is_some_and(|c| {
        command == c
            || command
                .strip_prefix(c)
                .and_then(|rest| rest.strip_prefix(' '))
                .is_some_and(|event| !event.contains(' '))
    });
    custom_form || (command.contains("hookhost") && command.contains(&args))
}

/// The command of a handler: Claude Code's, Codex's, Gemini's and Cursor's `command`,
/// Copilot's `bash` (a handler with a `type` must be a command).
fn handler_command(handler: &Value) -> Option<&str> {
    match handler.get("type").and_then(Value::as_str) {
        Some("command") | None => handler
            .get("command")
            .or_else(|| handler.get("bash"))
            .and_then(Value::as_str),
        Some(_) => None,
    }
}

/// The `hooks` object of the settings, checked to be Claude Code's shape where hookhost
/// looks: an object of arrays.
fn hooks_object<'a>(
    settings: &'a mut Map<String, Value>,
    shown: &str,
) -> Result<Option<&'a mut Map<String, Value>>, String> {
    match settings.get_mut("hooks") {
        None => Ok(None),
        Some(Value::Object(hooks)) => {
            for (event, groups) in hooks.iter() {
                if !groups.is_array() {
                    return Err(format!(
                        "`{shown}`: `hooks.{}` is not an array of matcher groups; fix it first",
                        escape(event)
                    ));
                }
            }
            Ok(Some(hooks))
        }
        Some(_) => Err(format!("`{shown}`: `hooks` is not an object; fix it first")),
    }
}

/// The commands of an event's handlers: in matcher groups (`hooks` inside), or listed
/// directly (Copilot, Cursor).
fn commands(groups: &Value) -> impl Iterator<Item = &str> {
    groups
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| match group.get("hooks").and_then(Value::as_array) {
            Some(handlers) => handlers.iter().collect::<Vec<_>>(),
            None => vec![group],
        })
        .filter_map(handler_command)
}

/// Adds the drop-in for each event that has none; returns the events it was added to.
/// A drop-in of another format (an older `install --codex` wrote `--format claude`) is
/// brought to the agent's own.
pub(super) fn add_drop_in(
    settings: &mut Map<String, Value>,
    agent: Agent,
    command: &str,
    custom: Option<&str>,
    shown: &str,
) -> Result<Vec<&'static str>, String> {
    hooks_object(settings, shown)?;
    if agent.flat() && !settings.contains_key("version") {
        settings.insert("version".into(), json!(1));
    }
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .expect("checked above");
    let mut added = Vec::new();
    for &event in agent.events() {
        let fail_closed = blocks_on_failure(agent, event);
        let command = agent.command_for(command, event);
        if let Some(groups) = hooks.get_mut(event) {
            if commands(groups).any(|c| is_any_drop_in(c, custom, agent.format())) {
                // A drop-in `install` wrote before it wrote `onFailure` gets it now.
                if fail_closed && add_on_failure(groups, custom) {
                    added.push(event);
                }
                continue;
            }
            if reformat(groups, custom, &command) {
                added.push(event);
                continue;
            }
        }
        let entry = if agent.flat() {
            agent.flat_handler(&command)
        } else {
            let mut group = Map::new();
            if TOOL_EVENTS.contains(&event) {
                group.insert("matcher".into(), json!(agent.any_tool()));
            }
            let mut handler = json!({"type": "command", "command": command});
            if fail_closed {
                handler["onFailure"] = json!("block");
            }
            group.insert("hooks".into(), json!([handler]));
            Value::Object(group)
        };
        hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .expect("checked above")
            .push(entry);
        added.push(event);
    }
    Ok(added)
}

/// Brings drop-ins of another format among `groups` to `command`; whether it did.
fn reformat(groups: &mut Value, custom: Option<&str>, command: &str) -> bool {
    let mut changed = false;
    for group in groups.as_array_mut().into_iter().flatten() {
        let handlers: Vec<&mut Value> = if group.get("hooks").is_some_and(Value::is_array) {
            group["hooks"]
                .as_array_mut()
                .expect("an array")
                .iter_mut()
                .collect()
        } else {
            vec![group]
        };
        for handler in handlers {
            let key = if handler.get("bash").is_some() {
                "bash"
            } else {
                "command"
            };
            if handler_command(handler)
                .is_some_and(|c| c != command && is_installed_form(c, custom))
            {
                handler[key] = json!(command);
                changed = true;
            }
        }
    }
    changed
}

/// Adds `"onFailure": "block"` to the drop-ins of the form `install` writes among
/// `groups` that have no `onFailure` (one the user set is theirs); whether it added one.
fn add_on_failure(groups: &mut Value, custom: Option<&str>) -> bool {
    let mut added = false;
    let handlers = groups
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|group| group.get_mut("hooks")?.as_array_mut())
        .flatten();
    for handler in handlers {
        let ours = handler.get("type").and_then(Value::as_str) == Some("command")
            && handler
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(|c| is_installed_form(c, custom));
        if let Some(handler) = handler.as_object_mut()
            && ours
            && !handler.contains_key("onFailure")
        {
            handler.insert("onFailure".into(), json!("block"));
            added = true;
        }
    }
    added
}

/// Removes every drop-in handler `install` writes; matcher groups, events and the
/// `hooks` object that it leaves empty go too (and the `version` of Copilot's and
/// Cursor's files, when nothing else is left). Returns the events it was removed from.
pub(super) fn remove_drop_in(
    settings: &mut Map<String, Value>,
    custom: Option<&str>,
    shown: &str,
) -> Result<Vec<String>, String> {
    let Some(hooks) = hooks_object(settings, shown)? else {
        return Ok(Vec::new());
    };
    let ours = |h: &Value| handler_command(h).is_some_and(|c| is_installed_form(c, custom));
    let mut removed = Vec::new();
    let mut emptied = Vec::new();
    for (event, groups) in hooks.iter_mut() {
        let groups = groups.as_array_mut().expect("checked by hooks_object");
        let before = groups.len();
        let mut touched = false;
        groups.retain_mut(|group| {
            let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                // A handler listed directly (Copilot, Cursor).
                if ours(group) {
                    touched = true;
                    return false;
                }
                return true;
            };
            let count = handlers.len();
            handlers.retain(|h| !ours(h));
            if handlers.len() == count {
                return true;
            }
            touched = true;
            !handlers.is_empty()
        });
        if touched {
            removed.push(event.clone());
        }
        if before > 0 && groups.is_empty() {
            emptied.push(event.clone());
        }
    }
    let had_events = !hooks.is_empty();
    for event in emptied {
        hooks.shift_remove(&event);
    }
    if had_events && hooks.is_empty() {
        settings.shift_remove("hooks");
        if settings.len() == 1 && settings.get("version") == Some(&json!(1)) {
            settings.shift_remove("version");
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::install::CLAUDE_EVENTS;
    use crate::cli::install::settings::render;

    fn parse(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn installed_forms_are_recognised() {
        for ours in [
            "hookhost dispatch --format claude",
            "/usr/local/bin/hookhost dispatch --format claude",
            "'/home/a b/.cargo/bin/hookhost' dispatch --format claude",
            // The small client's forms.
            "hookhost-dispatch --format claude",
            "/usr/local/bin/hookhost-dispatch --format claude",
            "'/home/a b/.cargo/bin/hookhost-dispatch' --format claude",
        ] {
            assert!(is_installed_form(ours, None), "{ours}");
        }
        for theirs in [
            "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude",
            "./hookhost-wrapper dispatch --format claude",
            "hookhost dispatch --format claude; rm -rf ~",
            "echo hookhost dispatch --format claude",
            "./hookhost-dispatch --format claude",
            "hookhost-dispatch dispatch --format claude",
            "/usr/bin/hookhost --format claude",
            "/usr/bin/hookhost-dispatch --format claude; rm -rf ~",
        ] {
            assert!(!is_installed_form(theirs, None), "{theirs}");
        }
        assert!(is_any_drop_in(
            "HOOKHOST_DISPATCH_DAEMON=off hookhost-dispatch --format claude",
            None,
            "claude"
        ));
        assert!(is_any_drop_in(
            "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude",
            None,
            "claude"
        ));
        assert!(is_installed_form("my-hook", Some("my-hook")));
    }
    #[test]
    fn install_then_uninstall_gives_back_the_same_bytes() {
        let original = "{\n  \"model\": \"opus\",\n  \"hooks\": {\n    \"PreToolUse\": [\n      {\n        \"matcher\": \"Bash\",\n        \"hooks\": [\n          {\n            \"type\": \"command\",\n            \"command\": \"./guard.sh\"\n          }\n        ]\n      }\n    ]\n  },\n  \"env\": {\n    \"A\": \"1\"\n  }\n}\n";
        let mut value = parse(original);
        assert_eq!(render(&value, true).unwrap(), original, "round trip");
        let added = add_drop_in(
            &mut value,
            Agent::Claude,
            "hookhost dispatch --format claude",
            None,
            "f",
        )
        .unwrap();
        assert_eq!(added, CLAUDE_EVENTS);
        // The user's hook and keys are kept, in their order.
        let keys: Vec<&String> = value.keys().collect();
        assert_eq!(keys, ["model", "hooks", "env"]);
        assert_eq!(
            value["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            "./guard.sh"
        );
        assert_eq!(value["hooks"]["PreToolUse"][1]["matcher"], "*");
        assert!(value["hooks"]["Stop"][0].get("matcher").is_none());
        // Idempotent.
        assert!(
            add_drop_in(
                &mut value,
                Agent::Claude,
                "hookhost dispatch --format claude",
                None,
                "f"
            )
            .unwrap()
            .is_empty()
        );
        let removed = remove_drop_in(&mut value, None, "f").unwrap();
        assert_eq!(removed.len(), CLAUDE_EVENTS.len());
        assert_eq!(render(&value, true).unwrap(), original);
    }

    #[test]
    fn uninstall_keeps_handlers_it_did_not_write() {
        let mut value = parse(
            r#"{"hooks": {"Stop": [{"hooks": [
                {"type": "command", "command": "hookhost dispatch --format claude"},
                {"type": "command", "command": "./mine.sh"}]}],
              "PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "command", "command": "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude"}]}]}}"#,
        );
        let removed = remove_drop_in(&mut value, None, "f").unwrap();
        assert_eq!(removed, ["Stop"]);
        assert_eq!(
            Value::Object(value),
            json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./mine.sh"}]}],
                   "PreToolUse": [{"matcher": "*", "hooks": [
                     {"type": "command", "command": "HOOKHOST_DISPATCH_DAEMON=off hookhost dispatch --format claude"}]}]}})
        );
    }
    #[test]
    fn a_wrong_shape_is_refused_not_replaced() {
        let mut value = parse(r#"{"hooks": []}"#);
        let e = add_drop_in(&mut value, Agent::Codex, "x", None, "f").unwrap_err();
        assert!(e.contains("`hooks` is not an object"), "{e}");
        let mut value = parse(r#"{"hooks": {"Stop": {}}}"#);
        let e = add_drop_in(&mut value, Agent::Codex, "x", None, "f").unwrap_err();
        assert!(e.contains("`hooks.Stop`"), "{e}");
    }
}
