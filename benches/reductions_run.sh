#!/usr/bin/env bash
# Reductions over axes other than the innermost on the CUDA device: each workload file
# tuned from an empty database (TRIALS trials, default 256; batch 64, seed 11, nothing
# shipped), its best rebuilt and timed by `tessel run` (checked against the reference),
# then PyTorch's eager call over the same shapes on the same GPU (benches/torch_softmax.py).
#
#   benches/reductions_run.sh OUT [TRIALS]
#   WORKLOADS="benches/global_avg_pool_16x512x28x28.tw" benches/reductions_run.sh OUT
#   WORKLOADS="$(python3 benches/draw_reductions.py 20261166 /tmp/r)" benches/reductions_run.sh OUT
#     (held-out pools and channel statistics; TESSEL_BIN=... times another binary)
set -u
out=$1 trials=${2:-256}
here=$(dirname "$0")
bin=${TESSEL_BIN:-./.gpu/tessel}
export TESSEL_SHIPPED=off
ws=${WORKLOADS:-"$here/column_softmax_4096x1024.tw $here/channel_sumsq_32x256x28x28.tw
    $here/channel_norm_64x512x196.tw $here/global_avg_pool_16x512x28x28.tw"}
mkdir -p "$out"
for w in $ws; do
  tag=$(basename "$w" .tw) db=/tmp/tessel-reductions-$tag.sqlite
  rm -f "$db"
  echo "== $w"
  "$bin" tune "$w" --target cuda --trials "$trials" --time-limit 60 --batch 64 --seed 11 \
    --db "$db" >"$out/$tag.tune.txt" 2>&1
  grep -E "^(stopped|best) " "$out/$tag.tune.txt"
  "$bin" best "$w" --target cuda --db "$db" --emit trace >"$out/$tag.sched" || continue
  "$bin" run "$w" --schedule "$out/$tag.sched" --target cuda 2>&1 | grep -E "^(check|latency|speed)"
done
# shellcheck disable=SC2086
python3 "$here/torch_softmax.py" $ws
