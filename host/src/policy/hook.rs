//! One resolved hook: validated, with its matcher, `if` rule and handler compiled.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Settings;
use crate::config::schema::{HandlerType, InstanceMode, OnFailure, RawCapabilities, RawHandler};
use crate::config::{ConfigLayer, ConfigWarning, Origin};
use crate::event::EventSpec;
use crate::matcher::{IfRule, Matcher};

/// A matcher group: the hooks that share a matcher.
#[derive(Debug, Clone)]
pub struct Group {
    /// The compiled matcher.
    pub matcher: Matcher,
    /// The matcher as written (`None` when absent).
    pub matcher_source: Option<String>,
    /// Run the hooks one after another; a block stops the rest.
    pub sequential: bool,
    /// The hooks, in config order.
    pub hooks: Vec<Arc<Hook>>,
}

/// How a hook's result is awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// The dispatch waits for it and merges its answer.
    Sync,
    /// Runs in the background; its context arrives with a later outcome of the session.
    Async,
    /// Like `Async`, and exit 2 (a block) wakes the session with the hook's message.
    AsyncRewake,
}

/// Which shell runs a shell-form command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    /// `sh -c` (the default on Unix, as in Claude Code).
    Sh,
    /// `bash -c`.
    Bash,
}

/// A command hook.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// The shell command, or the program in exec form.
    pub command: String,
    /// Exec-form arguments (`None` = shell form).
    pub args: Option<Vec<String>>,
    /// The shell of the shell form.
    pub shell: Shell,
}

/// An HTTP hook.
#[derive(Debug, Clone)]
pub struct HttpSpec {
    /// The URL to POST to.
    pub url: String,
    /// Header templates.
    pub headers: Vec<(String, String)>,
    /// Env vars the headers may interpolate: the hook's `allowedEnvVars`, intersected with
    /// `httpHookAllowedEnvVars` when a settings file sets it.
    pub allowed_env_vars: Vec<String>,
}

/// A wasm hook, as configured. The sandbox turns grants into live capabilities.
#[derive(Debug, Clone)]
pub struct WasmSpec {
    /// Absolute path of the component.
    pub plugin: PathBuf,
    /// Expected sha256 (lowercase hex).
    pub sha256: Option<String>,
    /// Capability grants.
    pub capabilities: RawCapabilities,
    /// Fuel per call.
    pub fuel: Option<u64>,
    /// Memory cap in bytes.
    pub memory_bytes: Option<u64>,
    /// Instance lifetime.
    pub instance: InstanceMode,
    /// Plugin-specific settings.
    pub config: Option<Value>,
}

/// What runs.
#[derive(Debug, Clone)]
pub enum HandlerSpec {
    /// A process.
    Command(CommandSpec),
    /// A POST.
    Http(HttpSpec),
    /// A sandboxed component.
    Wasm(WasmSpec),
    /// An in-process function registered by an embedder.
    Function(crate::handlers::function::FunctionSpec),
    /// A type hookhost accepts in config but cannot run (`prompt`, `agent`, `mcp_tool`).
    Unsupported(HandlerType),
}

impl HandlerSpec {
    /// The handler type as named in config.
    pub fn type_name(&self) -> &'static str {
        match self {
            HandlerSpec::Command(_) => "command",
            HandlerSpec::Http(_) => "http",
            HandlerSpec::Wasm(_) => "wasm",
            HandlerSpec::Function(_) => "function",
            HandlerSpec::Unsupported(t) => t.as_str(),
        }
    }

    /// A one-line description for listings.
    pub fn summary(&self) -> String {
        match self {
            HandlerSpec::Command(c) => match &c.args {
                Some(args) => format!("{} {}", c.command, args.join(" ")),
                None => c.command.clone(),
            },
            HandlerSpec::Http(h) => h.url.clone(),
            HandlerSpec::Wasm(w) => w.plugin.display().to_string(),
            HandlerSpec::Function(_) => "(in-process function)".into(),
            HandlerSpec::Unsupported(t) => format!("({} hook)", t.as_str()),
        }
    }
}

/// One resolved hook.
#[derive(Debug, Clone)]
pub struct Hook {
    /// Stable name in reports: the configured `id`, else `<source>:<Event>[group][index]`.
    pub id: String,
    /// The event.
    pub event: String,
    /// Where it was configured.
    pub origin: Origin,
    /// Its JSON path in that source.
    pub config_path: String,
    /// What runs.
    pub handler: HandlerSpec,
    /// The `if` filter.
    pub if_rule: Option<IfRule>,
    /// Deadline of one run.
    pub timeout: Duration,
    /// Fail open or closed.
    pub on_failure: OnFailure,
    /// Tie-break among input rewrites: higher wins.
    pub priority: i64,
    /// Sync or background.
    pub mode: RunMode,
    /// Spinner text.
    pub status_message: Option<String>,
    /// Why the hook never runs (`enabled: false`, governance, duplicates), if it doesn't.
    pub skip: Option<String>,
    /// Position in config order.
    pub order: usize,
}

/// Fields that belong to one handler type only.
const COMMAND_FIELDS: &[&str] = &["command", "args", "shell"];
const HTTP_FIELDS: &[&str] = &["url", "headers", "allowedEnvVars"];
const WASM_FIELDS: &[&str] = &[
    "plugin",
    "sha256",
    "capabilities",
    "limits",
    "instance",
    "config",
];
const CLAUDE_ONLY_FIELDS: &[&str] = &[
    "server",
    "tool",
    "input",
    "prompt",
    "model",
    "continueOnBlock",
];

fn present_fields(raw: &RawHandler) -> Vec<&'static str> {
    let checks: [(&'static str, bool); 17] = [
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
/// the caller.
pub(super) fn build(
    raw: &RawHandler,
    spec: &EventSpec,
    layer: &ConfigLayer,
    path: &str,
    settings: &Settings,
    order: usize,
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
        HandlerType::McpTool | HandlerType::Prompt | HandlerType::Agent => CLAUDE_ONLY_FIELDS,
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
            Some(IfRule::parse(rule)?)
        }
    };

    let mode = match (raw.run_async, raw.async_rewake) {
        (_, Some(true)) => RunMode::AsyncRewake,
        (Some(true), _) => RunMode::Async,
        _ => RunMode::Sync,
    };
    let on_failure = raw.on_failure.unwrap_or_default();
    if on_failure == OnFailure::Block && (mode != RunMode::Sync || !spec.can_block()) {
        let why = if mode != RunMode::Sync {
            "async hooks".to_string()
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
    };
    Ok((hook, warnings))
}

fn required(value: &Option<String>, field: &str, kind: HandlerType) -> Result<String, String> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v.clone()),
        _ => Err(format!("hooks of type `{}` need `{field}`", kind.as_str())),
    }
}

fn resolve_plugin_path(base: &Path, plugin: &str) -> PathBuf {
    let path = Path::new(plugin);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}
