#!/usr/bin/env bash
# Vector global loads in the shared fetches (`[cache_read] vector_transposed`), on and off:
# the same validation GEMMs tuned with the same seed, trials and starting database (the
# shipped records and a model trained on them) with the shipped space and with the switch
# off, each best timed against cublasLt in the same session (benches/gpu_suite.sh).
#
#   benches/vector_fetch_check.sh OUT SECONDS TRIALS [WORKLOAD...]
#
# Defaults to five GEMMs of benches/validation.toml (every layout; dimensions with and
# without a factor of 4). OUT/on and OUT/off hold gpu_suite.sh's files; the last lines
# print TFLOP/s and the ratio to cublasLt per workload and switch.
set -u
# A fresh database here means nothing at all: not the shipped records `tessel tune`
# starts a new database from (TESSEL_SHIPPED=on restores that).
export TESSEL_SHIPPED=${TESSEL_SHIPPED:-off}
out=$1 secs=$2 trials=$3
shift 3
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=(
  "matmul:m=2704,n=3236,k=4052,layout=nt"
  "matmul:m=1531,n=1553,k=3863,layout=nn"
  "matmul:m=2450,n=1039,k=456,layout=nn"
  "matmul:m=414,n=3860,k=1928,layout=tt"
  "matmul:m=3037,n=3449,k=3229,layout=tn"
)
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
base=$out/base.sqlite
rm -f "$base"
for f in database/*.all.jsonl.gz; do "$bin" db import "$f" --db "$base" >>"$out/import.txt" 2>&1; done
"$bin" model train --db "$base" --target cuda >"$out/train.txt" 2>&1
sed 's/^vector_transposed = true/vector_transposed = false/' search_spaces/cuda.toml >"$out/off.toml"
grep -q '^vector_transposed = false' "$out/off.toml" || { echo "no vector_transposed key"; exit 1; }
for switch in on off; do
  cp "$base" "$out/$switch.sqlite"
  space=()
  [[ $switch == off ]] && space=(--space "$out/off.toml")
  mkdir -p "$out/$switch"
  for w in "${workloads[@]}"; do
    tag=$(printf '%s' "$w" | tr ':,=/' '____')
    "$bin" tune "$w" --target cuda --trials "$trials" --time-limit "$secs" --batch 32 --seed 11 \
      --db "$out/$switch.sqlite" ${space[@]+"${space[@]}"} >"$out/$switch/$tag.tune.txt" 2>&1
    "$bin" best "$w" --target cuda --db "$out/$switch.sqlite" --emit trace >"$out/$switch/$tag.sched" &&
      "$bin" run "$w" --schedule "$out/$switch/$tag.sched" --target cuda --compare \
        >"$out/$switch/$tag.run.txt" 2>&1
    echo "$switch $w $(grep -E '^trials' "$out/$switch/$tag.tune.txt" | head -1 | tr -s ' ' | cut -c1-40) |" \
      "$(grep -E '^speed' "$out/$switch/$tag.run.txt" | tr -s ' ')" \
      "$(grep -oE '= [0-9.]+x' "$out/$switch/$tag.run.txt" | head -1)"
  done
  rm -f "$out/$switch.sqlite"
done
rm -f "$base"
