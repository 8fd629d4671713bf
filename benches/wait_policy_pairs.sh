#!/usr/bin/env bash
# The worker's OpenMP wait policy against bounded spinning on given schedules (issue 16):
# each WORKLOAD=SCHEDULE pair run by `tessel run --warm` REPS times (default 3) under
# `OMP_WAIT_POLICY=passive` alone (threads sleep at once) and as many times spinning a
# while before sleeping (`GOMP_SPINCOUNT=N` beside it, for each N of SPINCOUNTS, default
# "300000 10000": libgomp's count with no policy set, and the worker's default),
# alternating; prints each run's median in ms, one line per workload.
#
#   THREADS=2 [SPINCOUNTS="300000 10000"] benches/wait_policy_pairs.sh 'WORKLOAD @ SCHEDULE' ...
#   e.g. 'matmul:512x512x512 @ /tmp/cb/matmul_512x512x512.trace'
set -u
bin=${TESSEL_BIN:-./target/release/tessel}
threads=${THREADS:-$(nproc)} reps=${REPS:-3}
read -r -a counts <<<"${SPINCOUNTS:-300000 10000}"
run() { # workload schedule env... -> median ms
  local w=$1 s=$2
  shift 2
  env "$@" "$bin" run "$w" --target cpu --schedule "$s" --threads "$threads" --warm 2>&1 |
    awk '/^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'
}
for pair in "$@"; do
  w=${pair% @ *} s=${pair##* @ }
  passive=""
  declare -A spin=()
  for ((i = 0; i < reps; i++)); do
    passive+=" $(run "$w" "$s" OMP_WAIT_POLICY=passive)"
    for n in "${counts[@]}"; do
      spin[$n]+=" $(run "$w" "$s" OMP_WAIT_POLICY=passive GOMP_SPINCOUNT="$n")"
    done
  done
  line="$w | passive$passive"
  for n in "${counts[@]}"; do line+=" | spin $n${spin[$n]}"; done
  echo "$line"
  unset spin
done
