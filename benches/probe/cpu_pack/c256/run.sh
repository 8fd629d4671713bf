#!/usr/bin/env bash
# The c256 14x14 3x3 NCHW conv's tuned best on the host CPU (benches/RESULTS.md,
# 2026-11-29: a tune of 128 trials by benches/cpu_blas.sh with the binary of daa2452)
# and variants written from it by hand, each run PASSES times (default 2), alternating,
# by `tessel run` on THREADS threads (default 2); prints each run's median.
#   best                         the tuned best: 7 rows x 4 vectors, weights packed once
#   nr2_mr7, nr2_mr14            7 or 14 rows x 2 vectors (no register spilled)
#   rows_2, rows_7               2 or 7 output rows p in a parallel block, inside N1
#   panel_per_column_tile,       the packed weights also copied into a panel per N1
#   panel_per_reduction_block    (or per K0) block, as a GEMM's B
#   benches/probe/cpu_pack/c256/run.sh
dir=$(dirname "$0")
bin=${TESSEL_BIN:-./target/release/tessel}
w=conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1
for ((i = 1; i <= ${PASSES:-2}; i++)); do
  for f in "$dir"/*.sched; do
    printf '%s %s\n' "$(basename "$f" .sched)" "$("$bin" run "$w" --target cpu --schedule "$f" \
      --threads "${THREADS:-2}" 2>&1 | grep -E '^latency' | cut -c11-)"
  done
done
