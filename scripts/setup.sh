#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: the system packages the build
# needs, and pip (used only to download pinned data and model wheels from PyPI).
set -euo pipefail

# cmake + clang/libclang: llama.cpp for the embedded model (feature `embedded`);
# pkg-config: -sys crates; fonts-dejavu-core: labels in PNG plots;
# stockfish: the UCI chess engine of the Chess environment (/usr/games/stockfish);
# graphviz: renders `otb plan --format dot` (optional for users; the tests check it);
# python3-venv: the tests' virtual environment for the `openai` client;
# chromium: the tests open `otb report`'s page in headless Chromium (optional for users);
# git: what mcp-server-git, the real MCP server of tests/mcp_proxy.rs, works on.
pkgs=(pkg-config cmake clang libclang-dev fonts-dejavu-core stockfish graphviz python3-venv chromium git)
command -v python3 >/dev/null 2>&1 || pkgs+=(python3)
python3 -m pip --version >/dev/null 2>&1 || pkgs+=(python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install the stable Rust toolchain (rustup) first" >&2; exit 2; }
python3 -m pip --version >/dev/null
echo "setup: system packages ok"
bash "$(dirname "$0")/setup-mcp.sh"   # the fourth benchmark's MCP servers, into tools/mcp/
