#!/usr/bin/env bash
# The fp32 ceiling's 2048^3 TT kernel that transposes B in its fetch
# (tests/golden/tt_transposing_fetch_2048.sched) timed against cublasLt as it is and with
# the loop over a staged tile's steps (`r0_1`) unrolled, as `unroll.tile_steps` annotates
# it, alternately REPS times (default 2). On the GPU machine.
#
#   benches/probe/tile_steps/time_golden.sh [REPS]
set -u
bin=${TESSEL_BIN:-./.gpu/tessel}
golden=tests/golden/tt_transposing_fetch_2048.sched
tmp=$(mktemp -d)
cp "$golden" "$tmp/rolled.sched"
{ cat "$golden"; echo 'annotate(r0_1, key="pragma_auto_unroll_max_step", value=512)'; } >"$tmp/unrolled.sched"
for ((rep = 1; rep <= ${1:-2}; rep++)); do
  for f in rolled unrolled; do
    echo "$f, run $rep: $("$bin" run matmul:2048x2048x2048,layout=tt --schedule "$tmp/$f.sched" \
      --target cuda --compare 2>&1 | grep -E '^(check|speed|ratio)' | tr -s ' ' | tr '\n' ' ')"
  done
done
rm -rf "$tmp"
