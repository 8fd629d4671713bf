#!/usr/bin/env bash
# benches/validation_run.sh spread over every GPU of the host: the same protocol (a base
# database of the shipped records and the model trained on them, each GPU tuning from its
# own copy; the default search, batch 64, seed 11; each best timed against cublasLt /
# cuDNN in the same call), the set's workloads dealt round-robin to the GPUs.
#
#   benches/validation_gpus.sh OUT SECONDS TRIALS [KIND...]    (KIND: gemm, conv, tensor_core)
#   e.g. benches/validation_gpus.sh /tmp/val 45 300 gemm conv   (on four H200s: 5 minutes)
#
# TESSEL_SET picks another set file (default benches/validation.toml); TESSEL_SPEC_SUFFIX
# is appended to every workload spec (`,math=tf32`: the f32 GEMMs on TF32 tensor cores,
# against cublasLt's TF32); OUT/gN.log is GPU
# N's progress, OUT/gN/ its outputs (benches/gpu_suite.sh), OUT/summary.txt one line per
# GEMM with its ratio to cublasLt (a conv's cuDNN figure is in its .run.txt).
set -u
out=$1 secs=$2 trials=$3
shift 3
kinds=("${@:-gemm}")
bin=${TESSEL_BIN:-./.gpu/tessel}
set=${TESSEL_SET:-benches/validation.toml}
base=${TESSEL_BASE_DB:-/tmp/tessel-validation-base.sqlite}
mkdir -p "$out"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$base" "$out"
gpus=$(nvidia-smi -L | wc -l)
mapfile -t workloads < <(python3 "$(dirname "$0")/set_workloads.py" "$set" "${kinds[@]}" \
  --suffix "${TESSEL_SPEC_SUFFIX:-}")
for ((g = 0; g < gpus; g++)); do
  mine=()
  for i in "${!workloads[@]}"; do (( i % gpus == g )) && mine+=("${workloads[$i]}"); done
  (( ${#mine[@]} )) || continue
  fresh_db "$base" "/tmp/tessel-validation-$g.sqlite"
  CUDA_VISIBLE_DEVICES=$g TESSEL_DB=/tmp/tessel-validation-$g.sqlite TESSEL_NO_EXPORT=1 \
    TESSEL_BATCH=${TESSEL_BATCH:-64} bash benches/gpu_suite.sh "$out/g$g" "$secs" "$trials" \
    "${mine[@]}" >"$out/g$g.log" 2>&1 &
done
wait
for f in "$out"/g*.log; do
  awk '/^== /{w=$2} /^ratio /{for (i = 1; i < NF; i++) if ($i == "=") print w, $(i + 1)}' "$f"
done >"$out/summary.txt"
cat "$out/summary.txt"
