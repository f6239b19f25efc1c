#!/usr/bin/env bash
# make bench: the benchmarks whose numbers go into docs/results.md and docs/log/.
#
#   OTB_BENCH_MODEL=smollm2-135m make bench   # quick embedded run (default: qwen2.5-coder-1.5b)
#   OTB_BENCH_EMBEDDED=single|batch|parallel|llama|spec|0  # one part of the embedded bench, or none
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
echo "== cached rerun of a fully fresh experiment (pipeline store)"
cargo run --release -q -p pipeline --example bench_store -- 200 2000

echo "== the full scripted grid with 1, 2 and 4 cooperating workers (otb run --shard)"
bash scripts/bench-shards.sh target/release/otb

echo "== the store on object storage: the scripted grid on a local S3 server (moto), and a cached rerun from it"
bash scripts/bench-object-store.sh target/release/otb

echo "== otb report of the full scripted grid (time and size; goal under 5 s and 50 MB)"
bash scripts/bench-report.sh target/release/otb

rel=${OTB_RELEASED_RUNS:-../shared/data/otb/bfcl/released_runs}
if [ -d "$rel" ]; then
  echo "== rescoring every released run (all methods, settings, iterations)"
  for i in 1 2 3; do
    start=$EPOCHREALTIME
    target/release/otb released score "$rel" --backend recorded \
      --recorded "$rel/../recorded_api_responses.json" --expected "$rel/../tool_configs" --format csv > /tmp/otb-bench-released.csv
    end=$EPOCHREALTIME
    echo "  run $i: $(awk "BEGIN{printf \"%.3f\", $end - $start}") s for $(($(wc -l < /tmp/otb-bench-released.csv) - 1)) run versions"
  done
else
  echo "== released runs not found ($rel): skipping the rescoring benchmark"
fi

echo "== chess: bootstrap Elo (1000 shuffles x 600 games) and engine-pool throughput at depth 12"
cargo run --release -q -p datasets --example bench_chess

echo "== search: BM25 index build over the substitute corpus and tool calls per second"
cargo run --release -q -p datasets --example bench_search

echo "== client overhead of the openai backend (in-process 127.0.0.1 server; under a minute)"
cargo run --release -q -p llm --example bench_client

part=${OTB_BENCH_EMBEDDED:-all}
if [ "$part" != 0 ]; then
  model=${OTB_BENCH_MODEL:-qwen2.5-coder-1.5b}
  echo "== embedded $model: tokens/s, grammar, prefix reuse, 1 vs 4 requests at once, 8 requests at parallel 1/4/8 (minutes with the 1.5B model)"
  cargo run --release -q -p llm --features embedded --example bench_embedded -- "$model" "$part"
  if [ "$part" = all ]; then
    echo "== embedded $model against llama.cpp's own llama-bench (pp512, tg128; builds llama-bench once)"
    bash scripts/bench-llama.sh "$model"
    echo "== speculative decoding: qwen2.5-coder-0.5b drafting for $model (greedy answers must not change)"
    cargo run --release -q -p llm --features embedded --example bench_embedded -- "$model" spec
  fi
fi
