#!/usr/bin/env bash
# The `otb report` benchmark: the full scripted grid (experiments/scripted.toml: 150
# instances, every setting and method, about 27,500 model calls), run once into a
# scratch store, then reported three times: wall time and the size of what is written
# (goal: under 5 s and 50 MB).
#
#   bash scripts/bench-report.sh [OTB]   # default target/release/otb
set -euo pipefail
cd "$(dirname "$0")/.."
otb=${1:-target/release/otb}
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$otb" --store "$d/store" run experiments/scripted.toml --quiet > /dev/null
for i in 1 2 3; do
  start=$EPOCHREALTIME
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f %M -o "$d/rss" "$otb" --store "$d/store" report experiments/scripted.toml --to "$d/report" > /dev/null
  else
    "$otb" --store "$d/store" report experiments/scripted.toml --to "$d/report" > /dev/null
    echo 0 > "$d/rss"
  fi
  end=$EPOCHREALTIME
  bytes=$(du -sb "$d/report" | cut -f1)
  calls=$(grep -o '[0-9,]* model calls' "$d/report/report.html" | head -1)
  echo "  run $i: $(awk "BEGIN{printf \"%.3f\", $end - $start}") s, $(awk "BEGIN{printf \"%.1f\", $bytes / 1048576}") MB written, peak memory $(($(cat "$d/rss") / 1024)) MB ($calls in the grid)"
done
