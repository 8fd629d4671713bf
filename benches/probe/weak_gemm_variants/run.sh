#!/usr/bin/env bash
# Two GEMMs the default search leaves near 0.7x of cublasLt, their tuned bests (issue 14's
# protocol, seed 11, on the H200 of 2026-11-30) and hand edits of a few of their decisions:
#   tn507_*:  matmul:m=507,n=1557,k=1880,layout=tn (64 x 64 outputs a block, 128 threads,
#             8 x 4 a thread, scalar fetches: both operands' rows are odd, 4 stages);
#             stages2: 2 pipeline stages; unroll64: unroll step 64 instead of 16.
#   nn3779_*: matmul:m=3779,n=941,k=787,layout=nn (128 x 64 outputs a block, 256 threads,
#             8 x 4 a thread, A transposed by a kernel of its own, 3 stages);
#             vecA4: A's fetch in float4 instead of float2; 8x8: 8 x 8 a thread, 128 x 128
#             a block (N tile [8, 2, 16, 1, 4]); vecA4_8x8: both.
# Each is built, checked and timed twice against cublasLt in the same process, then the
# 507 best's hardware counters by Nsight Compute (benches/ncu_profile.sh). Run from the
# repository root on the GPU machine:
#
#   bash benches/probe/weak_gemm_variants/run.sh OUT
set -u
out=$1
bin=${TESSEL_BIN:-./.gpu/tessel}
d=$(dirname "$0")
for f in "$d"/*.sched; do
  case $(basename "$f") in
    tn507_*) w=matmul:m=507,n=1557,k=1880,layout=tn ;;
    *) w=matmul:m=3779,n=941,k=787,layout=nn ;;
  esac
  for rep in 1 2; do
    echo "== $(basename "$f" .sched) $rep: $("$bin" run $w --schedule "$f" --target cuda --compare 2>&1 |
      grep -E '^(check|speed|peer)' | tr -s ' ' | tr '\n' ' ')"
  done
done
bash "$(dirname "$0")/../../ncu_profile.sh" "$out" matmul:m=507,n=1557,k=1880,layout=tn "$d/tn507_best.sched" 4
