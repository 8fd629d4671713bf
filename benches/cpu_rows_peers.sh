#!/usr/bin/env bash
# The bests of a benches/cpu_ab.sh run over row workloads (softmaxes, attention softmaxes,
# layer and RMS norms, named as benches/rows_*/ names them: KIND_DIMS.tw) beside PyTorch
# on the same threads: per workload, PASSES (2) rounds of both arms' bests run warm by
# `tessel run --warm` (the peers run warm: benches/cpu_peers.py) and the peer. Prints
# milliseconds, one line a round.
#
#   benches/cpu_rows_peers.sh AB_OUT WORKLOAD.tw...
#   e.g. benches/cpu_rows_peers.sh /tmp/cab benches/rows_20261151/*.tw
set -u
out=$1
shift
bin=${TESSEL_BIN:-target/release/tessel}
threads=${THREADS:-$(nproc)}
warm_ms() {
  "$bin" run "$1" --target cpu --schedule "$2" --threads "$threads" --warm 2>&1 |
    awk '/^latency/ {v = $3; if ($4 == "us") v /= 1000; print v}'
}
for w in "$@"; do
  tag=$(echo "$w" | tr -c 'a-zA-Z0-9\n' '_')
  base=$(basename "$w" .tw)
  kind=${base%_*} dims=${base##*_}
  [[ $kind == attention_softmax ]] && kind=softmax
  for ((i = 0; i < ${PASSES:-2}; i++)); do
    peer=$(python3 "$(dirname "$0")/cpu_peers.py" "$kind:$dims" "$threads" | awk '/torch/ {printf "%.4f", $3 * 1000}')
    echo "$base | A $(warm_ms "$w" "$out/$tag.a.sched") | B $(warm_ms "$w" "$out/$tag.b.sched") | torch $peer"
  done
done
