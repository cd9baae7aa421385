//! Parsing one settings document into [`RawSettings`], with errors that carry the JSON
//! path and warnings for entries that are skipped.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::UnreadHook;
use super::schema::{RawEventGroup, RawHandler, RawMatcherGroup, RawSettings};
use super::{ConfigError, ConfigWarning};
use crate::event::EventCatalogue;

/// Top-level keys of Claude Code's `settings.json` that are not about hooks. A file in
/// Claude Code's format may carry them; hookhost ignores them there.
const CLAUDE_SETTINGS_KEYS: &[&str] = &[
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "cleanupPeriodDays",
    "companyAnnouncements",
    "disableBypassPermissionsMode",
    "enableAllProjectMcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "enabledPlugins",
    "env",
    "extraKnownMarketplaces",
    "forceLoginMethod",
    "forceLoginOrgUUID",
    "includeCoAuthoredBy",
    "model",
    "otelHeadersHelper",
    "outputStyle",
    "permissions",
    "sandbox",
    "spinnerTipsEnabled",
    "statusLine",
    "strictPluginOnlyCustomization",
    "alwaysThinkingEnabled",
    "theme",
    "allowedMcpServers",
    "deniedMcpServers",
    "fileSuggestion",
    "respectGitignore",
];

/// Parses one settings document.
///
/// `claude_format` relaxes the top level for Claude Code's own settings files: keys that
/// Claude Code knows and hookhost does not use are ignored instead of rejected. The
/// `hooks` tree is strict either way. An unknown event name is a warning: that entry is
/// skipped and the rest of the file loads.
///
/// # Errors
///
/// Invalid JSON, unknown fields and wrong types, each naming `location`, the JSON path and
/// what was expected.
pub fn parse_settings(
    text: &str,
    location: &str,
    claude_format: bool,
    catalogue: &EventCatalogue,
) -> Result<(RawSettings, Vec<ConfigWarning>), ConfigError> {
    let err = |path: &str, message: String| ConfigError {
        location: location.to_string(),
        path: path.to_string(),
        message,
    };
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        err(
            "$",
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )
    })?;
    let Value::Object(top) = doc else {
        return Err(err(
            "$",
            format!("expected an object, found {}", kind_of(&doc)),
        ));
    };

    let mut settings = RawSettings::default();
    let mut warnings = Vec::new();
    for (key, value) in &top {
        let path = format!("$.{key}");
        match key.as_str() {
            "$schema" | "description" => {}
            "hooks" if value.is_array() => {
                settings.groups = super::flat::parse(value, location, catalogue, &mut warnings)?;
            }
            "hooks" => {
                settings.groups =
                    parse_hooks(value, location, claude_format, catalogue, &mut warnings)?;
            }
            "disableAllHooks" => settings.disable_all_hooks = typed(value, location, &path)?,
            "allowManagedHooksOnly" => {
                settings.allow_managed_hooks_only = typed(value, location, &path)?
            }
            "allowedHttpHookUrls" => {
                settings.allowed_http_hook_urls = typed(value, location, &path)?
            }
            "httpHookAllowedEnvVars" => {
                settings.http_hook_allowed_env_vars = typed(value, location, &path)?
            }
            "envAllowlist" => settings.env_allowlist = typed(value, location, &path)?,
            "mcpServers" => settings.mcp_servers = typed(value, location, &path)?,
            "stopBlockCap" => settings.stop_block_cap = typed(value, location, &path)?,
            "modelProvider" => settings.model_provider = typed(value, location, &path)?,
            "stopEscapeHatch" => settings.stop_escape_hatch = typed(value, location, &path)?,
            "maxHookDepth" => settings.max_hook_depth = typed(value, location, &path)?,
            "pluginAllowlist" => settings.managed.plugin_allowlist = typed(value, location, &path)?,
            "requireAllowlistedPlugins" => {
                settings.managed.require_allowlisted_plugins = typed(value, location, &path)?
            }
            "ceilings" => settings.managed.ceilings = typed(value, location, &path)?,
            "trustedWorkspaces" => {
                settings.managed.trusted_workspaces = typed(value, location, &path)?
            }
            "forbidWorkspaceTrust" => {
                settings.managed.forbid_workspace_trust = typed(value, location, &path)?
            }
            "forbidEnvironmentTrust" => {
                settings.managed.forbid_environment_trust = typed(value, location, &path)?
            }
            "auditLog" => {
                let log: String = typed(value, location, &path)?;
                if !std::path::Path::new(&log).is_absolute() {
                    return Err(err(
                        &path,
                        format!("`auditLog` must be an absolute path, found `{log}`"),
                    ));
                }
                settings.managed.audit_log = Some(log);
            }
            "httpHookCaFile" => {
                let file: String = typed(value, location, &path)?;
                if !std::path::Path::new(&file).is_absolute() {
                    return Err(err(
                        &path,
                        format!("`httpHookCaFile` must be an absolute path, found `{file}`"),
                    ));
                }
                settings.managed.http_hook_ca_file = Some(file);
            }
            "telemetry" => {
                let telemetry: super::schema::RawTelemetry = typed(value, location, &path)?;
                let scheme = url::Url::parse(&telemetry.endpoint).map(|u| u.scheme().to_string());
                if !matches!(scheme.as_deref(), Ok("http" | "https")) {
                    return Err(err(
                        &format!("{path}.endpoint"),
                        format!(
                            "`{}` is not an http or https URL",
                            crate::text::escape(&telemetry.endpoint)
                        ),
                    ));
                }
                settings.managed.telemetry = Some(telemetry);
            }
            _ if claude_format && CLAUDE_SETTINGS_KEYS.contains(&key.as_str()) => {}
            _ if claude_format => warnings.push(super::lenient::unknown_key_warning(
                location,
                path,
                key,
                super::lenient::top_level_keys(),
            )),
            _ => {
                return Err(err(
                    &path,
                    format!(
                        "unknown field `{key}`, expected one of `hooks`, `disableAllHooks`, \
                         `allowManagedHooksOnly`, `allowedHttpHookUrls`, \
                         `httpHookAllowedEnvVars`, `envAllowlist`, `stopBlockCap`, `stopEscapeHatch`, \
                         `maxHookDepth`, `modelProvider`, `mcpServers`, `$schema` \
                         (managed policy only: `pluginAllowlist`, `requireAllowlistedPlugins`, \
                         `ceilings`, `trustedWorkspaces`, `forbidWorkspaceTrust`, \
                         `forbidEnvironmentTrust`, `auditLog`, `httpHookCaFile`, `telemetry`)"
                    ),
                ));
            }
        }
    }
    Ok((settings, warnings))
}

