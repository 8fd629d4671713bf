#!/usr/bin/env bash
# Two binaries' tunes of the same convs by issue 17's protocol (benches/conv_repeat.sh
# TRIALS 3: a fresh database, its best run three times, cuDNN three times), for each seed
# OTHER first, then this bundle's binary; each best's trace kept as OUT/SIDE.sSEED.N.sched.
# On the CUDA device.
#
#   bash benches/probe/standalone_elements/ab.sh OUT OTHER TRIALS "SEED..." WORKLOAD...
set -u
out=$1 other=$2 trials=$3 seeds=$4
shift 4
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
for seed in $seeds; do
  for side in other this; do
    b=${TESSEL_BIN:-./.gpu/tessel}
    [ $side = other ] && b=$other
    echo "### seed $seed side $side"
    TESSEL_BIN=$b TESSEL_SEED=$seed bash "$here/conv_repeat.sh" "$trials" 3 "$@"
    i=0
    for w in "$@"; do
      i=$((i + 1))
      "$b" best "$w" --target cuda --db "${TESSEL_DB:-/tmp/tessel-conv-repeat.sqlite}" \
        --emit trace >"$out/$side.s$seed.$i.sched" 2>/dev/null
    done
  done
done
