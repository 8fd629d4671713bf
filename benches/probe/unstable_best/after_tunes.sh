#!/usr/bin/env bash
# Whether a schedule's time drifts as the machine runs tunes: every third of the tuning
# set's first 24 GEMMs (benches/tuning.toml) tuned by issue 14's protocol (a copy of the
# shipped base database, 300 trials, batch 64, seed 11, a 60 s limit), and after each tune
# a fresh `tessel run` of SCHED (the L2 overwritten before every timed run, as in tuning);
# then the GPU's temperature, clocks and power. SCHED defaults to the seed-11 best of
# 2953 x 379 x 1013 NT whose time did not hold on some machines. Run from the repository
# root on the GPU machine:
#
#   bash benches/probe/unstable_best/after_tunes.sh OUT [SCHED]
set -u
out=$1
sched=${2:-$(dirname "$0")/seed11_2026_11_30.sched}
bin=${TESSEL_BIN:-./.gpu/tessel}
base=${TESSEL_BASE_DB:-/tmp/tessel-conv-ab-base.sqlite}
w=matmul:m=2953,n=379,k=1013,layout=nt
export TESSEL_SHIPPED=off
mkdir -p "$out"
source "$(dirname "$0")/../../shipped_db.sh"
shipped_db "$bin" "$base" "$out"
echo "before: $("$bin" run $w --schedule "$sched" --target cuda 2>&1 | grep -E '^speed')"
for x in $(grep '^workload = "matmul' benches/tuning.toml | sed -n 1,24p | cut -d'"' -f2 | awk 'NR % 3 == 0'); do
  fresh_db "$base" /tmp/tessel-after-tunes.sqlite
  t=$("$bin" tune "$x" --target cuda --trials 300 --time-limit 60 --batch 64 --seed 11 \
    --db /tmp/tessel-after-tunes.sqlite --retrain focused 2>&1 | grep -E '^stopped')
  echo "$x: $t | $("$bin" run $w --schedule "$sched" --target cuda 2>&1 | grep -E '^speed')"
done
nvidia-smi --query-gpu=temperature.gpu,clocks.sm,clocks.mem,power.draw --format=csv
