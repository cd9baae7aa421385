//! [`PluginCall`]: one plugin run, independent of the config structures.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{DEFAULT_FUEL, DEFAULT_MEMORY_BYTES};
use crate::config::schema::{InstanceMode, RawCapabilities};
use crate::policy::{HandlerSpec, Hook};

/// Everything one plugin run needs, independent of the config structures.
#[derive(Debug, Clone)]
pub struct PluginCall {
    /// A name for reports: the hook id, or the file name.
    pub label: String,
    /// The component file.
    pub plugin: PathBuf,
    /// Expected sha256, checked before compiling.
    pub sha256: Option<String>,
    /// Grants.
    pub capabilities: RawCapabilities,
    /// Fuel per call.
    pub fuel: u64,
    /// Memory cap in bytes.
    pub memory_bytes: u64,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Instance lifetime.
    pub instance: InstanceMode,
    /// The hook's `config`, handed to the plugin.
    pub config: Option<Value>,
    /// The registry reference when the plugin comes from one: `plugin` is then found
    /// in (or pulled into) the OCI cache (`oci`).
    pub oci: Option<crate::policy::oci::OciRef>,
}

impl PluginCall {
    /// A call of the plugin file at `plugin` with the defaults of a configured hook (no
    /// grants, default fuel and memory, a fresh instance per event), a 10-second timeout,
    /// and the file name as its label.
    pub fn new(plugin: impl Into<PathBuf>) -> PluginCall {
        let plugin = plugin.into();
        PluginCall {
            label: plugin.file_name().map_or_else(
                || plugin.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            plugin,
            sha256: None,
            capabilities: RawCapabilities::default(),
            fuel: DEFAULT_FUEL,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            timeout: Duration::from_secs(10),
            instance: InstanceMode::Event,
            config: None,
            oci: None,
        }
    }

    /// The call a configured wasm hook makes; `None` for other handler types.
    pub fn from_hook(hook: &Hook) -> Option<PluginCall> {
        let HandlerSpec::Wasm(spec) = &hook.handler else {
            return None;
        };
        Some(PluginCall {
            label: hook.id.clone(),
            plugin: spec.plugin.clone(),
            sha256: spec.sha256.clone(),
            capabilities: spec.capabilities.clone(),
            fuel: spec.fuel.unwrap_or(DEFAULT_FUEL),
            memory_bytes: spec.memory_bytes.unwrap_or(DEFAULT_MEMORY_BYTES),
            timeout: hook.timeout,
            instance: spec.instance,
            config: spec.config.clone(),
            oci: spec.oci.as_deref().cloned(),
        })
    }
}
