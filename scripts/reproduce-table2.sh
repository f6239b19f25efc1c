#!/usr/bin/env bash
# make reproduce-table2: rescore the authors' released runs (when OTB_RELEASED_RUNS
# points at them), run the experiment grid (resumable: finished stages are reused),
# and print Table 2 with paper / released / this-run values, then the token table
# (each method's cost and its ratio to ToolObserver) and Table 6 (fidelity to gold).
#
# Environment:
#   EXP=experiments/table2.toml   experiment file
#   SUBSET=N                      first N instances per category (quick run)
#   OTB_RELEASED_RUNS=DIR         the authors' released BFCL run tree
#   OTB_RECORDED=FILE             their frozen API responses (default: DIR/../recorded_api_responses.json)
#   OTB_EXPECTED=DIR              their reference configs (default: DIR/../tool_configs)
#   STEPWISE=0                    run the whole grid at once (no table after each setting)
set -euo pipefail
cd "$(dirname "$0")/.."
OTB=${OTB:-target/release/otb}
EXP=${EXP:-experiments/table2.toml}
OUT=${OUT:-outputs/table2}
mkdir -p "$OUT"

if [ -n "${SUBSET:-}" ]; then
  sub="$OUT/$(basename "$EXP" .toml)-subset$SUBSET.toml"
  awk -v n="$SUBSET" -v dir="$(cd "$(dirname "$EXP")" && pwd)" '
    /^\[bfcl\]/ { print; print "subset = " n; next }
    /^subset *=/ { next }
    { print }' "$EXP" > "$sub"
  EXP="$sub"
fi

table_args=(--experiment "$EXP" --out "$OUT")
if [ -n "${OTB_RELEASED_RUNS:-}" ]; then
  rel="$OTB_RELEASED_RUNS"
  rec="${OTB_RECORDED:-$rel/../recorded_api_responses.json}"
  expd="${OTB_EXPECTED:-$rel/../tool_configs}"
  table_args+=(--released "$rel")
  [ -f "$rec" ] && table_args+=(--recorded "$rec")
  [ -d "$expd" ] && table_args+=(--expected "$expd")
fi

# One setting after another, with Table 2 printed after each: the first rows are
# readable long before the whole grid is done. Each step reruns nothing that an
# earlier one finished (the store is content-addressed); `otb table table2` on a
# store whose run is still going (or was stopped) prints the finished cells too.
settings=$(awk -F= '/^settings *=/ { gsub(/[][" ]/, "", $2); print $2; exit }' "$EXP")
if [ -n "$settings" ] && [ "${STEPWISE:-1}" = 1 ]; then
  done_settings=""
  IFS=, read -ra all <<< "$settings"
  for s in "${all[@]}"; do
    done_settings="${done_settings:+$done_settings, }\"$s\""
    step="$OUT/$(basename "$EXP" .toml)-upto-${s//+/_}.toml"
    awk -v list="[$done_settings]" '
      /^settings *=/ { print "settings = " list; next }
      { print }' "$EXP" > "$step"
    echo "reproduce-table2: setting $s (${SECONDS}s so far)" >&2
    "$OTB" run "$step"
    "$OTB" table table2 --experiment "$step" "${table_args[@]:2}"
    # How much of the whole grid is left, at the stage times measured so far.
    "$OTB" status "$EXP" | grep -E '^(estimated time|[0-9]+ stages shown)' >&2 || true
  done
fi
"$OTB" run "$EXP"
"$OTB" table table2 "${table_args[@]}"
# What each method spent, and how close its learned docs are to the originals.
"$OTB" table tokens --experiment "$EXP" --out "$OUT"
"$OTB" table table6 --experiment "$EXP" --out "$OUT"
echo "reproduce-table2: done in ${SECONDS}s; tables in $OUT" >&2
