#!/usr/bin/env bash
# The first screen of each kind of `otb report` as docs/screens/<kind>.png (headless
# Chromium, 1280x900): the scripted Table 2 grid (experiments/scripted.toml), the
# authors' released runs (when ../shared/data/otb/bfcl is there), a small scripted
# chess run and a small scripted search run. Everything is made from the repository
# root with relative paths (the pages show no machine path), in outputs/screens/.
#
# Environment:
#   OTB=target/release/otb     the otb binary
#   CHROMIUM=chromium          the browser
#   SHARED=../shared/data/otb  the reference data (released runs)
set -euo pipefail
cd "$(dirname "$0")/.."
OTB=${OTB:-target/release/otb}
CHROMIUM=${CHROMIUM:-chromium}
SHARED=${SHARED:-../shared/data/otb}
W=outputs/screens
S=$W/store
mkdir -p "$W" docs/screens
shot() { # report folder, kind
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$W/profile" --window-size=1280,900 \
    --screenshot="docs/screens/$2.png" "file://$PWD/$1/report.html" >/dev/null 2>&1
  echo "docs/screens/$2.png ($(wc -c < "docs/screens/$2.png") bytes)"
}

"$OTB" --store "$S" run experiments/scripted.toml --quiet
"$OTB" --store "$S" report experiments/scripted.toml --to "$W/scripted" >/dev/null
shot "$W/scripted" scripted

if [ -d "$SHARED/bfcl/released_runs" ]; then
  "$OTB" --store "$S" report --released "$SHARED/bfcl/released_runs" \
    --recorded "$SHARED/bfcl/recorded_api_responses.json" --to "$W/released" >/dev/null
  shot "$W/released" released
else
  echo "report-screens: no $SHARED/bfcl/released_runs: no screen of the released runs" >&2
fi

# Chess: two training and two test positions, the scripted random agent, one round.
pos() { printf '{"fen": "%s", "phase": "%s", "evaluation": "equal", "cp": 0.0, "mate": null, "depth": 12, "test_id": "%s"}\n' "$@"; }
{ pos "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -" opening p1
  pos "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq -" opening p4; } > "$W/train.jsonl"
{ pos "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ -" middlegame p2
  pos "8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -" late_endgame p3; } > "$W/test.jsonl"
cat > "$W/chess.toml" <<'TOML'
name = "chess"
[chess]
train_file = "train.jsonl"
test_file = "test.jsonl"
tool_sets = ["strength_gradient"]
methods = ["base", "toolobserver"]
opponents = [1350]
max_plies = 12
rounds = 1
opponent_ratings = "nominal"
concurrency = 2
[models]
agent = "scripted:random"
editor = "scripted:errors"
TOML
"$OTB" --store "$S" run "$W/chess.toml" --quiet
"$OTB" --store "$S" report "$W/chess.toml" --to "$W/chess" >/dev/null
shot "$W/chess" chess

# Search on the substitute corpus: 3 training and 4 test questions, scripted models.
cat > "$W/search.toml" <<'TOML'
name = "search"
[search]
tool_sets = ["domains"]
methods = ["base", "toolobserver"]
train_questions = 3
test_questions = 4
max_turns = 2
rounds = 1
batch_size = 2
[models]
agent = "scripted:search-oracle"
editor = "scripted:observer"
TOML
"$OTB" --store "$S" run "$W/search.toml" --quiet
"$OTB" --store "$S" report "$W/search.toml" --to "$W/search" >/dev/null
shot "$W/search" search
