"""NCHW convs with a window for A/B'ing the channels-last decision, drawn as
benches/validation_set.py draws its convs (odd channels and sizes, batch 1..16, windows
of 3, 5, 7, strides 1 and 2 alternating) with a seed of their own, keeping only those of
at most 100 GFLOP (a tune of 300 trials of a larger one outlasts the A/B's time limit).

    python3 benches/probe/nchw_as_nhwc/draw.py [SEED] [COUNT]   (prints TOML)
"""
import random
import sys


def odd(rng, lo, hi):
    return rng.randrange(lo | 1, hi + 1, 2)


def main():
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 20261129
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    rng = random.Random(seed)
    print(f"# python3 benches/probe/nchw_as_nhwc/draw.py {seed} {count}")
    i = 0
    while count:
        stride = 1 + i % 2
        n, c, k = rng.randint(1, 16), odd(rng, 3, 511), odd(rng, 3, 511)
        size = odd(rng, 7, 113)
        r = rng.choice([3, 5, 7])
        pad = r // 2
        out = (size + 2 * pad - r) // stride + 1
        if 2 * n * k * out * out * c * r * r > 100e9:
            continue
        i += 1
        count -= 1
        print(f'\n[[conv]]\nworkload = "conv2d_nchw:n={n},c={c},h={size},w={size},k={k},'
              f'r={r},s={r},stride={stride},pad={pad}"')


main()
