#!/usr/bin/env bash
# CPU kernels against BLAS (issue 16): each workload tuned on the host CPU with TRIALS
# trials (default 128), then, in one run, its best schedule timed with ndarray's `dot`
# (`tessel run --compare`, GEMMs only) and the Python peers (benches/cpu_peers.py: numpy
# / OpenBLAS, PyTorch's oneDNN conv when torch imports), all on THREADS threads (default:
# every core). The load (`uptime`) is taken before and after each workload's
# measurements: the machine may be shared. Writes OUT/table.md.
#
#   benches/cpu_blas.sh OUT [TRIALS] [WORKLOAD...]
#
# PASSES=N (default 0) then runs every best and its peer N more times, alternating, and
# prints each pass's medians and ratio (a GEMM's pass also times ndarray's `dot` in the
# same `tessel run --compare`, the same way as the kernel): on a shared machine one pair of runs can land in
# different minutes' load. `tessel run` evicts the kernel's buffers before each timed
# run, the Python peers run warm; the table also gives tessel's best timed warm
# (`tessel run --warm`) and its ratio to oneDNN, and WARM=1 times the passes warm.
set -u
out=$1
trials=${2:-128}
shift $(( $# >= 2 ? 2 : $# ))
workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
  workloads=(matmul:512x512x512 matmul:1024x1024x1024
    "conv2d_nchw:n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1")
fi
bin=${TESSEL_BIN:-./target/release/tessel}
threads=${THREADS:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
db=$out/cpu_blas.sqlite
model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu:     $model, $(nproc) hardware threads; kernels and peers on $threads threads"
  echo "trials:  $trials per workload"
} >"$out/header.txt"
cat "$out/header.txt"
for w in "${workloads[@]}"; do
  tag=$(printf '%s' "$w" | tr ':,=/' '____')
  echo "== $w ($(date -u +%H:%M:%S))"
  "$bin" tune "$w" --target cpu --trials "$trials" --threads "$threads" --db "$db" \
    >"$out/$tag.tune.txt" 2>"$out/$tag.tune.err"
  grep -E '^(target|trials|best) ' "$out/$tag.tune.txt" | cut -c1-160
  "$bin" best "$w" --target cpu --db "$db" --emit trace >"$out/$tag.trace" 2>/dev/null
  uptime >"$out/$tag.load"
  compare=--compare
  case $w in matmul:*) ;; *) compare= ;; esac
  "$bin" run "$w" --schedule "$out/$tag.trace" --threads "$threads" $compare \
    >"$out/$tag.run.txt" 2>&1
  "$bin" run "$w" --schedule "$out/$tag.trace" --threads "$threads" --warm \
    >"$out/$tag.warm.txt" 2>&1
  python3 "$here/cpu_peers.py" "$w" "$threads" >"$out/$tag.peers.txt" 2>&1
  uptime >>"$out/$tag.load"
  cat "$out/$tag.run.txt" "$out/$tag.warm.txt" "$out/$tag.peers.txt" | grep -E 'latency|speed|peer'
done
python3 - "$out" "${workloads[@]}" <<'PY'
import re, sys, os
out, workloads = sys.argv[1], sys.argv[2:]
def flops(w):
    kind, _, a = w.partition(":")
    if kind in ("matmul", "dense_bias_relu"):
        if "=" in a:
            p = dict(kv.split("=") for kv in a.split(","))
            return 2 * int(p["m"]) * int(p["n"]) * int(p["k"])
        m, n, k = map(int, a.split("x"))
        return 2 * m * n * k
    p = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in a.split(",")}
    oh = (p["h"] + 2 * p.get("pad", 0) - p["r"]) // p.get("stride", 1) + 1
    ow = (p["w"] + 2 * p.get("pad", 0) - p["s"]) // p.get("stride", 1) + 1
    return 2 * p["n"] * p["k"] * oh * ow * p["c"] * p["r"] * p["s"]
unit = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
lines = open(os.path.join(out, "header.txt")).read().splitlines()
print("\n".join(lines) + "\n")
print("| workload | tessel (GFLOP/s) | tessel, warm | ndarray dot | numpy / OpenBLAS | PyTorch (oneDNN) | tessel / OpenBLAS | tessel warm / oneDNN | load before, after |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for w in workloads:
    tag = w.replace(":", "_").replace(",", "_").replace("=", "_")
    run = open(os.path.join(out, tag + ".run.txt")).read()
    peers = open(os.path.join(out, tag + ".peers.txt")).read()
    f = flops(w)
    m = re.search(r"latency\s+median ([\d.]+) (us|ms|s)", run)
    t = float(m.group(1)) * unit[m.group(2)] if m else None
    m = re.search(r"latency\s+median ([\d.]+) (us|ms|s)", open(os.path.join(out, tag + ".warm.txt")).read())
    warm = float(m.group(1)) * unit[m.group(2)] if m else None
    nd = re.search(r"peer\s+ndarray[^:]*: median ([\d.]+) (us|ms|s)", run)
    nd = float(nd.group(1)) * unit[nd.group(2)] if nd else None
    def peer(name):
        m = re.search(r"peer " + name + r"\S* ([\d.]+)$", peers, re.M)
        return float(m.group(1)) if m else None
    blas = peer("numpy-openblas") or peer("numpy-im2col-openblas")
    torch = peer("torch")
    g = lambda s: f"{f / s / 1e9:.1f}" if s else "-"
    loads = [l.split("load average:")[1].split(",")[0].strip() for l in open(os.path.join(out, tag + ".load"))]
    ratio = f"{blas / t:.2f}x" if t and blas else "-"
    warm_ratio = f"{torch / warm:.2f}x" if warm and torch else "-"
    print(f"| {w} | {g(t)} | {g(warm)} | {g(nd)} | {g(blas)} | {g(torch)} | {ratio} | {warm_ratio} | {', '.join(loads)} |")
PY
passes=${PASSES:-0}
for ((pass = 1; pass <= passes; pass++)); do
  for w in "${workloads[@]}"; do
    tag=$(printf '%s' "$w" | tr ':,=/' '____')
    compare=
    case $w in matmul:*) compare=--compare ;; esac
    run=$("$bin" run "$w" --schedule "$out/$tag.trace" --threads "$threads" ${WARM:+--warm} $compare 2>&1)
    ours=$(printf '%s\n' "$run" | sed -n 's/^latency *median \([0-9.]*\) \(us\|ms\|s\) .*/\1 \2/p')
    dot=$(printf '%s\n' "$run" | sed -n 's/^peer *ndarray[^:]*: median \([0-9.]*\) \(us\|ms\|s\) .*/\1 \2/p')
    peer=$(python3 "$here/cpu_peers.py" "$w" "$threads" 2>&1 |
      awk '$1 == "peer" && $3 ~ /^[0-9.]+$/ { print $3; exit }')
    python3 - "$pass" "$w" "$ours" "$peer" "$dot" <<'PY'
import sys
p, w, ours, peer, dot = sys.argv[1:6]
secs = lambda s: float(s.split()[0]) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[s.split()[1]]
if not ours or not peer:
    print(f"pass {p} {w}: no figure (tessel: {ours!r}, peer: {peer!r})")
else:
    t = secs(ours)
    line = f"pass {p} {w}: tessel {t * 1e3:.3f} ms, peer {float(peer) * 1e3:.3f} ms, tessel / peer {float(peer) / t:.2f}x"
    if dot:
        line += f"; ndarray dot {secs(dot) * 1e3:.3f} ms, tessel / dot {secs(dot) / t:.2f}x"
    print(line)
PY
  done
done
