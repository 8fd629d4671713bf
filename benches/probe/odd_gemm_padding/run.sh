#!/usr/bin/env bash
# The search's best for matmul:m=1556,n=3953,k=2198 (NN, seed 12 of the feature-set A/B,
# 2026-11-30: found.sched) and variants of it with decisions edited by hand: the padding
# multiples of M and K lowered (found_m64, found_k16, found_m64_k16[_s3]) and other block
# shapes (bROWSxCOLS_tTHREADS, with _sN stages, _kN steps, _m64/_k16 paddings). Each is
# built, checked and timed against cublasLt in the same process. Run from the repository
# root on the GPU machine (benches/RESULTS.md, 2026-11-30, has the figures):
#
#   bash benches/probe/odd_gemm_padding/run.sh
w=matmul:m=1556,n=3953,k=2198
for f in "$(dirname "$0")"/*.sched; do
  echo "== $(basename "$f" .sched): $(${TESSEL_BIN:-./.gpu/tessel} run $w --schedule "$f" --target cuda --compare 2>&1 | grep -E '^(check|speed|peer)' | tr '\n' ' ')"
done
