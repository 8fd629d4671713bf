#!/usr/bin/env bash
# Restates shipped results against the honest GEMM peer: for each GEMM given, the best
# record of a shipped set is built and timed afresh with `tessel run --compare` (cublasLt,
# the fastest of its heuristic's candidates, same process, same inputs), and PyTorch's
# matmul is timed beside it (benches/torch_gemm.py) as the cross-check.
#
#   benches/peer_restate.sh OUT RECORDS.jsonl WORKLOAD...
set -u
out=$1 records=$2
shift 2
bin=${TESSEL_BIN:-./.gpu/tessel}
db=/tmp/tessel-restate.sqlite
rm -f "$db"
mkdir -p "$out"
"$bin" db import "$records" --format jsonl --db "$db" >"$out/import.txt" 2>&1 || cat "$out/import.txt"
for w in "$@"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  echo "== $w"
  if "$bin" best "$w" --target cuda --db "$db" --emit trace >"$out/$tag.sched" 2>/dev/null; then
    "$bin" run "$w" --schedule "$out/$tag.sched" --target cuda --compare >"$out/$tag.run.txt" 2>&1
  else
    "$bin" run "$w" --target cuda --compare >"$out/$tag.run.txt" 2>&1
  fi
  grep -E 'TFLOP|check|cublasLt|peer|ratio|x ' "$out/$tag.run.txt" | head -6
  spec=${w#*:}
  case $w in
    matmul:*x*) IFS=x read -r m n k <<<"$spec"; python3 benches/torch_gemm.py "$m" "$n" "$k" nn ;;
    matmul:*)
      m=$(grep -o 'm=[0-9]*' <<<"$spec" | cut -d= -f2); n=$(grep -o 'n=[0-9]*' <<<"$spec" | cut -d= -f2)
      k=$(grep -o 'k=[0-9]*' <<<"$spec" | cut -d= -f2); l=$(grep -o 'layout=[a-z]*' <<<"$spec" | cut -d= -f2)
      python3 benches/torch_gemm.py "$m" "$n" "$k" "${l:-nn}" ;;
    dense_bias_relu:*)
      m=$(grep -o 'm=[0-9]*' <<<"$spec" | cut -d= -f2); n=$(grep -o 'n=[0-9]*' <<<"$spec" | cut -d= -f2)
      k=$(grep -o 'k=[0-9]*' <<<"$spec" | cut -d= -f2)
      python3 benches/torch_gemm.py "$m" "$n" "$k" nt dense ;;
  esac
done
