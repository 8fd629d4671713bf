#!/usr/bin/env bash
# Odd workloads end to end on the CUDA device, as a user's first tune meets them: a new
# database that starts from the shipped records, the default search, then each best
# checked and timed against cublasLt / cuDNN in the same call (benches/gpu_suite.sh).
# GEMVs both ways, a reduction of 16 and of 100,000, a 4 x 4 GEMM, a small batched GEMM,
# a dense layer of batch 1, a ResNet stem, a dilated, a depthwise and a tiny NHWC conv.
#
#   benches/odd_workloads.sh OUT [TRIALS [SECONDS]]      (default 64 trials, 25 s)
set -u
out=$1 trials=${2:-64} secs=${3:-25}
rm -f /tmp/tessel-odd.sqlite
TESSEL_SHIPPED=on TESSEL_DB=/tmp/tessel-odd.sqlite TESSEL_BATCH=32 \
  bash "$(dirname "$0")/gpu_suite.sh" "$out" "$secs" "$trials" \
  "matmul:m=1,n=4096,k=4096" \
  "matmul:m=4096,n=1,k=4096,layout=nt" \
  "matmul:m=8192,n=8192,k=16" \
  "matmul:m=4,n=4,k=4" \
  "matmul:m=2,n=3,k=100000" \
  "matmul:m=1000,n=1000,k=1000,layout=tn" \
  "batch_matmul:b=37,m=17,n=29,k=61" \
  "dense_bias_relu:m=1,n=1000,k=2048" \
  "conv2d_nchw:n=2,c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3" \
  "conv2d_nchw:n=1,c=32,h=28,w=28,k=32,r=3,s=3,dilation=2,pad=2" \
  "depthwise_conv2d_nchw:n=1,c=96,h=112,w=112,r=3,s=3,pad=1" \
  "conv2d_nhwc:n=4,c=5,h=9,w=11,k=6,r=3,s=2,stride=2,pad=1"
