#!/usr/bin/env bash
# The channels-last decision (cache_read.channels_last_kernels) A/B'd on ab.toml's NCHW
# convs by benches/parallel_ab.sh (issue 14's protocol, 300 trials): A the default space,
# B the same with the decision offered.
#   benches/probe/nchw_as_nhwc/ab.sh OUT
dir=$(dirname "$0")
sed 's/^transpose_kernels = true/transpose_kernels = true\nchannels_last_kernels = true/' \
  search_spaces/cuda.toml >/tmp/channels-last.toml
TESSEL_SET=$dir/ab.toml exec bash "$dir/../../parallel_ab.sh" "$1" search_spaces/cuda.toml \
  /tmp/channels-last.toml 300 conv
