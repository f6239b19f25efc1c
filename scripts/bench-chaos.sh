#!/usr/bin/env bash
# Cooperating workers under SIGKILL: 8 workers (`otb run --shard i/8`) of the
# scripted grid on one `file://` store, then on an S3 server (moto, from the Python
# in OTB_PYTHON, on 127.0.0.1; skipped without it), two of them SIGKILLed at
# moments drawn from a seed (once the workers together have computed k nodes, k
# drawn from 1 to 2/3 of the grid). The rest finish, taking the killed workers'
# nodes over once their leases expire (OTB_LEASE_S). Checks the tables (Table 2,
# Table 5, tokens) equal those of one process and that a rerun computes nothing,
# and prints: wall time, computations published (each node once?), and the
# duplicate work: nodes taken over from a killed worker's open lease (the
# "taking over NODE from ...: its lease expired" lines), and any taken over from a
# live worker (a heartbeat that came too late: a node computed twice).
#
#   bash scripts/bench-chaos.sh [OTB] [SEED]   # default target/release/otb, seed 59
#
# OTB_CHAOS_EXPERIMENT (default experiments/scripted.toml), OTB_CHAOS_LEASE_S
# (file://, default 3) and OTB_CHAOS_S3_LEASE_S (default 15) change the run.
set -euo pipefail
cd "$(dirname "$0")/.."
otb=$(realpath "${1:-target/release/otb}")
seed=${2:-59}
exp=${OTB_CHAOS_EXPERIMENT:-experiments/scripted.toml}
d=$(mktemp -d)
moto=""
pids=()
cleanup() {
  for p in "${pids[@]}" $moto; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$d"
}
trap cleanup EXIT
export OTB_HEARTBEAT_S=0
unset OTB_STORE OTB_FAULT_PAUSE OTB_LLM_BASE_URL

tables() { # STORE MIRROR
  for t in table2 table5 tokens; do
    OTB_STORE_CACHE=$2 "$otb" --store "$1" table "$t" --format csv --experiment "$exp"
  done
}

"$otb" --store "$d/one" run "$exp" --quiet > "$d/one.txt"
total=$(sed -n 's/^[^:]*: \([0-9]*\) stages.*/\1/p' "$d/one.txt")
tables "$d/one" "$d/one-mirror" > "$d/one.tables"
echo "grid: $exp, $total nodes; one process made the reference tables"

RANDOM=$seed
chaos() { # LABEL URL LEASE_S LEASES_DIR
  local label=$1 url=$2 lease=$3 leases=$4
  local w=$d/$label
  mkdir -p "$w"
  local a=$((RANDOM % 8 + 1)) b k1 k2 start end
  pids=()
  b=$(( (a + RANDOM % 7) % 8 + 1 ))
  k1=$((RANDOM % (total * 2 / 3) + 1)); k2=$((RANDOM % (total * 2 / 3) + 1))
  if [ "$k1" -gt "$k2" ]; then local t=$k1; k1=$k2; k2=$t; fi
  start=$EPOCHREALTIME
  for i in $(seq 1 8); do
    OTB_LEASE_S=$lease OTB_STORE_CACHE=$w/m$i "$otb" --store "$url" run "$exp" --shard "$i/8" \
      > "$w/out$i" 2> "$w/log$i" &
    pids+=($!)
  done
  local killed="" open=0 victim k pid
  for pair in "$a $k1" "$b $k2"; do
    read -r victim k <<< "$pair"
    while [ "$(cat "$w"/log* | grep -c '^  ran ' || true)" -lt "$k" ]; do sleep 0.005; done
    pid=${pids[$((victim - 1))]}
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    killed="$killed $pid"
    echo "  $label: killed shard $victim/8 (pid $pid) after $k nodes, at $(awk "BEGIN{printf \"%.1f\", $EPOCHREALTIME - $start}") s"
    if [ -n "$leases" ]; then
      open=$((open + $({ grep -l "\"pid\":$pid[,}]" "$leases"/*.json 2>/dev/null || true; } | wc -l)))
    fi
  done
  for i in $(seq 1 8); do
    pid=${pids[$((i - 1))]}
    case " $killed " in *" $pid "*) continue ;; esac
    wait "$pid" || { echo "worker $i failed:"; cat "$w/log$i"; exit 1; }
  done
  end=$EPOCHREALTIME
  local ran uniq dup taken live
  ran=$(cat "$w"/log* | grep -c '^  ran ' || true)
  uniq=$(cat "$w"/log* | grep '^  ran ' | sed 's/ in [0-9.]*s (.*//' | sort -u | wc -l)
  dup=$(cat "$w"/log* | grep '^  ran ' | sed 's/ in [0-9.]*s (.*//' | sort | uniq -d | wc -l)
  taken=$(cat "$w"/log* | grep -c '^  taking over ' || true)
  live=0
  while read -r p; do
    case " $killed " in *" $p "*) ;; *) live=$((live + 1)) ;; esac
  done < <(cat "$w"/log* | sed -n 's/^  taking over .* pid \([0-9]*\)): its lease expired$/\1/p')
  tables "$url" "$w/check" > "$w/tables"
  local same=no fresh
  cmp -s "$w/tables" "$d/one.tables" && same=yes
  fresh=$(OTB_STORE_CACHE=$w/check "$otb" --store "$url" run "$exp" --quiet)
  echo "  $label (OTB_LEASE_S=$lease): all ended in $(awk "BEGIN{printf \"%.1f\", $end - $start}") s;" \
    "$ran computations published for $total nodes ($dup node(s) published twice," \
    "$((total - uniq)) published by a killed worker before its line);" \
    "duplicate work: $taken node(s) taken over ($((taken - live)) from the killed workers'" \
    "open leases${leases:+, of $open left open}; $live from live workers);" \
    "tables equal one process: $same; rerun: ${fresh#*: }"
}

chaos file "file://$d/shared" "${OTB_CHAOS_LEASE_S:-3}" "$d/shared/cache/leases"

py=${OTB_PYTHON:-python3}
if "$py" -c 'import moto.server' 2>/dev/null; then
  port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$py" -m moto.server -H 127.0.0.1 -p "$port" > "$d/moto.log" 2>&1 &
  moto=$!
  until curl -s -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.2; done
  curl -s -o /dev/null -X PUT "http://127.0.0.1:$port/chaos"
  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
    AWS_ENDPOINT=http://127.0.0.1:$port AWS_ALLOW_HTTP=true
  chaos s3 "s3://chaos/p" "${OTB_CHAOS_S3_LEASE_S:-15}" ""
else
  echo "  s3: skipped (no Python with moto[server]; set OTB_PYTHON)"
fi
