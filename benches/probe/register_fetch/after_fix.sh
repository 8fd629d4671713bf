#!/usr/bin/env bash
# The multi-kernel schedules of no_pdl.sh (the convs and the split-K GEMM as tuned in its
# call, committed beside this script) run by a build without the early trigger, three
# times each: their times should be no_pdl.sh's "late" ones.
#
#   benches/probe/register_fetch/after_fix.sh OUT
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
runs=(
  "matmul:1024x1024x1024,layout=nn $here/1024_nn_K.sched"
  "matmul:m=1804,n=846,k=1710,layout=nn $here/tk_1804x846x1710_nn.sched"
  "matmul:m=2953,n=379,k=1013,layout=nt $here/../unstable_best/seed11_2026_11_30.sched"
  "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32 $here/conv_c64_f16_tuned.sched"
  "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32 $here/conv_c256_f16_tuned.sched"
  "matmul:512x768x3072 $here/matmul_512x768x3072_tuned.sched"
)
for r in "${runs[@]}"; do
  set -- $r
  t=()
  for i in 1 2 3; do
    t+=("$("$bin" run "$1" --schedule "$2" --target cuda 2>&1 | grep -E '^latency' | awk '{print $3}')")
  done
  echo "$1 $(basename "$2"): ${t[*]} us"
done | tee "$out/after_fix.txt"
