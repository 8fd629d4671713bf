#!/usr/bin/env bash
# The wgmma sketch's pipeline depth on mid-size 16-bit GEMMs (benches/RESULTS.md, "Deeper
# wgmma pipelines, tried and reverted"): the tuned bests of 1000^3 bf16 (4 stages) and of
# 512x1024x4096 TT bf16 (3 stages, split-K), each with its stage decision edited to 3, 4,
# 6 or 8 (benches/schedules/wgmma_stages/), built and timed against cublasLt, twice.
#
#   benches/wgmma_stages.sh            (TESSEL_BIN, default ./.gpu/tessel)
set -u
bin=${TESSEL_BIN:-./.gpu/tessel}
dir=$(dirname "$0")/schedules/wgmma_stages
for rep in 1 2; do
  for f in "$dir"/matmul_1000_bf16_stages*.sched; do
    echo "== $(basename "$f") run $rep"
    "$bin" run "matmul:1000x1000x1000,dtype=bf16,acc=f32" --schedule "$f" --target cuda --compare 2>&1 |
      grep -E "^(speed|ratio|check)"
  done
  for f in "$dir"/matmul_512x1024x4096_tt_bf16_stages*.sched; do
    echo "== $(basename "$f") run $rep"
    "$bin" run "matmul:m=512,n=1024,k=4096,layout=tt,dtype=bf16,acc=f32" --schedule "$f" --target cuda --compare 2>&1 |
      grep -E "^(speed|ratio|check)"
  done
done
