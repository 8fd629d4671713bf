#!/usr/bin/env bash
# Tune conv2d workloads on the CUDA device from a fresh database, then re-run each best
# and cuDNN (benches/cudnn_conv.py, same layout and dtype) REPS times in the same session:
# the spread of both sides, for kernels short enough that one timing is noisy.
#
#   benches/conv_repeat.sh TRIALS REPS WORKLOAD...
#   e.g. benches/conv_repeat.sh 128 3 "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1,dtype=f16,acc=f32"
set -u
# A fresh database here means nothing at all: not the shipped records `tessel tune`
# starts a new database from (TESSEL_SHIPPED=on restores that).
export TESSEL_SHIPPED=${TESSEL_SHIPPED:-off}
trials=$1 reps=$2
shift 2
bin=${TESSEL_BIN:-./.gpu/tessel}
db=${TESSEL_DB:-/tmp/tessel-conv-repeat.sqlite}
rm -f "$db"
for w in "$@"; do
  echo "== $w"
  "$bin" tune "$w" --target cuda --trials "$trials" --time-limit 120 --seed "${TESSEL_SEED:-11}" \
    --db "$db" 2>/dev/null | grep -E "^(stopped|best) "
  "$bin" best "$w" --target cuda --db "$db" --emit trace >/tmp/conv-repeat.sched || continue
  for _ in $(seq "$reps"); do
    "$bin" run "$w" --schedule /tmp/conv-repeat.sched --target cuda 2>&1 | grep -E "^latency"
  done
  # conv2d_nchw:n=1,c=64,... -> 1 64 ... in the script's argument order.
  args=$(printf '%s' "${w#*:}" | tr ',' '\n' | cut -d= -f2 | tr '\n' ' ')
  extra=
  [[ $w == conv2d_nhwc* ]] && extra=nhwc
  [[ $w == conv2d_relu* ]] && extra="$extra relu"
  for _ in $(seq "$reps"); do
    python3 benches/cudnn_conv.py $args $extra
  done
  echo "split-K: $(grep -c 'rfactor(' /tmp/conv-repeat.sched)"
done
