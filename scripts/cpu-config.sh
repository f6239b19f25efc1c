#!/usr/bin/env bash
# Writes .cargo/config.toml (git-ignored) so that llama.cpp, which the embedded model
# runs on (crate llama-cpp-sys-2, built from source), is compiled for the x86-64
# extensions this machine's CPU has. Without it llama.cpp gets its generic x86-64
# set (AVX2, FMA, F16C) and no AVX-512 / VNNI, which on a 2-core Xeon made prompt
# evaluation of the default Qwen2.5-Coder-1.5B about 1.5x slower per thread (README,
# Performance). Every cargo command in the repository reads the file, so all builds
# agree and none rebuilds llama.cpp because of a different environment.
#
# AMX is left off on purpose: with `-march=native` llama.cpp's AMX kernels were
# compiled in and died with an illegal instruction on a VM that lists the amx flags.
#
# It also points llama.cpp's CMake build at scripts/llama-common.cmake, which compiles
# llama.cpp's `common` library (asked for by the crate's CMake options, never called
# by the embedded backend) and two helper libraries from one empty file: about half
# of llama.cpp's compile time before.
#
# The file is only written when it is missing or was written by this script; delete it
# to build for the generic set (then `cargo clean -p llama-cpp-sys-2`, since cargo
# rebuilds llama.cpp only when a GGML_* variable it saw changes).
set -euo pipefail
cd "$(dirname "$0")/.."
out=.cargo/config.toml
marker="# Written by scripts/cpu-config.sh"

if [ -e "$out" ] && ! head -n1 "$out" | grep -qF "$marker"; then
  echo "cpu-config: $out exists and was not written by this script; leaving it alone" >&2
  exit 0
fi

flags=""
if [ "$(uname -m)" = x86_64 ] && [ -r /proc/cpuinfo ]; then
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
fi
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }

tmp="$out.tmp.$$"
mkdir -p .cargo
{
  echo "$marker from this machine's CPU flags; see that script."
  echo "[env]"
  if [ -n "$flags" ]; then
    onoff() { if has "${@:2}"; then echo "$1 = \"ON\""; else echo "$1 = \"OFF\""; fi; }
    onoff GGML_SSE42 sse4_2
    onoff GGML_AVX avx
    onoff GGML_AVX2 avx2
    onoff GGML_FMA fma
    onoff GGML_F16C f16c
    onoff GGML_BMI2 bmi2
    onoff GGML_AVX_VNNI avx_vnni
    onoff GGML_AVX512 avx512f avx512cd avx512vl avx512dq avx512bw
    onoff GGML_AVX512_VBMI avx512f avx512vbmi
    onoff GGML_AVX512_VNNI avx512f avx512_vnni
    onoff GGML_AVX512_BF16 avx512f avx512_bf16
    echo 'GGML_AMX_TILE = "OFF"'
    echo 'GGML_AMX_INT8 = "OFF"'
    echo 'GGML_AMX_BF16 = "OFF"'
  fi
  # llama.cpp's `common` library not compiled (see that file): minutes less of
  # llama.cpp's build on 2 cores, nothing of the model's code changed.
  echo 'CMAKE_PROJECT_INCLUDE = { value = "scripts/llama-common.cmake", relative = true }'
} > "$tmp"
mv "$tmp" "$out"
on=$(grep -c '"ON"' "$out" || true)
echo "cpu-config: $out: llama.cpp built with $on x86 extension groups ($(grep '"ON"' "$out" | cut -d' ' -f1 | sed 's/GGML_//' | tr '\n' ' '))"
