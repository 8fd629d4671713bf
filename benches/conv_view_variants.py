#!/usr/bin/env python3
"""The GEMM ceiling's block tiles on a convolution's GEMM view: from `tessel sample CONV
--target cuda --space S --json` samples (S with `tiling.gemm_view_windowed` = 1), the
first COUNT that took the view (`im2col`), copy operands by kernels of their own
(`scope="global"`), pipeline their fetch and pad the GEMM's axes to multiples that the
tiles below divide (or need no padding), each rewritten with every other decision as
sampled: blocks of 128 x 128 of 256 threads (`c`) or 64 x 128 of 128 threads (`m64`),
8 x 8 outputs a thread in 2 x 2 virtual threads of 4 x 4, reduction steps of 32 or 16, 2
or 3 pipeline stages, 4-float fetch vectors, unrolled up to 512 steps. What the search
could reach in the space it has, for `tessel run` to time (benches/RESULTS.md,
2026-11-30).

    benches/conv_view_variants.py OUT SPEC SAMPLES.json [COUNT | I,J,...]
        writes OUT/<a, b, ...>.<tile>k<step>s<stages>.sched, from the first COUNT (2)
        samples that fit, or from samples I, J, ... (their indices in SAMPLES.json)
"""
import json
import os
import re
import sys

TILES = {"c": ((2, 16, 1, 4), (2, 16, 1, 4)), "m64": ((2, 8, 1, 4), (2, 16, 1, 4))}
STEPS = ((16, 3), (32, 3), (32, 2))


def ceil(e, q):
    return -(-e // q) * q


def gemm_dims(spec):
    """The GEMM im2col makes of conv SPEC: (rows, columns, reduction). NCHW stores the
    transposed product (output channels as rows), NHWC the pixels as rows."""
    d = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(":")[1].split(","))}
    p = (d["h"] + 2 * d["pad"] - d["r"]) // d["stride"] + 1
    q = (d["w"] + 2 * d["pad"] - d["s"]) // d["stride"] + 1
    npq, crs = d["n"] * p * q, d["c"] * d["r"] * d["s"]
    return (d["k"], npq, crs) if spec.startswith("conv2d_nchw") else (npq, d["k"], crs)


def padding(lines):
    """The pad_einsum line's index and, per GEMM axis, its multiple's categorical line
    (None: not padded)."""
    at = next(i for i, l in enumerate(lines) if l.startswith("pad_einsum"))
    toks = re.search(r"padding=\[(.*)\]", lines[at]).group(1).split(", ")
    cats = [None if t == "1" else
            next(j for j in range(at) if lines[j].startswith(t + " = sample_categorical"))
            for t in toks]
    return cats


def candidates(line):
    return [int(x) for x in re.search(r"candidates=\[([^\]]*)\]", line).group(1).split(",")]


def variant(lines, dims, tile, step, stages):
    """`lines` with the tile, or None where the sample's padding cannot give extents it
    divides (a multiple is only changed among the padded ones: unpadding renames blocks)."""
    lines = list(lines)
    want = [v * t * s * i for v, t, s, i in tile] + [step]
    ext = list(dims)
    for axis, j in enumerate(padding(lines)):
        if j is None:
            continue
        cands = candidates(lines[j])
        pick = next((c for c in sorted(cands) if c > 1 and c % want[axis] == 0), None)
        if pick is None:
            return None
        lines[j] = re.sub(r"decision=\d+", f"decision={cands.index(pick)}", lines[j])
        ext[axis] = ceil(ext[axis], pick)
    if any(e % w for e, w in zip(ext, want)):
        return None
    tiles = [[ext[0] // want[0], *tile[0]], [ext[1] // want[1], *tile[1]],
             [ext[2] // step, step // 16, 16]]
    t = 0
    for i, l in enumerate(lines):
        if "sample_perfect_tile" in l and t < 3:
            lines[i] = re.sub(r"decision=\[[^\]]*\]", f"decision={tiles[t]}", l)
            t += 1
        elif "software_pipeline_stage" in l:
            v = re.search(r"value=\[0, 0, (v\d+)\]", l).group(1)
            j = next(j for j in range(i) if lines[j].startswith(v + " = sample_categorical"))
            if stages - 1 not in candidates(lines[j]):
                return None  # the stages' copies would not fit shared memory
            lines[j] = re.sub(r"decision=\d+", f"decision={stages - 1}", lines[j])
    for i, l in enumerate(lines):
        if "candidates=[1, 2, 4]" in l:
            lines[i] = re.sub(r"decision=\d+", "decision=2", l)
        elif "candidates=[0, 16, 64, 512]" in l:
            lines[i] = re.sub(r"decision=\d+", "decision=3", l)
    return lines


def fits(lines, dims):
    if not (lines[0].endswith("decision=1)") and 'scope="global"' in "\n".join(lines)
            and any("software_pipeline" in l for l in lines)):
        return False
    return any(variant(lines, dims, t, s, st) for t in TILES.values() for s, st in STEPS)


def main():
    out, spec, samples = sys.argv[1:4]
    pick = sys.argv[4] if len(sys.argv) > 4 else "2"
    dims = gemm_dims(spec)
    os.makedirs(out, exist_ok=True)
    traces = [c["trace"].split("\n") for c in json.load(open(samples))]
    if "," in pick:
        picked = [traces[int(i)] for i in pick.split(",")]
    else:
        picked = [l for l in traces if fits(l, dims)][: int(pick)]
    for n, lines in enumerate(picked):
        for name, tile in TILES.items():
            for step, stages in STEPS:
                v = variant(lines, dims, tile, step, stages)
                if v is not None:
                    with open(f"{out}/{chr(97 + n)}.{name}k{step}s{stages}.sched", "w") as f:
                        f.write("\n".join(v))


if __name__ == "__main__":
    main()
