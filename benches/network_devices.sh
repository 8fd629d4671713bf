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
# stage summed over the rounds (slots overlap, so the sums exceed the wall time), the CPU
# seconds of the tuner's process and of its measurement workers (NVRTC); then
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
    >"$out/tune_$tag.txt" 2>"$out/tune_$tag.err" &
  tune_pid=$!
  # The tuner's own CPU ticks and those of the workers it has reaped, sampled until it
  # exits (the last sample misses at most its last half second).
  # Also the ticks of its live threads by name (digits dropped: `tessel-pool-N` the global
  # pool, proposing; `tessel-learn-N` the cost model's trainings; `tessel` the others).
  ticks= threads=
  while kill -0 "$tune_pid" 2>/dev/null; do
    t=$(awk '{print $14 + $15, $16 + $17}' "/proc/$tune_pid/stat" 2>/dev/null) && [[ -n $t ]] && ticks=$t
    t=$(cat /proc/"$tune_pid"/task/*/stat 2>/dev/null | awk '{n = $2; gsub(/[()]/, "", n);
      sub(/-[0-9]+$/, "", n); s[n] += $14 + $15} END {for (n in s) printf "%s %d ", n, s[n]}')
    [[ -n $t ]] && threads=$t
    sleep 0.5
  done
  wait "$tune_pid"
  kill "$vmstat_pid"
  grep -E '^(stopped|estimated) ' "$out/tune_$tag.txt"
  seconds=$(grep -o "trials in [0-9.]* s" "$out/tune_$tag.txt" | grep -o "[0-9.]* s" | tr -d ' s')
  busy=$(awk 'NR > 2 && $15 ~ /^[0-9]+$/ {s += 100 - $15; n++} END {if (n) printf "%.0f", s / n}' \
    "$out/cpu_$tag.txt")
  rate=$(awk -v t="$trials" -v s="$seconds" 'BEGIN {printf "%.2f", t / s}')
  echo "candidates/s $rate (--devices $dev), host CPU busy ${busy:-?}%"
  # shellcheck disable=SC2086
  awk -v hz="$(getconf CLK_TCK)" -v t="$trials" -v ticks="$ticks" 'BEGIN {
    split(ticks, x, " "); own = x[1] / hz; workers = x[2] / hz
    printf "cpu-seconds: tuner %.1f, measurement workers %.1f; %.0f ms of CPU a candidate\n",
      own, workers, 1000 * (own + workers) / t }'
  # shellcheck disable=SC2086
  awk -v hz="$(getconf CLK_TCK)" -v threads="$threads" 'BEGIN {
    n = split(threads, x, " "); line = "cpu-seconds by thread:"
    for (i = 1; i < n; i += 2) line = line sprintf(" %s %.1f", x[i], x[i + 1] / hz)
    print line }'
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
rounds = report["rounds"]
if rounds and "opened_seconds" in report:
    done = [r["elapsed_seconds"] for r in rounds]
    half = next(t for r, t in zip(rounds, done) if r["total_trials"] * 2 >= report["trials"])
    print(f"timeline: tasks opened at {report['opened_seconds']:.1f} s, first round in at "
          f"{done[0]:.1f} s, half the trials at {half:.1f} s, the last at {done[-1]:.1f} s")
PY
  rates+=("$rate")
done
for i in "${!devices[@]}"; do
  awk -v a="${rates[$i]}" -v b="${rates[0]}" -v d="${devices[$i]}" \
    'BEGIN {printf "--devices %s: %.2fx the candidates per second of the first\n", d, a / b}'
done
