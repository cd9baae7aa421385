//! Settings that are not hooks: merging them across layers under the precedence rule
//! ([`merge_settings`]), and what only managed policy can set (plugin allowlist,
//! ceilings, workspace trust).

use std::path::PathBuf;
use std::sync::Arc;

use super::allowlist::PluginAllowlist;
use super::ceiling::Ceilings;
use super::trust::ManagedTrust;
use super::urls::{self, UrlAllowlist};
use crate::config::schema::{RawCeilings, RawSettings};
use crate::config::{ConfigError, ConfigLayer, ConfigWarning, SourceKind};

/// Claude Code's cap on consecutive Stop blocks in one session.
pub const DEFAULT_STOP_BLOCK_CAP: u32 = 8;

/// Settings that are not hooks, after precedence.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Every hook that `disableAllHooks` turned off, by source: `true` for all but managed.
    pub disable_all_hooks: bool,
    /// Managed policy's `disableAllHooks`: every hook is off, managed included.
    pub managed_disable_all_hooks: bool,
    /// Managed policy's `allowManagedHooksOnly`.
    pub allow_managed_hooks_only: bool,
    /// Where HTTP hooks may post; `None` when no layer restricts it.
    pub allowed_http_hook_urls: Option<UrlAllowlist>,
    /// Outer limit on the env vars HTTP hook headers may interpolate.
    pub http_hook_allowed_env_vars: Option<Vec<String>>,
    /// `allowedHttpHookUrls` of managed policy alone: what binds managed hooks
    /// ([`Settings::url_allowlist_for`]).
    pub managed_allowed_http_hook_urls: Option<UrlAllowlist>,
    /// `httpHookAllowedEnvVars` of managed policy alone
    /// ([`Settings::env_var_limit_for`]).
    pub managed_http_hook_allowed_env_vars: Option<Vec<String>>,
    /// `allowedHttpHookUrls` of the user's own files and managed policy only (never a
    /// project's or `--settings`'): the endpoints besides a provider's own that a model
    /// API key may be sent to (`handlers/model/endpoint.rs` `resolve`).
    pub key_allowed_http_hook_urls: Option<UrlAllowlist>,
    /// Credential-looking env vars that command hooks still receive.
    pub env_allowlist: Vec<String>,
    /// Consecutive Stop blocks before hookhost overrides the block; 0 = no cap.
    pub stop_block_cap: u32,
    /// `stopEscapeHatch`: the sentence added to the reason of a Stop or SubagentStop
    /// block (`None`: off, the default).
    pub stop_escape_hatch: Option<String>,
    /// `maxHookDepth`: hookhost runs no hook when `HOOKHOST_DEPTH` is this or more.
    pub max_hook_depth: u32,
    /// Managed `pluginAllowlist` and `requireAllowlistedPlugins`, checked by the sandbox
    /// on the bytes it compiles.
    pub plugin_allowlist: Arc<PluginAllowlist>,
    /// Managed `ceilings` (`None`: no ceilings).
    pub ceilings: Option<Ceilings>,
    /// Managed `trustedWorkspaces`, `forbidWorkspaceTrust` and `forbidEnvironmentTrust`.
    pub managed_trust: ManagedTrust,
    /// Managed `auditLog` (`${uid}` expanded): where every dispatch is recorded, whatever
    /// the environment says.
    pub audit_log: Option<PathBuf>,
    /// Why managed policy is broken (a managed file failed to load, or one of its hooks
    /// failed to build): then no hook outside managed policy runs.
    pub managed_broken: Option<String>,
    /// Managed `httpHookCaFile`: certificates HTTP hooks trust besides the system's.
    pub http_hook_ca_file: Option<PathBuf>,
    /// `sha256:<hex>` over the managed policy files in force (each one's path and the
    /// digest of its bytes, in load order), for the audit log; `None` without any.
    pub managed_digest: Option<String>,
    /// Managed `telemetry` (the first managed file that sets it): the collector every
    /// dispatch is exported to, whatever the environment says.
    pub telemetry: Option<crate::config::schema::RawTelemetry>,
    /// `modelProvider` of the first layer that sets one.
    pub model_provider: Option<super::models::ModelProvider>,
    /// `mcpServers` by name, each with the file that defined it ([`super::mcp`]).
    pub mcp_servers: std::collections::BTreeMap<String, (super::mcp::McpServer, String)>,
    /// The project's `hookhost.lock` in a trusted workspace: the digests its `oci://`
    /// plugins run at (`None`: no lock, or an untrusted workspace's, which binds nothing).
    pub oci_lock: Option<Arc<super::oci::Pins>>,
}

