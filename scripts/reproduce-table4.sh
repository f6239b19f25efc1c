#!/usr/bin/env bash
# make reproduce-table4: run the search grid (substitute corpus) (resumable: finished stages are reused)
# and print Table 4 with the paper's values beside this run's.
#
# Environment:
#   EXP=experiments/table4.toml   experiment file
#   (the substitute corpus and the BM25 index are cached under the store)
set -euo pipefail
cd "$(dirname "$0")/.."
OTB=${OTB:-target/release/otb}
EXP=${EXP:-experiments/table4.toml}
OUT=${OUT:-outputs/table4}
mkdir -p "$OUT"
"$OTB" run "$EXP"
"$OTB" table table4 --experiment "$EXP" --out "$OUT"
echo "reproduce-table4: done in ${SECONDS}s; tables in $OUT" >&2
