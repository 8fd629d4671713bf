#!/usr/bin/env python3
"""Draws tessel's validation set (benches/validation.toml): shapes nobody tuned for.

    python3 benches/validation_set.py [--seed S] > benches/validation.toml
    python3 benches/validation_set.py --training > benches/training.toml

`--training` draws the training set from the same distribution with another seed: the
shapes whose tuned records ship in `database/` (what transfer and the cost model learn
from), never the validation set's.

24 GEMMs (f32), six per layout (nn, nt, tn, tt): every dimension uniform in 1..4096;
a quarter of them (at least one per layout) have every dimension moved to the next
prime, the others keep their draw (about half of those dimensions are odd). 8 convs:
odd channels and sizes, batch uniform in 1..16, stride 1 and 2, NCHW and NHWC, kernels
of 1, 3, 5 or 7 with the padding that keeps the size for stride 1. The same seed draws
the same set; the rules of the search are not to be tuned to any one of them.
"""
import argparse
import random

GEMMS = 24
CONVS = 8
# The training set draws twice the convs: they are the slowest to tune and the most varied.
TRAINING_CONVS = 16
LAYOUTS = ["nn", "nt", "tn", "tt"]
VALIDATION_SEED = 20261123
TRAINING_SEED = 20261125


def is_prime(n):
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True


def next_prime(n):
    while not is_prime(n):
        n += 1
    return n


def odd(rng, lo, hi):
    return rng.randrange(lo | 1, hi + 1, 2)


def draw(seed, conv_count=CONVS):
    rng = random.Random(seed)
    gemms = []
    for i in range(GEMMS):
        layout = LAYOUTS[i % len(LAYOUTS)]
        m, n, k = (rng.randint(1, 4096) for _ in range(3))
        # Six of 24 (0, 5, 10, 15, 16, 21): every layout among them.
        prime = i % 4 == (i // 4) % 4
        if prime:
            m, n, k = next_prime(m), next_prime(n), next_prime(k)
        gemms.append((f"matmul:m={m},n={n},k={k},layout={layout}", "prime" if prime else "uniform"))
    convs = []
    for i in range(conv_count):
        preset = "conv2d_nchw" if i % 2 == 0 else "conv2d_nhwc"
        stride = 1 + (i // 2) % 2
        batch = rng.randint(1, 16)
        c, k = odd(rng, 3, 511), odd(rng, 3, 511)
        size = odd(rng, 7, 113)
        r = rng.choice([1, 3, 5, 7])
        pad = r // 2
        convs.append(
            f"{preset}:n={batch},c={c},h={size},w={size},k={k},r={r},s={r},stride={stride},pad={pad}"
        )
    return gemms, convs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int)
    ap.add_argument("--training", action="store_true", help="the training set's seed and header")
    args = ap.parse_args()
    seed = args.seed or (TRAINING_SEED if args.training else VALIDATION_SEED)
    gemms, convs = draw(seed, TRAINING_CONVS if args.training else CONVS)
    if args.training:
        print(f"# tessel's training set, drawn by `python3 benches/validation_set.py --training`")
        print("# (seed below; do not edit by hand). The same distribution as the validation set,")
        print("# another seed: its tuned records ship in database/ for transfer and the cost model;")
        print("# no shape here is in benches/validation.toml.")
    else:
        print(f"# tessel's validation set, drawn by `python3 benches/validation_set.py --seed {seed}`")
        print("# (do not edit by hand: change the script or the seed and redraw). Each entry is a")
        print("# workload spec for `tessel tune` / `tessel sample`; `kind` says how a GEMM was drawn.")
        print("# The suite's workloads (benches/RESULTS.md) are tuned beside these.")
    print(f"seed = {seed}")
    for spec, kind in gemms:
        print(f'\n[[gemm]]\nworkload = "{spec}"\nkind = "{kind}"')
    for spec in convs:
        print(f'\n[[conv]]\nworkload = "{spec}"')


if __name__ == "__main__":
    main()
