#!/usr/bin/env bash
# Where the fp32 ceiling's fetch-transposing (T) TT kernel loses to the kernel-transposed
# (K) one (0.86x vs 0.96x cublasLt at 4096^3, benches/RESULTS.md), though their compute
# loops issue the same SASS (benches/probe/sass_loop_mix.py): both 128x128 k32i16 3-stage
# variants of benches/gemm_ceiling.py profiled by Nsight Compute beside cublasLt, with
# shared-memory bank conflicts (loads, stores) and wavefronts, global sectors and the
# stall reasons (benches/stall_reasons.sh).
#
#   benches/probe/t_vs_k/run.sh OUT [N]      (N: 4096)
set -u
out=$1 n=${2:-4096}
here=$(dirname "$0")
mkdir -p "$out"
python3 "$here/../../gemm_ceiling.py" --layout tt "$out" "$n" >/dev/null
s=l1tex__data_pipe_lsu_wavefronts_mem_shared_op
b=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op
export NCU_EXTRA=${s}_ld.sum,${s}_st.sum,${b}_ld.sum,${b}_st.sum,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum
for form in T K; do
  sched="$out/${n}_tt_-${form}_128x128_lanes4x8_k32i16_s3.sched"
  echo "== $form: $(basename "$sched")"
  "$here/../../stall_reasons.sh" "$out/ncu-$form" "matmul:m=$n,n=$n,k=$n,layout=tt" "$sched"
done
