#!/usr/bin/env bash
# One block shape (64 x 128 outputs, K in steps of 16, the fastest hand-edited schedule of
# matmul:m=1556,n=3953,k=2198 in benches/probe/odd_gemm_padding, its M padded to 64, its K to
# 16) with the thread's outputs laid out five ways: tROWSxCOLS_thTHREADS, the rows and
# columns of C one thread computes and the block's threads (8 x 8 is the original).
# Only the two spatial tile decisions differ. Each is built, checked and timed against
# cublasLt in the same process, then its kernels timed by Nsight Compute
# (benches/kernel_times.sh: registers, warps active, SM throughput). Run from the
# repository root on the GPU machine:
#
#   bash benches/probe/thread_tile_shape/run.sh OUT
set -u
out=$1
w=matmul:m=1556,n=3953,k=2198
for f in "$(dirname "$0")"/*.sched; do
  echo "== $(basename "$f" .sched): $(${TESSEL_BIN:-./.gpu/tessel} run $w --schedule "$f" --target cuda --compare 2>&1 | grep -E '^(check|speed|peer)' | tr '\n' ' ')"
done
for f in "$(dirname "$0")"/*.sched; do
  echo "== $(basename "$f" .sched)"
  bash "$(dirname "$0")/../../kernel_times.sh" "$out/$(basename "$f" .sched)" $w "$f" 2>&1 | grep -A3 '\.ncu\.csv' | grep main_kernel
done
