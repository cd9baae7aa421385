//! Raw config types: what a settings file says, parsed but not yet validated.
//!
//! The shape is Claude Code's settings block, so a `.claude/settings.json` is a valid
//! source, plus hookhost's own fields. Every struct denies unknown fields, so a typo is an
//! error that names the file and the JSON path instead of a silently ignored setting.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod models;
pub use models::{ModelProviderKind, RawModelCeiling, RawModelGrant, RawModelProvider};

/// One matcher group: `{"matcher": "...", "hooks": [...]}`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMatcherGroup {
    /// Which subjects (tool names, sources, ...) the group applies to.
    #[serde(default)]
    pub matcher: Option<String>,
    /// The handlers of the group.
    pub hooks: Vec<RawHandler>,
    /// Run the handlers one after another in config order; a block stops the rest.
    #[serde(default)]
    pub sequential: Option<bool>,
    /// A transform chain: run the handlers one after another in config order (as
    /// `sequential`), each given the input as the handlers before it rewrote it
    /// (`updatedInput`, `updatedToolOutput`, `updatedPrompt`, `skipResult`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<bool>,
    /// Every hook of the group is required: when one that matches gives no verdict
    /// (skipped, failed, timed out), the event fails closed (docs/book/src/required-hooks.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// The handler types a settings file may name.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandlerType {
    /// A process: shell form (`command`) or exec form (`command` + `args`).
    Command,
    /// A POST to a URL.
    Http,
    /// A sandboxed WebAssembly component.
    Wasm,
    /// Claude Code's MCP tool hook (accepted so settings files load; not run).
    McpTool,
    /// Claude Code's prompt hook: one model judgement, `{ok, reason, impossible}`.
    Prompt,
    /// Claude Code's agent hook (accepted so settings files load; not run).
    Agent,
}

impl HandlerType {
    /// The name used in config and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerType::Command => "command",
            HandlerType::Http => "http",
            HandlerType::Wasm => "wasm",
            HandlerType::McpTool => "mcp_tool",
            HandlerType::Prompt => "prompt",
            HandlerType::Agent => "agent",
        }
    }
}

/// What a failing hook (cannot start, timeout, unexpected exit, invalid output, trap)
/// does to the action.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum OnFailure {
    /// Fail open: a non-blocking error notice (Claude Code's default).
    #[default]
    Continue,
    /// Fail open without a notice: the failure is still in the hook's report and the
    /// audit log (hookhost's own; Claude Code does not know it).
    Ignore,
    /// Fail closed: the failure blocks like exit 2 (a deny on permission events).
    Block,
    /// Stop the agent: `continue: false` with a stop reason naming the hook (hookhost's
    /// own; Claude Code does not know it).
    Abort,
}

impl OnFailure {
    /// The value as config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Continue => "continue",
            OnFailure::Ignore => "ignore",
            OnFailure::Block => "block",
            OnFailure::Abort => "abort",
        }
    }
}

/// Where a wasm plugin keeps its instance.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum InstanceMode {
    /// A fresh instance for every event (the default; nothing leaks between events).
    #[default]
    Event,
    /// One instance per session, for stateful plugins.
    Session,
}

