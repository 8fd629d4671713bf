#!/usr/bin/env bash
# Tunes workloads on the CUDA device from the shipped start (a database of every
# database/*.all.jsonl.gz and the cost model trained on them, benches/shipped_db.sh) with
# the default search, and writes the records this run measured, and only those, as a
# record set to ship in database/: OUT/all.jsonl.gz (every record, failures with their
# reasons) and OUT/best.jsonl (each workload's fastest).
#
#   benches/record_set.sh OUT SECONDS TRIALS WORKLOAD...
#   e.g. benches/record_set.sh /tmp/rs 45 300 $(python3 benches/set_workloads.py benches/training.toml conv)
#
# Only training workloads belong in a shipped set: a test refuses validation shapes.
set -u
out=$1 secs=$2 trials=$3
shift 3
bin=${TESSEL_BIN:-./.gpu/tessel}
db=${TESSEL_DB:-/tmp/tessel-record-set.sqlite}
mkdir -p "$out"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$db" "$out"
start=$(date +%s)
TESSEL_DB=$db TESSEL_BATCH=${TESSEL_BATCH:-64} TESSEL_NO_PEER=1 TESSEL_NO_EXPORT=1 \
  bash "$(dirname "$0")/gpu_suite.sh" "$out" "$secs" "$trials" "$@"
rm -f /tmp/record-set-all.jsonl
"$bin" db export --db "$db" --out /tmp/record-set-all.jsonl --target cuda --format jsonl >/dev/null
python3 - "$start" /tmp/record-set-all.jsonl "$out" <<'PY'
import gzip, json, sys
start, src, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
new = [line for line in open(src) if json.loads(line)["created_at"] >= start]
with gzip.open(f"{out}/all.jsonl.gz", "wt") as f:
    f.writelines(new)
best = {}
for line in new:
    r = json.loads(line)
    if r["status"] == "ok":
        key = r["workload_key"]
        if key not in best or r["median_secs"] < best[key][0]:
            best[key] = (r["median_secs"], line)
with open(f"{out}/best.jsonl", "w") as f:
    f.writelines(line for _, line in sorted(best.values(), key=lambda b: b[1]))
print(f"{len(new)} records of this run, {len(best)} best")
PY
