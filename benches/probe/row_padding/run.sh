#!/usr/bin/env bash
# Three tuned records of the suite's batch-16 conv (benches/RESULTS.md, 2026-12-02, "Reduction-
# major rows padded to 16 bytes"): a11 and a11b, the two fastest of a seed-11 tune, and c13,
# the fastest of a seed-13 one, as tuned (o1: both reduction-major copies' rows padded by
# one element), with the walked data copy's rows padded to 16 bytes (w4), the filters' (k4)
# and both (o4); each variant is its trace with `offset=1` edited to `offset=4` on the
# copy's `storage_align`. Each is run by `tessel run` (checked, then timed).
#
#   benches/probe/row_padding/run.sh        (on the GPU machine, .gpu carried)
set -u
here=$(dirname "$0")
bin=${TESSEL_BIN:-./.gpu/tessel}
W=conv2d_nchw:n=16,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1
# The data copy (read 0) is b5 in these traces, the filters' (read 1) b6.
pad() { sed "s/storage_align($1, buffer_index=0, axis=0, factor=32, offset=1)/storage_align($1, buffer_index=0, axis=0, factor=32, offset=4)/"; }
tmp=$(mktemp -d)
for f in "$here"/*.sched; do
  n=$(basename "$f" .sched)
  cp "$f" "$tmp/$n.o1.sched"
  pad b5 <"$f" >"$tmp/$n.w4.sched"
  pad b6 <"$f" >"$tmp/$n.k4.sched"
  pad b5 <"$f" | pad b6 >"$tmp/$n.o4.sched"
  for v in o1 w4 k4 o4; do
    echo "$n $v | $(timeout 30 "$bin" run "$W" --schedule "$tmp/$n.$v.sched" --target cuda 2>&1 |
      grep -E "^(check|latency|error)" | tr '\n' ' ')"
  done
done
rm -rf "$tmp"
