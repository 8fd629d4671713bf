#!/usr/bin/env bash
# Two search-space files A/B'd as a user meets them, on every GPU of the host: each
# workload tuned once per space from its own copy of a base database of the shipped
# records and the model trained on them (issue 14's protocol: the default search, TRIALS
# trials, batch 64, seed 11), its best then timed against cublasLt by `tessel run
# --compare`. Both arms of a workload run on the same GPU, one after the other; the
# workloads are dealt round-robin to the GPUs. For changes of the rules and defaults,
# on the tuning set (benches/tuning.toml) so that the validation set stays held out.
#
#   benches/parallel_ab.sh OUT SPACE_A SPACE_B [TRIALS [KIND]]
#   e.g. sed 's/^generations = 4/generations = 8/' search_spaces/cuda.toml >/tmp/gen8.toml
#        benches/parallel_ab.sh /tmp/ab search_spaces/cuda.toml /tmp/gen8.toml 300 gemm
#
# TESSEL_BIN_B runs arm B with another binary (a change of the code rather than of the
# space: pass the same space file twice). TESSEL_SET picks another set file; TESSEL_SPEC_SUFFIX is appended to every workload spec
# (`,math=tf32`: the set's f32 GEMMs on TF32 tensor cores); TESSEL_LAYOUTS (`nn,tn`) keeps
# the GEMMs of those layouts; TESSEL_WORKLOADS (specs,
# space-separated) replaces the set's; TESSEL_SEEDS (default 11) tunes each arm once per
# seed; TESSEL_GPUS (indices, space-separated; default all) the GPUs to deal them to, so
# that another job may hold the rest. OUT/all.txt: per workload, space and seed the tune's stop and time lines, how many
# `rfactor`s the best has (a split-K best has one) and the run's check, speed, peer and
# ratio; then the geomean ratio of each space and of B over A. OUT/best/: each tune's best
# schedule, named by workload, space file, arm and seed.
set -u
out=$1 a=$2 b=$3 trials=${4:-300} kind=${5:-gemm}
bin=${TESSEL_BIN:-./.gpu/tessel}
set=${TESSEL_SET:-benches/tuning.toml}
base=${TESSEL_BASE_DB:-/tmp/tessel-ab-base.sqlite}
export TESSEL_SHIPPED=off
mkdir -p "$out"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$base" "$out"
read -ra gpus <<<"${TESSEL_GPUS:-$(seq -s ' ' 0 $(($(nvidia-smi -L | wc -l) - 1)))}"
if [[ -n ${TESSEL_WORKLOADS:-} ]]; then
  read -ra ws <<<"$TESSEL_WORKLOADS"
else
  mapfile -t ws < <(python3 "$(dirname "$0")/set_workloads.py" "$set" "$kind" \
    --suffix "${TESSEL_SPEC_SUFFIX:-}" --layouts "${TESSEL_LAYOUTS:-}")
fi
read -ra seeds <<<"${TESSEL_SEEDS:-11}"
one() { # gpu workload space seed binary
  local db=/tmp/tessel-ab-$1.sqlite sched=/tmp/tessel-ab-$1.sched t r bin=$5
  fresh_db "$base" "$db"
  t=$(CUDA_VISIBLE_DEVICES=$1 "$bin" tune "$2" --target cuda --space "$3" --trials "$trials" \
    --time-limit 60 --batch 64 --seed "$4" --db "$db" --retrain focused 2>/dev/null |
    grep -E "^(stopped|time)" | tr '\n' ' ')
  CUDA_VISIBLE_DEVICES=$1 "$bin" best "$2" --target cuda --db "$db" --emit trace >"$sched" 2>/dev/null
  mkdir -p "$out/best"
  cp "$sched" "$out/best/$(basename "$2" .tw | tr -c 'A-Za-z0-9_=,\n' '_')-$(basename "$3" .toml)${6:+-B}-s$4.sched"
  r=$(CUDA_VISIBLE_DEVICES=$1 "$bin" run "$2" --schedule "$sched" --target cuda --compare 2>&1 |
    grep -E "^(speed|peer|ratio|check)" | tr '\n' ' ')
  echo "$2 | $3${6:-} | seed $4 | $t | rfactor $(grep -c 'rfactor(' "$sched") | $r"
}
for ((j = 0; j < ${#gpus[@]}; j++)); do
  (
    g=${gpus[$j]}
    for i in "${!ws[@]}"; do
      (( i % ${#gpus[@]} == j )) || continue
      for seed in "${seeds[@]}"; do
        one "$g" "${ws[$i]}" "$a" "$seed" "$bin"
        one "$g" "${ws[$i]}" "$b" "$seed" "${TESSEL_BIN_B:-$bin}" "${TESSEL_BIN_B:+ (B)}"
      done
    done >"$out/g$g.txt"
  ) &
done
wait
sort "$out"/g*.txt >"$out/all.txt"
python3 - "$out/all.txt" "$a" "$b${TESSEL_BIN_B:+ (B)}" <<'PY'
import math, re, sys
rows = {}
for line in open(sys.argv[1]):
    w, space, seed = line.split(" | ")[:3]
    m = re.search(r"= ([\d.]+)x", line)
    if m:
        rows.setdefault((w, seed), {})[space] = float(m.group(1))
a, b = sys.argv[2], sys.argv[3]
both = [v for v in rows.values() if a in v and b in v]
g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print(f"{len(both)} tunes a side: geomean ratio to cublasLt {g([v[a] for v in both]):.3f} ({a}), "
      f"{g([v[b] for v in both]):.3f} ({b}); B / A {g([v[b] / v[a] for v in both]):.3f}")
PY
