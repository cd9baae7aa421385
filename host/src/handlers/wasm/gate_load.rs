//! Loads outside a call: [`WasmRuntime::inspect`] (`hookhost plugin inspect`), and the
//! reload gate's load of a hook's plugin ([`WasmRuntime::load_for_hook`]): the load
//! the hook's first event makes, run when its config is built, so that a plugin that
//! cannot start under the hook's own limits is refused at reload rather than failing at
//! every event.

use std::path::Path;

use super::cache::CacheStatus;
use super::compiles::{Budget, COMPILE_BUDGET};
use super::limits::Limits;
use super::load::{PluginInfo, block_on};
use super::{PluginCall, PluginError, WasmRuntime};

impl WasmRuntime {
    /// Loads a plugin (compiling or reading the cache) and returns what it declares.
    /// Blocks until done (`describe` runs in the plugin).
    ///
    /// # Errors
    ///
    /// [`PluginError::Load`] naming the file: unreadable or refused (not a regular file,
    /// above the size cap), not a component, built for another WIT version, or its
    /// `describe` failed; [`PluginError::Engine`] when no engine could be set up.
    pub fn inspect(&self, path: &Path) -> Result<(PluginInfo, CacheStatus), PluginError> {
        let sandbox = self.sandbox().map_err(PluginError::Engine)?;
        let budget = Budget {
            hook: None,
            time: COMPILE_BUDGET,
            event: None,
        };
        let loaded =
            block_on(sandbox.load(path, None, None, &super::load::INSPECT_LIMITS, &budget))
                .map_err(PluginError::Engine)?
                .map_err(|(kind, message)| PluginError::Load { kind, message })?;
        Ok((loaded.info.clone(), loaded.cache_status.clone()))
    }

    /// Loads the plugin of `call` as its hook's first event would: compiled (or from the
    /// compile cache), linked, and `describe` run under the call's own fuel, memory and
    /// timeout when its answer is not memoized. The `sha256` pin and managed policy's
    /// allowlist are not asked here (the gate asks them first, on the file's digest). The
    /// compile waits at most [`COMPILE_BUDGET`]; the loaded plugin is kept for the
    /// first event. Blocks until done.
    ///
    /// # Errors
    ///
    /// As [`WasmRuntime::inspect`], `describe` judged under the call's limits.
    pub fn load_for_hook(&self, call: &PluginCall) -> Result<PluginInfo, PluginError> {
        let sandbox = self.sandbox().map_err(PluginError::Engine)?;
        let limits = Limits {
            fuel: call.fuel,
            memory_bytes: call.memory_bytes,
            timeout: call.timeout,
        };
        let budget = Budget {
            hook: Some(&call.label),
            time: COMPILE_BUDGET,
            event: None,
        };
        let loaded = block_on(sandbox.load(&call.plugin, None, None, &limits, &budget))
            .map_err(PluginError::Engine)?
            .map_err(|(kind, message)| PluginError::Load { kind, message })?;
        Ok(loaded.info.clone())
    }
}