/// Whether a list of matcher groups has `"required": true` on a group or a hook.
fn names_required(groups: &Value) -> bool {
    let required = |v: &Value| v.get("required") == Some(&Value::Bool(true));
    groups.as_array().into_iter().flatten().any(|group| {
        required(group)
            || group
                .get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|hooks| hooks.iter().any(required))
    })
}

fn parse_hooks(
    value: &Value,
    location: &str,
    claude_format: bool,
    catalogue: &EventCatalogue,
    warnings: &mut Vec<ConfigWarning>,
) -> Result<Vec<RawEventGroup>, ConfigError> {
    let events: Map<String, Value> = typed(value, location, "$.hooks")?;
    let mut groups = Vec::new();
    for (event, mut list) in events {
        let path = format!("$.hooks.{event}");
        if catalogue.get(&event).is_none() {
            let required = if names_required(&list) {
                " (a required one too: it never matches, so it never fails closed)"
            } else {
                ""
            };
            warnings.push(ConfigWarning {
                location: location.to_string(),
                path,
                message: format!("unknown event `{event}`; its hooks are skipped{required}"),
            });
            continue;
        }
        super::lenient::prepare_groups(&mut list, location, &path, claude_format, warnings);
        let read = match typed::<Vec<RawMatcherGroup>>(&list, location, &path) {
            Ok(read) => read.into_iter().map(|g| (g, None, Vec::new())).collect(),
            // One entry that cannot be read does not take the file's other hooks with it.
            Err(whole) => entry_by_entry(&list, location, &path).ok_or(whole)?,
        };
        groups.extend(read.into_iter().enumerate().map(
            |(index, (group, left_out, unread_required))| RawEventGroup {
                event: event.clone(),
                index,
                group,
                flat: None,
                left_out,
                unread_required,
            },
        ));
    }
    Ok(groups)
}

