#!/usr/bin/env bash
# The held-out A/B of the CPU's vector math (RESULTS.md, "Vector exp, tanh, max and
# selects"): two softmaxes and two dense + bias + GELU layers drawn with
# random.Random(20261141), and BERT-base's FFN-in layer, each tuned by both binaries
# (benches/cpu_ab.sh, 64 trials, three alternating passes), then PyTorch's softmax /
# linear + GELU (benches/cpu_peers.py) and B's best timed warm, all on THREADS threads
# (default 2) under PIN (default `taskset -c 2,3`; PIN= runs unpinned).
#
#   benches/cpu_vector_math.sh OUT BIN_A BIN_B
set -u
out=$1 bin_a=$2 bin_b=$3
here=$(cd "$(dirname "$0")" && pwd)
threads=${THREADS:-2} pin=${PIN-taskset -c 2,3}
mkdir -p "$out"
specs=(softmax:1197x866 softmax:1782x2516 dense_bias_gelu:m=75,n=1454,k=2050
  dense_bias_gelu:m=171,n=768,k=2571 dense_bias_gelu:m=128,n=3072,k=768)
files=(softmax_1197x866 softmax_1782x2516 dense_bias_gelu_75x1454x2050
  dense_bias_gelu_171x768x2571 dense_bias_gelu_128x3072x768)
ws=()
for f in "${files[@]}"; do ws+=("$here/$f.tw"); done
PASSES=3 THREADS=$threads $pin bash "$here/cpu_ab.sh" "$out/ab" 64 "$bin_a" "$bin_b" "${ws[@]}" \
  >"$out/ab.log" 2>&1
for i in "${!specs[@]}"; do
  echo "== ${specs[$i]}" >>"$out/peers.log"
  $pin python3 "$here/cpu_peers.py" "${specs[$i]}" "$threads" >>"$out/peers.log" 2>&1
  w=${ws[$i]} tag=$(echo "${ws[$i]}" | tr -c 'a-zA-Z0-9\n' '_')
  echo "${files[$i]} B warm: $($pin "$bin_b" run "$w" --target cpu --schedule "$out/ab/$tag.b.sched" \
    --threads "$threads" --warm 2>&1 | grep latency)" >>"$out/warm.log"
done
cat "$out/ab.log" "$out/peers.log" "$out/warm.log"