/// One hook handler. All types share this struct so a field on the wrong type is caught
/// by validation with a message that names the type ("`url` is not a field of a command
/// hook"), not by serde's generic "unknown variant".
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHandler {
    /// The handler type.
    #[serde(rename = "type")]
    pub kind: HandlerType,

    // Common fields.
    /// Permission-rule filter (`Bash(git *)`, `Edit(*.ts)`), tool events only.
    #[serde(rename = "if", default, skip_serializing_if = "Option::is_none")]
    pub if_rule: Option<String>,
    /// The agents the hook runs for (`claude`, `codex`, `gemini`, `copilot`, `cursor`,
    /// `opencode`: `hookhost dispatch --format`'s names); absent: every agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<Vec<String>>,
    /// Timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Spinner text shown by agents while the hook runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Claude Code's run-once flag (honoured there only in skill frontmatter; ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub once: Option<bool>,
    /// A stable name for reports; defaults to the config path of the handler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `false` keeps the hook in the file but never runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// What a failure does: `continue` (default: a notice), `ignore` (no notice),
    /// `block` (fail closed) or `abort` (stop the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<OnFailure>,
    /// Higher wins when several hooks rewrite the tool input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// When the hook matches but gives no verdict (skipped, failed, timed out), the event
    /// fails closed (docs/book/src/required-hooks.md). Honoured from managed policy, the user's
    /// settings and `--settings`; from project and local files in a trusted workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,

    /// `hookSpecificOutput` keys that grant, consent or widen (`updatedPermissions`,
    /// `retry`, Elicitation `action`, `worktreePath` …) which this command or HTTP hook may
    /// set; without it they are dropped with a notice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widens: Option<Vec<String>>,

    // command
    /// Shell command (shell form) or program (exec form, with `args`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Exec-form arguments: no shell, one argv entry each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Run in the background; results arrive with a later outcome of the session.
    #[serde(rename = "async", default, skip_serializing_if = "Option::is_none")]
    pub run_async: Option<bool>,
    /// Async, and exit 2 wakes the session with the hook's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_rewake: Option<bool>,
    /// `bash` (default `sh`) or `powershell`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// Seconds between the `SIGTERM` and the `SIGKILL` to the hook's process group on a
    /// timeout or a cancellation (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_grace: Option<f64>,
    /// Put the event's context in the hook's environment (`HOOKHOST_TOOL_NAME`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_env: Option<bool>,

    // http
    /// URL to POST the input to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Request headers; values may use `$VAR` / `${VAR}` from `allowedEnvVars`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Env vars that header values may interpolate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_env_vars: Option<Vec<String>>,

    // wasm
    /// Path of the component, relative to the config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// Expected sha256 of the component, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// What the plugin is granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<RawCapabilities>,
    /// Resource limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RawLimits>,
    /// Fresh instance per event (default) or one per session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<InstanceMode>,
    /// Plugin-specific settings, handed to the plugin as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,

    // mcp_tool (handlers::mcp); prompt and agent: accepted.
    /// `mcp_tool`: the MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `mcp_tool`: the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `mcp_tool`: the tool input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// `prompt` / `agent`: the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `prompt` / `agent`: the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `prompt` / `agent`: who answers (default: `modelProvider`, else the embedder's model, else
    /// Anthropic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ModelProviderKind>,
    /// `prompt`: keep the turn going on a block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_on_block: Option<bool>,
    /// `agent`: the most model turns (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// `agent`: the most tokens (input + output) one run may spend, under managed
    /// `ceilings.models.tokensPerEvent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_budget: Option<u64>,
}

/// Capability grants of a wasm hook. Each is live only if the plugin also declares it.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCapabilities {
    /// Directories to preopen.
    #[serde(default)]
    pub dirs: Vec<RawDirGrant>,
    /// Environment variable names the plugin may read.
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts (`host`, `host:port`, `https://host`, `*.example.com`) the plugin may call.
    #[serde(default)]
    pub http: Vec<String>,
    /// The model of the hook's provider, under a token budget (0.2.0 plugins that
    /// import `hookhost:hook/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<RawModelGrant>,
}

/// A preopened directory.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDirGrant {
    /// Host path: absolute, or `${workspace}` / `${home}` based.
    pub path: String,
    /// Where the plugin sees it; defaults to the host path.
    #[serde(default)]
    pub guest: Option<String>,
    /// `ro` (default) or `rw`.
    #[serde(default)]
    pub mode: DirMode,
}

/// Access mode of a directory grant.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
pub enum DirMode {
    /// Read-only.
    #[default]
    #[serde(rename = "ro", alias = "read")]
    ReadOnly,
    /// Read and write.
    #[serde(rename = "rw", alias = "write")]
    ReadWrite,
}

/// Resource limits of a wasm hook.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawLimits {
    /// Fuel per call.
    #[serde(default)]
    pub fuel: Option<u64>,
    /// Linear memory cap in MiB.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Wall-clock limit in seconds (same as the handler's `timeout`).
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// A matcher group as found in a file, with where it was.
#[derive(Debug, Clone)]
pub struct RawEventGroup {
    /// The event name.
    pub event: String,
    /// Index of the group in the event's list.
    pub index: usize,
    /// The group.
    pub group: RawMatcherGroup,
    /// The index of its entry when it comes from a flat-format file (`$.hooks[N]`, one
    /// handler per entry: [`crate::config::flat`]); `None` in the nested shape.
    pub flat: Option<usize>,
    /// Entries left out unread (path, message) and each kept hook's position (`parse.rs`).
    pub left_out: Option<LeftOut>,
    /// Required entries left out unread: policy keeps them, failing closed.
    pub unread_required: Vec<super::UnreadHook>,
}

