#!/usr/bin/env python3
"""Writes the variants of benches/probe/mma_gemm.cu that benches/cuda_probe.py times:
each is the kernel with its switches and tile sizes defined in front and the concrete
launch line.    benches/probe/variants.py OUT [M N K]"""
import os
import sys

VARIANTS = {
    # name: (BM, BN, BK, WM, WN, STAGES, switches)
    "base": (128, 128, 32, 2, 2, 3, []),
    "bx4": (128, 128, 32, 2, 2, 3, ["BX4"]),
    "prefetch": (128, 128, 32, 2, 2, 3, ["PREFETCH"]),
    "prefetch_bx4": (128, 128, 32, 2, 2, 3, ["PREFETCH", "BX4"]),
    "prefetch_bx4_k64": (128, 128, 64, 2, 2, 3, ["PREFETCH", "BX4"]),
    "prefetch_bx4_k32_s4": (128, 128, 32, 2, 2, 4, ["PREFETCH", "BX4"]),
    "prefetch_bx4_128x256": (128, 256, 32, 2, 4, 3, ["PREFETCH", "BX4"]),
    "prefetch_bx4_256x128": (256, 128, 32, 4, 2, 3, ["PREFETCH", "BX4"]),
}


def main():
    out = sys.argv[1]
    m, n, k = (int(x) for x in sys.argv[2:5]) if len(sys.argv) > 4 else (4096, 4096, 4096)
    here = os.path.dirname(os.path.abspath(__file__))
    body = open(os.path.join(here, "mma_gemm.cu")).read()
    os.makedirs(out, exist_ok=True)
    for name, (bm, bn, bk, wm, wn, stages, sw) in VARIANTS.items():
        shared = stages * (bm * (bk + 8) + bk * (bn + 8)) * 2
        head = [f"#define {d} {v}" for d, v in
                [("BM", bm), ("BN", bn), ("BK", bk), ("WM", wm), ("WN", wn), ("STAGES", stages),
                 ("M", m), ("N", n), ("K", k)]]
        head += [f"#define {s}" for s in sw]
        head.append(f"// launch: grid=({(m // bm) * (n // bn)}, 1, 1) block=({32 * wm * wn}, 1, 1) "
                    f"shared={shared} bytes (dynamic)")
        head.append(f"// problem: m={m} n={n} k={k} dtype=f16")
        with open(os.path.join(out, f"mma_{name}.cu"), "w") as f:
            f.write("\n".join(head) + "\n" + body)


if __name__ == "__main__":
    main()
