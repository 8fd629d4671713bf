#!/usr/bin/env bash
# The gradient task scheduler against round-robin from one starting state: per seed, a
# warm-up-only run (one round for every task, round-robin) into a copy of the shipped
# records and their model, then each policy resumed from its own copy of that database
# for the rest of the budget. Runs from one database share their start, so the comparison
# is not swamped by how differently two runs' first rounds turn out (a pipelined run's
# in-run seeds and model swaps depend on timing).
#
#   benches/network_schedulers.sh OUT TRIALS [SEED...]      (default seed: 13)
#
# OUT/SEED receives warm.txt/.json and gradient.txt/.json, round-robin.txt/.json (the tune
# reports: per round the estimated latency). Prints per seed each run's stop line and
# estimate, and the gradient's estimate over round-robin's (< 1: the gradient is ahead).
# TESSEL_BIN (default ./.gpu/tessel), TESSEL_NETWORK (default ResNet-50 batch 1),
# TESSEL_BATCH (16). TESSEL_START=empty starts every seed from an empty database instead
# (no shipped record, no model: the warm-up's rounds are random samples, and the model is
# trained on the run's own records).
set -u
out=$1 trials=$2
shift 2
seeds=("$@")
[[ ${#seeds[@]} -gt 0 ]] || seeds=(13)
bin=${TESSEL_BIN:-./.gpu/tessel}
net=${TESSEL_NETWORK:-benches/networks/resnet50-b1.toml}
batch=${TESSEL_BATCH:-16}
mkdir -p "$out"
base=$out/base.sqlite
rm -f "$base"
if [[ ${TESSEL_START:-shipped} == empty ]]; then
  export TESSEL_SHIPPED=off
else
  source "$(dirname "$0")/shipped_db.sh"
  shipped_db "$bin" "$base" "$out"
  tail -1 "$out/train.txt"
fi
tasks=$(grep -c '^\[\[task\]\]' "$net")
warm=$((tasks * batch))
estimate() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["estimated_seconds"])' "$1"; }
for seed in "${seeds[@]}"; do
  o=$out/$seed
  mkdir -p "$o"
  rm -f "$o/warm.sqlite"
  [[ -e $base ]] && cp "$base" "$o/warm.sqlite"
  "$bin" tune --network "$net" --trials "$warm" --target cuda --task-scheduler round-robin \
    --batch "$batch" --seed "$seed" --db "$o/warm.sqlite" --report-json "$o/warm.json" \
    >"$o/warm.txt" 2>"$o/warm.err"
  echo "seed $seed warm-up: $(grep -E '^(stopped|estimated)' "$o/warm.txt" | tr '\n' ' ')"
  for p in gradient round-robin; do
    cp "$o/warm.sqlite" "$o/$p.sqlite"
    "$bin" tune --network "$net" --trials $((trials - warm)) --target cuda \
      --task-scheduler "$p" --batch "$batch" --seed "$seed" --db "$o/$p.sqlite" \
      --report-json "$o/$p.json" >"$o/$p.txt" 2>"$o/$p.err"
    echo "seed $seed $p: $(grep -E '^(stopped|estimated)' "$o/$p.txt" | tr '\n' ' ')"
  done
  awk -v g="$(estimate "$o/gradient.json")" -v r="$(estimate "$o/round-robin.json")" \
    -v s="$seed" 'BEGIN {printf "seed %s: gradient / round-robin estimate %.4f\n", s, g / r}'
  rm -f "$o"/*.sqlite
done
