#!/usr/bin/env bash
# The same CPU schedules built by two tessel binaries that differ only in how the C hands
# out a parallel loop's iterations (OpenMP `schedule(static)`, the default, against
# `schedule(dynamic, TESSEL_CHUNK(n))`), each timed by `tessel run` (its median, the
# buffers evicted before each run, as the tuner times), the two binaries alternating
# PASSES times per schedule, so that the machine's load lands on both. Prints per
# schedule each pass's medians and the median ratio A / B of the times (> 1: B faster).
# SWAP=1 runs B first in each pass.
#
#   bash benches/probe/omp_schedule/policy_ab.sh BIN_A BIN_B PASSES SCHED=WORKLOAD...
set -u
a=$1 b=$2 passes=$3
shift 3
ms() {
  "$1" run "$2" --target cpu --schedule "$3" ${THREADS:+--threads $THREADS} 2>&1 |
    awk '/^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'
}
for pair in "$@"; do
  sched=${pair%%=*} w=${pair#*=}
  ta=() tb=()
  for _ in $(seq "$passes"); do
    if [[ ${SWAP:-0} == 1 ]]; then
      tb+=("$(ms "$b" "$w" "$sched")")
      ta+=("$(ms "$a" "$w" "$sched")")
    else
      ta+=("$(ms "$a" "$w" "$sched")")
      tb+=("$(ms "$b" "$w" "$sched")")
    fi
  done
  python3 - "$(basename "$sched")" "${ta[*]}" "${tb[*]}" <<'PY'
import statistics, sys
name, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
print(f"{name:60s} A ms {' '.join(f'{x:.3f}' for x in a)} | B ms {' '.join(f'{x:.3f}' for x in b)} | A / B {statistics.median(a) / statistics.median(b):.3f}")
PY
done
