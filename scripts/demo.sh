#!/usr/bin/env bash
# make demo: run experiments/demo.toml (a small fixed slice of BFCL with the embedded
# model: Gold, Base and ToolObserver on 6 instances of `names`, at most 2 rounds),
# then print what ToolObserver did -- each description it changed, before and after
# every round, and the instances whose verdict flipped -- then Table 2 (paper beside
# this run) as it came out, and where the report is. Resumable: finished stages are
# reused, so a second `make demo` only prints.
#
# Environment:
#   EXP=experiments/demo.toml   experiment file
#   OUT=outputs/demo            where the report goes ($OUT/report/report.html)
#   OTB=target/release/otb      the otb binary
#   OTB_STORE=DIR               another store (default outputs/store)
set -euo pipefail
cd "$(dirname "$0")/.."
OTB=${OTB:-target/release/otb}
EXP=${EXP:-experiments/demo.toml}
OUT=${OUT:-outputs/demo}
mkdir -p "$OUT"
"$OTB" run "$EXP"
echo
"$OTB" report "$EXP" --edits --to "$OUT/report" > "$OUT/edits.txt"
grep -v '/report\.html$' "$OUT/edits.txt" || true
echo
"$OTB" table table2 --experiment "$EXP"
echo
echo "make demo: done in ${SECONDS}s; the documentation edits in $OUT/edits.txt; the report: $OUT/report/report.html"
