#!/usr/bin/env bash
# What tight padding (`tiling.tight_padding`) does to the samples of GEMMs, without a
# device: N draws of each GEMM by `tessel sample` with the embedded space's option off
# and on (seed 5), the padded work of each draw over the GEMM's (from its `pad_einsum`
# multiples), its mean, median and 90th percentile, and the command's wall time. Uses
# ./target/release/tessel (cargo build --release) or $TESSEL_BIN.
#
#   benches/padded_work.sh [N] -- matmul:m=M,n=N,k=K...
#   e.g. benches/padded_work.sh 500 -- matmul:m=1556,n=3953,k=2198 matmul:m=1009,n=523,k=311
set -u
n=500
[[ $1 != -- ]] && { n=$1; shift; }
shift
bin=${TESSEL_BIN:-./target/release/tessel}
tight=$(mktemp --suffix .toml)
sed 's/^tight_padding = false/tight_padding = true/' search_spaces/cuda.toml >"$tight"
for w in "$@"; do
  for space in search_spaces/cuda.toml "$tight"; do
    start=$(date +%s%N)
    "$bin" sample "$w" --target cuda -n "$n" --seed 5 --json --space "$space" >/tmp/padded_work.json
    wall=$(( $(date +%s%N) - start ))
    side=$([[ $space == "$tight" ]] && echo on || echo off)
    python3 - "$w" /tmp/padded_work.json "$side" "$wall" <<'PY'
import json, re, statistics, sys
spec, path, side, wall = sys.argv[1:]
dims = dict(kv.split("=") for kv in spec.split(":", 1)[1].split(","))
extents = [int(dims[a]) for a in "mnk"]
ratios = []
for c in json.load(open(path)):
    t = c["trace"]
    pad = re.search(r"pad_einsum\(\w+, padding=\[([^\]]*)\]\)", t)
    if not pad:
        ratios.append(1.0)
        continue
    chosen = {v: int(cands.split(",")[int(d)]) for v, cands, d in re.findall(
        r"(v\d+) = sample_categorical\(candidates=\[([^\]]*)\], probs=\[[^\]]*\], decision=(\d+)\)", t)}
    r = 1.0
    for e, x in zip(extents, pad.group(1).split(",")):
        m = chosen.get(x.strip()) or int(x)
        r *= ((e + m - 1) // m * m) / e
    ratios.append(r)
ratios.sort()
print(f"{spec} tight padding {side}: {len(ratios)} samples, padded work / work: mean "
      f"{statistics.mean(ratios):.3f}, median {statistics.median(ratios):.3f}, p90 "
      f"{ratios[int(0.9 * len(ratios))]:.3f}; {int(wall) / 1e9:.2f} s")
PY
  done
done
rm -f "$tight"
