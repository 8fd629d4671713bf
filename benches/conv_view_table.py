#!/usr/bin/env python3
"""The table of a GEMM A/B by benches/conv_view_ab.sh (its output saved as LOG): per GEMM
each space's best against cublasLt (`tessel run --compare` in the same process), B / A
in throughput, and for each side the best's time by `tessel run` over the fastest time the
tune itself recorded (a value far from 1 is a best whose time did not hold when run
again; nan where the log lacks the tune's records line). Then the geomean of B / A. The
sides are named by the log's space column: a space file's name, or "other" and "this" in
the log of benches/binary_ab.sh.

    python3 benches/conv_view_table.py LOG SPACE_A SPACE_B
    e.g. python3 benches/conv_view_table.py /tmp/ab.log cuda.toml tight.toml
"""
import math
import re
import sys

ROW = re.compile(r"matmul:m=(\d+),n=(\d+),k=(\d+)(\S*) \| (\S+) \|.*speed\s+([\d.]+) TFLOP/s"
                 r".*\(([\d.]+) TFLOP/s\)")


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
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"{len(ratios)} GEMMs, geomean B/A {geo:.3f}, "
              f"{sum(r > 1.0 for r in ratios)} faster, {sum(r < 1.0 for r in ratios)} slower")


if __name__ == "__main__":
    main()