/// A group as read entry by entry: the group, (when something was left out) its
/// entries that could not be read (`(JSON path, message)`) and the position of each kept
/// hook in the file's list ([`RawEventGroup::left_out`]), and the required ones among
/// those left out ([`RawEventGroup::unread_required`]).
type ReadGroup = (
    RawMatcherGroup,
    Option<(Vec<(String, String)>, Vec<usize>)>,
    Vec<UnreadHook>,
);

/// An event's list of groups that does not read whole, read one group and one hook
/// entry at a time: what reads is kept, what does not is named (file, entry, field) for
/// the build to report, as a hook that cannot be built is. `None` when the list is not a
/// list (the whole file's error then stands).
fn entry_by_entry(list: &Value, location: &str, path: &str) -> Option<Vec<ReadGroup>> {
    let mut read = Vec::new();
    for (i, group) in list.as_array()?.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let whole = match typed::<RawMatcherGroup>(group, location, &at) {
            Ok(group) => {
                read.push((group, None, Vec::new()));
                continue;
            }
            Err(e) => e,
        };
        let entries = group.get("hooks").and_then(Value::as_array);
        let mut shell = group.clone();
        if let Some(fields) = shell.as_object_mut() {
            fields.insert("hooks".into(), Value::Array(Vec::new()));
        }
        let kept = match (entries, typed::<RawMatcherGroup>(&shell, location, &at)) {
            (Some(entries), Ok(kept)) => Some((entries, kept)),
            _ => None,
        };
        let Some((entries, mut kept)) = kept else {
            // The group itself cannot be read (its matcher, a `hooks` that is no list):
            // none of its hooks are kept.
            let empty = RawMatcherGroup {
                matcher: None,
                hooks: Vec::new(),
                sequential: None,
                chain: None,
                required: None,
            };
            // Its required entries stay known: they fail closed on every event of its name.
            let unread = entries
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(j, entry)| {
                    let path = format!("{at}.hooks[{j}]");
                    unread_required(group, entry, path, &whole.message)
                })
                .collect();
            read.push((
                empty,
                Some((vec![(whole.path, whole.message)], Vec::new())),
                unread,
            ));
            continue;
        };
        let (mut unreadable, mut positions, mut unread) = (Vec::new(), Vec::new(), Vec::new());
        for (j, entry) in entries.iter().enumerate() {
            match typed::<RawHandler>(entry, location, &format!("{at}.hooks[{j}]")) {
                Ok(hook) => {
                    kept.hooks.push(hook);
                    positions.push(j);
                }
                Err(e) => {
                    unread.extend(unread_required(group, entry, e.path.clone(), &e.message));
                    unreadable.push((e.path, e.message));
                }
            }
        }
        read.push((kept, Some((unreadable, positions)), unread));
    }
    Some(read)
}

/// What is known of `entry` (of `group`), which could not be read (`message`), when it
/// or its group says `"required": true`.
fn unread_required(
    group: &Value,
    entry: &Value,
    path: String,
    message: &str,
) -> Option<UnreadHook> {
    // The entry's own `required` (true or false) over its group's.
    let required = entry.get("required").or(group.get("required")) == Some(&Value::Bool(true));
    required.then(|| UnreadHook {
        path,
        kind: entry
            .get("type")
            .and_then(|t| serde_json::from_value(t.clone()).ok()),
        id: entry.get("id").and_then(Value::as_str).map(str::to_string),
        message: message.to_string(),
    })
}

/// Deserializes `value`, turning serde's error into one that names the JSON path below
/// `base`.
fn typed<T: DeserializeOwned>(value: &Value, location: &str, base: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = if inner == "." || inner.is_empty() {
            base.to_string()
        } else if inner.starts_with('[') {
            format!("{base}{inner}")
        } else {
            format!("{base}.{inner}")
        };
        ConfigError {
            location: location.to_string(),
            path,
            message: e.into_inner().to_string(),
        }
    })
}

