#!/usr/bin/env bash
# Evolutionary against random search on the host CPU (issue 13): each workload tuned with
# each strategy and each seed into a fresh database (no records, so no model: the
# evolutionary search evolves on what it measures), the same trial budget; the table
# gives the median best latency over the seeds per strategy. Every database is then
# merged into OUT/all.sqlite, the CPU records the cost model is evaluated on
# (`tessel model eval --db OUT/all.sqlite --target cpu`).
#
#   benches/cpu_search.sh OUT TRIALS "SEED..." WORKLOAD...
#   e.g. benches/cpu_search.sh /tmp/cpu 64 "1 2 3" matmul:256x256x256
#        JOBS=6 benches/cpu_search.sh /tmp/cpu 64 "1 2 3 4 5" matmul:256x256x256
# RETIME=R (default 3) runs every tune's best again in R passes at the end (below).
set -u
out=$1 trials=$2 seeds=$3
shift 3
bin=${TESSEL_BIN:-./target/release/tessel}
mkdir -p "$out"
# JOBS=N (default 1) runs N tunes at once, each pinned (taskset) to its own
# CORES_PER_JOB cores (default 2) and running its kernels on that many threads: on a
# many-core host this gives every tune a quiet 2-core machine of its own.
jobs=${JOBS:-1} per=${CORES_PER_JOB:-2}
threads=()
[[ $jobs -gt 1 ]] && threads=(--threads "$per")
# deal N CMD...: runs the commands in N slots at once, command i in slot i mod N, each
# slot's in order; with JOBS > 1 a slot is pinned (taskset) to its own CORES_PER_JOB cores.
deal() {
  local n=$1 slot i
  shift
  local todo=("$@")
  for ((slot = 0; slot < n; slot++)); do
    (
      cores=$((slot * per))-$((slot * per + per - 1))
      for ((i = slot; i < ${#todo[@]}; i += n)); do
        if [[ $jobs -gt 1 ]]; then
          taskset -c "$cores" bash -c "${todo[i]}"
        else
          bash -c "${todo[i]}"
        fi
      done
    ) &
  done
  wait
}
cmds=()
for w in "$@"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  # Seed by seed, the strategies alternate: on a shared machine the load drifts over
  # minutes, and all of one strategy's runs before the other's would give it other weather.
  for seed in $seeds; do
    for s in evolutionary random; do
      db=$out/$tag.$s.$seed.sqlite
      rm -f "$db"
      cmds+=("echo \"== $w $s seed $seed (\$(date -u +%H:%M:%S))\"; \
        \"$bin\" tune \"$w\" --target cpu --strategy $s --trials $trials --batch 16 \
        --seed $seed ${threads[*]} --db \"$db\" >\"$out/$tag.$s.$seed.txt\" \
        2>\"$out/$tag.$s.$seed.err\"; grep -E '^(trials|best) ' \"$out/$tag.$s.$seed.txt\" | head -2")
    done
  done
done
deal "$jobs" "${cmds[@]}"
# Re-timing (RETIME=R, default 3 passes): a tune's best is the fastest of 64 noisy
# measurements, and on a shared machine the noise is as large as the differences between
# strategies. Each run's best schedule is run again by `tessel run` in R passes over all
# the runs, strategies alternating; RETIME_JOBS=N (default JOBS) deals the passes' runs to
# N slots like the tunes (each pinned to its own cores; 1: one run at a time, the quietest,
# as eight runs at once share the memory system). The table gives the median of those
# re-timed medians as well.
retime=${RETIME:-3} rjobs=${RETIME_JOBS:-$jobs}
for w in "$@"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  for seed in $seeds; do
    for s in evolutionary random; do
      db=$out/$tag.$s.$seed.sqlite
      trace=$out/$tag.$s.$seed.trace
      [[ -s $trace ]] || "$bin" best "$w" --target cpu --db "$db" --emit trace >"$trace" 2>/dev/null
    done
  done
done
runs=()
for ((pass = 1; pass <= retime; pass++)); do
  for w in "$@"; do
    tag=$(printf '%s' "$w" | tr ':,=/' '____')
    for seed in $seeds; do
      for s in evolutionary random; do
        runs+=("\"$bin\" run \"$w\" --schedule \"$out/$tag.$s.$seed.trace\" --target cpu \
          ${threads[*]} 2>/dev/null | grep -E '^latency' >>\"$out/$tag.$s.$seed.retime\"")
      done
    done
  done
done
deal "$rjobs" "${runs[@]}"
rm -f "$out/all.sqlite"
for db in "$out"/*.*.*.sqlite; do
  "$bin" db import "$db" --db "$out/all.sqlite" >/dev/null
done
python3 - "$out" <<'PY'
import glob, math, re, statistics, sys, os
out = sys.argv[1]
rows, retimes, bests = {}, {}, {}
for f in glob.glob(os.path.join(out, "*.txt")):
    m = re.match(r"(.*)\.(evolutionary|random)\.(\d+)\.txt$", os.path.basename(f))
    if not m:
        continue
    best = None
    for line in open(f):
        b = re.match(r"best\s+([\d.]+) (us|ms|s) ", line)
        if b:
            best = float(b.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[b.group(2)]
            break
    rows.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(best)
    bests.setdefault(m.group(1), {}).setdefault(m.group(2), {})[int(m.group(3))] = best
    again = []
    retimed = f[: -len(".txt")] + ".retime"
    if os.path.exists(retimed):
        for line in open(retimed):
            b = re.match(r"latency\s+median ([\d.]+) (us|ms|s) ", line)
            if b:
                again.append(float(b.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[b.group(2)])
    if again:
        retimes.setdefault(m.group(1), {}).setdefault(m.group(2), []).append(statistics.median(again))
print("| workload | evolutionary median best (us) | random median best (us) | evolutionary / random speed | re-timed: evolutionary / random (us) | re-timed speed |")
print("| --- | --- | --- | --- | --- | --- |")
for w, r in sorted(rows.items()):
    e, q = statistics.median(r["evolutionary"]), statistics.median(r["random"])
    again = ""
    t = retimes.get(w)
    if t and t.get("evolutionary") and t.get("random"):
        te, tq = statistics.median(t["evolutionary"]), statistics.median(t["random"])
        again = f" {te:.1f} / {tq:.1f} | {tq / te:.2f}x |"
    else:
        again = " | |"
    print(f"| {w} | {e:.1f} ({len(r['evolutionary'])} seeds) | {q:.1f} ({len(r['random'])} seeds) | {q / e:.2f}x |{again}")
# The same seeds paired: random's best over evolutionary's, seed by seed.
print()
print("| workload | same seed, random / evolutionary best: geomean | seeds where evolutionary is faster |")
print("| --- | --- | --- |")
for w, b in sorted(bests.items()):
    seeds = sorted(set(b.get("evolutionary", {})) & set(b.get("random", {})))
    ratios = [b["random"][s] / b["evolutionary"][s] for s in seeds]
    if ratios:
        g = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"| {w} | {g:.2f}x | {sum(x > 1 for x in ratios)} of {len(ratios)} |")
PY
