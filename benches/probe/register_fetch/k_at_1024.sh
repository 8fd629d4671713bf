#!/usr/bin/env bash
# Why the ceiling's K variant (A transposed by a kernel of its own) of 1024^3 NN ran 190 us
# where the R variant (A transposed by the fetch through registers) ran 105 us: both timed
# again by `tessel run`, then kernel by kernel by Nsight Compute (benches/kernel_times.sh).
#
#   benches/probe/register_fetch/k_at_1024.sh OUT
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./.gpu/tessel}
w=matmul:1024x1024x1024,layout=nn
mkdir -p "$out"
for v in K R; do
  for i in 1 2; do
    echo "$v run $i: $("$bin" run "$w" --schedule "$here/1024_nn_$v.sched" --target cuda 2>&1 | grep -E '^latency')"
  done
  "$here/../../kernel_times.sh" "$out/$v" "$w" "$here/1024_nn_$v.sched"
done
