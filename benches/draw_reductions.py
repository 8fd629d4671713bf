#!/usr/bin/env python3
"""Held-out reductions over contiguous axes: POOLS global average pools and SUMS channel
sums of squares of NCHW tensors, shapes drawn with SEED, written as workload files into
DIR (the form of benches/global_avg_pool_16x512x28x28.tw and channel_sumsq_32x256x28x28.tw,
which benches/torch_softmax.py times in PyTorch). Prints the files' paths.

    python3 benches/draw_reductions.py SEED DIR [POOLS SUMS]
    WORKLOADS="$(python3 benches/draw_reductions.py 20261166 /tmp/r)" benches/reductions_run.sh OUT
"""
import pathlib, random, sys

seed, out = int(sys.argv[1]), pathlib.Path(sys.argv[2])
pools, sums = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (4, 2)
rng = random.Random(seed)
out.mkdir(parents=True, exist_ok=True)
MAX_ELEMENTS = 40_000_000


def shape(max_c):
    n = rng.choice([1, 2, 4, 8, 16, 32])
    c = rng.randint(16, max_c)
    h = rng.randint(7, 56)
    w = rng.choice([h, rng.randint(7, 56)])
    return n, min(c, MAX_ELEMENTS // (n * h * w)), h, w


def pool(n, c, h, w):
    return (f"global_avg_pool_{n}x{c}x{h}x{w}",
            f"workload global_avg_pool\ninput X: f32[{n}, {c}, {h}, {w}]\n"
            f"S[n, c] = sum(X[n, c, h, w], h: {h}, w: {w})\nY[n, c] = S[n, c] / {float(h * w)}\n")


def sumsq(n, c, h, w):
    return (f"channel_sumsq_{n}x{c}x{h}x{w}",
            f"workload channel_sumsq\ninput X: f32[{n}, {c}, {h}, {w}]\n"
            f"S[c] = sum(X[n, c, h, w] * X[n, c, h, w], n: {n}, h: {h}, w: {w})\n")


files = []
for count, max_c, program in ((pools, 2048, pool), (sums, 1024, sumsq)):
    for _ in range(count):
        name, text = program(*shape(max_c))
        f = out / f"{name}.tw"
        f.write_text(text)
        files.append(f)
print(" ".join(str(f) for f in files))
