#!/usr/bin/env bash
# Candidates per second of a network tune on one GPU against several: the same network,
# trial budget, seed and starting database (the shipped records and a cost model trained
# on them), once per `--devices` value. Run on a host with the GPUs (all of one kind).
#
#   benches/network_devices.sh OUT TRIALS [DEVICES...]      (default: 0 0,1)
#
# OUT receives per devices value tune_<devices>.txt / .err / .json (the tune report:
# elapsed seconds, per round the stage seconds). The elapsed times are printed.
# TESSEL_BIN (default ./.gpu/tessel), TESSEL_NETWORK (default ResNet-50 batch 1).
set -u
out=$1 trials=$2
shift 2
devices=("$@")
[[ ${#devices[@]} -gt 0 ]] || devices=(0 0,1)
bin=${TESSEL_BIN:-./.gpu/tessel}
net=${TESSEL_NETWORK:-benches/networks/resnet50-b1.toml}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$out/gpus.txt"
base=$out/base.sqlite
rm -f "$base"
for f in database/*.all.jsonl.gz; do "$bin" db import "$f" --db "$base" >>"$out/import.txt" 2>&1; done
"$bin" model train --db "$base" --target cuda >"$out/train.txt" 2>&1
for dev in "${devices[@]}"; do
  tag=${dev//,/_}
  cp "$base" "$out/db_$tag.sqlite"
  echo "== --devices $dev ($(date -u +%H:%M:%S))"
  "$bin" tune --network "$net" --trials "$trials" --target cuda --batch 16 --seed 11 \
    --db "$out/db_$tag.sqlite" --devices "$dev" --report-json "$out/tune_$tag.json" \
    >"$out/tune_$tag.txt" 2>"$out/tune_$tag.err"
  grep -E '^(stopped|estimated) ' "$out/tune_$tag.txt"
done
