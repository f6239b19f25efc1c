#!/usr/bin/env bash
# make reproduce-table3: run the chess grid (resumable: finished stages are reused)
# and print Table 3 with the paper's values beside this run's.
#
# Environment:
#   EXP=experiments/table3.toml   experiment file (table3-paper.toml: the paper's budgets)
#   OTB_CHESS_ENGINE=PATH         another UCI engine (default: Debian's stockfish)
set -euo pipefail
cd "$(dirname "$0")/.."
OTB=${OTB:-target/release/otb}
EXP=${EXP:-experiments/table3.toml}
OUT=${OUT:-outputs/table3}
mkdir -p "$OUT"
"$OTB" run "$EXP"
"$OTB" table table3 --experiment "$EXP" --out "$OUT"
echo "reproduce-table3: done in ${SECONDS}s; tables in $OUT" >&2
