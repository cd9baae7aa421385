//! Builds one resolved hook from its config entry: validated, with its matcher, `if` rule and
//! handler compiled (the types are in [`super::spec`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agents a hook's `agents` may name: `hookhost dispatch --format`'s names.
pub const AGENTS: &[&str] = &["claude", "codex", "gemini", "copilot", "cursor", "opencode"];

use super::oci::OciRef;
use super::settings::Settings;
use crate::config::schema::{HandlerType, OnFailure, RawHandler};
use crate::config::{ConfigLayer, ConfigWarning, SourceKind};
use crate::event::{EventSpec, KeyClass};
use crate::matcher::IfRule;

use super::spec::{
    AgentSpec, CommandSpec, DEFAULT_KILL_GRACE, HandlerSpec, Hook, HttpSpec, MAX_KILL_GRACE_SECS,
    PromptSpec, RunMode, Shell, WasmSpec, is_framing_header,
};
// `widens` is for command and HTTP hooks only: a plugin has no typed response field for a
// key that widens, so a grant to one would be a promise the sandbox does not keep.
const COMMAND_FIELDS: &[&str] = &[
    "command",
    "args",
    "shell",
    "widens",
    "killGrace",
    "contextEnv",
];
const HTTP_FIELDS: &[&str] = &["url", "headers", "allowedEnvVars", "widens"];
const WASM_FIELDS: &[&str] = &[
    "plugin",
    "sha256",
    "capabilities",
    "limits",
    "instance",
    "config",
    "model",
    "provider",
];
const PROMPT_FIELDS: &[&str] = &["prompt", "model", "provider", "continueOnBlock"];
const AGENT_FIELDS: &[&str] = &["prompt", "model", "provider", "maxTurns", "tokenBudget"];
/// Turns of an agent hook when `maxTurns` is not set (Claude Code's).
pub const DEFAULT_MAX_TURNS: u32 = 50;
const MCP_TOOL_FIELDS: &[&str] = &["server", "tool", "input"];

