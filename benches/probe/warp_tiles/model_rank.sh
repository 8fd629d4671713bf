#!/usr/bin/env bash
# Where the cost model the tunes start from ranks the warp-tile samples of a space
# (`tiling.warp_tile_share`, issue 14): N samples of each workload (`tessel sample
# --json`, seed 1), a sample counted as a warp tile where both spatial axes' tiles end
# in [.., 1, 4] (4 x 4 pieces), each scored by `tessel model score` with the model of
# BASE (a database built by benches/shipped_db.sh's shipped_db); prints how many warp
# tiles there are, how many of them are in the model's top 64 (a tune's batch) and the
# best ranks, of all and of those with 64 or more outputs a thread. No device.
#
#   bash benches/probe/warp_tiles/model_rank.sh BASE N SPACE WORKLOAD...
set -eu
bin=${TESSEL_BIN:-./target/release/tessel}
base=$1 n=$2 space=$3; shift 3
for w in "$@"; do
  dir=$(mktemp -d)
  "$bin" sample "$w" --target cuda -n "$n" --seed 1 --json --space "$space" > "$dir/samples.json"
  python3 - "$dir" <<'PY'
import json, sys, re
d = sys.argv[1]
for i, s in enumerate(json.load(open(f"{d}/samples.json"))):
    tiles = [l for l in s["trace"].splitlines() if "sample_perfect_tile(" in l and "n=5" in l]
    warp = len(tiles) == 2 and all(l.endswith(", 1, 4])") for l in tiles)
    per = s['outputs_per_block'] // s['threads_per_block']
    open(f"{d}/{i:04d}_{per}_{s['threads_per_block']}_{int(warp)}.sched", "w").write(s["trace"])
PY
  "$bin" model score "$w" --db "$base" --schedule "$dir"/*.sched > "$dir/scores.txt"
  python3 - "$dir/scores.txt" "$w" <<'PY'
import re, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
warp = [i for i, (_, p) in enumerate(rows) if p.endswith("_1.sched")]
big = [i for i, (_, p) in enumerate(rows) if p.endswith("_1.sched") and int(re.search(r"_(\d+)_(\d+)_1\.sched$", p).group(1)) >= 64]
print(f"{sys.argv[2]}: {len(rows)} samples, {len(warp)} warp tiles; in the top 64: {sum(1 for i in warp if i < 64)}; ranks {warp[:12]}...; >=64 outputs: {len(big)}, ranks {big[:10]}")
PY
  rm -rf "$dir"
done
