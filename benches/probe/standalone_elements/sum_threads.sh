#!/usr/bin/env bash
# A split-K best's sum stage at each count of elements a thread (`threads.
# standalone_min_blocks`, issue 17): the decision that feeds the sum's split `factors=[None,
# vN, 128]` (the last such split of the trace) set to each of its candidates in turn by
# editing SCHED, each variant run PASSES times in rounds (`tessel run`, medians printed),
# then the first variant's kernels under the profiler (benches/kernel_times.sh into
# OUT/kt; KT=0 skips it). On the CUDA device.
#
#   bash benches/probe/standalone_elements/sum_threads.sh OUT WORKLOAD SCHED [PASSES]
set -u
out=$1 w=$2 sched=$3 passes=${4:-3}
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
var=$(grep -o "factors=\[None, v[0-9]*, 128\])" "$sched" | tail -1 | grep -o "v[0-9]*")
line=$(grep -n "^$var = sample_categorical(" "$sched" | cut -d: -f1)
[ -n "$line" ] || { echo "no split-K sum's decision in $sched" >&2; exit 1; }
echo "sum's decision: $(sed -n "${line}p" "$sched")"
n=$(sed -n "${line}p" "$sched" | grep -o "candidates=\[[0-9, ]*\]" | tr -cd ',' | wc -c)
for d in $(seq 0 "$n"); do sed "${line}s/decision=[0-9]*/decision=$d/" "$sched" >"$out/d$d.sched"; done
for pass in $(seq "$passes"); do
  for d in $(seq 0 "$n"); do
    echo "decision $d pass $pass $("$bin" run "$w" --schedule "$out/d$d.sched" --target cuda 2>&1 |
      grep -E '^(latency|error)' | head -1)"
  done
done
[ "${KT:-1}" = 0 ] || bash "$here/kernel_times.sh" "$out/kt" "$w" "$out/d0.sched" | grep main_kernel
