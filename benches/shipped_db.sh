# Sourced by the bench scripts that tune from what ships (validation_run.sh,
# transfer_run.sh, tuning_curves.sh, network_schedulers.sh):
#
#   shipped_db BIN DB OUT
#
# unless DB exists, imports every shipped record set (database/*.all.jsonl.gz) into it
# and trains the cost model on all of them (featurizing every record once, so that copies
# of DB reuse the cached features); the logs go to OUT/import.txt and OUT/train.txt.
#
#   fresh_db BASE DB
#
# makes DB a copy of BASE, removing first the write-ahead log and shared-memory index a
# tune into DB left if it was killed: SQLite would replay a stale DB-wal onto the copy and
# the next tune would fail with "database disk image is malformed".
shipped_db() {
  local bin=$1 db=$2 out=$3 f
  [[ -e $db ]] && return 0
  for f in database/*.all.jsonl.gz; do
    "$bin" db import "$f" --db "$db" >>"$out/import.txt" 2>&1
  done
  "$bin" model train --db "$db" --target cuda >"$out/train.txt" 2>&1
}

fresh_db() {
  rm -f "$2" "$2-wal" "$2-shm"
  cp "$1" "$2"
}
