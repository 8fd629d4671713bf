#!/usr/bin/env bash
# Two tessel binaries under issue 14's protocol (benches/conv_view_ab.sh: a base database
# of the shipped records and the model trained on them, 300 trials, batch 64, seed 11, a
# 60 s limit, one tune a side), each binary with a base database it built and trained
# itself: for changes to the cost model or its features, whose model only that binary
# can train. The other binary's side runs first, all workloads, then this one's. Run from
# the repository root on the GPU machine, $OUT set (as `run` sets it); writes $OUT/ab.tgz.
#
#   benches/binary_ab.sh OTHER_BIN -- WORKLOAD...
#   e.g. benches/binary_ab.sh ./.gpu/tessel-old -- conv2d_nchw:n=9,... matmul:m=3779,...
set -u
other=$1; shift 2
o=$OUT/ab; mkdir -p $o
side() {
  local name=$1 bin=$2; shift 2
  TESSEL_BIN=$bin TESSEL_BASE_DB=/tmp/base-$name.sqlite \
    bash benches/conv_view_ab.sh $o/$name search_spaces/cuda.toml -- "$@" > $o/$name.txt 2>&1
  echo "### side $name: $bin"; cat $o/$name.txt
}
side other "$other" "$@"
side this "${TESSEL_BIN:-./.gpu/tessel}" "$@"
tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $o
