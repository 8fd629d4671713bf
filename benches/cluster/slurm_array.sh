#!/usr/bin/env bash
# Tune a network on the nodes of a Slurm job array: array index i of N tunes share i/N of
# the network's tasks (`tessel tune --shard i/N`, balanced by weight x FLOPs) into its own
# database; a final job merges the shards' databases with `tessel db import` and writes
# the report. Slurm does the scheduling; tessel only needs its index and a shared folder.
#
#   # 4 GPUs, 3000 trials in all (750 per shard), results under /shared/run1:
#   jid=$(sbatch --parsable --array=0-3 benches/cluster/slurm_array.sh \
#           benches/networks/resnet50-b1.toml 3000 /shared/run1)
#   sbatch --dependency=afterok:$jid benches/cluster/slurm_array.sh --merge \
#           benches/networks/resnet50-b1.toml /shared/run1
#
# Each index writes OUT/shard-i.sqlite, OUT/shard-i.txt (the table) and OUT/shard-i.json
# (the tune report); the merge writes OUT/merged.sqlite and OUT/report/index.html.
# TESSEL_BIN names the binary (default: tessel on PATH); TESSEL_TARGET the target (cuda).
#SBATCH --job-name=tessel-network
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=16
#SBATCH --time=04:00:00
#SBATCH --output=tessel-%A_%a.log
set -euo pipefail
bin=${TESSEL_BIN:-tessel}
target=${TESSEL_TARGET:-cuda}

if [[ ${1:-} == --merge ]]; then
  network=$2 out=$3
  merged=$out/merged.sqlite
  for db in "$out"/shard-*.sqlite; do
    "$bin" db import "$db" --db "$merged"
  done
  "$bin" report --network "$network" --target "$target" --db "$merged" --out "$out/report"
  exit 0
fi

network=$1 trials=$2 out=$3
index=${SLURM_ARRAY_TASK_ID:?run this script with sbatch --array=0-(N-1)}
count=${SLURM_ARRAY_TASK_COUNT:-$((SLURM_ARRAY_TASK_MAX - SLURM_ARRAY_TASK_MIN + 1))}
mkdir -p "$out"
"$bin" tune --network "$network" --shard "$index/$count" --trials $((trials / count)) \
  --target "$target" --db "$out/shard-$index.sqlite" --report-json "$out/shard-$index.json" \
  >"$out/shard-$index.txt"
