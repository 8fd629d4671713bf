#!/usr/bin/env bash
# `tessel tune --confirm 0` against `--confirm 3`, workload by workload, by
# benches/conv_view_ab.sh (issue 14's protocol, each best then run against cublasLt by a
# fresh process; its table's "held" is that run's time over the fastest the tune
# recorded). First the machine: the seed-11 best of 2953 x 379 x 1013 NT run cold twice
# (below 22 TFLOP/s: a machine where buffers' placement moves a kernel's cold time; see
# flush_order.sh). The table: `python3 benches/conv_view_table.py OUT/ab.log confirm0 confirm3`.
#
#   bash benches/probe/unstable_best/confirm_ab.sh OUT WORKLOAD...
set -u
out=$1
shift
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(dirname "$0")
mkdir -p "$out"
echo "machine: $(for i in 1 2; do "$bin" run matmul:m=2953,n=379,k=1013,layout=nt --schedule "$here/seed11_2026_11_30.sched" --target cuda 2>&1 | grep -E '^speed' | awk '{print $2}'; done | tr '\n' ' ')TFLOP/s cold; $(nvidia-smi --query-gpu=serial --format=csv,noheader)"
for w in "$@"; do
  for c in 0 3; do
    TESSEL_CONFIRM=$c bash "$here/../../conv_view_ab.sh" "$out/c$c" search_spaces/cuda.toml -- "$w" |
      sed "s/ | cuda.toml | / | confirm$c | /" | tee -a "$out/ab.log"
  done
done
