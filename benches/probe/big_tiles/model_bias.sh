#!/usr/bin/env bash
# How the cost model the tunes start from ranks a GEMM's sampled candidates by the
# outputs a thread computes: N samples of the space (`tessel sample --json`), each scored
# by `tessel model score` with the model of BASE (a database built by
# benches/shipped_db.sh's shipped_db), then per outputs-a-thread class the share of the
# samples and the share of the model's top 64 (the size of a tune's batch), and the same
# for blocks whose threads are not a whole number of warps. No device.
#
#   bash benches/probe/big_tiles/model_bias.sh BASE N WORKLOAD...
set -eu
base=$1 n=$2; shift 2
bin=${TESSEL_BIN:-./target/release/tessel}
for w in "$@"; do
  dir=$(mktemp -d)
  "$bin" sample "$w" --target cuda -n "$n" --seed 1 --json > "$dir/samples.json"
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
for i, s in enumerate(json.load(open(f"{d}/samples.json"))):
    per = s['outputs_per_block'] // s['threads_per_block']
    open(f"{d}/{i:04d}_{per}_{s['threads_per_block']}.sched", "w").write(s["trace"])
PY
  "$bin" model score "$w" --db "$base" --schedule "$dir"/*.sched > "$dir/scores.txt"
  python3 - "$dir/scores.txt" "$w" <<'PY'
import collections, re, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
names = [re.search(r"_(\d+)_(\d+)\.sched$", path) for _, path in rows]
per = [int(m.group(1)) for m in names]
partial = [int(m.group(2)) % 32 != 0 for m in names]
cls = lambda o: "<=16" if o <= 16 else "32" if o <= 32 else "64" if o <= 64 else ">64"
everyone = collections.Counter(cls(o) for o in per)
top = collections.Counter(cls(o) for o in per[:64])
print(f"{sys.argv[2]}: {len(per)} samples")
for c in ["<=16", "32", "64", ">64"]:
    print(f"  {c:>6} outputs a thread: {everyone[c] / len(per):6.1%} of the samples, "
          f"{top[c] / min(64, len(per)):6.1%} of the model's top 64")
print(f"  threads not whole warps: {sum(partial) / len(per):6.1%} of the samples, "
      f"{sum(partial[:64]) / min(64, len(per)):6.1%} of the model's top 64")
PY
  rm -rf "$dir"
done
