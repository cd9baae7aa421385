#!/usr/bin/env bash
# Builds deny_dangerous_bash.wasm with componentize-py (pip install componentize-py==0.25.1).
# Usage: build.sh [OUT.wasm]   (default: ./deny_dangerous_bash.wasm)
# COMPONENTIZE_PY names the tool when it is not on PATH.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/deny_dangerous_bash.wasm}"
tool="${COMPONENTIZE_PY:-componentize-py}"
cd "$here"
"$tool" -d ../../wit -w plugin componentize app -p . -o "$out"
