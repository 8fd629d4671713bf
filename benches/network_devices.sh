#!/usr/bin/env bash
# Candidates per second of a network tune on one GPU against several: the same network,
# trial budget, seed and starting database (the shipped records and a cost model trained
# on them), once per `--devices` value. Run on a host with the GPUs (all of one kind).
#
#   benches/network_devices.sh OUT TRIALS [DEVICES...]      (default: 0 0,1)
#
# OUT receives per run N (from 0) tune_N_<devices>.txt / .err / .json (the tune report:
# elapsed seconds, per round the stage seconds) and cpu_N_<devices>.txt (`vmstat 5` during
# the tune: the host's CPU, which proposing and NVRTC share). Printed per value: the
# elapsed time, candidates per second, the host's mean busy share, the seconds of each
# stage summed over the rounds (slots overlap, so the sums exceed the wall time); then
# each value's candidates per second over the first's. The values may repeat
# (`0 0,1 0 0,1`): one pair of runs swings by 20% on the same host.
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
rates=()
for dev in "${devices[@]}"; do
  tag=${#rates[@]}_${dev//,/_}
  cp "$base" "$out/db_$tag.sqlite"
  echo "== --devices $dev ($(date -u +%H:%M:%S))"
  vmstat 5 >"$out/cpu_$tag.txt" &
  vmstat_pid=$!
  "$bin" tune --network "$net" --trials "$trials" --target cuda --batch 16 --seed 11 \
    --db "$out/db_$tag.sqlite" --devices "$dev" --report-json "$out/tune_$tag.json" \
    >"$out/tune_$tag.txt" 2>"$out/tune_$tag.err"
  kill "$vmstat_pid"
  grep -E '^(stopped|estimated) ' "$out/tune_$tag.txt"
  seconds=$(grep -o "trials in [0-9.]* s" "$out/tune_$tag.txt" | grep -o "[0-9.]* s" | tr -d ' s')
  busy=$(awk 'NR > 2 && $15 ~ /^[0-9]+$/ {s += 100 - $15; n++} END {if (n) printf "%.0f", s / n}' \
    "$out/cpu_$tag.txt")
  rate=$(awk -v t="$trials" -v s="$seconds" 'BEGIN {printf "%.2f", t / s}')
  echo "candidates/s $rate (--devices $dev), host CPU busy ${busy:-?}%"
  # Where the slots' time went: each stage summed over every task's rounds.
  python3 - "$out/tune_$tag.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
sums = {}
for task in report["tasks"]:
    for r in task["report"]["rounds"]:
        for stage, s in r["seconds"].items():
            sums[stage] = sums.get(stage, 0.0) + s
print("slot-seconds " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(sums.items())))
PY
  rates+=("$rate")
done
for i in "${!devices[@]}"; do
  awk -v a="${rates[$i]}" -v b="${rates[0]}" -v d="${devices[$i]}" \
    'BEGIN {printf "--devices %s: %.2fx the candidates per second of the first\n", d, a / b}'
done
