#!/usr/bin/env bash
# Tune suite workloads on the CUDA device, then time each best kernel against its peer in
# the same device session: cublasLt (the fastest of its heuristic's candidates) in the same process (`tessel run --compare`) for GEMMs,
# cuDNN through PyTorch (benches/cudnn_conv.py) for conv2d.
#
#   benches/gpu_suite.sh OUT SECONDS TRIALS WORKLOAD...
#
# OUT receives per workload: the tuner's report (.tune.txt, progress on .tune.err), the
# best trace (.sched) and the peer comparison (.run.txt). The database is
# $TESSEL_DB (default /tmp/tessel-suite.sqlite); OUT gets its best-only export.
# TESSEL_NO_PEER=1 skips building the best afresh and timing the peer; TESSEL_RETRAIN=all
# retrains the cost model on every record (tessel tune --retrain); TESSEL_NO_EXPORT=1
# skips the database's exports.
set -u
# A fresh database here means nothing at all: not the shipped records `tessel tune`
# starts a new database from (TESSEL_SHIPPED=on restores that).
export TESSEL_SHIPPED=${TESSEL_SHIPPED:-off}
out=$1 secs=$2 trials=$3
shift 3
bin=${TESSEL_BIN:-./.gpu/tessel}
db=${TESSEL_DB:-/tmp/tessel-suite.sqlite}
seed=${TESSEL_SEED:-11}
mkdir -p "$out"
for w in "$@"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  echo "== $w ($(date -u +%H:%M:%S))"
  "$bin" tune "$w" --target cuda --trials "$trials" --time-limit "$secs" --batch "${TESSEL_BATCH:-32}" \
    --seed "$seed" --db "$db" --retrain "${TESSEL_RETRAIN:-focused}" >"$out/$tag.tune.txt" 2>"$out/$tag.tune.err"
  grep -E '^(stopped|trials|time|failures|best) ' "$out/$tag.tune.txt"
  "$bin" best "$w" --target cuda --db "$db" --emit trace >"$out/$tag.sched" || continue
  [[ ${TESSEL_NO_PEER:-0} == 1 ]] && continue
  # tessel's best, built and timed afresh (and against cuBLAS for the GEMMs).
  case $w in
    matmul* | batch_matmul* | dense_bias_relu*) cmp=--compare ;;
    *) cmp= ;;
  esac
  "$bin" run "$w" --schedule "$out/$tag.sched" --target cuda $cmp >"$out/$tag.run.txt" 2>&1
  case $w in
    conv2d*)
      # conv2d_nchw:n=1,c=64,... -> 1 64 ... in the script's argument order, by key (a
      # spec may leave stride and pad at their defaults or name a dilation).
      args=$(python3 -c '
import sys
kv = dict(x.split("=") for x in sys.argv[1].split(","))
out = [kv[k] for k in "n c h w k r s".split()] + [kv.get("stride", "1"), kv.get("pad", "0")]
out += [kv[k] for k in ("dtype", "acc") if k in kv] + (["dilation=" + kv["dilation"]] if "dilation" in kv else [])
print(" ".join(out))' "${w#*:}")
      relu= layout=
      [[ $w == conv2d_relu* ]] && relu=relu
      # cuDNN reads an NHWC conv's tensors channels last, as tessel does.
      [[ $w == conv2d_nhwc* ]] && layout=nhwc
      python3 benches/cudnn_conv.py $args $relu $layout >>"$out/$tag.run.txt" 2>&1
      ;;
  esac
  cat "$out/$tag.run.txt" | grep -E "TFLOP|check|cublasLt|cuDNN" | head -8
done
[[ ${TESSEL_NO_EXPORT:-0} == 1 ]] && exit 0
# `db export` does not overwrite a file: a second run into the same OUT replaces them.
rm -f "$out/best.sqlite" "$out/best.jsonl" /tmp/all.jsonl
"$bin" db export --db "$db" --out "$out/best.sqlite" --best-only --target cuda >/dev/null
"$bin" db export --db "$db" --out "$out/best.jsonl" --best-only --target cuda --format jsonl >/dev/null
"$bin" db export --db "$db" --out /tmp/all.jsonl --target cuda --format jsonl >/dev/null &&
  gzip -c /tmp/all.jsonl >"$out/all.jsonl.gz"
ls -la "$out"
