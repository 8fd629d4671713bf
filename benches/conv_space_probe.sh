#!/usr/bin/env bash
# What a conv's CUDA space holds near a peer's kernel, timed sample by sample on the GPU
# (benches/RESULTS.md, 2026-12-02, the batch-16 conv against cuDNN's implicit GEMM):
# samples drawn by `tessel sample --json`, chosen by benches/conv_space_probe.py (MODE
# near or unroll, see there), each run by `tessel run` (checked against the reference,
# then timed); prints every run's check and latency to OUT/probe.txt and the 25 fastest.
#
#   benches/conv_space_probe.sh OUT MODE WORKLOAD N SEED... 
#   near, as on 2026-12-02 (the space before `walk_contiguous`):
#     sed 's/^walk_contiguous = true/walk_contiguous = false/' search_spaces/cuda.toml >/tmp/off.toml
#     SPACE=/tmp/off.toml benches/conv_space_probe.sh /tmp/p near \
#       conv2d_nchw:n=16,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1 8000 101 202
#   unroll: benches/conv_space_probe.sh /tmp/u unroll conv2d_nchw:n=16,... 3000 77
set -u
out=$1 mode=$2 w=$3 n=$4
shift 4
bin=${TESSEL_BIN:-./.gpu/tessel}
here=$(dirname "$0")
space=()
[[ -n ${SPACE:-} ]] && space=(--space "$SPACE")
mkdir -p "$out/sched"
jsons=()
for seed in "$@"; do
  "$bin" sample "$w" --target cuda "${space[@]}" -n "$n" --seed "$seed" --json >"$out/samples-$seed.json"
  jsons+=("$out/samples-$seed.json")
done
python3 "$here/conv_space_probe.py" "$mode" "$out/sched" "${jsons[@]}"
for f in "$out"/sched/*.sched; do
  echo "$(basename "$f" .sched) | $(timeout 60 "$bin" run "$w" --schedule "$f" --target cuda 2>&1 |
    grep -E "^(check|latency|error)" | tr '\n' ' ')"
done >"$out/probe.txt"
python3 - "$out/probe.txt" <<'PY'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.search(r"latency\s+median ([0-9.]+) (us|ms)", line)
    if m:
        rows.append((float(m[1]) * (1000 if m[2] == "ms" else 1), line.split(" |")[0]))
for t, name in sorted(rows)[:25]:
    print(f"{t:9.1f} us  {name}")
PY
