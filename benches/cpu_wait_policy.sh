#!/usr/bin/env bash
# The OpenMP wait policy of CPU kernels (issue 16): each GEMM tuned with TRIALS trials
# under the worker's default policy (`passive`), then its best schedule run twice by
# `tessel run --compare` (beside ndarray's `dot` in the same worker) with the default and
# twice with OMP_WAIT_POLICY=active, and twice spinning for a while before sleeping
# (`spin`: active with GOMP_SPINCOUNT=300000, libgomp's spin count when no policy is
# set). Prints one line per run.
#
#   benches/cpu_wait_policy.sh [TRIALS] [WORKLOAD...]
set -u
trials=${1:-64}
shift $(( $# >= 1 ? 1 : 0 ))
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(matmul:512x512x512 matmul:1024x1024x1024)
bin=${TESSEL_BIN:-./target/release/tessel}
db=$(mktemp -d)/wait_policy.sqlite
for w in "${workloads[@]}"; do
  "$bin" tune "$w" --target cpu --trials "$trials" --db "$db" >/tmp/wait_policy.tune.txt 2>&1
  grep -E "^(trials|best) " /tmp/wait_policy.tune.txt
  "$bin" best "$w" --target cpu --db "$db" --emit trace >/tmp/wait_policy.sched
  for policy in default active spin; do
    unset OMP_WAIT_POLICY GOMP_SPINCOUNT
    case $policy in
      active) export OMP_WAIT_POLICY=active ;;
      spin) export OMP_WAIT_POLICY=active GOMP_SPINCOUNT=300000 ;;
    esac
    for rep in 1 2; do
      echo "$w $policy $rep: $("$bin" run "$w" --schedule /tmp/wait_policy.sched --target cpu --compare 2>&1 |
        grep -E '^(latency|speed|peer)' | tr '\n' ' ' | cut -c1-300)"
    done
  done
  unset OMP_WAIT_POLICY GOMP_SPINCOUNT
done
