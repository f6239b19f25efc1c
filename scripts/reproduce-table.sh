#!/usr/bin/env bash
# make reproduce-table3 / reproduce-table4: run one table's experiment (resumable:
# finished stages are reused) and print the table with the paper's values beside this
# run's, then write the run's HTML report (`otb report`) to $OUT/report/.
# Usage: reproduce-table.sh table3|table4
#
# Environment:
#   EXP=experiments/<table>.toml   experiment file (table3-paper.toml / table4-paper.toml:
#                                  the paper's budgets, for an endpoint)
#   OUT=outputs/<table>            where the table files go
#   OTB_CHESS_ENGINE=PATH          table3: another UCI engine (default: Debian's stockfish)
#   (table4: the substitute corpus and the BM25 index are cached under the store)
set -euo pipefail
cd "$(dirname "$0")/.."
TABLE=${1:?usage: reproduce-table.sh table3|table4}
OTB=${OTB:-target/release/otb}
EXP=${EXP:-experiments/$TABLE.toml}
OUT=${OUT:-outputs/$TABLE}
mkdir -p "$OUT"
"$OTB" run "$EXP"
"$OTB" table "$TABLE" --experiment "$EXP" --out "$OUT"
"$OTB" report "$EXP" --to "$OUT/report" > /dev/null
echo "reproduce-$TABLE: done in ${SECONDS}s; tables in $OUT; the report: $OUT/report/report.html" >&2
