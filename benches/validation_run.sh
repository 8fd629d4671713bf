#!/usr/bin/env bash
# The validation set (benches/validation.toml) on the CUDA device, as a user meets it:
# a database holding the shipped records of other workloads (none of these shapes) and
# the cost model trained on them; each workload tuned with the default search, then its
# best timed against cublasLt / cuDNN in the same session (benches/gpu_suite.sh).
#
#   benches/validation_run.sh OUT SECONDS TRIALS [gemm|conv] [FIRST [COUNT]]
#   e.g. benches/validation_run.sh /tmp/val 60 300 gemm 0 8
#
# Needs database/*.all.jsonl.gz, python3 (tomllib) and, for convs, PyTorch.
#
# TESSEL_SET=benches/training.toml tunes the training set instead (the records that ship
# in database/); TESSEL_NO_PEER=1 skips timing the bests against the peers.
set -u
out=$1 secs=$2 trials=$3
kind=${4:-gemm} first=${5:-0} count=${6:-1000}
bin=${TESSEL_BIN:-./.gpu/tessel}
db=${TESSEL_DB:-/tmp/tessel-validation.sqlite}
set=${TESSEL_SET:-benches/validation.toml}
mkdir -p "$out"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$db" "$out"
mapfile -t workloads < <(python3 "$(dirname "$0")/set_workloads.py" "$set" "$kind" \
  --first "$first" --count "$count")
TESSEL_DB=$db TESSEL_BATCH=${TESSEL_BATCH:-64} bash benches/gpu_suite.sh "$out" "$secs" "$trials" "${workloads[@]}"
