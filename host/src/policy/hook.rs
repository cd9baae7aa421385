//! Builds one resolved hook from its config entry: validated, with its matcher, `if` rule and
//! handler compiled (the types are in [`super::spec`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::settings::Settings;
use crate::config::schema::{HandlerType, OnFailure, RawHandler};
use crate::config::{ConfigLayer, ConfigWarning};
use crate::event::{EventSpec, KeyClass};
use crate::matcher::IfRule;

use super::spec::{CommandSpec, HandlerSpec, Hook, HttpSpec, RunMode, Shell, WasmSpec};
// `widens` is for command and HTTP hooks only: a plugin has no typed response field for a
// key that widens, so a grant to one would be a promise the sandbox does not keep.
const COMMAND_FIELDS: &[&str] = &["command", "args", "shell", "widens"];
const HTTP_FIELDS: &[&str] = &["url", "headers", "allowedEnvVars", "widens"];
const WASM_FIELDS: &[&str] = &[
    "plugin",
    "sha256",
    "capabilities",
    "limits",
    "instance",
    "config",
];
const MCP_TOOL_FIELDS: &[&str] = &["server", "tool", "input"];
const CLAUDE_ONLY_FIELDS: &[&str] = &["prompt", "model", "continueOnBlock"];

fn present_fields(raw: &RawHandler) -> Vec<&'static str> {
    let checks: [(&'static str, bool); 18] = [
        ("widens", raw.widens.is_some()),
        ("command", raw.command.is_some()),
        ("args", raw.args.is_some()),
        ("shell", raw.shell.is_some()),
        ("url", raw.url.is_some()),
        ("headers", raw.headers.is_some()),
        ("allowedEnvVars", raw.allowed_env_vars.is_some()),
        ("plugin", raw.plugin.is_some()),
        ("sha256", raw.sha256.is_some()),
        ("capabilities", raw.capabilities.is_some()),
        ("limits", raw.limits.is_some()),
        ("instance", raw.instance.is_some()),
        ("config", raw.config.is_some()),
        ("server", raw.server.is_some()),
        ("tool", raw.tool.is_some()),
        ("input", raw.input.is_some()),
        ("prompt", raw.prompt.is_some()),
        ("model", raw.model.is_some()),
    ];
    checks
        .iter()
        .filter(|(_, present)| *present)
        .map(|(name, _)| *name)
        .collect()
}

