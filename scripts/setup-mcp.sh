#!/usr/bin/env bash
# The real MCP servers of the fourth benchmark (experiments/mcp.toml), pinned, installed
# into tools/mcp/ of the repository (ignored by git). Idempotent: a part whose pins are
# already installed is skipped. Called at the end of scripts/setup.sh.
#
#   tools/mcp/git/      a venv: mcp==2.3.0, mcp-server-git==2026.10.19
#                       (also the official MCP Python client, bin/python)
#   tools/mcp/sqlite/   a venv: mcp==1.30.0, mcp-server-sqlite==2025.4.25
#                       (mcp-server-sqlite fails to start with mcp 2.x)
#   tools/mcp/npm/      @modelcontextprotocol/server-filesystem@2026.8.31 and
#                       @modelcontextprotocol/server-memory@2026.8.31 (npm)
#
# Needs python3 with venv (scripts/setup.sh installs python3-venv) and Node.js with npm
# (installed from Debian if absent, as .ci/run does for Azurite).
# Environment: OTB_MCP_TOOLS=DIR installs there instead of tools/mcp.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${OTB_MCP_TOOLS:-tools/mcp}
mkdir -p "$dir"

# One venv with pinned packages; `stamp` records the pins it was made with.
venv() {
  local name=$1
  shift
  local stamp="$dir/$name/.otb-pins"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$*" ] && [ -x "$dir/$name/bin/python" ]; then
    return 0
  fi
  rm -rf "${dir:?}/$name"
  python3 -m venv "$dir/$name"
  "$dir/$name/bin/python" -m pip install -q --disable-pip-version-check "$@"
  echo "$*" > "$stamp"
  echo "setup-mcp: $dir/$name: $*"
}

venv git "mcp==2.3.0" "mcp-server-git==2026.10.19"
venv sqlite "mcp==1.30.0" "mcp-server-sqlite==2025.4.25"

npm_pins="@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31"
if ! command -v npm >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
fi
stamp="$dir/npm/.otb-pins"
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$npm_pins" ]; }; then
  # shellcheck disable=SC2086 # the pins are separate words
  npm install --silent --no-audit --no-fund --prefix "$dir/npm" $npm_pins >/dev/null
  echo "$npm_pins" > "$stamp"
  echo "setup-mcp: $dir/npm: $npm_pins"
fi

# One folder with the four servers, for PATH (the experiments name the programs):
# `export PATH="$PWD/tools/mcp/bin:$PATH"`; `make reproduce-mcp` does it.
mkdir -p "$dir/bin"
for bin in git/bin/mcp-server-git sqlite/bin/mcp-server-sqlite \
  npm/node_modules/.bin/mcp-server-filesystem npm/node_modules/.bin/mcp-server-memory; do
  [ -x "$dir/$bin" ] || { echo "setup-mcp: $dir/$bin is missing after the install" >&2; exit 1; }
  ln -sfn "$(cd "$dir" && pwd)/$bin" "$dir/bin/$(basename "$bin")"
done
echo "setup-mcp: MCP servers ok ($dir; programs in $dir/bin)"
