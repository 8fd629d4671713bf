#!/usr/bin/env bash
# The bound on a thread's register tile (threads.max_outputs_per_thread) A/B'd on the
# tuning set's fp32 GEMMs by benches/parallel_ab.sh (issue 14's protocol, 300 trials): A
# the default space ([128]: the joint draws of large extents pile up at 128 outputs a
# thread), B one of [32, 64, 128] drawn per sample. COUNT GEMMs from the FIRST (default:
# all 24), so that one GPU can take the set in two calls of under ten minutes.
#   benches/probe/outputs_per_thread/ab.sh OUT [FIRST COUNT]
dir=$(dirname "$0")
sed 's/^max_outputs_per_thread = \[128\]/max_outputs_per_thread = [32, 64, 128]/' \
  search_spaces/cuda.toml >/tmp/outputs-per-thread-b.toml
if [[ $# -ge 3 ]]; then
  TESSEL_WORKLOADS=$(python3 "$dir/../../set_workloads.py" benches/tuning.toml gemm \
    --first "$2" --count "$3" | tr '\n' ' ')
  export TESSEL_WORKLOADS
fi
exec bash "$dir/../../parallel_ab.sh" "$1" search_spaces/cuda.toml \
  /tmp/outputs-per-thread-b.toml 300 gemm
