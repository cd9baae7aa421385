//! The generated bindings of the `hookhost:hook` worlds this host loads: 0.1.0
//! (`wit/v0.1.0/`) and 0.2.0 (`wit/`, which adds the `model` import). Private to the
//! sandbox: the rest of the crate sees domain types only.
//!
//! The two versions share their `types` interface, unchanged: 0.2.0's is mapped onto
//! 0.1.0's Rust types, so an event, a response and a plugin's self-description are the
//! same values whichever version a plugin was built for, and one call path
//! ([`PluginPre`], [`Plugin`]) serves both.

use wasmtime::Store;
use wasmtime::component::InstancePre;

/// The `hookhost:hook@0.1.0` bindings (world `plugin`).
pub mod v0_1 {
    wasmtime::component::bindgen!({
        world: "plugin",
        path: "wit/v0.1.0",
        // Calls run on a fiber of the calling task (`call_async`), so a wasm hook never
        // blocks a runtime thread: the epoch deadline yields back to the executor each
        // tick.
        exports: { default: async },
    });
}

/// The `hookhost:hook@0.2.0` bindings (world `plugin-with-model`, of which `plugin` is a
/// part). `types` is 0.1.0's; `model.complete` is linked by [`super::model_call`].
pub mod v0_2 {
    wasmtime::component::bindgen!({
        world: "plugin-with-model",
        path: "wit",
        exports: { default: async },
        with: {
            "hookhost:hook/types@0.2.0": crate::handlers::wasm::bindings::v0_1::hookhost::hook::types,
        },
    });
}

pub use v0_1::hookhost;
pub use v0_1::hookhost::hook::types::{Event, Level, Permission, PluginInfo, Response};

/// The export every plugin of `version` has.
fn hook_export(version: &str) -> String {
    format!("{}@{version}", super::HOOK_EXPORT)
}

/// A plugin linked and ready to instantiate, of either version.
pub enum PluginPre<T: 'static> {
    /// Built for 0.1.0.
    V0_1(v0_1::PluginPre<T>),
    /// Built for 0.2.0.
    V0_2(v0_2::PluginWithModelPre<T>),
}

impl<T: Send + 'static> PluginPre<T> {
    /// The template of a linked component: of the version whose `hook` it exports.
    ///
    /// # Errors
    ///
    /// The component lacks the exports of its version.
    pub fn new(pre: InstancePre<T>) -> wasmtime::Result<PluginPre<T>> {
        let newer = pre
            .component()
            .get_export_index(None, hook_export("0.2.0"))
            .is_some();
        if newer {
            Ok(PluginPre::V0_2(v0_2::PluginWithModelPre::new(pre)?))
        } else {
            Ok(PluginPre::V0_1(v0_1::PluginPre::new(pre)?))
        }
    }

    /// A new instance in `store`.
    ///
    /// # Errors
    ///
    /// Instantiation failed (a trap, a limit, no pool slot).
    pub async fn instantiate_async(&self, store: &mut Store<T>) -> wasmtime::Result<Plugin> {
        Ok(match self {
            PluginPre::V0_1(pre) => Plugin::V0_1(pre.instantiate_async(store).await?),
            PluginPre::V0_2(pre) => Plugin::V0_2(pre.instantiate_async(store).await?),
        })
    }
}

/// An instance of a plugin, of either version.
pub enum Plugin {
    /// Built for 0.1.0.
    V0_1(v0_1::Plugin),
    /// Built for 0.2.0.
    V0_2(v0_2::PluginWithModel),
}

/// Its `hook` export.
pub enum Guest<'a> {
    /// 0.1.0's.
    V0_1(&'a v0_1::exports::hookhost::hook::hook::Guest),
    /// 0.2.0's.
    V0_2(&'a v0_2::exports::hookhost::hook::hook::Guest),
}

impl Plugin {
    /// The plugin's `hook` export.
    pub fn hookhost_hook_hook(&self) -> Guest<'_> {
        match self {
            Plugin::V0_1(p) => Guest::V0_1(p.hookhost_hook_hook()),
            Plugin::V0_2(p) => Guest::V0_2(p.hookhost_hook_hook()),
        }
    }
}

impl Guest<'_> {
    /// `hook.handle`.
    ///
    /// # Errors
    ///
    /// A trap, a limit or the deadline.
    pub async fn call_handle<T: Send>(
        &self,
        store: &mut Store<T>,
        event: &Event,
    ) -> wasmtime::Result<Result<Response, String>> {
        match self {
            Guest::V0_1(g) => g.call_handle(store, event).await,
            Guest::V0_2(g) => g.call_handle(store, event).await,
        }
    }

    /// `hook.describe`.
    ///
    /// # Errors
    ///
    /// A trap, a limit or the deadline.
    pub async fn call_describe<T: Send>(
        &self,
        store: &mut Store<T>,
    ) -> wasmtime::Result<PluginInfo> {
        match self {
            Guest::V0_1(g) => g.call_describe(store).await,
            Guest::V0_2(g) => g.call_describe(store).await,
        }
    }
}
