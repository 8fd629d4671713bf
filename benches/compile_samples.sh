#!/usr/bin/env bash
# NVRTC on random samples of a workload's CUDA space, without a GPU: for each of N samples
# (`tessel sample --seed SEED`), the compile time, the most registers of its kernels, their
# spills and stack frames summed (`tessel build`, one compile at a time, each stopped after
# 25 s) and the floats of its local arrays (`tessel show --emit cuda`). One CSV line per
# sample.
#
#   benches/compile_samples.sh WORKLOAD N SEED OUT.csv
#   e.g. benches/compile_samples.sh "conv2d_nchw:n=12,c=111,h=47,w=47,k=411,r=7,s=7,stride=2,pad=3" 16 11 /tmp/n12.csv
#
# Needs NVRTC (`eval "$(../shared/tools/nvrtc-local)"` here, or the wheel the README names).
set -u
w=$1 n=$2 seed=$3 out=$4
bin=${TESSEL_BIN:-./target/release/tessel}
dir=$(mktemp -d)
"$bin" sample "$w" -n "$n" --seed "$seed" --json >"$dir/samples.json"
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
for i, x in enumerate(json.load(open(f"{d}/samples.json"))):
    open(f"{d}/{i}.sched", "w").write(x["trace"])
PY
echo "sample,compile_ms,registers,spill_store_bytes,stack_bytes,local_floats" >"$out"
for ((i = 0; i < n; i++)); do
  f=$dir/$i.sched
  [[ -e $f ]] || continue
  local_floats=$("$bin" show "$w" --schedule "$f" --emit cuda 2>/dev/null |
    grep -o "float [a-z0-9_]*local\[[0-9]*\]" | grep -o "[0-9]*\]" | tr -d ']' |
    awk '{s += $1} END {print s + 0}')
  # One "built ... NVRTC in N ms" line, then a line per kernel: the most registers of
  # any kernel, the spill stores and stack frames of all of them.
  r=$(timeout 25 "$bin" build "$w" --schedule "$f" 2>&1)
  ms=$(grep -o "NVRTC in [0-9]* ms" <<<"$r" | grep -o "[0-9]*")
  regs=$(grep -o "[0-9]* registers" <<<"$r" | grep -o "^[0-9]*" | sort -n | tail -1)
  spill=$(grep -o "[0-9]* bytes spill stores" <<<"$r" | grep -o "^[0-9]*" | awk '{s += $1} END {print s + 0}')
  stack=$(grep -o "[0-9]* bytes stack" <<<"$r" | grep -o "^[0-9]*" | awk '{s += $1} END {print s + 0}')
  [[ -n $ms ]] || spill= stack=
  echo "$i,${ms:-timeout},${regs:-},${spill:-},${stack:-},$local_floats" >>"$out"
done
rm -rf "$dir"
python3 - "$out" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ms = [int(r["compile_ms"]) if r["compile_ms"].isdigit() else 25000 for r in rows]
print(f"{len(rows)} samples: {sum(ms) / 1000:.1f} s of NVRTC in all (a timeout counted 25 s), "
      f"slowest {max(ms)} ms, {sum(1 for r in rows if not r['compile_ms'].isdigit())} past 25 s")
PY
