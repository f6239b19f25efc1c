#!/usr/bin/env bash
# `otb serve --model scripted:echo` under load: 200 concurrent streaming clients
# (`stream: true`, each on a kept-alive connection, one request after another) for
# 60 s. It is the test tests/serve_load.rs run longer: it fails on any error, on a
# client that got no reply while the load lasted, or on memory that grew in the
# second half of the load; it prints requests answered, errors, latency p50 / p90 /
# p99 / max and the server's RSS at the start, middle and end (and its peak).
#
#   bash scripts/bench-serve.sh [SECONDS] [CLIENTS]   # default 60 200
#
# Server and clients are the dev-profile builds `cargo test` makes, on this machine
# (the clients' threads share its cores with the server).
set -euo pipefail
cd "$(dirname "$0")/.."
OTB_SERVE_LOAD_S=${1:-60} OTB_SERVE_CLIENTS=${2:-200} \
  cargo test --test serve_load -- --nocapture 2>&1 |
  grep -E '^serve load:|panicked|^test result'
