#!/usr/bin/env bash
# Split-K offered up to 4M outputs (the shipped search_spaces/cuda.toml with
# split_k.max_output_elements raised from 1M) against the shipped space: each from a fresh
# database, TRIALS trials, seed 11; each best run against cublasLt (benches/RESULTS.md,
# 2026-11-28: "Split-K for mid-size GEMMs, tried"; no gain, not kept).
#
#   benches/probe/split_k_mid/run.sh TRIALS WORKLOAD...      (TESSEL_BIN, default ./.gpu/tessel)
#   e.g. benches/probe/split_k_mid/run.sh 128 "matmul:m=728,n=3092,k=3184,layout=nt"
set -u
export TESSEL_SHIPPED=off
bin=${TESSEL_BIN:-./.gpu/tessel}
trials=$1; shift
space=/tmp/split_k_4m.toml
sed 's/^max_output_elements = 1048576$/max_output_elements = 4194304/' search_spaces/cuda.toml > $space
for w in "$@"; do
  for side in base sk4m; do
    db=/tmp/sk-$side.sqlite; rm -f $db
    extra=""; [ $side = sk4m ] && extra="--space $space"
    printf '%s %s: ' "$side" "$w"
    "$bin" tune "$w" --target cuda --trials "$trials" --seed 11 --db $db $extra 2>/dev/null | grep -E "^stopped" | tr '\n' ' '
    "$bin" best "$w" --target cuda --db $db --emit trace > /tmp/sk.sched 2>/dev/null
    printf 'rfactors %s ' "$(grep -c rfactor /tmp/sk.sched)"
    "$bin" run "$w" --schedule /tmp/sk.sched --target cuda --compare 2>&1 | grep -E "^(latency|peer)" | sed 's/(fastest[^)]*)//' | tr '\n' ' '
    echo
  done
done
