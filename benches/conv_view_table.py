#!/usr/bin/env python3
"""The table of an A/B by benches/conv_view_ab.sh (its output saved as LOG): per GEMM
each space's best against cublasLt (`tessel run --compare` in the same process), B / A
in throughput, and for each side the best's time by `tessel run` over the fastest time the
tune itself recorded (a value far from 1 is a best whose time did not hold when run
again; nan where the log lacks the tune's records line). Then the geomean of B / A. Per
convolution the same against cuDNN (the log's `benches/cudnn_conv.py` line of that conv,
nan where it lacks one), its own geomean after the GEMMs'. The sides are named by the
log's space column: a space file's name, or "other" and "this" in the log of
benches/binary_ab.sh.

    python3 benches/conv_view_table.py LOG SPACE_A SPACE_B
    e.g. python3 benches/conv_view_table.py /tmp/ab.log cuda.toml tight.toml
"""
import math
import re
import sys

ROW = re.compile(r"matmul:m=(\d+),n=(\d+),k=(\d+)(\S*) \| (\S+) \|.*speed\s+([\d.]+) TFLOP/s"
                 r".*\(([\d.]+) TFLOP/s\)")


CONV = re.compile(r"(conv2d_(nchw|nhwc):\S+) \| (\S+) \|.*speed\s+([\d.]+) TFLOP/s")
CUDNN = re.compile(r"cuDNN conv2d \S+ (nhwc )?(\S+) (stride\d+ pad\d+): median [\d.]+ us, ([\d.]+) TFLOP/s")


def cudnn_key(workload):
    """The words by which benches/cudnn_conv.py names `workload`'s conv."""
    d = dict(kv.split("=") for kv in workload.split(":")[1].split(","))
    dims = "".join(f"{k}{d[k]}" for k in "n c h w k r s".split())
    return ("nhwc " if workload.startswith("conv2d_nhwc") else "") + \
        f"{dims} stride{d['stride']} pad{d['pad']}"


def geomean_line(ratios, what):
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"{len(ratios)} {what}, geomean B/A {geo:.3f}, "
          f"{sum(r > 1.0 for r in ratios)} faster, {sum(r < 1.0 for r in ratios)} slower")


def convs(lines, a, b):
    """The convolutions' rows: each side's TFLOP/s and its ratio to cuDNN, then B / A."""
    peers = {}
    for line in lines:
        m = CUDNN.search(line)
        if m:
            peers[f"{m[1] or ''}{m[2]} {m[3]}"] = float(m[4])
    rows = {}
    for line in lines:
        m = CONV.match(line)
        if m:
            rows.setdefault(m[1], {})[m[3]] = float(m[4])
    ratios = []
    for w, sides in rows.items():
        if a not in sides or b not in sides:
            continue
        peer = peers.get(cudnn_key(w), float("nan"))
        ta, tb = sides[a], sides[b]
        ratios.append(tb / ta)
        print(f"{w:64s} {ta:6.2f} ({ta / peer:5.2f}x) {tb:6.2f} ({tb / peer:5.2f}x) {tb / ta:5.3f}")
    if ratios:
        geomean_line(ratios, "convs")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    log, a, b = sys.argv[1:]
    lines = open(log).read().splitlines()
    rows = {}
    for i, line in enumerate(lines):
        m = ROW.match(line)
        if not m:
            continue
        mm, n, k = map(int, m.group(1, 2, 3))
        tflops, peer = float(m[6]), float(m[7])
        rerun_us = 2 * mm * n * k / tflops / 1e6
        following = lines[i + 1] if i + 1 < len(lines) else ""
        recorded = [float(x) for x in re.findall(r"best ([\d.]+) us", following)]
        held = rerun_us / min(recorded) if recorded else float("nan")
        rows.setdefault(f"{mm}x{n}x{k}{m[4]}", {})[m[5]] = (tflops / peer, tflops, held)
    ratios = []
    print(f"{'GEMM':34s} {a:>12s} {b:>12s}   B/A  held A  held B")
    for w, sides in rows.items():
        if a not in sides or b not in sides:
            continue
        (ra, ta, ha), (rb, tb, hb) = sides[a], sides[b]
        ratios.append(tb / ta)
        print(f"{w:34s} {ra:12.3f} {rb:12.3f} {tb / ta:5.3f}  {ha:6.3f}  {hb:6.3f}")
    if ratios:
        geomean_line(ratios, "GEMMs")
    convs(lines, a, b)


if __name__ == "__main__":
    main()
