#!/usr/bin/env bash
# TF32 on the H100 (issue 17): the example schedule (NN) and its NT variant timed against
# cublasLt with CUBLAS_COMPUTE_32F_FAST_TF32 in the same process, then GEMMs of several
# shapes and layouts tuned from a fresh database each (128 trials, 60 s at most) and their
# bests timed the same way. Run on the device from the repository root:
#   OUT=DIR [WORKLOADS="W..."] bash benches/probe/tf32_run.sh
set -u
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/r/device.txt
for spec in "matmul:4096x4096x4096,math=tf32" "matmul:2048x2048x2048,math=tf32" "matmul:8192x8192x8192,math=tf32"; do
  echo "== example $spec"; .gpu/tessel run "$spec" --schedule examples/schedules/wgmma_tf32_gemm.sched --target cuda --compare 2>&1 | grep -E "check|speed|peer|ratio"
done
echo "== NT"; .gpu/tessel run "matmul:m=4096,n=4096,k=4096,layout=nt,math=tf32" --schedule benches/probe/wgmma_tf32_nt.sched --target cuda --compare 2>&1 | grep -E "check|speed|peer|ratio"
i=0
for w in ${WORKLOADS:-"matmul:4096x4096x4096,math=tf32" "matmul:2048x2048x2048,math=tf32" "matmul:m=1009,n=523,k=311,math=tf32" "matmul:m=728,n=3092,k=3184,layout=nt,math=tf32" "dense_bias_relu:m=128,n=3072,k=768,math=tf32" "matmul:m=827,n=3478,k=2226,layout=tt,math=tf32" "matmul:m=1523,n=241,k=605,layout=tn,math=tf32"}; do
  i=$((i+1)); TESSEL_DB=/tmp/tf32_$i.sqlite timeout 150 benches/gpu_suite.sh $OUT/r/tune$i 60 128 "$w" 2>&1 | grep -v "^-\|^total\|^d"
done
cd $OUT && tar czf r.tgz r && rm -rf r
