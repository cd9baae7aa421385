#!/usr/bin/env bash
# Builds {{wasm_name}}.wasm with componentize-py: pip install componentize-py==0.25.1
# Usage: ./build.sh [OUT.wasm]; COMPONENTIZE_PY names the tool when it is not on PATH.
set -euo pipefail
cd "$(dirname "$0")"
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w plugin componentize app -p . -o "${1:-{{wasm_name}}.wasm}"
