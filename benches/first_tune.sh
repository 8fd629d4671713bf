#!/usr/bin/env bash
# A new user's first tunes: workloads tuned in a new database as `tessel tune` starts one
# (the record sets that ship in database/ imported and the cost model trained on them),
# against the same tunes from nothing (TESSEL_SHIPPED=off), at the same budget and seed;
# each best timed against its vendor-library peer in the same session
# (benches/gpu_suite.sh: cublasLt in the same process, cuDNN through PyTorch).
#
#   benches/first_tune.sh OUT TRIALS WORKLOAD...
#
# The start is made once, by `tessel tune` itself on a tiny GEMM (one trial) into
# OUT/base.sqlite (its notes on OUT/bootstrap.txt, its wall time printed); each workload
# then tunes in a copy of that database, so none sees another's records. OUT/shipped and
# OUT/nothing receive gpu_suite.sh's files; OUT/summary.md the table (also on stdout).
set -u
out=$1 trials=$2
shift 2
bin=${TESSEL_BIN:-./.gpu/tessel}
mkdir -p "$out/shipped" "$out/nothing"
rm -f "$out/base.sqlite"
start=$(date +%s.%N)
TESSEL_SHIPPED=on "$bin" tune matmul:64x64x64 --target cuda --trials 1 --db "$out/base.sqlite" \
  >"$out/bootstrap.txt" 2>&1
echo "== the start: $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
grep -E "importing|imported" "$out/bootstrap.txt"
for w in "$@"; do
  cp "$out/base.sqlite" "$out/w.sqlite"
  TESSEL_NO_EXPORT=1 TESSEL_DB=$out/w.sqlite bash benches/gpu_suite.sh "$out/shipped" 60 "$trials" "$w"
  rm -f "$out/w.sqlite"
  TESSEL_NO_EXPORT=1 TESSEL_DB=$out/w.sqlite TESSEL_SHIPPED=off bash benches/gpu_suite.sh \
    "$out/nothing" 60 "$trials" "$w"
  rm -f "$out/w.sqlite"
done
rm -f "$out/base.sqlite"
python3 - "$out" "$@" <<'PY' | tee "$out/summary.md"
import re, sys
out, workloads = sys.argv[1], sys.argv[2:]

def tflops(text, pattern):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else None

def arm(arm, w):
    tag = re.sub(r"[:,=]", "_", w)
    try:
        run = open(f"{out}/{arm}/{tag}.run.txt").read()
    except OSError:
        return None, None
    ours = tflops(run, r"speed\s+([\d.]+) TFLOP/s")
    peer = tflops(run, r"peer .*?\(([\d.]+) TFLOP/s\)") or tflops(run, r"cuDNN .*?([\d.]+) TFLOP/s")
    return ours, peer

print(f"| workload | shipped start: TFLOP/s, ratio | from nothing: TFLOP/s, ratio | peer TFLOP/s | shipped / nothing |")
print("| --- | --- | --- | --- | --- |")
for w in workloads:
    a, pa = arm("shipped", w)
    b, pb = arm("nothing", w)
    cell = lambda t, p: f"{t:.2f}, {t / p:.2f}x" if t and p else "-"
    peer = " / ".join(f"{p:.2f}" for p in (pa, pb) if p)
    gain = f"{a / b:.2f}x" if a and b else "-"
    print(f"| {w} | {cell(a, pa)} | {cell(b, pb)} | {peer} | {gain} |")
PY
