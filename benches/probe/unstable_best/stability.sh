#!/usr/bin/env bash
# Where the mutator side's best of matmul:m=2953,n=379,k=1013,layout=nt loses its time:
# five `tessel run`s (each a fresh process; the L2 overwritten before every timed run, as
# in tuning), three with --warm (no overwrite), then Nsight Compute's kernel durations
# (each launch serialized) with its cache control off and on (on: L2 flushed and
# invalidated before each kernel). Run from the repository root on the GPU machine:
#
#   bash benches/probe/unstable_best/stability.sh OUT
set -u
out=$1
mkdir -p "$out"
bin=${TESSEL_BIN:-./.gpu/tessel}
w=matmul:m=2953,n=379,k=1013,layout=nt
s=$(dirname "$0")/mutator_side.sched
for i in 1 2 3 4 5; do echo "cold: $("$bin" run $w --schedule "$s" --target cuda 2>&1 | grep -E '^speed')"; done
for i in 1 2 3; do echo "warm: $("$bin" run $w --schedule "$s" --target cuda --warm 2>&1 | grep -E '^speed')"; done
for cc in none all; do
  echo "== ncu --cache-control $cc: kernel, launches, median us"
  ncu --clock-control none --cache-control $cc -k regex:main_kernel -c 40 \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv \
    "$bin" run $w --schedule "$s" --target cuda >"$out/ncu_$cc.csv" 2>&1
  PYTHONPATH="$(dirname "$0")/../.." python3 - "$out/ncu_$cc.csv" <<'PY'
import sys
from ncu_csv import kernels, number
for (name, grid, block), ms in (kernels(sys.argv[1]) or {}).items():
    ns = sorted(number(m["gpu__time_duration.sum"]) for m in ms)
    print(f"  {name} grid {grid} block {block}: {len(ns)} launches, {ns[len(ns) // 2] / 1e3:.1f} us")
PY
done
