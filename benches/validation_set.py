#!/usr/bin/env python3
"""Draws tessel's validation set (benches/validation.toml): shapes nobody tuned for.

    python3 benches/validation_set.py [--seed S] > benches/validation.toml
    python3 benches/validation_set.py --training > benches/training.toml
    python3 benches/validation_set.py --tuning > benches/tuning.toml

`--training` draws the training set from the same distribution with another seed: the
shapes whose tuned records ship in `database/` (what transfer and the cost model learn
from), never the validation set's.

24 GEMMs (f32), six per layout (nn, nt, tn, tt): every dimension uniform in 1..4096;
a quarter of them (at least one per layout) have every dimension moved to the next
prime, the others keep their draw (about half of those dimensions are odd). 8 convs:
odd channels and sizes, batch uniform in 1..16, stride 1 and 2, NCHW and NHWC, kernels
of 1, 3, 5 or 7 with the padding that keeps the size for stride 1. Then 16-bit GEMMs
for the tensor cores (`[[tensor_core]]`: see TENSOR_CORE_VALIDATION and draw_tensor_core).
The same seed draws the same set; the rules of the search are not to be tuned to any one
of them.

`--tuning` draws the tuning set, a third seed: the shapes on which a change of the rules
or of a default is A/B'd before it lands (benches/parallel_ab.sh), so that the validation
set stays held out and its figures are not what the defaults were chosen on.
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
TUNING_SEED = 20261128


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


# 16-bit GEMMs on the tensor cores (f16/bf16 operands, f32 accumulation). The validation
# set's are the shapes every tensor-core table of benches/RESULTS.md has used since
# 2026-11-26, fixed before any training shape was drawn; the training set's are drawn.
TENSOR_CORE_VALIDATION = [
    "matmul:m=4096,n=4096,k=4096,dtype=f16,acc=f32",
    "matmul:m=2048,n=2048,k=2048,dtype=bf16,acc=f32",
    "matmul:m=1009,n=523,k=311,dtype=f16,acc=f32",
    "matmul:m=728,n=3092,k=3184,layout=nt,dtype=f16,acc=f32",
    "matmul:m=1523,n=241,k=605,layout=tn,dtype=bf16,acc=f32",
    "batch_matmul:b=12,m=384,n=384,k=64,dtype=f16,acc=f32",
    "matmul:m=512,n=1024,k=4096,layout=tt,dtype=bf16,acc=f32",
    "dense_bias_relu:m=128,n=3072,k=768,dtype=f16,acc=f32",
    "matmul:m=1000,n=1000,k=1000,dtype=bf16,acc=f32",
]
TENSOR_CORE_GEMMS = 12


def draw_tensor_core(seed):
    """12 GEMMs (dimensions uniform in 128..4096, the four layouts, f16 and bf16), two
    batched GEMMs (attention's shapes: batch 2..16, m and n 64..1024, k 32..256) and two
    dense layers (rows 1..512), all accumulated in f32; a stream of its own, so that
    the f32 entries of a set stay as they were drawn."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(TENSOR_CORE_GEMMS):
        layout = LAYOUTS[i % len(LAYOUTS)]
        dtype = "f16" if i % 2 == 0 else "bf16"
        m, n, k = (rng.randint(128, 4096) for _ in range(3))
        out.append(f"matmul:m={m},n={n},k={k},layout={layout},dtype={dtype},acc=f32")
    for dtype in ["f16", "bf16"]:
        b, m, n, k = rng.randint(2, 16), rng.randint(64, 1024), rng.randint(64, 1024), rng.randint(32, 256)
        out.append(f"batch_matmul:b={b},m={m},n={n},k={k},dtype={dtype},acc=f32")
    for dtype in ["f16", "bf16"]:
        m, n, k = rng.randint(1, 512), rng.randint(128, 4096), rng.randint(128, 4096)
        out.append(f"dense_bias_relu:m={m},n={n},k={k},dtype={dtype},acc=f32")
    return [w for w in out if w not in TENSOR_CORE_VALIDATION]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int)
    ap.add_argument("--training", action="store_true", help="the training set's seed and header")
    ap.add_argument("--tuning", action="store_true", help="the tuning set's seed and header")
    args = ap.parse_args()
    default = TRAINING_SEED if args.training else TUNING_SEED if args.tuning else VALIDATION_SEED
    seed = args.seed or default
    gemms, convs = draw(seed, TRAINING_CONVS if args.training else CONVS)
    if args.training:
        print(f"# tessel's training set, drawn by `python3 benches/validation_set.py --training`")
        print("# (seed below; do not edit by hand). The same distribution as the validation set,")
        print("# another seed: its tuned records ship in database/ for transfer and the cost model;")
        print("# no shape here is in benches/validation.toml.")
    elif args.tuning:
        print("# tessel's tuning set, drawn by `python3 benches/validation_set.py --tuning`")
        print("# (seed below; do not edit by hand). The same distribution, a third seed: changes")
        print("# of the rules and defaults are A/B'd on these shapes (benches/parallel_ab.sh),")
        print("# so that benches/validation.toml stays held out. No record of them ships.")
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
    tensor_core = draw_tensor_core(seed) if args.training or args.tuning else TENSOR_CORE_VALIDATION
    for spec in tensor_core:
        print(f'\n[[tensor_core]]\nworkload = "{spec}"')


if __name__ == "__main__":
    main()
