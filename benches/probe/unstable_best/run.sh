#!/usr/bin/env bash
# The two bests of matmul:m=2953,n=379,k=1013,layout=nt from the padding-mutator A/B
# (2026-11-30, seed 11: the mutator side's, timed at 94.0 us in tuning and 115-166 us by
# later runs, and the other side's, steady), each run twice against cublasLt in the same
# process. Run from the repository root on the GPU machine:
#
#   bash benches/probe/unstable_best/run.sh
w=matmul:m=2953,n=379,k=1013,layout=nt
for i in 1 2; do
  for s in mutator_side before_side; do
    echo "$s: $(${TESSEL_BIN:-./.gpu/tessel} run $w --schedule "$(dirname "$0")/$s.sched" --target cuda --compare 2>&1 | grep -E '^(speed|peer)' | tr '\n' ' ')"
  done
done
