#!/usr/bin/env bash
# One schedule built by two tessel binaries (a code-generation change, the search left
# out): each WORKLOAD=SCHEDULE pair run by BIN_A then BIN_B, PAIRS times alternating
# (`tessel run`, cold caches, its median in ms), on THREADS threads (default 2). Prints
# per pair "old/new" medians; writes OUT/same.log.
#
#   benches/cpu_same_schedule.sh OUT BIN_A BIN_B WORKLOAD=SCHEDULE...
#   e.g. after benches/cpu_ab.sh /tmp/ab 64 A B matmul:m=512,n=301,k=1221,layout=nt:
#        benches/cpu_same_schedule.sh /tmp/same A B \
#          matmul:m=512,n=301,k=1221,layout=nt=/tmp/ab/matmul_m_512_n_301_k_1221_layout_nt.a.sched
# PIN="taskset -c 2,3" pins the runs to cores (on a shared host).
set -u
out=$1 bin_a=$2 bin_b=$3
shift 3
threads=${THREADS:-2} pairs=${PAIRS:-3}
mkdir -p "$out"
ms() { ${PIN:-} "$1" run "$2" --target cpu --schedule "$3" --threads "$threads" 2>&1 |
  awk '/^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'; }
for pair in "$@"; do
  w=${pair%=*} sched=${pair##*=}
  r=""
  for ((i = 0; i < pairs; i++)); do
    r="$r $(ms "$bin_a" "$w" "$sched")/$(ms "$bin_b" "$w" "$sched")"
  done
  echo "$w $(basename "$sched"), A/B ms:$r" | tee -a "$out/same.log"
done
