#!/usr/bin/env bash
# The channels-last decision (cache_read.channels_last_kernels) A/B'd on ab.toml's NCHW
# convs by benches/parallel_ab.sh (issue 14's protocol, 300 trials): A the default space
# with the decision switched off, B the default space (where it is on since 520f5c2;
# before, this script made B by adding the key, with A the default).
#   benches/probe/nchw_as_nhwc/ab.sh OUT
dir=$(dirname "$0")
sed 's/^channels_last_kernels = true/channels_last_kernels = false/' \
  search_spaces/cuda.toml >/tmp/channels-last-off.toml
TESSEL_SET=$dir/ab.toml exec bash "$dir/../../parallel_ab.sh" "$1" /tmp/channels-last-off.toml \
  search_spaces/cuda.toml 300 conv
