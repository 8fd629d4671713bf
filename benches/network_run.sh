#!/usr/bin/env bash
# Tune ResNet-50 batch 1 (benches/networks/resnet50-b1.toml) on the CUDA device as one
# network with TRIALS trials in all, time each task's vendor-library peer (cuDNN / cuBLAS
# through PyTorch: benches/network_peers.py) in the same session, and write the report.
#
#   benches/network_run.sh OUT TRIALS [gradient|round-robin]
#
# OUT receives: tune.txt (the table after tuning; progress, a line per round, on
# tune.err), tune.json (the tune report: per task trials, rounds, best; per round the
# task chosen and the estimated latency), peers.json (+ peers.err), report.txt (the
# table with the ratios to the vendor libraries and, on its last line, the estimated
# network latency against the libraries' per-layer total) and report/ (index.html, one SVG
# tuning curve per task, network.svg). The third argument picks the task scheduler: run
# once with each into two OUTs to compare them at the same budget.
# TESSEL_BIN (default ./.gpu/tessel), TESSEL_DB (default OUT/network.sqlite; a new one
# starts from the shipped records, as `tessel tune` does, unless TESSEL_SHIPPED=off),
# TESSEL_NETWORK (another network file), TESSEL_SEED (11), TESSEL_BATCH (per round, 64).
set -u
out=$1 trials=$2 policy=${3:-gradient}
bin=${TESSEL_BIN:-./.gpu/tessel}
net=${TESSEL_NETWORK:-benches/networks/resnet50-b1.toml}
db=${TESSEL_DB:-$out/network.sqlite}
mkdir -p "$out"
echo "== tune $net, $trials trials, $policy ($(date -u +%H:%M:%S))"
"$bin" tune --network "$net" --trials "$trials" --target cuda --task-scheduler "$policy" \
  --batch "${TESSEL_BATCH:-64}" --seed "${TESSEL_SEED:-11}" --db "$db" \
  --report-json "$out/tune.json" >"$out/tune.txt" 2>"$out/tune.err"
grep -E '^(stopped|trials|estimated) ' "$out/tune.txt"
echo "== peers ($(date -u +%H:%M:%S))"
peers=()
if python3 benches/network_peers.py "$net" >"$out/peers.json" 2>"$out/peers.err"; then
  peers=(--peers "$out/peers.json")
else
  echo "peers not timed: see $out/peers.err"
fi
"$bin" report --network "$net" --target cuda --db "$db" ${peers[@]+"${peers[@]}"} --out "$out/report" \
  >"$out/report.txt"
cat "$out/report.txt"
