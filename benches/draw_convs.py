#!/usr/bin/env python3
"""Held-out NCHW 3x3 convs for an A/B of a conv rule: COUNT drawn with SEED (batch 1-16,
channels 16-256, square images of 14-64, 32-256 filters, stride 1, padding 1), one spec
a line.

    python3 benches/draw_convs.py SEED COUNT
"""
import random
import sys

seed, count = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
for _ in range(count):
    n, c, h, k = rng.randint(1, 16), rng.randint(16, 256), rng.randint(14, 64), rng.randint(32, 256)
    print(f"conv2d_nchw:n={n},c={c},h={h},w={h},k={k},r=3,s=3,stride=1,pad=1")
