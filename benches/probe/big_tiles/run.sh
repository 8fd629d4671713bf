#!/usr/bin/env bash
# The big-tile edits of gen.sh against the tuned bests they came from, `tessel run`
# medians (checked, L2 flushed), twice each; cublasLt's fastest from one `--compare`.
#
#   bash benches/probe/big_tiles/run.sh OUT
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
lat() { "$bin" run "$1" --schedule "$2" --target cuda "${@:3}" 2>&1 | awk '/^check/ && $2 != "ok:" {print "CHECK-FAILED"} /^latency/ {print $3} /^peer/ {print "peer", $0}' | tr '\n' ' '; }
sets=(
  "nn3779 matmul:m=3779,n=941,k=787,layout=nn $here/../weak_gemm_variants/nn3779_best.sched"
  "nn1556 matmul:m=1556,n=3953,k=2198,layout=nn $here/../register_fetch/tk_1556x3953x2198_nn.sched"
  "nn1804 matmul:m=1804,n=846,k=1710,layout=nn $here/../register_fetch/tk_1804x846x1710_nn.sched"
)
for s in "${sets[@]}"; do
  set -- $s
  echo "$1 as tuned: $(lat "$2" "$3" --compare) $(lat "$2" "$3")"
  for v in "$here/$1"_*.sched; do
    echo "$1 $(basename "$v" .sched): $(lat "$2" "$v") $(lat "$2" "$v")"
  done
done | tee "$out/big_tiles.txt"
