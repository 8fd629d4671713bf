#!/usr/bin/env bash
# One tune of a GEMM under issue 14's protocol (the shipped start, 300 trials, batch 64,
# seed 11, focused retraining, --confirm 3) on the GPU machine, its records exported as
# JSON lines to OUT/records.jsonl for tune_tiles.py. Run from the repository root.
#
#   bash benches/probe/big_tiles/tune_records.sh OUT WORKLOAD
set -eu
out=$1 w=$2
bin=${TESSEL_BIN:-./.gpu/tessel}
source "$(dirname "$0")/../../shipped_db.sh"
mkdir -p "$out/base"
shipped_db "$bin" /tmp/base.sqlite "$out/base"
fresh_db /tmp/base.sqlite /tmp/t.sqlite
TESSEL_SHIPPED=off "$bin" tune "$w" --target cuda --trials 300 --time-limit 60 --batch 64 --seed 11 \
  --db /tmp/t.sqlite --retrain focused --confirm 3 2>&1 | grep -E '^(stopped|best|speed)' || true
"$bin" db export --db /tmp/t.sqlite --workload "$w" --format jsonl --out "$out/records.jsonl"
