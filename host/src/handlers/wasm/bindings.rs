//! The generated bindings of the `hookhost:hook` world. Private to the sandbox: the rest
//! of the crate sees domain types only.

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
    // Calls run on a fiber of the calling task (`call_async`), so a wasm hook never
    // blocks a runtime thread: the epoch deadline yields back to the executor each tick.
    exports: { default: async },
});

pub use self::hookhost::hook::types::{Event, Level, Permission, PluginInfo, Response};