/// What a group's reading left out: the entries left unread (path, message) and each kept
/// hook's position in the file's list.
pub type LeftOut = (Vec<(String, String)>, Vec<usize>);

/// One settings source, parsed.
#[derive(Debug, Clone, Default)]
pub struct RawSettings {
    /// Matcher groups of known events, in file order.
    pub groups: Vec<RawEventGroup>,
    /// `disableAllHooks`.
    pub disable_all_hooks: Option<bool>,
    /// `allowManagedHooksOnly` (honoured in managed policy only).
    pub allow_managed_hooks_only: Option<bool>,
    /// `allowedHttpHookUrls`: where HTTP hooks may post (merges across files).
    pub allowed_http_hook_urls: Option<Vec<String>>,
    /// `httpHookAllowedEnvVars`: outer limit on each HTTP hook's `allowedEnvVars`.
    pub http_hook_allowed_env_vars: Option<Vec<String>>,
    /// `envAllowlist`: credential-looking variables that command hooks still get.
    pub env_allowlist: Option<Vec<String>>,
    /// `stopBlockCap`: consecutive Stop blocks before the block is overridden.
    pub stop_block_cap: Option<u32>,
    /// `modelProvider`: who answers `prompt` hooks.
    pub model_provider: Option<RawModelProvider>,
    /// `stopEscapeHatch`: a sentence added to the reason of a Stop block.
    pub stop_escape_hatch: Option<StopEscapeHatch>,
    /// `maxHookDepth`: past this depth of hooks in hooks, hookhost runs none.
    pub max_hook_depth: Option<u32>,
    /// Managed-only settings (allowlist, ceilings, workspace trust); see [`RawManaged`].
    pub managed: RawManaged,
    /// `mcpServers`: the MCP servers `mcp_tool` hooks call, by name (`.mcp.json`'s shape).
    pub mcp_servers: Option<BTreeMap<String, RawMcpServer>>,
}

/// One MCP server, in the shape of Claude Code's `.mcp.json`: `command`/`args`/`env` for a
/// stdio server, `type: "http"` and `url` for streamable HTTP.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMcpServer {
    /// `stdio` (the default when `command` is set) or `http`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The program of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Variables added to the hook environment it starts with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// The endpoint of an HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Settings that only managed policy may set. Other sources may not: a non-managed file
/// that sets one gets a warning naming the key, and the value is ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawManaged {
    /// `pluginAllowlist`: the wasm plugins managed policy admits.
    pub plugin_allowlist: Option<Vec<RawAllowEntry>>,
    /// `requireAllowlistedPlugins`: refuse every plugin the allowlist does not admit.
    pub require_allowlisted_plugins: Option<bool>,
    /// `ceilings`: the most any hook outside managed policy may be granted.
    pub ceilings: Option<RawCeilings>,
    /// `trustedWorkspaces`: workspace paths (globs) that are trusted without `hookhost trust`.
    pub trusted_workspaces: Option<Vec<String>>,
    /// `forbidWorkspaceTrust`: users may not trust workspaces (pre-trusted ones still are).
    pub forbid_workspace_trust: Option<bool>,
    /// `forbidEnvironmentTrust`: `HOOKHOST_TRUST_WORKSPACE=1` does not trust (a
    /// repository can set it through Claude Code's project `env` block); the
    /// `--trust-workspace` flag and `hookhost trust` still do.
    pub forbid_environment_trust: Option<bool>,
    /// `auditLog`: where every dispatch is recorded (an absolute path; `${uid}` is the
    /// user's uid). `HOOKHOST_AUDIT_LOG` cannot move it.
    pub audit_log: Option<String>,
    /// `httpHookCaFile`: a PEM file of certificates HTTP hooks trust besides the system's
    /// store and the Mozilla roots (an absolute path). The environment cannot add roots
    /// (`SSL_CERT_FILE` is ignored).
    pub http_hook_ca_file: Option<String>,
    /// `telemetry`: the OTLP/HTTP collector every dispatch's spans and metrics go to,
    /// whatever the environment says (`crate::telemetry`).
    pub telemetry: Option<RawTelemetry>,
}

