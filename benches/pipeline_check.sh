#!/usr/bin/env bash
# Software pipelining with cp.async (issue 17, first part) on the CUDA device: each
# workload is tuned for SECONDS with the default space (pipeline stages 1-4 a decision of
# the trace) and with a copy of it limited to `stages = [1]` (today's single-buffered
# fetch), each into a fresh database so neither run sees the other's records; each best
# kernel is then built and timed afresh (`tessel run`, against cublasLt for the GEMMs).
# Three workloads x two spaces at the default 50 s stay under 8 minutes. First, the seed
# GEMM (hand-written tiles) with 1 to 4 stages, a few seconds each.
#
#   benches/pipeline_check.sh OUT [SECONDS]
#
# OUT receives per workload and space: the tuner's report (.tune.txt, progress on
# .tune.err, JSON on .tune.json), the best trace (.sched) and the timing (.run.txt); the
# summary table (stages of the best trace, TFLOP/s) goes to stdout and OUT/summary.md.
set -u
# A fresh database here means nothing at all: not the shipped records `tessel tune`
# starts a new database from (TESSEL_SHIPPED=on restores that).
export TESSEL_SHIPPED=${TESSEL_SHIPPED:-off}
out=$1 secs=${2:-50}
bin=${TESSEL_BIN:-./.gpu/tessel}
seed=${TESSEL_SEED:-11}
mkdir -p "$out"
# The default space and the same space without pipelining.
sed 's/^stages = \[.*\]$/stages = [1]/' search_spaces/cuda.toml >"$out/cuda-stages1.toml"
grep -q '^stages = \[1\]$' "$out/cuda-stages1.toml" || {
  echo "search_spaces/cuda.toml has no [pipeline] stages line" >&2
  exit 1
}
# The seed GEMM at 2048^3 with 1 to 4 stages (examples/schedules/seed_pipelined_gemm.sched
# with its last stage changed): the same tiles, only the pipeline differs.
for stages in 1 2 3 4; do
  sed "s/value=\[0, 0, 2\]/value=[0, 0, $((stages - 1))]/" examples/schedules/seed_pipelined_gemm.sched \
    >"$out/seed.$stages.sched"
  echo "== seed GEMM 2048^3, $stages stages"
  "$bin" run matmul:2048x2048x2048 --schedule "$out/seed.$stages.sched" --target cuda \
    >"$out/seed.$stages.run.txt" 2>&1
  grep -E "TFLOP|check" "$out/seed.$stages.run.txt" | head -2
done
workloads=(
  matmul:2048x2048x2048
  matmul:1605x3910x935
  conv2d_nchw:n=1,c=256,h=14,w=14,k=256,r=3,s=3,stride=1,pad=1
)
for w in "${workloads[@]}"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  for space in pipelined stages1; do
    case $space in
      pipelined) space_arg=() ;;
      stages1) space_arg=(--space "$out/cuda-stages1.toml") ;;
    esac
    db=$out/$tag.$space.sqlite
    rm -f "$db"
    echo "== $w, $space ($(date -u +%H:%M:%S))"
    "$bin" tune "$w" --target cuda --trials 100000 --time-limit "$secs" --batch "${TESSEL_BATCH:-32}" \
      --seed "$seed" --db "$db" "${space_arg[@]}" --report-json "$out/$tag.$space.tune.json" \
      >"$out/$tag.$space.tune.txt" 2>"$out/$tag.$space.tune.err"
    grep -E '^(stopped|trials|failures|best) ' "$out/$tag.$space.tune.txt"
    "$bin" best "$w" --target cuda --db "$db" --emit trace >"$out/$tag.$space.sched" || continue
    case $w in
      matmul*) cmp=--compare ;;
      *) cmp= ;;
    esac
    "$bin" run "$w" --schedule "$out/$tag.$space.sched" --target cuda $cmp \
      >"$out/$tag.$space.run.txt" 2>&1
    grep -E "TFLOP|check|cublasLt" "$out/$tag.$space.run.txt" | head -4
  done
done
python3 - "$out" "${workloads[@]}" <<'PY' | tee "$out/summary.md"
import os, re, sys
out, workloads = sys.argv[1], sys.argv[2:]

def stages(sched):
    # The stage count of the best trace: the compute stage of its pipeline annotation + 1.
    try:
        text = open(sched).read()
    except OSError:
        return "-"
    m = re.search(r'annotate\(\S+, key="software_pipeline_stage", value=\[[^\]]*?(\w+)\]\)', text)
    if not m:
        return "1 (no annotation)"
    last = m.group(1)
    if last.isdigit():
        return str(int(last) + 1)
    d = re.search(rf"^{last} = sample_categorical\(candidates=\[([^\]]*)\].*decision=(\d+)\)", text, re.M)
    return str(int(d.group(1).split(", ")[int(d.group(2))]) + 1) if d else "?"

def tflops(run):
    try:
        text = open(run).read()
    except OSError:
        return "-", "-"
    ours = re.findall(r"([\d.]+) TFLOP/s", text)
    peer = re.search(r"cublasLt[^\n]*?([\d.]+) TFLOP/s", text)
    return (ours[0] if ours else "-"), (peer.group(1) if peer else "-")

print("| workload | space | trials | stages of best | TFLOP/s | cublasLt TFLOP/s |")
print("| --- | --- | --- | --- | --- | --- |")
for w in workloads:
    tag = re.sub(r"[:,=]", "_", w)
    for space in ("pipelined", "stages1"):
        trials = "-"
        try:
            m = re.search(r"^trials\s+(\d+)", open(f"{out}/{tag}.{space}.tune.txt").read(), re.M)
            trials = m.group(1) if m else "-"
        except OSError:
            pass
        ours, peer = tflops(f"{out}/{tag}.{space}.run.txt")
        print(f"| {w} | {space} | {trials} | {stages(f'{out}/{tag}.{space}.sched')} | {ours} | {peer} |")
for n in range(1, 5):
    ours, _ = tflops(f"{out}/seed.{n}.run.txt")
    print(f"| matmul:2048x2048x2048 | seed_pipelined_gemm.sched | - | {n} | {ours} | - |")
PY
