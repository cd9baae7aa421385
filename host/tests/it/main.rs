//! hookhost's integration tests.

mod allowlist;
mod demo;
mod gate;
mod golden;
mod guest_fs;
mod guest_fs_holes;
mod hostile;
mod http_bodies;
mod lang;
mod load;
mod mcp;
mod mcp_bounds;
mod mcp_embedder;
#[path = "../common/mcp_peers.rs"]
mod mcp_peers;
mod output_keys;
mod places;
mod raw;
mod readers;
mod response_props;
#[path = "../common/skip.rs"]
mod skip;
mod support;
mod wasm;
