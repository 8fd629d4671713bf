#!/usr/bin/env bash
# Two search-space files with one tessel binary on the CUDA device: each workload tuned
# from a fresh database per space (nothing shipped, TRIALS trials or SECS seconds, seed 11
# or TESSEL_SEED), its best run by `tessel run --compare`, and whether that best took the
# GEMM view (`im2col(` in its trace) and how many operands it transposed by kernels of their
# own (`cache_read.transpose_kernels`: `scope="global"` copies); then cuDNN (benches/cudnn_conv.py) for each conv in
# the same call. For a change of `search_spaces/cuda.toml` alone.
#
#   benches/space_ab.sh SPACE_A SPACE_B TRIALS SECS WORKLOAD...
#   e.g. sed 's/^gemm_view_windowed = 0.0/gemm_view_windowed = 0.5/' search_spaces/cuda.toml >/tmp/win.toml
#        benches/space_ab.sh search_spaces/cuda.toml /tmp/win.toml 128 40 conv2d_nchw:n=1,c=203,...
set -u
a=$1 b=$2 trials=$3 secs=$4
shift 4
export TESSEL_SHIPPED=off
bin=${TESSEL_BIN:-./.gpu/tessel}
db=/tmp/tessel-space-ab.sqlite sched=/tmp/tessel-space-ab.sched
for w in "$@"; do
  for space in "$a" "$b"; do
    rm -f "$db"
    printf '%s | %s | ' "$(basename "$space")" "$w"
    "$bin" tune "$w" --target cuda --space "$space" --trials "$trials" --time-limit "$secs" \
      --seed "${TESSEL_SEED:-11}" --db "$db" 2>/dev/null | grep -E "^stopped " | tr '\n' ' '
    "$bin" best "$w" --target cuda --db "$db" --emit trace >"$sched" 2>/dev/null || { echo; continue; }
    printf ' | gemm view: %s | transposing kernels: %s | ' "$(grep -c 'im2col(' "$sched")" \
      "$(grep -c 'scope="global")' "$sched")"
    "$bin" run "$w" --schedule "$sched" --target cuda --compare 2>&1 |
      grep -E "^(latency|speed|peer)" | tr '\n' ' '
    echo
  done
done
for w in "$@"; do
  case $w in
    conv2d_*)
      # shellcheck disable=SC2046
      python3 "$(dirname "$0")/cudnn_conv.py" $(python3 -c "
import sys
w = sys.argv[1]
d = dict(kv.split('=') for kv in w.split(':')[1].split(','))
print(*[d[k] for k in 'n c h w k r s stride pad'.split()], 'nhwc' if 'nhwc' in w else '', d.get('dtype', ''))" "$w") 2>&1 | tail -1
      ;;
  esac
done