/// Validates one raw handler and builds its [`Hook`]. Governance (`skip`) is applied by
/// the caller. `home` anchors `~/` in the `if` rule.
pub(super) fn build(
    raw: &RawHandler,
    spec: &EventSpec,
    layer: &ConfigLayer,
    path: &str,
    settings: &Settings,
    order: usize,
    home: Option<&Path>,
) -> Result<(Hook, Vec<ConfigWarning>), String> {
    let mut warnings = Vec::new();
    let mut warn = |field: &str, message: String| {
        warnings.push(ConfigWarning {
            location: layer.origin.location.clone(),
            path: format!("{path}.{field}"),
            message,
        })
    };
    let own_fields: &[&str] = match raw.kind {
        HandlerType::Command => COMMAND_FIELDS,
        HandlerType::Http => HTTP_FIELDS,
        HandlerType::Wasm => WASM_FIELDS,
        HandlerType::McpTool => MCP_TOOL_FIELDS,
        HandlerType::Prompt | HandlerType::Agent => CLAUDE_ONLY_FIELDS,
    };
    if let Some(field) = present_fields(raw)
        .into_iter()
        .find(|f| !own_fields.contains(f))
    {
        return Err(format!(
            "`{field}` is not a field of a {} hook",
            raw.kind.as_str()
        ));
    }

    let handler = match raw.kind {
        HandlerType::Command => {
            let command = required(&raw.command, "command", raw.kind)?;
            let shell = match raw.shell.as_deref() {
                None | Some("sh") => Shell::Sh,
                Some("bash") => Shell::Bash,
                Some(other) => {
                    return Err(format!(
                        "unsupported `shell` `{other}`, expected `bash` or `sh`"
                    ));
                }
            };
            if raw.args.is_some() && command.contains(char::is_whitespace) {
                warn(
                    "command",
                    format!(
                        "exec-form program `{command}` contains whitespace; it is one file name, not a command line"
                    ),
                );
            }
            if raw.args.is_some() && raw.shell.is_some() {
                warn(
                    "shell",
                    "`shell` has no effect with `args` (exec form runs no shell)".into(),
                );
            }
            HandlerSpec::Command(CommandSpec {
                command,
                args: raw.args.clone(),
                shell,
            })
        }
        HandlerType::Http => {
            let url = required(&raw.url, "url", raw.kind)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("`url` `{url}` must start with http:// or https://"));
            }
            let mut allowed = raw.allowed_env_vars.clone().unwrap_or_default();
            if let Some(outer) = &settings.http_hook_allowed_env_vars {
                allowed.retain(|var| outer.contains(var));
            }
            let headers = raw
                .headers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect();
            HandlerSpec::Http(HttpSpec {
                url,
                headers,
                allowed_env_vars: allowed,
            })
        }
        HandlerType::Wasm => {
            let plugin = required(&raw.plugin, "plugin", raw.kind)?;
            let sha256 = match &raw.sha256 {
                Some(s) if s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit()) => {
                    Some(s.to_ascii_lowercase())
                }
                Some(s) => return Err(format!("`sha256` `{s}` is not 64 hex digits")),
                None => None,
            };
            let limits = raw.limits.clone().unwrap_or_default();
            if limits.fuel == Some(0) {
                return Err("`limits.fuel` must be at least 1".into());
            }
            if limits.memory_mb == Some(0) {
                return Err("`limits.memoryMb` must be at least 1".into());
            }
            let capabilities = raw.capabilities.clone().unwrap_or_default();
            super::capability::validate(&capabilities)
                .map_err(|(field, message)| format!("`{field}`: {message}"))?;
            HandlerSpec::Wasm(WasmSpec {
                plugin: resolve_plugin_path(&layer.base_dir, &plugin),
                sha256,
                capabilities,
                fuel: limits.fuel,
                memory_bytes: limits.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
                instance: raw.instance.unwrap_or_default(),
                config: raw.config.clone(),
            })
        }
        HandlerType::McpTool => {
            let server = required(&raw.server, "server", raw.kind)?;
            let tool = required(&raw.tool, "tool", raw.kind)?;
            let input = match &raw.input {
                None => serde_json::Map::new(),
                Some(serde_json::Value::Object(map)) => map.clone(),
                Some(other) => {
                    return Err(format!(
                        "`input` must be an object of the tool's arguments, found {}",
                        match other {
                            serde_json::Value::Array(_) => "an array",
                            serde_json::Value::String(_) => "a string",
                            serde_json::Value::Number(_) => "a number",
                            serde_json::Value::Bool(_) => "a boolean",
                            _ => "null",
                        }
                    ));
                }
            };
            if !settings.mcp_servers.contains_key(&server) {
                warn(
                    "server",
                    format!(
                        "MCP server `{server}` is not in any `mcpServers` (of a trusted \
                         workspace); the hook fails unless the embedder provides it"
                    ),
                );
            }
            HandlerSpec::McpTool(super::mcp::McpToolSpec {
                server,
                tool,
                input,
            })
        }
        other => HandlerSpec::Unsupported(other),
    };

    let limit_timeout = raw.limits.as_ref().and_then(|l| l.timeout);
    let timeout_secs = match (raw.timeout, limit_timeout) {
        (Some(a), Some(b)) if a != b => {
            return Err(format!(
                "`timeout` ({a}) and `limits.timeout` ({b}) disagree; set one"
            ));
        }
        (a, b) => a.or(b),
    };
    let timeout = match timeout_secs {
        None => spec.default_timeout,
        Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Duration::from_secs_f64(secs)
        }
        Some(secs) => {
            return Err(format!(
                "`timeout` must be between 0 and 86400 seconds, found {secs}"
            ));
        }
    };

    let if_rule = match &raw.if_rule {
        None => None,
        Some(rule) => {
            if !spec.tool_event {
                warn(
                    "if",
                    format!(
                        "`if` only applies to tool events; this hook never runs on `{}`",
                        spec.name
                    ),
                );
            }
            Some(IfRule::parse(rule, home)?)
        }
    };

    let mode = match (raw.run_async, raw.async_rewake) {
        (_, Some(true)) => RunMode::AsyncRewake,
        (Some(true), _) => RunMode::Async,
        _ => RunMode::Sync,
    };
    let on_failure = raw.on_failure.unwrap_or_default();
    if on_failure == OnFailure::Block && (mode != RunMode::Sync || !spec.honours_on_failure()) {
        let why = if mode != RunMode::Sync {
            "async hooks".to_string()
        } else if spec.can_block() {
            format!(
                "`{}` (as in Claude Code: a failing check must not trap the agent in a loop)",
                spec.name
            )
        } else {
            format!("`{}`, which cannot block", spec.name)
        };
        warn(
            "onFailure",
            format!("`onFailure: \"block\"` is ignored on {why}"),
        );
    }
    if raw.once.is_some() {
        warn(
            "once",
            "`once` is honoured only in skill frontmatter; ignored".into(),
        );
    }

    let skip = match (&handler, raw.enabled) {
        (_, Some(false)) => Some("disabled in config (`enabled: false`)".to_string()),
        (HandlerSpec::Unsupported(t), _) => {
            let why = format!("hookhost does not run `{}` hooks", t.as_str());
            warn("type", format!("{why}; skipped"));
            Some(why)
        }
        _ if raw.if_rule.is_some() && !spec.tool_event => {
            Some(format!("`if` never matches on `{}`", spec.name))
        }
        _ => None,
    };

    let widens = raw.widens.clone().unwrap_or_default();
    for (i, key) in widens.iter().enumerate() {
        match spec.output_key(key) {
            Some(k) if k.class == KeyClass::Widens => {}
            _ => {
                let list: Vec<&str> = spec
                    .specific_outputs
                    .iter()
                    .filter(|k| k.class == KeyClass::Widens)
                    .map(|k| k.name)
                    .collect();
                return Err(format!(
                    "`widens[{i}]` `{key}` is not a key of `{}` that grants, consents or \
                     widens (those are: {})",
                    spec.name,
                    if list.is_empty() {
                        "none".to_string()
                    } else {
                        list.join(", ")
                    }
                ));
            }
        }
    }

    let id = raw.id.clone().unwrap_or_else(|| {
        let short = path.trim_start_matches("$.hooks.").replace(".hooks", "");
        format!("{}:{short}", layer.origin.kind)
    });
    let hook = Hook {
        id,
        event: spec.name.to_string(),
        origin: layer.origin.clone(),
        config_path: path.to_string(),
        handler,
        if_rule,
        timeout,
        on_failure,
        priority: raw.priority.unwrap_or(0),
        mode,
        status_message: raw.status_message.clone(),
        skip,
        order,
        widens,
    };
    Ok((hook, warnings))
}

fn required(value: &Option<String>, field: &str, kind: HandlerType) -> Result<String, String> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v.clone()),
        _ => Err(format!("hooks of type `{}` need `{field}`", kind.as_str())),
    }
}

pub(super) fn resolve_plugin_path(base: &Path, plugin: &str) -> PathBuf {
    let path = Path::new(plugin);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}
