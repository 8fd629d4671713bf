#!/usr/bin/env bash
# Whether `tessel tune --confirm` (the K fastest records timed again in a fresh worker)
# leaves a best whose time holds: each workload tuned by issue 14's protocol (a copy of
# the shipped base database, 300 trials, batch 64, seed 11, a 60 s limit, focused
# retraining) with `--confirm ${CONFIRM:-3}`, the tune's confirmation and best lines,
# then its best run RUNS (3) times by fresh `tessel run --compare` processes against
# cublasLt. The defaults are the two GEMMs whose seed-11 bests did not hold before
# (2026-11-29/30). Run from the repository root on the GPU machine:
#
#   bash benches/probe/unstable_best/confirm_check.sh OUT [WORKLOAD...]
set -u
out=$1
shift
ws=("$@")
[[ ${#ws[@]} -eq 0 ]] && ws=(matmul:m=2953,n=379,k=1013,layout=nt matmul:m=708,n=2724,k=1831)
bin=${TESSEL_BIN:-./.gpu/tessel}
base=${TESSEL_BASE_DB:-/tmp/tessel-conv-ab-base.sqlite}
db=/tmp/tessel-confirm-check.sqlite sched=/tmp/tessel-confirm-check.sched
export TESSEL_SHIPPED=off
mkdir -p "$out"
source "$(dirname "$0")/../../shipped_db.sh"
shipped_db "$bin" "$base" "$out"
for w in "${ws[@]}"; do
  fresh_db "$base" "$db"
  echo "== $w (confirm ${CONFIRM:-3})"
  "$bin" tune "$w" --target cuda --trials 300 --time-limit 60 --batch 64 --seed 11 \
    --db "$db" --retrain focused --confirm "${CONFIRM:-3}" 2>&1 | grep -E '^(stopped|confirmed|best)'
  "$bin" best "$w" --target cuda --db "$db" --emit trace >"$sched" 2>/dev/null
  for i in $(seq "${RUNS:-3}"); do
    echo "run $i: $("$bin" run "$w" --schedule "$sched" --target cuda --compare 2>&1 | grep -E '^(speed|peer)' | tr '\n' ' ')"
  done
done
