#!/usr/bin/env bash
# Whether it is the direct transposing copy that makes the seed-11 best of 2953 x 379 x
# 1013 NT lose its cold time on some machines: the best (A transposed through shared
# memory, B by a direct copy whose warps read 32 rows of B at one k) against the same
# schedule with B transposed through shared memory as well (seed11_b_tiled.sched), six
# fresh cold `tessel run`s each, alternating, then one warm each. It first runs the best
# twice and stops unless the machine is one where the time moves (< 22 TFLOP/s).
#
#   bash benches/probe/unstable_best/copy_kinds.sh
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(dirname "$0")
w=matmul:m=2953,n=379,k=1013,layout=nt
speed() { "$bin" run $w --schedule "$here/$1" --target cuda "${@:2}" 2>&1 | grep -E '^(speed|check)' | awk '/^check/ && $2 != "ok:" {print "CHECK-FAILED"} /^speed/ {print $2}'; }
check="$(speed seed11_2026_11_30.sched) $(speed seed11_2026_11_30.sched)"
echo "best, cold: $check; $(nvidia-smi --query-gpu=serial --format=csv,noheader)"
python3 -c "import sys; sys.exit(0 if min(map(float, sys.argv[1:])) < 22 else 1)" $check ||
  { echo "a machine that holds the time"; [[ ${FORCE:-0} == 1 ]] || exit 0; }
for i in 1 2 3 4 5 6; do
  echo "round $i: best $(speed seed11_2026_11_30.sched) | B tiled $(speed seed11_b_tiled.sched)"
done
echo "warm: best $(speed seed11_2026_11_30.sched --warm) | B tiled $(speed seed11_b_tiled.sched --warm)"
