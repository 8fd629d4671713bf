#!/usr/bin/env bash
# A split-K schedule with its partials summed by a kernel of their own and the same
# schedule summed by the last block to arrive at each tile (`serial_sum_at`, the space's
# `split_k.serial_sum` decision), everything else the same. SCHED (a trace sampled or
# tuned with `serial_sum` above 0 in SPACE, so that it carries the decision) is first grown
# again as it is (`tessel sample --like`: a tuned trace may hold decisions the space no
# longer draws the same way, and the two sides must come from one growth; the script says
# whether it grew back into its own decisions); then each two-way `sample_categorical` of
# that trace is flipped in turn and grown again, and the flip right before which (or after
# which) `serial_sum_at(` stands, with every line before it unchanged, gives the other
# side. Both are run PASSES times in rounds (`tessel run`: check and median latency), then
# under the profiler (benches/kernel_times.sh into OUT/kt-{separate,serial}; KT=0 skips
# it). On the CUDA device.
#
#   bash benches/probe/serial_sum/ab.sh OUT WORKLOAD SCHED SPACE [PASSES]
set -u
out=$1 w=$2 sched=$3 space=$4 passes=${5:-3}
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
like() { "$bin" sample "$w" --target cuda --space "$space" --like "$1" 2>/dev/null | tail -n +2; }
decisions() { grep -o "decision=.*" "$1"; }
like "$sched" >"$out/base.sched"
if [ "$(decisions "$sched")" = "$(decisions "$out/base.sched")" ]; then
  echo "$w: SCHED grows back into its own decisions"
else
  echo "$w: SCHED grows into other decisions; both sides are grown from those"
fi
base=$out/base.sched
rm -f "$out/serial.sched" "$out/separate.sched"
for line in $(grep -n "sample_categorical(candidates=\[0, 1\]" "$base" | cut -d: -f1); do
  d=$(sed -n "${line}p" "$base" | grep -o "decision=[01]" | cut -d= -f2)
  sed "${line}s/decision=$d/decision=$((1 - d))/" "$base" >"$out/flip.sched"
  like "$out/flip.sched" >"$out/grown.sched"
  [ "$(head -n $((line - 1)) "$base")" = "$(head -n $((line - 1)) "$out/grown.sched")" ] || continue
  next=$((line + 1))
  if sed -n "${next}p" "$base" | grep -q "^serial_sum_at("; then
    cp "$base" "$out/serial.sched" && cp "$out/grown.sched" "$out/separate.sched" && break
  elif sed -n "${next}p" "$out/grown.sched" | grep -q "^serial_sum_at("; then
    cp "$base" "$out/separate.sched" && cp "$out/grown.sched" "$out/serial.sched" && break
  fi
done
[ -s "$out/serial.sched" ] && [ -s "$out/separate.sched" ] ||
  { echo "$w: no flip of $sched changes its split-K sum alone" >&2; exit 1; }
echo "$w: the serial sum's decision on line $line"
for pass in $(seq "$passes"); do
  for side in separate serial; do
    echo "$w $side pass $pass $("$bin" run "$w" --schedule "$out/$side.sched" --target cuda 2>&1 |
      grep -E '^(check|latency|speed|error)' | tr '\n' ' ')"
  done
done
[ "${KT:-1}" = 0 ] && exit 0
for side in separate serial; do
  echo "$side:"
  bash "$here/kernel_times.sh" "$out/kt-$side" "$w" "$out/$side.sched" | grep main_kernel
done
