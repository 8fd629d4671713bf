#!/usr/bin/env bash
# Two tessel binaries under issue 14's protocol (benches/conv_view_ab.sh: a base database
# of the shipped records and the model trained on them, 300 trials, batch 64, seed 11 or
# $TESSEL_SEED, a 60 s limit, one tune a side), each binary with a base database it built
# and trained itself: for changes to the cost model or its features, whose model only that
# binary can train. The sides alternate workload by workload (the other binary first), so
# that a drift of the machine over the call falls on both. Run from the repository root on
# the GPU machine, $OUT set (as `run` sets it); writes $OUT/ab.tgz, whose ab/ab.log holds
# every tune's line with its side ("other" or "this") in the space column, the table's
# input:
#
#   benches/binary_ab.sh OTHER_BIN -- WORKLOAD...
#   python3 benches/conv_view_table.py ab/ab.log other this
#   e.g. benches/binary_ab.sh ./.exp/tessel-v5 -- conv2d_nchw:n=9,... matmul:m=3779,...
set -u
other=$1; shift 2
o=$OUT/ab; mkdir -p $o
side() {
  local name=$1 bin=$2 w=$3
  TESSEL_BIN=$bin TESSEL_BASE_DB=/tmp/base-$name.sqlite \
    bash benches/conv_view_ab.sh $o/$name search_spaces/cuda.toml -- "$w" 2>&1 |
    sed "s/ | cuda.toml | / | $name | /" | tee -a $o/$name.txt >> $o/ab.log
}
for w in "$@"; do
  side other "$other" "$w"
  side this "${TESSEL_BIN:-./.gpu/tessel}" "$w"
done
for name in other this; do echo "### side $name"; cat $o/$name.txt; done
tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $o
