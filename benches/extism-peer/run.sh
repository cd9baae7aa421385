#!/bin/sh
# Builds the Extism peer (release, no debug info, in its own target dir: this workspace is
# apart from hookhost's so that hookhost keeps one wasmtime version) and its plugin
# (wasm32-unknown-unknown), then runs `cargo bench -p hookhost --bench wasm`, which finds
# them and times them in rounds interleaved with hookhost's own sandbox calls, printing
# the ratios. Arguments are passed to that cargo command; HOOKHOST_BENCH_N scales it.
#
#   benches/extism-peer/run.sh            # from the repository root
#   HOOKHOST_BENCH_ONLY=wasm benches/extism-peer/run.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${HOOKHOST_EXTISM_PEER_TARGET:-$here/target}
rustup target list --installed | grep -qx wasm32-unknown-unknown || {
    echo "run.sh: the plugin needs the wasm32-unknown-unknown target: rustup target add wasm32-unknown-unknown" >&2
    exit 1
}
cargo build --manifest-path "$here/Cargo.toml" --target-dir "$target" --release \
    -p extism-deny-dangerous-bash --target wasm32-unknown-unknown
cargo build --manifest-path "$here/Cargo.toml" --target-dir "$target" --release -p extism-peer
cd "$root"
HOOKHOST_EXTISM_PEER_TARGET=$target exec cargo bench -p hookhost --bench wasm "$@"
