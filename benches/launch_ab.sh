#!/usr/bin/env bash
# The same schedules run by two tessel binaries, alternately, on the CUDA device: each
# workload tuned by the first binary (TESSEL_BIN, from a fresh database), then its best run
# REPS times by each binary in turn. For changes that leave the kernels' work alone and
# change how they are built or launched (e.g. the dependent launch: OTHER the binary of
# the commit before it).
#
#   benches/launch_ab.sh OTHER TRIALS REPS WORKLOAD...
#   e.g. benches/launch_ab.sh .gpu/tessel-before 128 3 "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32"
set -u
# A fresh database here means nothing at all: not the shipped records `tessel tune`
# starts a new database from (TESSEL_SHIPPED=on restores that).
export TESSEL_SHIPPED=${TESSEL_SHIPPED:-off}
other=$1 trials=$2 reps=$3
shift 3
bin=${TESSEL_BIN:-./.gpu/tessel}
db=${TESSEL_DB:-/tmp/tessel-launch-ab.sqlite}
rm -f "$db"
for w in "$@"; do
  echo "== $w"
  "$bin" tune "$w" --target cuda --trials "$trials" --seed "${TESSEL_SEED:-11}" --db "$db" 2>/dev/null |
    grep -E "^(stopped|best) " | head -2
  "$bin" best "$w" --target cuda --db "$db" --emit trace >/tmp/launch-ab.sched || continue
  echo "kernels: $("$bin" best "$w" --target cuda --db "$db" --emit cuda 2>/dev/null | grep -c __global__)"
  for _ in $(seq "$reps"); do
    for b in "$other" "$bin"; do
      printf '%s: ' "$b"
      "$b" run "$w" --schedule /tmp/launch-ab.sched --target cuda 2>&1 | grep -E "^(check|latency)" | tr '\n' ' '
      echo
    done
  done
done
