#!/usr/bin/env python3
"""The thread tile of each plain-sketch GEMM schedule given (`.sched` text, as
benches/conv_view_ab.sh saves its tunes' bests under OUT/best): the two spatial axes'
five-level tile decisions (block, virtual thread, thread, inner, innermost), the outputs
a thread computes (virtual thread x inner x innermost, over both axes) and the threads
of a block. No device.

    python3 benches/probe/big_tiles/best_tiles.py SCHED...
"""
import re
import sys

TILE = re.compile(r"sample_perfect_tile\(\S+, n=5.*?decision=\[([\d, ]+)\]")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        tiles = [list(map(int, m.split(","))) for m in TILE.findall(open(path).read())][:2]
        if len(tiles) < 2:
            print(f"{path}: not a plain-sketch GEMM schedule")
            continue
        outputs = threads = 1
        for t in tiles:
            outputs *= t[1] * t[3] * t[4]
            threads *= t[2]
        print(f"{path.split('/')[-1]:50s} tiles {tiles} outputs a thread {outputs:4d} threads {threads}")


if __name__ == "__main__":
    main()
