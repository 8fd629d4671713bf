#!/usr/bin/env bash
# The fastest records of one tune, each run again: the workload (default 2953 x 379 x 1013
# NT, whose bests did not hold) tuned by issue 14's protocol with `--confirm 3`, the
# TOP (4) fastest records' traces written to OUT/top-N.json with their recorded medians
# and provenance, each run twice by fresh `tessel run` processes (cold, the L2 flushed as
# in tuning) and once `--warm`, then the best's kernels one by one (benches/kernel_times.sh).
# Run from the repository root on the GPU machine:
#
#   bash benches/probe/unstable_best/top_records.sh OUT [WORKLOAD]
set -u
out=$1
w=${2:-matmul:m=2953,n=379,k=1013,layout=nt}
bin=${TESSEL_BIN:-./.gpu/tessel}
base=${TESSEL_BASE_DB:-/tmp/tessel-conv-ab-base.sqlite}
db=/tmp/tessel-top-records.sqlite
export TESSEL_SHIPPED=off
mkdir -p "$out"
source "$(dirname "$0")/../../shipped_db.sh"
shipped_db "$bin" "$base" "$out"
fresh_db "$base" "$db"
last=$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select max(id) from records').fetchone()[0])" "$base")
"$bin" tune "$w" --target cuda --trials 300 --time-limit 60 --batch 64 --seed 11 \
  --db "$db" --retrain focused --confirm 3 2>&1 | grep -E '^(stopped|trials|confirmed|best)'
python3 - "$db" "$last" "$out" "${TOP:-4}" <<'PY'
import json, sqlite3, sys
db, last, out, top = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
con = sqlite3.connect(db)
cols = [r[1] for r in con.execute("pragma table_info(records)")]
rows = con.execute(
    "select * from records where id > ? and status = 'ok' order by median_secs limit ?",
    (last, top)).fetchall()
for i, row in enumerate(rows):
    r = dict(zip(cols, row))
    open(f"{out}/top-{i}.json", "w").write(r["trace_json"])
    print(f"top-{i}: id {r['id']}, recorded {r['median_secs'] * 1e6:.1f} us,",
          {k: v for k, v in r.items() if k not in ("trace_json", "id", "median_secs")
           and not isinstance(v, bytes) and v is not None and len(str(v)) < 80})
PY
for f in "$out"/top-*.json; do
  for mode in "" "" --warm; do
    echo "$(basename "$f") ${mode:-cold}: $("$bin" run "$w" --schedule "$f" --target cuda $mode 2>&1 | grep -E '^speed')"
  done
done
bash "$(dirname "$0")/../../kernel_times.sh" "$out/kt" "$w" "$out/top-0.json"
