//! The generated bindings of the `hookhost:hook` world. Private to the sandbox: the rest
//! of the crate sees domain types only.

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
});

pub use self::hookhost::hook::types::{Event, Level, Permission, PluginInfo, Response};
