#!/usr/bin/env python3
"""Counts samples that run a padding kernel of their own and copy an operand by a
transposing kernel of its own (a `cache_read` into global memory): before 2026-11-30 the
transposing kernel could copy what the padding kernel wrote.

    tessel sample WORKLOAD --target cuda -n 200 --seed 3 --json | python3 benches/double_copies.py

A padding kernel is a `*_pad` block the trace gets but never inlines; a sample may pad
one operand and transpose the other, so `both` can stay above 0 without a copy of a copy
(`cargo test --release --test search_space no_operand` checks the copies themselves).
"""
import json
import re
import sys

samples = json.load(sys.stdin)
pad = tk = both = 0
for s in samples:
    t = s["trace"]
    name = dict(re.findall(r'(b\d+) = get_block\("([^"]+)"\)', t))
    inlined = {name[b] for b in re.findall(r"compute_inline\((b\d+)\)", t) if b in name}
    pads = {n for n in name.values() if n.endswith("_pad") and n not in inlined}
    glob = 'scope="global"' in t
    pad += bool(pads)
    tk += glob
    both += bool(pads) and glob
print(f"samples {len(samples)} pad-kernel {pad} transposing-kernel {tk} both {both}")
