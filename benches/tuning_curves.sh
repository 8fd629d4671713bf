#!/usr/bin/env bash
# Tuning curves on the CUDA device: each workload is tuned from a database that holds no
# record of it (the shipped records of the other workloads, and a model trained on them:
# what a user has), once per strategy, with the same seed and trial budget; every tune
# writes its report (--report-json) with the best latency after each round. The shipped
# best of the workload (random search, 350-1,000 trials) is timed afresh in the same
# session for the comparison. benches/plot_curves.rs turns the reports into CSV and SVG.
#
#   benches/tuning_curves.sh OUT TRIALS "STRATEGY..." WORKLOAD...
#   e.g. benches/tuning_curves.sh /tmp/curves 200 "evolutionary random" matmul:1024x1024x1024
#
# TESSEL_SPACE=FILE tunes in that space instead of the default (`tessel tune --space`).
#
# Needs database/*.all.jsonl.gz (the shipped records) and python3 (sqlite3 module).
set -u
out=$1 trials=$2 strategies=$3
shift 3
bin=${TESSEL_BIN:-./.gpu/tessel}
seed=${TESSEL_SEED:-7}
base=/tmp/tessel-curves-base.sqlite
mkdir -p "$out"
source "$(dirname "$0")/shipped_db.sh"
shipped_db "$bin" "$base" "$out"
for w in "$@"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  key=$("$bin" show "$w" --emit key | tail -n 1)
  # The shipped best of this workload, timed afresh beside what the tuners find.
  "$bin" best "$w" --target cuda --db "$base" --emit trace >"$out/$tag.shipped.sched" 2>/dev/null &&
    "$bin" run "$w" --schedule "$out/$tag.shipped.sched" --target cuda >"$out/$tag.shipped.run.txt" 2>&1
  for s in $strategies; do
    db=/tmp/curves-$tag-$s.sqlite
    fresh_db "$base" "$db"
    python3 - "$db" "$key" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("DELETE FROM records WHERE workload_key = ?", (sys.argv[2],))
c.execute("DELETE FROM models")
c.commit()
PY
    # The model a user has: trained on the other workloads' records (evolutionary only;
    # random search ranks nothing).
    [[ $s == evolutionary ]] && "$bin" model train --db "$db" --target cuda >"$out/$tag.$s.train.txt" 2>&1
    echo "== $w $s ($(date -u +%H:%M:%S))"
    "$bin" tune "$w" --target cuda --strategy "$s" --trials "$trials" --seed "$seed" --db "$db" \
      --time-limit "${TESSEL_TIME_LIMIT:-600}" ${TESSEL_SPACE:+--space "$TESSEL_SPACE"} \
      --report-json "$out/$tag.$s.json" >"$out/$tag.$s.tune.txt" 2>"$out/$tag.$s.tune.err"
    grep -E '^(stopped|trials|time|best) ' "$out/$tag.$s.tune.txt"
    # The best within the first 100 measured candidates (records in the order they were
    # stored, proposal-time rejections left out) over the run's best: the issue's "90% of
    # the final best within 100 trials", finer than the per-round report.
    python3 - "$db" "$key" <<'PY' | tee "$out/$tag.$s.within100.txt"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("SELECT status, median_secs FROM records WHERE workload_key = ? AND status != 'rejected' "
                 "ORDER BY id", (sys.argv[2],)).fetchall()
ok = lambda rs: [m for st, m in rs if st == "ok" and m]
first, final = ok(rows[:100]), ok(rows)
if first and final:
    print(f"within 100 trials: {min(final) / min(first):.3f} of the final best ({len(rows)} trials)")
PY
    "$bin" best "$w" --target cuda --db "$db" --emit trace >"$out/$tag.$s.sched" &&
      "$bin" run "$w" --schedule "$out/$tag.$s.sched" --target cuda >"$out/$tag.$s.run.txt" 2>&1
    grep -E 'latency|speed' "$out/$tag.$s.run.txt"
  done
  grep -E 'latency|speed' "$out/$tag.shipped.run.txt" | sed 's/^/shipped /'
done
