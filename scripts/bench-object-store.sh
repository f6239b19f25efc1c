#!/usr/bin/env bash
# The store on object storage: the full scripted grid (experiments/scripted.toml) on
# an S3-compatible server started here on 127.0.0.1 (the Python package moto, from
# OTB_PYTHON or python3; skipped without it). Three runs, each best of 3:
#   - from an empty bucket: every stage computed and published;
#   - a second machine (an empty local mirror): every entry looked up on the remote,
#     fetched and verified -- the cost of a cached rerun against the object store,
#     as entries (lookups) per second;
#   - the same machine again (a filled mirror).
#
#   bash scripts/bench-object-store.sh [OTB]   # default target/release/otb
set -euo pipefail
cd "$(dirname "$0")/.."
otb=${1:-target/release/otb}
py=${OTB_PYTHON:-python3}
exp=experiments/scripted.toml
if ! "$py" -c "import moto.server" 2>/dev/null; then
  echo "  skipped: no Python with moto[server] (set OTB_PYTHON)"
  exit 0
fi
d=$(mktemp -d)
port=$("$py" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$py" -m moto.server -H 127.0.0.1 -p "$port" > "$d/moto.log" 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null; rm -rf "$d"' EXIT
for _ in $(seq 1 300); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.1
done
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1 \
  AWS_ENDPOINT="http://127.0.0.1:$port" AWS_ALLOW_HTTP=true OTB_HEARTBEAT_S=0

# Wall seconds of `otb --store URL run` with mirror $2 (a fresh one when $3 = fresh).
timed() {
  local url=$1 mirror=$2
  [ "${3:-}" = fresh ] && rm -rf "$mirror"
  local start=$EPOCHREALTIME
  if ! OTB_STORE_CACHE="$mirror" "$otb" --store "$url" run "$exp" --quiet > "$d/out" 2> "$d/err"; then
    cat "$d/err" >&2
    return 1
  fi
  local end=$EPOCHREALTIME
  awk "BEGIN{printf \"%.3f\", $end - $start}"
}
min() { printf '%s\n' "$@" | sort -g | head -1; }

computed=() fetched=() again=()
for rep in 1 2 3; do
  curl -sf -X PUT --data '' -o /dev/null "http://127.0.0.1:$port/bench$rep"
  url="s3://bench$rep/s"
  t=$(timed "$url" "$d/m-a$rep" fresh) || exit 1
  computed+=("$t")
  t=$(timed "$url" "$d/m-b$rep" fresh) || exit 1
  fetched+=("$t")
  t=$(timed "$url" "$d/m-b$rep") || exit 1
  again+=("$t")
done
stages=$(sed -n 's/.*: \([0-9]*\) stages, .*/\1/p' "$d/out")
f=$(min "${fetched[@]}")
echo "  from an empty bucket (every stage computed and published): best of 3 $(min "${computed[@]}") s"
echo "  a second machine, empty mirror (every entry fetched from the bucket and verified): best of 3 $f s, $stages entries, $(awk "BEGIN{printf \"%.0f\", $stages / $f}") lookups/s"
echo "  the same machine again (filled mirror): best of 3 $(min "${again[@]}") s"
