#!/usr/bin/env bash
# Programmatic dependent launch on multi-kernel schedules, three ways: as shipped (each
# block of a kernel with a successor triggers it at its start, `launch_dependents`),
# late (no trigger: the successor's blocks are scheduled once every block before has
# exited) and ordinary launches. Each schedule run by `tessel run` (medians of 200 runs, L2
# flushed), the three ways alternating, three times. Two f16 convs (staging kernels) and
# a split-K GEMM are first tuned in the call (64 trials, no shipped records) for their
# bests. Needs a build with no_pdl.patch applied (TESSEL_PROBE_NO_PDL,
# TESSEL_PROBE_LATE_TRIGGER; not in the source).
#
#   benches/probe/register_fetch/no_pdl.sh OUT
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
export TESSEL_SHIPPED=off
runs=(
  "matmul:1024x1024x1024,layout=nn $here/1024_nn_K.sched"
  "matmul:m=1804,n=846,k=1710,layout=nn $here/tk_1804x846x1710_nn.sched"
  "matmul:m=2953,n=379,k=1013,layout=nt $here/../unstable_best/seed11_2026_11_30.sched"
)
i=0
for w in "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32" \
  "conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32" \
  "matmul:512x768x3072"; do
  i=$((i + 1))
  "$bin" tune "$w" --target cuda --trials 64 --db "$out/tune.sqlite" >/dev/null 2>&1
  "$bin" best "$w" --target cuda --db "$out/tune.sqlite" --emit trace >"$out/tuned$i.sched" 2>/dev/null
  runs+=("$w $out/tuned$i.sched")
done
for r in "${runs[@]}"; do
  set -- $r
  for i in 1 2 3; do
    a=$("$bin" run "$1" --schedule "$2" --target cuda 2>&1 | grep -E '^latency' | awk '{print $3}')
    b=$(TESSEL_PROBE_LATE_TRIGGER=1 "$bin" run "$1" --schedule "$2" --target cuda 2>&1 | grep -E '^latency' | awk '{print $3}')
    c=$(TESSEL_PROBE_NO_PDL=1 "$bin" run "$1" --schedule "$2" --target cuda 2>&1 | grep -E '^latency' | awk '{print $3}')
    echo "$1 $(basename "$2") run $i: shipped $a us, late $b us, ordinary $c us"
  done
done | tee "$out/no_pdl.txt"
