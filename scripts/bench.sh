#!/usr/bin/env bash
# make bench: the benchmarks whose numbers go into README's performance section.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
echo "== cached rerun of a fully fresh experiment (pipeline store)"
cargo run --release -q -p pipeline --example bench_store -- 200 2000

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
