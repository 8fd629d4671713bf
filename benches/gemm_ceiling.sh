#!/usr/bin/env bash
# The ceiling of the CUDA space for fp32 GEMMs (issues 14, 17): hand-picked classic
# register-tiled schedules in the plain sketch's structure (benches/gemm_ceiling.py: tile
# shapes, warp lane arrangements, reduction steps, pipeline stages), each built, checked
# and timed beside cublasLt (the fastest of its heuristic's candidates) in the same
# process (`tessel run --compare`). What the search could at best find with today's
# lowering, whatever its budget.
#
#   benches/gemm_ceiling.sh OUT [N...]      (default N: 2048 4096)
#   LAYOUT=nt benches/gemm_ceiling.sh OUT [N...]
#                 GEMMs of that layout, each operand whose rows are of the reduction
#                 transposed into shared memory (T, as the sketch does), kept as stored (S,
#                 I), or transposed by a kernel of its own (K)
#   ONLY=REGEX    time only the variants whose file name matches the extended regex
#   KERNELS=1 benches/gemm_ceiling.sh OUT [N...]
#                 NN GEMMs with A transposed by a kernel of its own, around the best tiling
#
# OUT receives the schedules (.sched), each run's output (.run.txt) and the table
# (summary.md, also on stdout), fastest first.
set -u
out=$1
shift
sizes=${*:-2048 4096}
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out"
layout=${LAYOUT:-}
# shellcheck disable=SC2086
python3 "$(dirname "$0")/gemm_ceiling.py" ${layout:+--layout $layout} ${KERNELS:+--kernels} "$out" $sizes
if [ -n "${ONLY:-}" ]; then
  for f in "$out"/*.sched; do
    basename "$f" | grep -Eq -- "$ONLY" || rm -f "$f"
  done
fi
for f in "$out"/*.sched; do
  name=$(basename "$f" .sched)
  n=${name%%_*}
  "$bin" run "matmul:${n}x${n}x${n}${layout:+,layout=$layout}" --schedule "$f" --target cuda --compare >"$out/$name.run.txt" 2>&1
done
python3 - "$out" <<'PY' | tee "$out/summary.md"
import glob, os, re, sys
rows = []
for f in glob.glob(os.path.join(sys.argv[1], "*.run.txt")):
    t = open(f).read()
    name = os.path.basename(f)[: -len(".run.txt")]
    g = lambda p: (re.search(p, t) or [None, None])[1]
    rows.append((name, g(r"check\s+(\w+)"), g(r"build\s+(\d+) registers"), g(r"speed\s+([\d.]+) TFLOP/s"),
                 g(r"peer .*?\(([\d.]+) TFLOP/s\)"), g(r"= ([\d.]+)x")))
print("| N, variant | check | registers | tessel TFLOP/s | cublasLt TFLOP/s | ratio |")
print("| --- | --- | --- | --- | --- | --- |")
for r in sorted(rows, key=lambda r: (r[0].split("_")[0], -float(r[5] or 0))):
    print("| " + " | ".join(x or "-" for x in r) + " |")
PY
