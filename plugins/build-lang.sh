#!/usr/bin/env bash
# Builds the Python and JavaScript plugins into OUTDIR:
#   OUTDIR/python_deny_dangerous_bash.wasm   (componentize-py 0.25.1)
#   OUTDIR/js_protect_paths.wasm             (@bytecodealliance/componentize-js 0.23.0)
#
# Usage: plugins/build-lang.sh [--install] OUTDIR
#   --install  first install the toolchains if missing: componentize-py from PyPI into
#              plugins/.toolchain/venv, componentize-js from npm (package-lock.json) into
#              plugins/js-protect-paths/node_modules.
# A plugin is rebuilt only when its sources, the WIT or the toolchain changed (a stamp
# with their sha256 sits beside each output). Exits 3 when a toolchain is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
install=0
if [[ "${1:-}" == "--install" ]]; then install=1; shift; fi
out="${1:?usage: build-lang.sh [--install] OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

venv="$here/.toolchain/venv"
py_tool="${COMPONENTIZE_PY:-$venv/bin/componentize-py}"
js_dir="$here/js-protect-paths"

if [[ $install == 1 ]]; then
  if [[ ! -x "$py_tool" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check componentize-py==0.25.1
    py_tool="$venv/bin/componentize-py"
  fi
  # (Re)install when node_modules is missing or older than the lockfile.
  if [[ ! "$js_dir/node_modules/.package-lock.json" -nt "$js_dir/package-lock.json" ]]; then
    (cd "$js_dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

missing=()
[[ -x "$py_tool" ]] || missing+=("componentize-py (expected at $py_tool)")
[[ -d "$js_dir/node_modules/@bytecodealliance/componentize-js" ]] \
  || missing+=("componentize-js (run npm ci in $js_dir)")
command -v node >/dev/null || missing+=("node")
if (( ${#missing[@]} )); then
  echo "build-lang.sh: missing toolchain: ${missing[*]}; run plugins/build-lang.sh --install OUTDIR" >&2
  exit 3
fi

# stamp DIR TOOLVERSION: sha256 over the plugin's sources, the WIT and the tool version.
stamp() {
  (cd "$1" && find . ../../wit -type f \( -name '*.py' -o -name '*.js' -o -name '*.mjs' \
      -o -name '*.wit' -o -name '*.sh' -o -name 'package-lock.json' \) \
      -not -path '*/node_modules/*' -not -path '*/__pycache__/*' | LC_ALL=C sort \
    | xargs sha256sum; echo "$2") | sha256sum | cut -d' ' -f1
}

build() { # NAME DIR TOOLVERSION COMMAND...
  local name="$1" dir="$2" version="$3"
  shift 3
  local wasm="$out/$name.wasm" want
  want="$(stamp "$dir" "$version")"
  if [[ -f "$wasm" && "$(cat "$wasm.stamp" 2>/dev/null)" == "$want" ]]; then
    echo "build-lang.sh: $name is up to date"
    return
  fi
  local start=$SECONDS
  "$@" "$wasm.tmp" >&2
  mv "$wasm.tmp" "$wasm"
  echo "$want" > "$wasm.stamp"
  echo "build-lang.sh: built $wasm in $((SECONDS - start)) s"
}

build python_deny_dangerous_bash "$here/python-deny-dangerous-bash" "$("$py_tool" --version)" \
  env COMPONENTIZE_PY="$py_tool" "$here/python-deny-dangerous-bash/build.sh"
build js_protect_paths "$js_dir" "componentize-js $(node -p "require('$js_dir/node_modules/@bytecodealliance/componentize-js/package.json').version")" \
  node "$js_dir/build.mjs"
