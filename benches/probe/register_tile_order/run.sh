#!/usr/bin/env bash
# A thread's register tile split in two levels around the innermost reduction loop
# (MetaSchedule's SSSRRSRS: i_3, r_2, i_4) against the same tile in the inner level alone
# (i_3 = 1, i_4 = i_3 * i_4: every register of the tile inside r_2), for two tuned bests
# whose fastest axis has its factor in the outer level (tt_*.sched here: H200 tunes of
# 2026-12-02, `unroll.tile_steps` on). With the outer level, NVRTC's PTX loads B's columns
# from shared memory a float at a time (the two columns of a thread are 16 r_2 steps apart
# in the unrolled code); merged, as 8-byte vectors. ptxas pairs them either way (the SASS
# of both forms loads alike: benches/probe/sass_loop_mix.py). Prints the PTX's shared
# loads and FMAs of both; on the GPU machine (nvidia-smi present) then times both against
# cublasLt alternately REPS times (default 2).
#
#   eval "$(../shared/tools/nvrtc-local)"; benches/probe/register_tile_order/run.sh   # here
#   benches/probe/register_tile_order/run.sh [REPS]                                  # GPU
set -u
dir=$(dirname "$0")
bin=${TESSEL_BIN:-$( [[ -x ./.gpu/tessel ]] && echo ./.gpu/tessel || echo target/release/tessel)}
tmp=$(mktemp -d)
for f in "$dir"/tt_*.sched; do
  n=$(basename "$f" .sched)
  w="matmul:${n#tt_},layout=tt"
  cp "$f" "$tmp/$n.split.sched"
  python3 - "$f" >"$tmp/$n.merged.sched" <<'PY'
import re, sys
def merge(m):
    d = [int(x) for x in m[2].split(",")]
    return f"{m[1]}decision=[{d[0]}, {d[1]}, {d[2]}, 1, {d[3] * d[4]}]"
print(re.sub(r"(sample_perfect_tile\(i[01], n=5, max_innermost_factor=\d+, )decision=\[([^]]*)\]",
             merge, open(sys.argv[1]).read()), end="")
PY
  for v in split merged; do
    p=$("$bin" build "$w" --schedule "$tmp/$n.$v.sched" --target cuda --emit ptx 2>/dev/null)
    echo "$n $v | ld.shared.f32 $(grep -c 'ld.shared.f32' <<<"$p")  .v2 $(grep -c 'ld.shared.v2.f32' <<<"$p")  .v4 $(grep -c 'ld.shared.v4.f32' <<<"$p")  fma $(grep -c 'fma.rn.f32' <<<"$p")"
  done
done
if command -v nvidia-smi >/dev/null; then
  for f in "$dir"/tt_*.sched; do
    n=$(basename "$f" .sched)
    for ((rep = 1; rep <= ${1:-2}; rep++)); do
      for v in split merged; do
        echo "$n $v, run $rep: $("$bin" run "matmul:${n#tt_},layout=tt" --schedule "$tmp/$n.$v.sched" \
          --target cuda --compare 2>&1 | grep -E '^(check|speed|ratio)' | tr -s ' ' | tr '\n' ' ')"
      done
    done
  done
fi
rm -rf "$tmp"
