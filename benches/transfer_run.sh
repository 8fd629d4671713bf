#!/usr/bin/env bash
# Transfer (issue 15): each validation GEMM tuned for a few trials from what ships, and
# from nothing else. A base database holds every shipped record (none of the validation
# shapes) and the cost model trained on them; every workload starts from its own copy of
# it, so no workload sees another validation shape's records. Its best is then timed
# against cublasLt in the same session (benches/gpu_suite.sh).
#
#   benches/transfer_run.sh OUT TRIALS [FIRST [COUNT]]
#   e.g. benches/transfer_run.sh /tmp/transfer 32 0 24
#
# TESSEL_SET picks another set file (default benches/validation.toml), TESSEL_KIND its
# entries (default gemm; tensor_core: the 16-bit GEMMs); the per-workload time limit is
# 60 s.
set -u
out=$1 trials=$2 first=${3:-0} count=${4:-1000}
bin=${TESSEL_BIN:-./.gpu/tessel}
set=${TESSEL_SET:-benches/validation.toml}
base=${TESSEL_BASE_DB:-/tmp/tessel-transfer-base.sqlite}
mkdir -p "$out"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$base" "$out"
mapfile -t workloads < <(python3 "$(dirname "$0")/set_workloads.py" "$set" \
  "${TESSEL_KIND:-gemm}" --first "$first" --count "$count")
for w in "${workloads[@]}"; do
  db=$(mktemp -u /tmp/tessel-transfer-XXXXXX.sqlite)
  fresh_db "$base" "$db"
  TESSEL_DB=$db bash benches/gpu_suite.sh "$out" 60 "$trials" "$w"
  rm -f "$db"
done