impl Settings {
    /// The `allowedHttpHookUrls` that binds a hook from `source`: for managed hooks,
    /// managed policy's list alone (Claude Code 2.1.326: "Where managed settings do not
    /// set this list, a list in any other settings file does not apply to hooks that
    /// managed settings define"); for every other hook, the union of all files. The one
    /// place the HTTP handler, `hookhost hooks` and the async admission record read it.
    pub fn url_allowlist_for(&self, source: SourceKind) -> Option<&UrlAllowlist> {
        match source {
            SourceKind::Managed => self.managed_allowed_http_hook_urls.as_ref(),
            _ => self.allowed_http_hook_urls.as_ref(),
        }
    }

    /// The `httpHookAllowedEnvVars` that binds a hook from `source`, by the same rule as
    /// [`Settings::url_allowlist_for`].
    pub fn env_var_limit_for(&self, source: SourceKind) -> Option<&Vec<String>> {
        match source {
            SourceKind::Managed => self.managed_http_hook_allowed_env_vars.as_ref(),
            _ => self.http_hook_allowed_env_vars.as_ref(),
        }
    }
}

/// Whether a layer sets anything besides hooks (what an untrusted workspace's files may
/// not set).
pub(super) fn sets_settings(s: &RawSettings) -> bool {
    !s.managed.keys_set().is_empty()
        || s.allow_managed_hooks_only.is_some()
        || s.disable_all_hooks.is_some()
        || s.allowed_http_hook_urls.is_some()
        || s.http_hook_allowed_env_vars.is_some()
        || s.env_allowlist.is_some()
        || s.stop_block_cap.is_some()
        || s.model_provider.is_some()
        || s.stop_escape_hatch.is_some()
        || s.max_hook_depth.is_some()
        || s.mcp_servers.is_some()
}

/// Managed `trustedWorkspaces` (union), `forbidWorkspaceTrust` and
/// `forbidEnvironmentTrust` (any).
pub(super) fn managed_trust(layers: &[ConfigLayer]) -> ManagedTrust {
    let mut trust = ManagedTrust::default();
    for layer in layers
        .iter()
        .filter(|l| l.origin.kind == SourceKind::Managed)
    {
        let managed = &layer.settings.managed;
        for path in managed.trusted_workspaces.iter().flatten() {
            if !trust.trusted.contains(path) {
                trust.trusted.push(path.clone());
            }
        }
        trust.forbid |= managed.forbid_workspace_trust == Some(true);
        trust.forbid_environment |= managed.forbid_environment_trust == Some(true);
    }
    trust
}

