#!/usr/bin/env bash
# Tensor cores (issue 17): the hand-written mma.sync GEMM of
# examples/schedules/tensor_core_gemm.sched, built, checked against the reference and timed
# beside cublasLt of the same precision (`tessel run --compare`, same inputs, same process),
# for f16 and bf16 operands accumulated in f32, with 1 to 4 pipeline stages (the file's
# stage annotation changed; 1 = a single-buffered fetch).
#
#   benches/tensor_core.sh OUT [SIZE...]      (default sizes 2048 4096; multiples of 128)
#
# OUT receives each run's output (.run.txt); the table goes to stdout and OUT/summary.md.
set -u
out=$1
shift
sizes=("$@")
[[ $# -eq 0 ]] && sizes=(2048 4096)
bin=${TESSEL_BIN:-./.gpu/tessel}
sched=examples/schedules/tensor_core_gemm.sched
mkdir -p "$out"
echo "| GEMM | dtype | stages | check | tessel | cublasLt | ratio |" | tee "$out/summary.md"
echo "| --- | --- | --- | --- | --- | --- | --- |" | tee -a "$out/summary.md"
for n in "${sizes[@]}"; do
  for dtype in f16 bf16; do
    for stages in 1 2 3 4; do
      s="$out/stages$stages.sched"
      sed "s/value=\[0, 0, 2\]/value=[0, 0, $((stages - 1))]/" "$sched" >"$s"
      w="matmul:m=$n,n=$n,k=$n,dtype=$dtype,acc=f32"
      r="$out/${n}_${dtype}_s$stages.run.txt"
      "$bin" run "$w" --schedule "$s" --target cuda --compare >"$r" 2>&1
      check=$(awk '/^check/ {print $2; exit}' "$r")
      ours=$(awk '/^speed/ {print $2, $3; exit}' "$r")
      peer=$(grep -m1 '^peer' "$r" | grep -oE '\([0-9.]+ [GT]FLOP/s\)' | tr -d '()')
      ratio=$(grep -m1 '^ratio' "$r" | grep -oE '[0-9.]+x')
      echo "| $n^3 | $dtype | $stages | ${check:-see $r} | ${ours:--} | ${peer:--} | ${ratio:--} |" | tee -a "$out/summary.md"
    done
  done
done
