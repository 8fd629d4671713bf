#!/usr/bin/env bash
# The validation GEMMs (benches/validation.toml) with `math=3xtf32` on the CUDA device:
# each tuned from a fresh database of its own (no shipped records, no model), then its best
# timed against cublasLt in f32 (TF32 off) in the same process (benches/gpu_suite.sh).
#
#   benches/validation_3xtf32.sh OUT TRIALS [SECONDS]
#
# Prints one line per GEMM: its spec, the ratio to cublasLt, the tuning time and the check.
set -u
out=$1 trials=$2 secs=${3:-25}
mkdir -p "$out"
mapfile -t workloads < <(python3 - <<'PY'
import tomllib
with open("benches/validation.toml", "rb") as f:
    for e in tomllib.load(f)["gemm"]:
        print(e["workload"])
PY
)
i=0
for w in "${workloads[@]}"; do
  i=$((i + 1))
  spec="$w,math=3xtf32"
  rm -f "$out/$i.sqlite"
  TESSEL_NO_EXPORT=1 TESSEL_DB="$out/$i.sqlite" timeout $((secs + 15)) \
    benches/gpu_suite.sh "$out/$i" "$secs" "$trials" "$spec" >"$out/$i.log" 2>&1
  ratio=$(grep -E '^ratio' "$out/$i.log" | grep -oE '= [0-9.]+x')
  tuning=$(grep -E '^stopped' "$out/$i.log" | grep -oE '[0-9.]+ s$')
  check=$(grep -E '^check' "$out/$i.log" | head -1)
  echo "$i $spec | ratio $ratio | tuning $tuning | $check"
done