/// The allowlist and ceilings of managed layers; warnings for non-managed layers that
/// set managed-only keys.
fn managed_governance(
    layers: &[&ConfigLayer],
    warnings: &mut Vec<ConfigWarning>,
    errors: &mut Vec<ConfigError>,
) -> (PluginAllowlist, Option<Ceilings>) {
    let mut entries = Vec::new();
    let mut required = false;
    let mut raw = RawCeilings::default();
    let mut any_ceiling = false;
    let mut ceiling_origin: Vec<(&'static str, String)> = Vec::new();
    for layer in layers {
        let managed = &layer.settings.managed;
        if layer.origin.kind != SourceKind::Managed {
            for key in managed.keys_set() {
                warnings.push(ConfigWarning {
                    location: layer.origin.location.clone(),
                    path: format!("$.{key}"),
                    message: format!("only managed policy can set `{key}`; ignored here"),
                });
            }
            continue;
        }
        for (index, entry) in managed.plugin_allowlist.iter().flatten().enumerate() {
            entries.push((layer.origin.location.clone(), index, entry.clone()));
        }
        required |= managed.require_allowlisted_plugins == Some(true);
        if let Some(c) = &managed.ceilings {
            any_ceiling = true;
            macro_rules! first {
                ($($field:ident),*) => {$(
                    if raw.$field.is_none() && c.$field.is_some() {
                        raw.$field = c.$field.clone();
                        ceiling_origin.push((stringify!($field), layer.origin.location.clone()));
                    }
                )*};
            }
            first!(
                dirs,
                env,
                http,
                fuel,
                memory_mb,
                memory_bytes,
                timeout,
                handler_types,
                models,
                mcp_servers,
                registries,
                oci_tags
            );
        }
    }
    let (allowlist, allowlist_errors) = PluginAllowlist::new(&entries, required);
    errors.extend(
        allowlist_errors
            .into_iter()
            .map(|(location, path, message)| ConfigError {
                location,
                path,
                message,
            }),
    );
    let ceilings = any_ceiling.then(|| {
        let (ceilings, problems) = Ceilings::new(&raw);
        for (path, message) in problems {
            let field = path
                .trim_start_matches("$.ceilings.")
                .split(['.', '['])
                .next()
                .unwrap_or_default()
                .to_string();
            let location = ceiling_origin
                .iter()
                .find(|(f, _)| f.replace('_', "") == field.to_ascii_lowercase())
                .map(|(_, l)| l.clone())
                .unwrap_or_else(|| "managed policy".into());
            errors.push(ConfigError {
                location,
                path,
                message,
            });
        }
        ceilings
    });
    (allowlist, ceilings)
}

/// The settings of `layers` (precedence order) after precedence; reports invalid entries
/// and entries that only managed policy can set. `stop_block_cap_override` is
/// the environment's cap (`HOOKHOST_STOP_BLOCK_CAP`), `uid` the caller's effective uid
/// (`${uid}` in `auditLog`).
pub(super) fn merge_settings(
    layers: &[&ConfigLayer],
    stop_block_cap_override: Option<u32>,
    uid: u32,
    warnings: &mut Vec<ConfigWarning>,
    errors: &mut Vec<ConfigError>,
) -> Settings {
    let (plugin_allowlist, ceilings) = managed_governance(layers, warnings, errors);
    let managed = |l: &&&ConfigLayer| l.origin.kind == SourceKind::Managed;
    let managed_disable_all_hooks = layers
        .iter()
        .filter(managed)
        .any(|l| l.settings.disable_all_hooks == Some(true));
    let disable_all_hooks = layers
        .iter()
        .find_map(|l| l.settings.disable_all_hooks)
        .unwrap_or(false);
    let allow_managed_hooks_only = layers
        .iter()
        .filter(managed)
        .any(|l| l.settings.allow_managed_hooks_only == Some(true));
    for layer in layers
        .iter()
        .filter(|l| l.origin.kind != SourceKind::Managed)
    {
        if layer.settings.allow_managed_hooks_only.is_some() {
            warnings.push(ConfigWarning {
                location: layer.origin.location.clone(),
                path: "$.allowManagedHooksOnly".into(),
                message: "only managed policy can set `allowManagedHooksOnly`; ignored here".into(),
            });
        }
    }
    let union = |get: fn(&ConfigLayer) -> Option<&Vec<String>>| -> Option<Vec<String>> {
        let mut any = false;
        let mut all = Vec::new();
        for list in layers.iter().filter_map(|l| get(l)) {
            any = true;
            for item in list {
                if !all.contains(item) {
                    all.push(item.clone());
                }
            }
        }
        any.then_some(all)
    };
    // An invalid pattern allows nothing; it is reported with its file and index.
    for layer in layers {
        let patterns = layer.settings.allowed_http_hook_urls.iter().flatten();
        for (i, pattern) in patterns.enumerate() {
            if let Err(message) = urls::validate_pattern(pattern) {
                errors.push(ConfigError {
                    location: layer.origin.location.clone(),
                    path: format!("$.allowedHttpHookUrls[{i}]"),
                    message,
                });
            }
        }
    }
    let allowed_urls = union(|l| l.settings.allowed_http_hook_urls.as_ref());
    let managed_union = |get: fn(&ConfigLayer) -> Option<&Vec<String>>| -> Option<Vec<String>> {
        let mut any = false;
        let mut all: Vec<String> = Vec::new();
        for list in layers.iter().filter(managed).filter_map(|l| get(l)) {
            any = true;
            for item in list {
                if !all.contains(item) {
                    all.push(item.clone());
                }
            }
        }
        any.then_some(all)
    };
    let managed_urls = managed_union(|l| l.settings.allowed_http_hook_urls.as_ref());
    // Where a model key may go: named by the user's files or managed policy, never by a
    // file the repository (or a command line in its settings) can write.
    let key_urls = {
        let mut any = false;
        let mut all: Vec<String> = Vec::new();
        let vouching = layers
            .iter()
            .filter(|l| matches!(l.origin.kind, SourceKind::Managed | SourceKind::User));
        for list in vouching.filter_map(|l| l.settings.allowed_http_hook_urls.as_ref()) {
            any = true;
            all.extend(list.iter().cloned());
        }
        any.then_some(all)
    };
    Settings {
        disable_all_hooks,
        managed_disable_all_hooks,
        allow_managed_hooks_only,
        allowed_http_hook_urls: allowed_urls.as_deref().map(UrlAllowlist::new),
        http_hook_allowed_env_vars: union(|l| l.settings.http_hook_allowed_env_vars.as_ref()),
        managed_allowed_http_hook_urls: managed_urls.as_deref().map(UrlAllowlist::new),
        key_allowed_http_hook_urls: key_urls.as_deref().map(UrlAllowlist::new),
        managed_http_hook_allowed_env_vars: managed_union(|l| {
            l.settings.http_hook_allowed_env_vars.as_ref()
        }),
        env_allowlist: union(|l| l.settings.env_allowlist.as_ref()).unwrap_or_default(),
        // Managed policy's cap, then the environment's, then the other files'.
        stop_block_cap: layers
            .iter()
            .filter(managed)
            .find_map(|l| l.settings.stop_block_cap)
            .or(stop_block_cap_override)
            .or_else(|| layers.iter().find_map(|l| l.settings.stop_block_cap))
            .unwrap_or(DEFAULT_STOP_BLOCK_CAP),
        stop_escape_hatch: super::loop_brakes::escape_hatch(layers, errors),
        max_hook_depth: super::loop_brakes::max_hook_depth(layers, errors),
        plugin_allowlist: Arc::new(plugin_allowlist),
        ceilings,
        managed_trust: ManagedTrust::default(),
        audit_log: layers
            .iter()
            .filter(managed)
            .find_map(|l| l.settings.managed.audit_log.as_deref())
            .map(|path| PathBuf::from(path.replace("${uid}", &uid.to_string()))),
        managed_broken: None,
        http_hook_ca_file: layers
            .iter()
            .filter(managed)
            .find_map(|l| l.settings.managed.http_hook_ca_file.as_deref())
            .map(PathBuf::from),
        managed_digest: managed_digest(layers),
        telemetry: layers
            .iter()
            .filter(managed)
            .find_map(|l| l.settings.managed.telemetry.clone()),
        model_provider: super::models::provider_of(layers, errors),
        mcp_servers: super::mcp::merge(layers, errors),
        oci_lock: None,
    }
}

/// The digest of the managed layers: sha256 over each one's file (or `inline`) and the
/// sha256 of its bytes, in load order; `None` when there is no managed layer.
fn managed_digest(layers: &[&ConfigLayer]) -> Option<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut any = false;
    for layer in layers
        .iter()
        .filter(|l| l.origin.kind == SourceKind::Managed)
    {
        any = true;
        let file = layer
            .file
            .as_ref()
            .map_or_else(|| "inline".to_string(), |f| f.display().to_string());
        for part in [file.as_str(), layer.sha256.as_deref().unwrap_or("")] {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
    }
    any.then(|| format!("sha256:{}", hex::encode(hasher.finalize())))
}
