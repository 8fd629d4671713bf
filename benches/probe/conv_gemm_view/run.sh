#!/usr/bin/env bash
# The GEMM view (`im2col`) of the two large NCHW validation convs, hand-written: 128 x 128
# tiles, 8 x 8 outputs a thread, reduction steps of 8-32, 2-3 stages (k = 463 and 403
# padded to 512). `*_r.sched` adds a `reorder` of the gather's fetch loops so that its lanes
# walk the image's contiguous axis (n*p*q) instead of the reduction. Each is built,
# checked and timed on the GPU, then cuDNN on the same shapes (benches/RESULTS.md,
# 2026-11-28: "The large NCHW convs, n8 and n11, again").
#
#   benches/probe/conv_gemm_view/run.sh          (TESSEL_BIN, default ./.gpu/tessel)
set -u
dir=$(dirname "$0")
bin=${TESSEL_BIN:-./.gpu/tessel}
n8="conv2d_nchw:n=8,c=25,h=113,w=113,k=463,r=7,s=7,stride=1,pad=3"
n11="conv2d_nchw:n=11,c=135,h=83,w=83,k=403,r=5,s=5,stride=1,pad=2"
for f in "$dir"/n8_*.sched "$dir"/n11_*.sched; do
  case $(basename "$f") in n8_*) w=$n8 ;; *) w=$n11 ;; esac
  echo "== $(basename "$f")"
  "$bin" run "$w" --schedule "$f" --target cuda 2>&1 | grep -E "check|speed|rror" | head -3
done
python3 benches/cudnn_conv.py 8 25 113 113 463 7 7 1 3
python3 benches/cudnn_conv.py 11 135 83 83 403 5 5 1 2
