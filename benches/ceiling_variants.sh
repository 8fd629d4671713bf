#!/usr/bin/env bash
# Times tuned bests beside their variants with the ceiling's structure
# (benches/ceiling_variants.py), on every GPU of the host: each best with
# `tessel run --compare` (cublasLt in the same process), each variant with `tessel run`.
#
#   benches/ceiling_variants.sh [--wide] OUT BEST.sched...
#   e.g. benches/validation_gpus.sh /tmp/val 45 300 gemm
#        benches/ceiling_variants.sh /tmp/cv /tmp/val/g*/matmul*.sched
#
# --wide adds the block tiles of cublasLt's mid-size kernels (ceiling_variants.py --wide).
#
# OUT/all.txt: per schedule its check, speed and (bests) the peer; then, per variant, the
# geomean of its speed over the best's.
set -u
wide=()
[[ $1 == --wide ]] && { wide=(--wide); shift; }
out=$1
shift
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out/sched"
python3 "$(dirname "$0")/ceiling_variants.py" "${wide[@]}" "$out/sched" "$@"
gpus=$(nvidia-smi -L | wc -l)
one() { # gpu file
  local b w cmp=
  b=$(basename "$2" .sched)
  w=$(echo "$b" | sed -E 's/matmul_m_([0-9]+)_n_([0-9]+)_k_([0-9]+)_layout_(..)\..*/matmul:m=\1,n=\2,k=\3,layout=\4/')
  [[ $b == *.best ]] && cmp=--compare
  echo "$b | $(CUDA_VISIBLE_DEVICES=$1 timeout 60 "$bin" run "$w" --schedule "$2" --target cuda $cmp 2>&1 |
    grep -E "^(check|speed|peer|ratio|error)" | tr '\n' ' ')"
}
files=("$out"/sched/*.sched)
for ((g = 0; g < gpus; g++)); do
  ( for i in "${!files[@]}"; do (( i % gpus == g )) && one "$g" "${files[$i]}"; done >"$out/g$g.txt" ) &
done
wait
sort "$out"/g*.txt >"$out/all.txt"
python3 - "$out/all.txt" <<'PY'
import math, re, sys
speed = {}
for line in open(sys.argv[1]):
    name = line.split(" | ")[0]
    m = re.search(r"speed\s+([\d.]+) TFLOP", line)
    if m:
        shape, var = name.rsplit(".", 1)
        speed.setdefault(shape, {})[var] = float(m.group(1))
for var in sorted({var for v in speed.values() for var in v} - {"best"}):
    r = [v[var] / v["best"] for v in speed.values() if var in v and "best" in v]
    if r:
        print(f"{var}: {len(r)} bests, geomean speed over the best "
              f"{math.exp(sum(map(math.log, r)) / len(r)):.3f}, range {min(r):.2f}-{max(r):.2f}")
best = [max(v.values()) / v["best"] for v in speed.values() if "best" in v]
print(f"fastest of each best's variants and itself: {len(best)} bests, geomean over the best "
      f"{math.exp(sum(map(math.log, best)) / len(best)):.3f}")
PY