/// Managed `telemetry`: where spans and metrics are exported.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTelemetry {
    /// The collector's OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are appended).
    pub endpoint: String,
    /// Headers sent with every export (a collector's key); they win over
    /// `OTEL_EXPORTER_OTLP_HEADERS` for the same name.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

/// The JSON keys of [`RawManaged`].
pub const MANAGED_KEYS: [&str; 9] = [
    "pluginAllowlist",
    "requireAllowlistedPlugins",
    "ceilings",
    "trustedWorkspaces",
    "forbidWorkspaceTrust",
    "forbidEnvironmentTrust",
    "auditLog",
    "httpHookCaFile",
    "telemetry",
];

impl RawManaged {
    /// The JSON keys that are set, for warnings in non-managed sources.
    pub fn keys_set(&self) -> Vec<&'static str> {
        let mut keys = Vec::new();
        if self.plugin_allowlist.is_some() {
            keys.push("pluginAllowlist");
        }
        if self.require_allowlisted_plugins.is_some() {
            keys.push("requireAllowlistedPlugins");
        }
        if self.ceilings.is_some() {
            keys.push("ceilings");
        }
        if self.trusted_workspaces.is_some() {
            keys.push("trustedWorkspaces");
        }
        if self.forbid_workspace_trust.is_some() {
            keys.push("forbidWorkspaceTrust");
        }
        if self.forbid_environment_trust.is_some() {
            keys.push("forbidEnvironmentTrust");
        }
        if self.audit_log.is_some() {
            keys.push("auditLog");
        }
        if self.http_hook_ca_file.is_some() {
            keys.push("httpHookCaFile");
        }
        if self.telemetry.is_some() {
            keys.push("telemetry");
        }
        keys
    }
}

/// One entry of `pluginAllowlist`: a plugin by digest, or a key whose signatures admit
/// plugins.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAllowEntry {
    /// sha256 of the component, hex.
    #[serde(default)]
    pub sha256: Option<String>,
    /// ed25519 public key (32 bytes, hex or base64) whose detached `.sig` admits a plugin.
    #[serde(default)]
    pub public_key: Option<String>,
    /// A note for people and reports.
    #[serde(default)]
    pub name: Option<String>,
}

/// `ceilings` in managed policy: each field absent means "no ceiling on this".
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCeilings {
    /// Directories (and below) that may be granted, with the highest mode.
    #[serde(default)]
    pub dirs: Option<Vec<RawDirCeiling>>,
    /// Env var names that may be granted (`*` wildcards).
    #[serde(default)]
    pub env: Option<Vec<String>>,
    /// Host patterns an HTTP grant must fall within.
    #[serde(default)]
    pub http: Option<Vec<String>>,
    /// Fuel per call.
    #[serde(default)]
    pub fuel: Option<u64>,
    /// Memory cap in MiB.
    #[serde(default)]
    pub memory_mb: Option<u64>,
    /// Memory cap in bytes (wins over `memoryMb` when both are set).
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Timeout of a plugin call, in seconds.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// Handler types each non-managed source may use.
    #[serde(default)]
    pub handler_types: Option<RawHandlerTypes>,
    /// Model providers, hosts and token budget of model hooks.
    #[serde(default)]
    pub models: Option<RawModelCeiling>,
    /// MCP servers `mcp_tool` hooks outside managed policy may call: each entry is a
    /// server's name, its stdio `command` or its http `url`, compared exactly.
    #[serde(default)]
    pub mcp_servers: Option<Vec<String>>,
    /// OCI registries (`host[:port]`, `*.suffix`) the `oci://` plugins of hooks outside
    /// managed policy may come from.
    #[serde(default)]
    pub registries: Option<Vec<String>>,
    /// Whether an `oci://` plugin may be named by its tag alone (any source, managed
    /// included); otherwise a reference must pin the manifest's digest.
    #[serde(default)]
    pub oci_tags: Option<bool>,
}

/// A directory ceiling.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDirCeiling {
    /// Host path: absolute, or `${workspace}` / `${home}` based.
    pub path: String,
    /// `ro` (default) or `rw`: the highest mode a grant at or below `path` may have.
    #[serde(default)]
    pub mode: DirMode,
}

