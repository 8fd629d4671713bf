#!/usr/bin/env bash
# The worker's OpenMP wait policy against bounded spinning on given schedules (issue 16):
# each WORKLOAD=SCHEDULE pair run by `tessel run --warm` REPS times (default 3) under the
# worker's default (`passive`) and as many times spinning a while before sleeping
# (`OMP_WAIT_POLICY=active GOMP_SPINCOUNT=300000`, libgomp's behaviour with no policy
# set), alternating; prints each run's median in ms, one line per workload.
#
#   THREADS=2 benches/wait_policy_pairs.sh 'WORKLOAD @ SCHEDULE' ...
#   e.g. 'matmul:512x512x512 @ /tmp/cb/matmul_512x512x512.trace'
set -u
bin=${TESSEL_BIN:-./target/release/tessel}
threads=${THREADS:-$(nproc)} reps=${REPS:-3}
run() { # workload schedule env... -> median ms
  local w=$1 s=$2
  shift 2
  env "$@" "$bin" run "$w" --target cpu --schedule "$s" --threads "$threads" --warm 2>&1 |
    awk '/^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'
}
for pair in "$@"; do
  w=${pair% @ *} s=${pair##* @ }
  passive="" spin=""
  for ((i = 0; i < reps; i++)); do
    passive+=" $(run "$w" "$s" TESSEL_POLICY=default)"
    spin+=" $(run "$w" "$s" OMP_WAIT_POLICY=active GOMP_SPINCOUNT=300000)"
  done
  echo "$w | passive$passive | spin$spin"
done
