#!/usr/bin/env bash
# A/B of a shipped record set and of the branch cap on convolutions, issue 14's protocol
# (benches/conv_view_ab.sh: a base database of the shipped records and the model trained
# on them, 300 trials, batch 64, seed 11, 60 s, one tune a side), each side with or
# without database/h200-2026-11-30.* in its base (moved aside while that base is built)
# and with the shipped space (cap) or the same with search.branch_share = 1.0 (nocap).
# Run from the repository root on the GPU machine, $OUT set (as `run` sets it); writes
# $OUT/ab.tgz.
#
# GEMMs run too (against cublasLt, `tessel run --compare`): the cap on GEMMs, untimed so
# far, is `1 nocap 1 cap -- $(python3 benches/set_workloads.py benches/validation.toml gemm
# --count 6)` (about 40 s a tune).
#
#   benches/shipped_set_ab.sh SET_A SPACE_A SET_B SPACE_B -- WORKLOAD...
#   e.g. benches/shipped_set_ab.sh 0 cap 1 cap -- conv2d_nchw:n=7,c=501,...
set -u
sa=$1 pa=$2 sb=$3 pb=$4; shift 5
o=$OUT/ab; mkdir -p $o /tmp/hide
sed 's/^branch_share = 0.5/branch_share = 1.0/' search_spaces/cuda.toml > /tmp/nocap.toml
sp() { [[ $1 == cap ]] && echo search_spaces/cuda.toml || echo /tmp/nocap.toml; }
side() {
  local name=$1 set=$2 space=$3; shift 3
  if [[ $set == 0 ]]; then mv database/h200-2026-11-30.* /tmp/hide/; fi
  TESSEL_BASE_DB=/tmp/base$set.sqlite bash benches/conv_view_ab.sh $o/$name $(sp $space) -- "$@" > $o/$name.txt 2>&1
  if [[ $set == 0 ]]; then mv /tmp/hide/* database/; fi
  echo "### side $name: set $set, $space"; cat $o/$name.txt
}
side A $sa $pa "$@"
side B $sb $pb "$@"
tar czf $OUT/ab.tgz -C $OUT ab && rm -rf $o