/// Handler types allowed per non-managed source; an absent source is unrestricted.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHandlerTypes {
    /// `--settings`.
    #[serde(default)]
    pub cli: Option<Vec<HandlerType>>,
    /// `.hookhost/hooks.local.json`.
    #[serde(default)]
    pub local: Option<Vec<HandlerType>>,
    /// `.hookhost/hooks.json`.
    #[serde(default)]
    pub project: Option<Vec<HandlerType>>,
    /// The user's `hooks.json`.
    #[serde(default)]
    pub user: Option<Vec<HandlerType>>,
}

/// The top level of a hookhost settings file, for the JSON Schema only: parsing goes
/// through [`crate::config::parse_settings`], which checks the same shape key by key so
/// that every error names its JSON path.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(
    title = "hookhost settings",
    description = "Hooks for coding agents: Claude Code's `hooks` block plus hookhost's own \
                   fields (wasm hooks, limits, capabilities)."
)]
pub struct SettingsFile {
    /// The schema of this file (editors use it for completion and checks).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Free text, ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Matcher groups per event name (`PreToolUse`, `Stop`, ...). An unknown event name is
    /// a warning and its groups are skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks: Option<BTreeMap<String, Vec<RawMatcherGroup>>>,
    /// Turn every hook off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_all_hooks: Option<bool>,
    /// Run managed-policy hooks only (honoured in managed policy only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_managed_hooks_only: Option<bool>,
    /// URL patterns HTTP hooks may post to (merges across files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_http_hook_urls: Option<Vec<String>>,
    /// Outer limit on each HTTP hook's `allowedEnvVars`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_hook_allowed_env_vars: Option<Vec<String>>,
    /// Credential-looking environment variables that command hooks still get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_allowlist: Option<Vec<String>>,
    /// Consecutive Stop blocks before the block is overridden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_block_cap: Option<u32>,
    /// Who answers `prompt` hooks that name no provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<RawModelProvider>,
    /// A sentence added to the reason of every Stop and SubagentStop block: `true` for
    /// "if you truly cannot fix this, explain why and stop", or the sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_escape_hatch: Option<StopEscapeHatch>,
    /// How deep hooks may nest (a hook that runs an agent whose hooks run hookhost):
    /// past it hookhost runs no hook (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub max_hook_depth: Option<u32>,
}

/// `stopEscapeHatch`: on (the default sentence), off, or a sentence of one's own.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(untagged)]
pub enum StopEscapeHatch {
    /// `true`: the default sentence; `false`: none.
    Switch(bool),
    /// The sentence.
    Sentence(String),
}

/// The JSON Schema (draft 2020-12) of a hookhost settings file, generated from the config
/// types. Optional fields do not accept `null`. The `hooks` object lists every built-in event name as a property so that
/// editors complete them; other names are still allowed (custom events).
pub fn json_schema() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(SettingsFile))
        .expect("a schema serializes to JSON");
    // `null` is not offered for optional fields: leave the key out instead.
    strip_null(&mut schema);
    if let Some(hooks) = schema.pointer_mut("/properties/hooks") {
        let groups = serde_json::json!({
            "type": "array",
            "items": {"$ref": "#/$defs/RawMatcherGroup"}
        });
        let properties: serde_json::Map<String, Value> = crate::event::built_in_names()
            .map(|name| (name.to_string(), groups.clone()))
            .collect();
        if let Value::Object(hooks) = hooks {
            hooks.insert("properties".into(), Value::Object(properties));
        }
    }
    schema
}

/// Removes the `null` alternative schemars adds for `Option` fields:
/// `"type": ["string", "null"]` becomes `"type": "string"`, and
/// `"anyOf": [X, {"type": "null"}]` becomes X, and `"default": null` goes.
fn strip_null(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("default") == Some(&Value::Null) {
                map.remove("default");
            }
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = map.get("anyOf") {
                let rest: Vec<Value> = any
                    .iter()
                    .filter(|s| s.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect();
                if rest.len() == 1 && rest.len() < any.len() {
                    map.remove("anyOf");
                    if let Value::Object(inner) = &rest[0] {
                        for (k, v) in inner {
                            map.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            map.values_mut().for_each(strip_null);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null),
        _ => {}
    }
}

/// [`json_schema`] as the pretty-printed text committed in `docs/hookhost.schema.json`.
pub fn json_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&json_schema()).expect("JSON serializes");
    text.push('\n');
    text
}
