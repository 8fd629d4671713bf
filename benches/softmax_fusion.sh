#!/usr/bin/env bash
# The fused form of the cross-thread sketch (`[cross_thread] fuse_consumer`) A/B'd on GPU
# softmaxes: arm A the default space without it (the row maximum, the row sum and the
# output in three kernels), arm B the default space (the fused form offered at a coin),
# each workload tuned once per arm from a base database of the shipped records
# (benches/parallel_ab.sh: TRIALS trials, batch 64, seed 11), its best run by `tessel
# run`; then PyTorch's softmax over the same shapes on the same GPU. Shapes: the
# held-out ones drawn with random.Random(20261144) (rows 64..4096, columns 256..8192),
# the two of earlier tables and an attention softmax of 12 heads; layer norms (BERT's
# 4096 x 768, and one drawn with random.Random(20261145): rows 64..8192, columns
# 256..8192) and RMS norms (2048 x 4096, and one drawn after it). WORKLOADS (files,
# space-separated) replaces the list. Last, benches/row_ab_table.py prints the A/B's table
# (kernel times, B / A, PyTorch over each arm).
#
# SWITCH names another boolean key of `[cross_thread]` to A/B the same way (`fold_lanes`:
# the lanes' partial results summed in two steps). EDIT, a sed expression, makes arm A's
# space from the default instead (`s/^min_reduction = 64/min_reduction = 256/`). With
# TESSEL_BIN_B (another binary) and neither SWITCH nor EDIT, both arms take the default
# space and the binaries are A/B'd: arm A TESSEL_BIN (./.gpu/tessel), arm B TESSEL_BIN_B.
#
#   benches/softmax_fusion.sh OUT [TRIALS]
#   SWITCH=fold_lanes WORKLOADS="benches/softmax_4096x1024.tw matmul:m=1,n=4096,k=4096,layout=nt" \
#     benches/softmax_fusion.sh OUT
set -u
out=$1 trials=${2:-128}
here=$(dirname "$0")
mkdir -p "$out"
switch=${SWITCH:-fuse_consumer}
edit=${EDIT:-"s/^$switch = true/$switch = false/"}
if [[ -n ${TESSEL_BIN_B:-} && -z ${SWITCH:-}${EDIT:-} ]]; then
  cp search_spaces/cuda.toml "$out/arm-a.toml"
else
  sed "$edit" search_spaces/cuda.toml >"$out/arm-a.toml"
  cmp -s search_spaces/cuda.toml "$out/arm-a.toml" && { echo "$edit changes nothing" >&2; exit 2; }
fi
ws=${WORKLOADS:-"$here/softmax_1328x3736.tw $here/softmax_2902x1661.tw
    $here/softmax_2819x6224.tw $here/softmax_1278x8144.tw $here/softmax_4096x1024.tw
    $here/softmax_512x8192.tw $here/softmax_12x384x384.tw $here/layer_norm_4096x768.tw
    $here/layer_norm_4409x7770.tw $here/rms_norm_2048x4096.tw $here/rms_norm_7514x1441.tw"}
TESSEL_WORKLOADS="$(echo $ws)" "$here/parallel_ab.sh" "$out/ab" "$out/arm-a.toml" \
  search_spaces/cuda.toml "$trials" >"$out/ab.log" 2>&1
python3 "$here/torch_softmax.py" $(printf '%s\n' $ws | grep '\.tw$') >"$out/torch.txt" 2>&1
cat "$out/ab/all.txt" "$out/torch.txt" 2>/dev/null
python3 "$here/row_ab_table.py" "$out" 2>/dev/null
