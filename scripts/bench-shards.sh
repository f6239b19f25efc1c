#!/usr/bin/env bash
# The `otb run --shard` benchmark: the full scripted grid (experiments/scripted.toml)
# from an empty store with 1, 2 and 4 cooperating workers on this machine; wall times
# and their ratios to one worker (a ratio is what carries over to other machines).
#
#   bash scripts/bench-shards.sh [OTB]   # default target/release/otb
set -euo pipefail
cd "$(dirname "$0")/.."
otb=${1:-target/release/otb}
exp=experiments/scripted.toml
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
base=""
for n in 1 2 4; do
  best=""
  for rep in 1 2 3; do
    rm -rf "$d/store"
    start=$EPOCHREALTIME
    for i in $(seq 1 "$n"); do
      OTB_HEARTBEAT_S=0 "$otb" --store "$d/store" run "$exp" --quiet --shard "$i/$n" > /dev/null &
    done
    wait
    end=$EPOCHREALTIME
    t=$(awk "BEGIN{printf \"%.3f\", $end - $start}")
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
  done
  [ -z "$base" ] && base=$best
  echo "  $n worker(s): best of 3 ${best} s (ratio to 1 worker: $(awk "BEGIN{printf \"%.2f\", $best / $base}"))"
done
# The cost of a cached rerun with a worker's lease checks: every node fresh.
start=$EPOCHREALTIME
"$otb" --store "$d/store" run "$exp" --quiet --shard 1/4 > /dev/null
end=$EPOCHREALTIME
echo "  fully cached rerun as worker 1/4: $(awk "BEGIN{printf \"%.3f\", $end - $start}") s"
