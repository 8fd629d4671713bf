#!/usr/bin/env bash
# Two tessel binaries' tunes of the same workloads on the CUDA device: each binary tunes
# each workload from a fresh database of its own (TRIALS trials, seed 11 or TESSEL_SEED,
# no model; its `stopped` and `time` lines printed), then its best is run by `tessel run
# --compare` against the vendor library in the same process. For changes to the search
# (the same seed proposes differently) and to the tuner's pipeline (where time goes).
#
# TESSEL_KEEP=DIR keeps each best's trace as DIR/{other,this}.N.sched (N the workload's
# place in the list), for benches/probe/standalone_elements/sum_threads.sh and the like.
#
#   benches/tune_ab.sh OTHER TRIALS WORKLOAD...
#   e.g. benches/tune_ab.sh .exp/tessel-old 128 matmul:1009x523x311 "matmul:1000x1000x1000,dtype=f16,acc=f32"
set -u
# A fresh database here means nothing at all: not the shipped records `tessel tune`
# starts a new database from (TESSEL_SHIPPED=on restores that).
export TESSEL_SHIPPED=${TESSEL_SHIPPED:-off}
other=$1 trials=$2
shift 2
bin=${TESSEL_BIN:-./.gpu/tessel}
n=0
for w in "$@"; do
  n=$((n + 1))
  for side in other this; do
    b=$bin db=/tmp/tessel-tune-ab-$side.sqlite
    [ $side = other ] && b=$other
    rm -f "$db"
    printf '%s %s: ' "$b" "$w"
    "$b" tune "$w" --target cuda --trials "$trials" --seed "${TESSEL_SEED:-11}" --db "$db" 2>/dev/null |
      grep -E "^(stopped|time) " | tr '\n' ' '
    "$b" best "$w" --target cuda --db "$db" --emit trace >/tmp/tune-ab.sched 2>/dev/null || { echo; continue; }
    [ -n "${TESSEL_KEEP:-}" ] && mkdir -p "$TESSEL_KEEP" && cp /tmp/tune-ab.sched "$TESSEL_KEEP/$side.$n.sched"
    "$b" run "$w" --schedule /tmp/tune-ab.sched --target cuda --compare 2>&1 |
      grep -E "^(latency|peer)" | tr '\n' ' '
    echo
  done
done
