#!/usr/bin/env bash
# One block shape (64 x 128 outputs, K in steps of 16, the fastest hand-edited schedule of
# matmul:m=1556,n=3953,k=2198 in benches/probe/odd_gemm_padding, its M padded to 64, its K to
# 16) with the thread's outputs laid out six ways: tROWSxCOLS_thTHREADS, the rows and
# columns of C one thread computes and the block's threads (8 x 8 is the original).
# Only the two spatial tile decisions differ. t4x16_vt4_th128 (timed in the section of
# benches/RESULTS.md after the first run's) is t4x16_th128 with its 16 columns as 4 virtual
# threads of 4 (N tile [31, 4, 8, 1, 4]) instead of 2 of 8: its float4 reads of B are
# contiguous across 8 threads, as the fast tiles' are. Each is built, checked and timed against
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