/// The JSON type of a value, for messages (the value itself may be large).
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(RawSettings, Vec<ConfigWarning>), ConfigError> {
        parse_settings(text, "hooks.json", false, &EventCatalogue::default())
    }

    #[test]
    fn parses_claude_shape() {
        let (s, w) = parse(
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "echo hi", "timeout": 5}]}]},
                "disableAllHooks": false}"#,
        )
        .unwrap();
        assert!(w.is_empty());
        assert_eq!(s.groups.len(), 1);
        assert_eq!(s.groups[0].event, "PreToolUse");
        assert_eq!(
            s.groups[0].group.hooks[0].command.as_deref(),
            Some("echo hi")
        );
        assert_eq!(s.disable_all_hooks, Some(false));
    }

    #[test]
    fn errors_name_file_path_and_expectation() {
        let cases: &[(&str, &str, &str)] = &[
            ("{", "$", "invalid JSON at line 1"),
            ("[]", "$", "expected an object, found an array"),
            (
                r#"{"disableAllHooks": "yes"}"#,
                "$.disableAllHooks",
                "expected a boolean",
            ),
            (r#"{"nope": 1}"#, "$.nope", "unknown field `nope`"),
            (
                r#"{"hooks": {"Stop": {}}}"#,
                "$.hooks.Stop",
                "expected a sequence",
            ),
        ];
        for (text, path, message) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.location, "hooks.json");
            assert_eq!(&e.path, path, "{text}");
            assert!(e.message.contains(message), "{text}: {}", e.message);
        }
    }

    /// An entry that cannot be read is left out and named (entry and field); the file's
    /// other groups and hooks are kept, each at its position in the file.
    #[test]
    fn an_entry_that_cannot_be_read_takes_nothing_else_with_it() {
        let good = r#"{"type": "command", "command": "true"}"#;
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"{"type": "command", "comand": "x"}"#,
                "$.hooks.Stop[0].hooks[1].comand",
                "unknown field `comand`",
            ),
            (
                r#"{"type": "shell"}"#,
                "$.hooks.Stop[0].hooks[1].type",
                "unknown variant `shell`",
            ),
            (
                r#"{"type": "command", "timeout": "5"}"#,
                "$.hooks.Stop[0].hooks[1].timeout",
                "expected f64",
            ),
        ];
        for (entry, path, message) in cases {
            let text = format!(
                r#"{{"hooks": {{"Stop": [{{"hooks": [{good}, {entry}, {good}]}},
                                         {{"matcher": 7, "hooks": [{good}]}}],
                               "PreToolUse": [{{"hooks": [{good}]}}]}}}}"#
            );
            let (s, _) = parse(&text).unwrap();
            let stop: Vec<_> = s.groups.iter().filter(|g| g.event == "Stop").collect();
            assert_eq!(stop[0].group.hooks.len(), 2, "{entry}");
            let (unreadable, positions) = stop[0].left_out.as_ref().unwrap();
            assert_eq!(positions, &[0, 2], "{entry}");
            assert_eq!(unreadable.len(), 1, "{entry}");
            assert_eq!(unreadable[0].0, *path, "{entry}");
            assert!(unreadable[0].1.contains(message), "{entry}");
            // A group that cannot be read keeps none of its hooks, and says why.
            assert!(stop[1].group.hooks.is_empty());
            let (unreadable, _) = stop[1].left_out.as_ref().unwrap();
            assert_eq!(unreadable[0].0, "$.hooks.Stop[1].matcher");
            let other = s.groups.iter().find(|g| g.event == "PreToolUse").unwrap();
            assert_eq!(other.group.hooks.len(), 1, "{entry}");
            assert!(other.left_out.is_none());
        }
    }

    #[test]
    fn unknown_event_is_a_warning_and_the_rest_loads() {
        let (s, w) = parse(
            r#"{"hooks": {"PreToolUze": [{"hooks": []}],
                "Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#,
        )
        .unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].path, "$.hooks.PreToolUze");
        assert!(w[0].message.contains("unknown event `PreToolUze`"));
        assert_eq!(s.groups.len(), 1);
        assert_eq!(s.groups[0].event, "Stop");
    }

    #[test]
    fn claude_settings_keys_are_ignored_in_claude_format_only() {
        let text = r#"{"permissions": {"allow": []}, "model": "x", "hooks": {}}"#;
        assert!(parse(text).is_err());
        let (_, w) = parse_settings(text, "settings.json", true, &EventCatalogue::default())
            .expect("claude settings load");
        assert!(w.is_empty());
    }
}
