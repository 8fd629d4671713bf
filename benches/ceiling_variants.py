#!/usr/bin/env python3
"""The ceiling's structure on tuned bests: from each tuned best trace of an f32 matmul
(a `.sched` file of benches/gpu_suite.sh, named as it names them, e.g.
`matmul_m_3037_n_3449_k_3229_layout_tn.sched`), variants with the tiles of the ceiling
schedules of benches/gemm_ceiling.py and every other decision as tuned: 128 x 128 blocks
of 256 threads, 8 x 8 outputs a thread in 2 x 2 vthreads of 4 x 4, the extents padded to
128 (the reduction to the step), reduction steps of 32 or 16, 2 or 3 pipeline stages.
A best whose padding decisions offer no such multiple gets none.

    benches/ceiling_variants.py OUT BEST.sched...   writes OUT/<best>.k32s3.sched, .k32s2,
        .k16s3 and OUT/<best>.best.sched (the best itself); benches/ceiling_variants.sh
        times them all.
    benches/ceiling_variants.py --wide OUT BEST.sched...   also the block tiles of
        cublasLt's fp32 kernels on mid-size GEMMs (benches/RESULTS.md, 2026-11-28: 128 x
        128 of 128 threads, 256 x 128 and 128 x 256 of 256 threads), 16 x 8 or 8 x 16
        outputs a thread, steps of 32 or 16, 3 stages: OUT/<best>.<tile>k32s3.sched...
"""
import os
import re
import shutil
import sys

VARIANTS = ((32, 3), (32, 2), (16, 3))
# Block tiles by name: per spatial axis (m, n) the [vthreads, threads, serial, inner]
# factors under the block level. "" is the ceiling's 128 x 128 of 256 threads, 8 x 8 each.
TILES = {"": ((2, 16, 1, 4), (2, 16, 1, 4))}
WIDE = {
    "t128": ((2, 8, 1, 8), (2, 16, 1, 4)),  # 128 x 128, 128 threads, 16 x 8 each
    "m256": ((2, 16, 1, 8), (2, 16, 1, 4)),  # 256 x 128, 256 threads, 16 x 8 each
    "n256": ((2, 16, 1, 4), (2, 16, 1, 8)),  # 128 x 256, 256 threads, 8 x 16 each
}
WIDE_VARIANTS = ((32, 3), (16, 3))


def ceil(e, q):
    return -(-e // q) * q


def variant(lines, m, n, k, step, stages, tile=TILES[""]):
    """The trace `lines` with the block tile `tile` (see TILES), or None where its padding
    cannot give extents they divide."""
    lines = list(lines)
    bm, bn = (v * t * s * i for v, t, s, i in tile)
    pad = next((i for i, l in enumerate(lines) if l.startswith("pad_einsum")), None)
    ext = [m, n, k]
    if pad is not None:
        # The three padding multiples (m, n, k) are the last categoricals before it.
        cats = [i for i in range(pad) if "sample_categorical" in lines[i]][-3:]
        for axis, (i, want) in enumerate(zip(cats, (bm, bn, step))):
            cands = [int(x) for x in re.search(r"candidates=\[([^\]]*)\]", lines[i]).group(1).split(",")]
            pick = next((c for c in sorted(cands) if c % want == 0), max(cands))
            lines[i] = re.sub(r"decision=\d+", f"decision={cands.index(pick)}", lines[i])
            ext[axis] = ceil(ext[axis], pick) if pick > 1 else ext[axis]
    M, N, K = ext
    if M % bm or N % bn or K % step:
        return None
    tiles = [[M // bm, *tile[0]], [N // bn, *tile[1]], [K // step, step // 16, 16]]
    t = 0
    for i, l in enumerate(lines):
        if "sample_perfect_tile" in l and t < 3:
            lines[i] = re.sub(r"decision=\[[^\]]*\]", f"decision={tiles[t]}", l)
            t += 1
    for i, l in enumerate(lines):
        if "software_pipeline_stage" in l:
            v = re.search(r"value=\[0, 0, (v\d+)\]", l).group(1)
            for j in range(i):
                if lines[j].startswith(v + " = sample_categorical"):
                    lines[j] = re.sub(r"decision=\d+", f"decision={stages - 1}", lines[j])
    return lines


def main():
    args = sys.argv[1:]
    wide = args[0] == "--wide"
    out, bests = args[wide], args[wide + 1 :]
    plan = [("", TILES[""], step, stages) for step, stages in VARIANTS]
    if wide:
        plan += [(n, t, step, stages) for n, t in WIDE.items() for step, stages in WIDE_VARIANTS]
    os.makedirs(out, exist_ok=True)
    for path in bests:
        name = os.path.basename(path)[: -len(".sched")]
        m, n, k = (int(re.search(rf"_{c}_(\d+)", name).group(1)) for c in "mnk")
        lines = open(path).read().split("\n")
        shutil.copy(path, f"{out}/{name}.best.sched")
        for tname, tile, step, stages in plan:
            label = f"{tname}k{step}s{stages}"
            v = variant(lines, m, n, k, step, stages, tile)
            if v is None:
                print(f"{name}: {label} does not fit its padding", file=sys.stderr)
                continue
            with open(f"{out}/{name}.{label}.sched", "w") as f:
                f.write("\n".join(v))


if __name__ == "__main__":
    main()
