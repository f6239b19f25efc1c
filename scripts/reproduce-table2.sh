#!/usr/bin/env bash
# make reproduce-table2: rescore the authors' released runs (when OTB_RELEASED_RUNS
# points at them), run the experiment grid (resumable: finished stages are reused),
# and print Table 2 with paper / released / this-run values, then the token table
# (each method's cost and its ratio to ToolObserver) and Table 6 (fidelity to gold), and
# write the run's HTML report (`otb report`) to $OUT/report/.
#
# Environment:
#   EXP=experiments/table2.toml   experiment file
#   SUBSET=N                      first N instances per category (quick run)
#   OTB_RELEASED_RUNS=DIR         the authors' released BFCL run tree
#   OTB_RECORDED=FILE             their frozen API responses (default: DIR/../recorded_api_responses.json)
#   OTB_EXPECTED=DIR              their reference configs (default: DIR/../tool_configs)
#   STEPWISE=0                    no table until the whole grid is done
#   POLL=30                       seconds between looks at the store (STEPWISE)
#   OTB_CONCURRENT_CHAINS=0       run the stages one after another
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

# The whole grid runs in one `otb run`, its settings and methods concurrently (so
# the model's batch stays full); meanwhile Table 2 is printed each time a setting
# has finished, with the finished cells of the others and the rest marked. `otb
# table table2` on a store whose run is still going (or was stopped) does the same
# at any moment. STEPWISE=0: no tables until the end.
#
# A setting is finished when `otb status` lists at least one node of it and every
# one of its nodes is fresh (node names carry the setting: `explore[names r0]`).
setting_done() {
  local lines
  lines=$(grep -F -e "[$1]" -e "[$1 " <<< "$2" | grep -v '^ ' || true)
  [ -n "$lines" ] && ! grep -qv '^fresh' <<< "$lines"
}
settings=$(awk -F= '/^settings *=/ { gsub(/[][" ]/, "", $2); print $2; exit }' "$EXP")
if grep -qE '^methods *=.*"gold"' "$EXP"; then settings="gold${settings:+,$settings}"; fi
"$OTB" run "$EXP" &
run_pid=$!
# A background job of a script ignores SIGINT, so the run is stopped with TERM (the store is
# crash-safe: what it finished is kept and the same command goes on).
trap 'kill -TERM $run_pid 2>/dev/null; wait $run_pid || true; exit 130' INT TERM
if [ -n "$settings" ] && [ "${STEPWISE:-1}" = 1 ]; then
  IFS=, read -ra all <<< "$settings"
  printed=" "
  while kill -0 "$run_pid" 2>/dev/null; do
    sleep "${POLL:-30}" & wait $! || true
    st=$("$OTB" status "$EXP" 2>/dev/null) || continue
    for s in "${all[@]}"; do
      case "$printed" in *" $s "*) continue ;; esac
      if setting_done "$s" "$st"; then
        printed="$printed$s "
        echo "reproduce-table2: setting $s finished (${SECONDS}s so far)" >&2
        [ "$s" = gold ] && continue
        "$OTB" table table2 "${table_args[@]}" || true
        # How much of the whole grid is left, at the stage times measured so far.
        grep -E '^(estimated time|  and up to|  at the overlap|[0-9]+ stages shown|not shown)' <<< "$st" >&2 || true
      fi
    done
  done
fi
wait "$run_pid"
trap - INT TERM
"$OTB" table table2 "${table_args[@]}"
# What each method spent, and how close its learned docs are to the originals.
"$OTB" table tokens --experiment "$EXP" --out "$OUT"
"$OTB" table table6 --experiment "$EXP" --out "$OUT"
# The run as one page: tables, curves, every trajectory, documentation edits.
"$OTB" report "$EXP" --to "$OUT/report" > /dev/null
echo "reproduce-table2: done in ${SECONDS}s; tables in $OUT; the report: $OUT/report/report.html" >&2
