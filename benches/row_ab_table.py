#!/usr/bin/env python3
"""The table of an A/B of row workloads (benches/softmax_fusion.sh OUT): per workload
arm A's and arm B's kernel times (from the FLOP count of the workload file's name and
the `speed` line of `tessel run`), B / A, PyTorch's time from OUT/torch.txt and PyTorch
over each arm; GEMVs (matmul specs) as GFLOP/s with their ratio to cublasLt. Then the
geomean of B / A and of PyTorch over each arm.

    python3 benches/row_ab_table.py OUT
"""
import math
import re
import sys

# FLOPs an element, as RESULTS.md counts them.
PER_ELEMENT = {"softmax": 5, "attention_softmax_masked": 9, "layer_norm": 12,
               "rms_norm": 7, "add_layer_norm": 13}


def flops(w):
    m = re.match(r"(\w+?)_(\d+(?:x\d+)+)$", w)
    dims = [int(x) for x in m[2].split("x")]
    return PER_ELEMENT[m[1]] * math.prod(dims)


def load(d):
    torch = {}
    for line in open(d + "/torch.txt"):
        m = re.match(r"torch (\S+) (\S+) f32: median ([\d.]+) us", line)
        if m:
            kind = m[1] if m[1] != "attention_softmax" else "softmax"
            torch[kind + "_" + m[2]] = float(m[3])
    rows = {}
    for line in open(d + "/ab/all.txt"):
        f = line.split(" | ")
        if len(f) < 5:
            continue
        w = f[0].replace("benches/", "").replace(".tw", "")
        arm = "A" if "arm-a" in f[1] else "B"
        sp = re.search(r"speed\s+([\d.]+) (G|T)FLOP", line)
        g = float(sp[1]) * (1000 if sp[2] == "T" else 1)
        r = re.search(r"= ([\d.]+)x", line)
        rows.setdefault(w, {})[arm] = (g, float(r[1]) if r else None)
    return torch, rows


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(d):
    torch, rows = load(d)
    ab, pa, pb = [], [], []
    for w, arms in rows.items():
        a, b = arms["A"], arms["B"]
        ab.append(b[0] / a[0])
        if w.startswith("matmul"):
            print(f"| {w} | {a[0]:.1f} GF/s ({a[1]}x) | {b[0]:.1f} GF/s ({b[1]}x) | {b[0] / a[0]:.2f}x |")
            continue
        ta, tb, t = flops(w) / a[0] / 1e3, flops(w) / b[0] / 1e3, torch[w]
        pa.append(t / ta)
        pb.append(t / tb)
        print(f"| {w} | {ta:.1f} us | {tb:.1f} us | {b[0] / a[0]:.2f}x | {t:.1f} us | {t / ta:.2f}x | {t / tb:.2f}x |")
    print(f"B/A geomean {gm(ab):.3f} range {min(ab):.2f}-{max(ab):.2f}; "
          f"vs torch A {gm(pa):.3f} B {gm(pb):.3f} (n={len(ab)})")


if __name__ == "__main__":
    main(sys.argv[1])
