#!/usr/bin/env bash
# Schedules of one workload run alternately on the CUDA device, REPS passes over all of
# them (`tessel run --schedule`: check against the reference, median of 200 timed runs),
# so that variants of a schedule written by hand are compared in the same minutes.
#
#   benches/schedule_ab.sh WORKLOAD REPS SCHED...
#   e.g. benches/schedule_ab.sh "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32" 3 \
#          benches/schedules/conv2d_nchw_c256_14x14_f16/*.sched
set -u
w=$1 reps=$2
shift 2
bin=${TESSEL_BIN:-./.gpu/tessel}
for rep in $(seq "$reps"); do
  for s in "$@"; do
    printf '%s %s: ' "$rep" "$(basename "$s" .sched)"
    "$bin" run "$w" --schedule "$s" --target cuda 2>&1 | grep -E "^(check|latency)" | tr '\n' ' '
    echo
  done
done
