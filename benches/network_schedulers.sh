#!/usr/bin/env bash
# The gradient task scheduler against round-robin from one starting state: a warm-up-only
# run (one round for every task, round-robin) into a copy of the shipped records and
# their model, then each policy resumed from its own copy of that database for the rest
# of the budget. Runs from one database share their start, so the comparison is not
# swamped by how differently two runs' first rounds turn out (a pipelined run's in-run
# seeds and model swaps depend on timing).
#
#   benches/network_schedulers.sh OUT TRIALS [SEED]
#
# OUT receives warm.txt/.json and gradient.txt/.json, round-robin.txt/.json (the tune
# reports: per round the estimated latency). Prints each run's stop line and estimate.
# TESSEL_BIN (default ./.gpu/tessel), TESSEL_NETWORK (default ResNet-50 batch 1),
# TESSEL_BATCH (16).
set -u
out=$1 trials=$2 seed=${3:-13}
bin=${TESSEL_BIN:-./.gpu/tessel}
net=${TESSEL_NETWORK:-benches/networks/resnet50-b1.toml}
batch=${TESSEL_BATCH:-16}
mkdir -p "$out"
base=$out/base.sqlite
rm -f "$base"
for f in database/*.all.jsonl.gz; do "$bin" db import "$f" --db "$base" >>"$out/import.txt" 2>&1; done
"$bin" model train --db "$base" --target cuda 2>&1 | tail -1
tasks=$(grep -c '^\[\[task\]\]' "$net")
warm=$((tasks * batch))
cp "$base" "$out/warm.sqlite"
"$bin" tune --network "$net" --trials "$warm" --target cuda --task-scheduler round-robin \
  --batch "$batch" --seed "$seed" --db "$out/warm.sqlite" --report-json "$out/warm.json" \
  >"$out/warm.txt" 2>"$out/warm.err"
echo "warm-up: $(grep -E '^(stopped|estimated)' "$out/warm.txt" | tr '\n' ' ')"
for p in gradient round-robin; do
  cp "$out/warm.sqlite" "$out/$p.sqlite"
  "$bin" tune --network "$net" --trials $((trials - warm)) --target cuda --task-scheduler "$p" \
    --batch "$batch" --seed "$seed" --db "$out/$p.sqlite" --report-json "$out/$p.json" \
    >"$out/$p.txt" 2>"$out/$p.err"
  echo "$p: $(grep -E '^(stopped|estimated)' "$out/$p.txt" | tr '\n' ' ')"
done
