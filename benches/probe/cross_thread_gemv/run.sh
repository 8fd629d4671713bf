#!/usr/bin/env bash
# Hand-written cross-thread GEMV schedules of a weight stored [out, in] (the structure of
# the cross_thread sketch, search_spaces/cuda.toml): `l{lanes}_r{rows}_v{vector}.sched`,
# lanes on threadIdx.x reading a row side by side, rows outputs a block on threadIdx.y,
# v4: each lane's share read as float4 into registers (a cache_read + vectorize the sketch
# does not have). Each is built, checked and timed against cublasLt in the same process
# (benches/RESULTS.md, 2026-11-28: "GEMVs of a weight stored by rows").
#
#   benches/probe/cross_thread_gemv/run.sh          (TESSEL_BIN, default ./.gpu/tessel)
set -u
dir=$(dirname "$0")
bin=${TESSEL_BIN:-./.gpu/tessel}
for w in "matmul:m=1,n=4096,k=4096,layout=nt" "matmul:m=1,n=11008,k=4096,layout=nt"; do
  for f in "$dir"/*.sched; do
    printf '%s %s: ' "$w" "$(basename "$f" .sched)"
    "$bin" run "$w" --schedule "$f" --target cuda --compare 2>&1 | grep -E "^(latency|peer|error)" | tr '\n' ' '
    echo
  done
done
