#!/usr/bin/env bash
# Tensor cores (issue 17): mma.sync GEMMs built, checked against the reference and timed
# beside cublasLt of the same precision (`tessel run --compare`: same inputs, same
# process), f16 and bf16 operands accumulated in f32. The schedules: the example
# examples/schedules/tensor_core_gemm.sched as it is (3 pipeline stages) and single-buffered
# (its stage annotation removed), and the tile variants of benches/tensor_core.py.
#
#   benches/tensor_core.sh OUT [SIZE...]      (default sizes 2048 4096; multiples of 256)
#
# OUT receives each run's output (.run.txt); the table goes to stdout and OUT/summary.md.
set -u
out=$1
shift
sizes=("$@")
[[ $# -eq 0 ]] && sizes=(2048 4096)
bin=${TESSEL_BIN:-./.gpu/tessel}
dtypes=${DTYPES:-f16 bf16}
mkdir -p "$out/sched"
example=examples/schedules/tensor_core_gemm.sched
cp "$example" "$out/sched/example_s3.sched"
grep -v software_pipeline_stage "$example" >"$out/sched/example_s1.sched"
python3 benches/tensor_core.py "$out/sched"
echo "| GEMM | dtype | schedule | check | tessel | cublasLt | ratio |" | tee "$out/summary.md"
echo "| --- | --- | --- | --- | --- | --- | --- |" | tee -a "$out/summary.md"
for n in "${sizes[@]}"; do
  for dtype in $dtypes; do
    for s in "$out"/sched/*.sched; do
      v=$(basename "$s" .sched)
      w="matmul:m=$n,n=$n,k=$n,dtype=$dtype,acc=f32"
      r="$out/${n}_${dtype}_$v.run.txt"
      "$bin" run "$w" --schedule "$s" --target cuda --compare >"$r" 2>&1
      check=$(awk '/^check/ {print $2; exit}' "$r")
      ours=$(awk '/^speed/ {print $2, $3; exit}' "$r")
      peer=$(grep -m1 '^peer' "$r" | grep -oE '\([0-9.]+ [GT]FLOP/s\)' | tr -d '()')
      ratio=$(grep -m1 '^ratio' "$r" | grep -oE '[0-9.]+x')
      echo "| $n^3 | $dtype | $v | ${check:-see $r} | ${ours:--} | ${peer:--} | ${ratio:--} |" | tee -a "$out/summary.md"
    done
  done
done