fn present_fields(raw: &RawHandler) -> Vec<&'static str> {
    let checks: [(&'static str, bool); 24] = [
        ("widens", raw.widens.is_some()),
        ("command", raw.command.is_some()),
        ("args", raw.args.is_some()),
        ("shell", raw.shell.is_some()),
        ("killGrace", raw.kill_grace.is_some()),
        ("contextEnv", raw.context_env.is_some()),
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
        ("provider", raw.provider.is_some()),
        ("continueOnBlock", raw.continue_on_block.is_some()),
        ("maxTurns", raw.max_turns.is_some()),
        ("tokenBudget", raw.token_budget.is_some()),
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
        HandlerType::Prompt => PROMPT_FIELDS,
        HandlerType::Agent => AGENT_FIELDS,
        HandlerType::McpTool => MCP_TOOL_FIELDS,
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
            let kill_grace = match raw.kill_grace {
                None => DEFAULT_KILL_GRACE,
                Some(secs) if secs.is_finite() && (0.0..=MAX_KILL_GRACE_SECS).contains(&secs) => {
                    Duration::from_secs_f64(secs)
                }
                Some(secs) => {
                    return Err(format!(
                        "`killGrace` must be between 0 and {MAX_KILL_GRACE_SECS} seconds, found {secs}"
                    ));
                }
            };
            HandlerSpec::Command(CommandSpec {
                command,
                args: raw.args.clone(),
                shell,
                kill_grace,
                context_env: raw.context_env.unwrap_or(false),
            })
        }
        HandlerType::Http => {
            let url = required(&raw.url, "url", raw.kind)?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("`url` `{url}` must start with http:// or https://"));
            }
            let mut allowed = raw.allowed_env_vars.clone().unwrap_or_default();
            if let Some(outer) = settings.env_var_limit_for(layer.origin.kind) {
                allowed.retain(|var| outer.contains(var));
            }
            let headers: Vec<(String, String)> = raw
                .headers
                .clone()
                .unwrap_or_default()
                .into_iter()
                .collect();
            for (name, _) in headers.iter().filter(|(n, _)| is_framing_header(n)) {
                warn(
                    &format!("headers.{name}"),
                    format!(
                        "`{name}` is ignored: the request's length is worked out from its body \
                         (as in Claude Code)"
                    ),
                );
            }
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
            if raw.model.as_ref().is_some_and(|m| m.trim().is_empty()) {
                return Err("`model` is empty".into());
            }
            if capabilities.model.is_none() {
                for (field, set) in [
                    ("model", raw.model.is_some()),
                    ("provider", raw.provider.is_some()),
                ] {
                    if set {
                        warn(
                            field,
                            format!(
                                "`{field}` names what a plugin's model requests use, but \
                                 `capabilities.model` grants none; it has no effect"
                            ),
                        );
                    }
                }
            }
            let (oci, locked_by) = match oci_reference(&plugin, settings, layer.origin.kind)? {
                Some((reference, locked_by)) => (Some(reference), locked_by),
                None => (None, None),
            };
            HandlerSpec::Wasm(WasmSpec {
                plugin: match &oci {
                    Some(reference) => PathBuf::from(reference.to_string()),
                    None => resolve_plugin_path(&layer.base_dir, &plugin),
                },
                oci: oci.map(Box::new),
                locked_by,
                sha256,
                capabilities,
                fuel: limits.fuel,
                memory_bytes: limits.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
                instance: raw.instance.unwrap_or_default(),
                config: raw.config.clone(),
                model: raw.model.clone(),
                provider: raw.provider,
            })
        }
        HandlerType::Prompt => {
            let prompt = required(&raw.prompt, "prompt", raw.kind)?;
            if raw.model.as_ref().is_some_and(|m| m.trim().is_empty()) {
                return Err("`model` is empty".into());
            }
            HandlerSpec::Prompt(PromptSpec {
                prompt,
                model: raw.model.clone(),
                provider: raw.provider,
                continue_on_block: raw.continue_on_block.unwrap_or(false),
            })
        }
        HandlerType::Agent => {
            if spec.refuses_agent_hooks() {
                return Err(format!(
                    "`type`: agent hooks are refused on `{}` (as in Claude Code since \
                     2.1.280); use a `prompt` or `command` hook",
                    spec.name
                ));
            }
            let prompt = required(&raw.prompt, "prompt", raw.kind)?;
            if raw.model.as_ref().is_some_and(|m| m.trim().is_empty()) {
                return Err("`model` is empty".into());
            }
            if raw.max_turns == Some(0) {
                return Err("`maxTurns` must be at least 1".into());
            }
            if raw.token_budget == Some(0) {
                return Err("`tokenBudget` must be at least 1".into());
            }
            HandlerSpec::Agent(AgentSpec {
                prompt,
                model: raw.model.clone(),
                provider: raw.provider,
                max_turns: raw.max_turns.unwrap_or(DEFAULT_MAX_TURNS),
                token_budget: raw.token_budget,
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
    let model_hook = matches!(handler, HandlerSpec::Prompt(_) | HandlerSpec::Agent(_));
    let timeout = match timeout_secs {
        // Claude Code: 30 s for prompt hooks, 60 s for agent hooks (never above the
        // event's own default, so that SessionEnd keeps its short budget), a floor of 1 s.
        None if matches!(handler, HandlerSpec::Agent(_)) => {
            spec.default_timeout.min(Duration::from_secs(60))
        }
        None if model_hook => spec.default_timeout.min(Duration::from_secs(30)),
        None => spec.default_timeout,
        Some(secs) if model_hook && secs.is_finite() && secs > 0.0 && secs < 1.0 => {
            Duration::from_secs(1)
        }
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

    if let Some(agents) = &raw.agents
        && let Some(unknown) = agents.iter().find(|a| !AGENTS.contains(&a.as_str()))
    {
        return Err(format!(
            "`agents`: `{}` is not an agent hookhost dispatches for (it knows {})",
            crate::text::escape(unknown),
            AGENTS.join(", ")
        ));
    }

    let mode = match (raw.run_async, raw.async_rewake) {
        _ if model_hook && (raw.run_async.is_some() || raw.async_rewake.is_some()) => {
            warn(
                "async",
                "prompt and agent hooks always run in the foreground (as in Claude Code); \
                 `async` ignored"
                    .into(),
            );
            RunMode::Sync
        }
        (_, Some(true)) => RunMode::AsyncRewake,
        (Some(true), _) => RunMode::Async,
        _ => RunMode::Sync,
    };
    let on_failure = raw.on_failure.unwrap_or_default();
    if let Some(why) = super::on_failure::ignored(on_failure, mode, spec) {
        warn(
            "onFailure",
            format!(
                "`onFailure: \"{}\"` has no effect here, a failure is a notice: {why}",
                on_failure.as_str()
            ),
        );
    }
    if matches!(on_failure, OnFailure::Ignore | OnFailure::Abort)
        && layer
            .file
            .as_deref()
            .is_some_and(crate::config::is_claude_settings_file)
    {
        warn(
            "onFailure",
            format!(
                "`onFailure: \"{}\"` is hookhost's own: Claude Code knows only `continue` and \
                 `block` and refuses this file's settings if it reads it; keep such hooks in a \
                 hookhost file (`.hookhost/hooks.json`)",
                on_failure.as_str()
            ),
        );
    }
    if spec.timeout_blocks() && mode == RunMode::Sync && raw.on_failure == Some(OnFailure::Continue)
    {
        warn(
            "onFailure",
            format!(
                "a timeout still blocks `{}` (as in Claude Code); `onFailure: \"continue\"` \
                 covers the other failures",
                spec.name
            ),
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

    let id = id_of(raw, layer, path);
    let hook = Hook {
        id,
        event: spec.name.to_string(),
        origin: layer.origin.clone(),
        config_path: path.to_string(),
        handler,
        if_rule,
        agents: raw.agents.clone(),
        timeout,
        on_failure,
        priority: raw.priority.unwrap_or(0),
        mode,
        status_message: raw.status_message.clone(),
        skip,
        order,
        widens,
        chain: None,
        // Decided by the resolution, which knows the group and the trust.
        required: false,
    };
    Ok((hook, warnings))
}

/// The hook's `id`, else its config path: `<source>:PreToolUse[0][1]`, or a flat file's
/// `<source>:hooks[3]`.
pub(super) fn id_of(raw: &RawHandler, layer: &ConfigLayer, path: &str) -> String {
    id_at(raw.id.as_deref(), layer, path)
}

/// `id`, else the id [`id_of`] makes of the config path.
pub(super) fn id_at(id: Option<&str>, layer: &ConfigLayer, path: &str) -> String {
    id.map(str::to_string).unwrap_or_else(|| {
        let short = match path.strip_prefix("$.hooks.") {
            Some(nested) => nested.replace(".hooks", ""),
            None => path.trim_start_matches("$.").replace(".handler", ""),
        };
        format!("{}:{short}", layer.origin.kind)
    })
}

fn required(value: &Option<String>, field: &str, kind: HandlerType) -> Result<String, String> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v.clone()),
        _ => Err(format!("hooks of type `{}` need `{field}`", kind.as_str())),
    }
}

/// The registry reference of a `plugin` that is one (`oci://…`): it must pin the
/// manifest's digest unless managed policy's `ceilings.ociTags` allows tags.
///
/// A project's `hookhost.lock` (trusted workspace) binds the references of the
/// workspace's own files (project and local): the reference runs at the lock's digest
/// (returned with the lock's path), so what runs is what was locked whatever the tag
/// names today. The lock is the repository's word: it binds no reference of the user's
/// files, `--settings` or managed policy (red team, stop 37: a lock pinning the name of
/// the user's own guard at another digest made it a config error, and the guard was
/// skipped).
fn oci_reference(
    plugin: &str,
    settings: &Settings,
    source: SourceKind,
) -> Result<Option<(OciRef, Option<String>)>, String> {
    if !OciRef::is_reference(plugin) {
        return Ok(None);
    }
    let reference = OciRef::parse(plugin).map_err(|e| format!("`plugin`: {e}"))?;
    if let Some(lock) = settings
        .oci_lock
        .as_ref()
        .filter(|_| matches!(source, SourceKind::Project | SourceKind::Local))
        && let Some(bound) = lock
            .bind(&reference)
            .map_err(|e| format!("`plugin`: {e}"))?
    {
        return Ok(Some((bound, Some(lock.location.clone()))));
    }
    let tags = settings.ceilings.as_ref().is_some_and(|c| c.oci_tags());
    if reference.digest.is_none() && !tags {
        return Err(format!(
            "`plugin`: `{reference}` names a tag but no digest; pin the manifest with \
             `@sha256:…` (`hookhost plugin pull` prints it), or managed policy must allow \
             tags (`ceilings.ociTags`)"
        ));
    }
    Ok(Some((reference, None)))
}

pub(super) fn resolve_plugin_path(base: &Path, plugin: &str) -> PathBuf {
    let path = Path::new(plugin);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}
