#!/usr/bin/env python3
"""A register-tile trace of a GEMM (as `tessel best --emit trace` prints one) with its A
block packed as the sketch's row panel packs it (issue 16): `cache_read` of the main
block's first read at the K0 loop (with --per-call: once per call, into a global buffer
by a stage of its own, parallel over rows), `split_layout` of its rows by the sampled MR,
the rows within a tile moved last. The trace must not pack A already; its main block is
`b0`, its row tile the third factor of the row axis's `sample_perfect_tile` over `i0`,
its K0 loop the first part of the reduction's split.

    with_rows.py [--per-call] SCHED > SCHED_WITH_ROWS
"""
import re
import sys

per_call = sys.argv[1] == "--per-call"
lines = open(sys.argv[-1]).read().splitlines()
assert not any("split_layout" in l for l in lines), "A is packed already"
text = "\n".join(lines)
mr = re.search(r"^\w+, \w+, (\w+) = sample_perfect_tile\(i0,", text, re.M).group(1)
k0 = re.search(r"^(\w+), \w+ = split\(r0,", text, re.M).group(1)
at = next(i for i, l in enumerate(lines) if "decompose_reduction(" in l)
stage = [
    'bA = cache_read(b0, read_index=0, scope="global")',
    "aA0, aA1 = get_loops(bA)",
    "parallel(aA0)",
] if per_call else [
    'bA = cache_read(b0, read_index=0, scope="local")',
    f"compute_at(bA, {k0})",
]
lines[at:at] = stage + [
    f"split_layout(bA, buffer_index=0, axis=0, factor={mr})",
    "transform_layout(bA, buffer_index=0, permutation=[0, 2, 1])",
]
print("\n".join(lines))
