#!/usr/bin/env bash
# Two CUDA search spaces A/B'd under issue 14's protocol: one database holding every
# shipped record and the cost model trained on them (benches/shipped_db.sh), copied
# afresh for each tune; each workload tuned once per space (TRIALS trials, SECS seconds,
# seed 11 or TESSEL_SEED, the default search), its best run by `tessel run --compare`
# against cublasLt in the same process; whether the best splits K (`rfactor(` in its
# trace) is printed beside it, and the peer's kernel.
#
#   benches/probe/split_k_outputs/ab.sh OUT SPACE_A SPACE_B SECS TRIALS WORKLOAD...
#   e.g. sed 's/^max_output_elements = 1048576/max_output_elements = 16777216/' \
#          search_spaces/cuda.toml >/tmp/b.toml
#        benches/probe/split_k_outputs/ab.sh /tmp/ab search_spaces/cuda.toml /tmp/b.toml 40 300 W...
set -u
out=$1 a=$2 b=$3 secs=$4 trials=$5
shift 5
bin=${TESSEL_BIN:-./.gpu/tessel}
base=/tmp/tessel-ab-base.sqlite db=/tmp/tessel-ab.sqlite
mkdir -p "$out"
here=$(dirname "$0")
source "$here/../../shipped_db.sh"
shipped_db "$bin" "$base" "$out"
n=0
for w in "$@"; do
  n=$((n + 1))
  for side in A B; do
    space=$a
    [[ $side == B ]] && space=$b
    fresh_db "$base" "$db"
    printf '%s | %s | ' "$side" "$w"
    "$bin" tune "$w" --target cuda --space "$space" --trials "$trials" --time-limit "$secs" \
      --batch 64 --seed "${TESSEL_SEED:-11}" --db "$db" 2>/dev/null | grep -E "^stopped " | tr '\n' ' '
    "$bin" best "$w" --target cuda --db "$db" --emit trace >"$out/$side.$n.sched" 2>/dev/null || { echo; continue; }
    printf ' | split-K: %s | ' "$(grep -c 'rfactor(' "$out/$side.$n.sched")"
    "$bin" run "$w" --schedule "$out/$side.$n.sched" --target cuda --compare 2>&1 |
      grep -E "^(speed|peer|ratio)" | tr '\n' ' '
    echo
  done
done
