#!/usr/bin/env bash
# A GEMM's register-tile best with and without its A block packed as the sketch's row
# panel packs it (with_rows.py), each timed by `tessel run` (its median, buffers evicted
# before each run, as the tuner times candidates) in PASSES alternating pairs on THREADS
# threads (default: every core); prints each pass's medians and the ratio (> 1: packed
# faster). PER_CALL=1: A packed once per call by a stage of its own (with_rows.py
# --per-call).
#   benches/probe/cpu_pack/pack_a/with_rows.sh SCHED WORKLOAD [PASSES]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./target/release/tessel}
sched=$1 w=$2 passes=${3:-4} threads=${THREADS:-$(nproc)}
rows=$(mktemp --suffix=.sched)
python3 "$here/with_rows.py" ${PER_CALL:+--per-call} "$sched" >"$rows"
ms() {
  "$bin" run "$w" --target cpu --schedule "$1" --threads "$threads" 2>&1 |
    awk '/^check/ && $2 != "ok:" {print "check failed" > "/dev/stderr"; exit 1}
         /^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'
}
for p in $(seq "$passes"); do
  a=$(ms "$sched") b=$(ms "$rows")
  echo "pass $p: as tuned $a ms, A packed $b ms, ratio $(python3 -c "print(f'{$a / $b:.3f}')")"
done
rm -f "$rows"
