#!/usr/bin/env python3
"""How a database's fp32 GEMM records fare by the outputs one GPU thread computes, without
a device: the workloads with one sum of two f32 operands (no 16-bit types, no epilogue)
and at least 50 `ok` records of the plain sketch (split-K and tensor-core records left
out); each record's outputs a thread from its last two five-level spatial tile decisions
([blocks, vthreads, threads, serial, inner]: vthreads x serial x inner on each axis).
Prints, per class of outputs a thread, how many records there are and the share of them in
their workload's fastest 5%, and the outputs a thread of each workload's fastest record;
then, for 64 and for 128 outputs a thread, the same share by the thread's tile (rows x
columns) and by its innermost factors (the last level of each axis, the register tile's
contiguous run), groups of 40 records or more.

    benches/tile_class_records.py DB     (DB: e.g. a shipped start, benches/shipped_db.sh)
"""
import collections
import json
import re
import sqlite3
import sys

MIN_RECORDS = 50


def is_fp32_gemm(text):
    sums = [l for l in text.splitlines() if "=" in l and "sum(" in l]
    return ("f32[" in text and "f16" not in text and "bf16" not in text and len(sums) == 1
            and text.count("\nt") == 1
            and re.search(r"sum\(t\d+\[[^\]]*\] \* t\d+\[[^\]]*\], r0: \d+\)", sums[0]))


def thread_tile(trace):
    """(rows, columns, innermost rows, innermost columns) of a thread's outputs."""
    if any(i["kind"] in ("rfactor", "tensorize", "blockize") for i in trace["insts"]):
        return None
    tiles = [i["decision"] for i in trace["insts"]
             if i["kind"] in ("sample_perfect_tile", "sample_tile") and len(i.get("decision") or []) == 5]
    if len(tiles) < 2:
        return None
    a, b = tiles[-2], tiles[-1]
    return a[1] * a[3] * a[4], b[1] * b[3] * b[4], a[4], b[4]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    db = sqlite3.connect(sys.argv[1])
    gemms = {k for k, t in db.execute("select key, canonical_text from workloads") if is_fp32_gemm(t)}
    by = collections.defaultdict(list)
    for key, trace, secs in db.execute(
            "select workload_key, trace_json, median_secs from records where status = 'ok'"):
        if key in gemms:
            t = thread_tile(json.loads(trace))
            if t is not None:
                by[key].append((secs, t[0] * t[1], t))
    fastest = collections.Counter()
    count, in_top = collections.Counter(), collections.Counter()
    classes = lambda o: ">= 64" if o >= 64 else "32-63" if o >= 32 else "< 32"
    workloads = [v for v in by.values() if len(v) >= MIN_RECORDS]
    for v in workloads:
        v.sort()
        fastest[v[0][1]] += 1
        cut = v[max(0, len(v) // 20 - 1)][0]
        for secs, o, t in v:
            count[classes(o)] += 1
            in_top[classes(o)] += secs <= cut
            for o_class in (64, 128):
                if o == o_class:
                    for name, group in (("tile", t[:2]), ("innermost", t[2:])):
                        count[(o_class, name, group)] += 1
                        in_top[(o_class, name, group)] += secs <= cut
    print(f"{len(workloads)} fp32 GEMM workloads with {MIN_RECORDS} or more ok records")
    for c in ("< 32", "32-63", ">= 64"):
        if count[c]:
            print(f"outputs a thread {c}: {count[c]} records, {in_top[c] / count[c]:.3f} of them "
                  "in their workload's fastest 5%")
    print("outputs a thread of each workload's fastest record:", dict(sorted(fastest.items())))
    for o_class in (64, 128):
        for name in ("tile", "innermost"):
            groups = sorted((k for k in count if isinstance(k, tuple) and k[:2] == (o_class, name)
                             and count[k] >= 40), key=lambda k: -count[k])
            print(f"{o_class} outputs a thread, by {name}: " + "; ".join(
                f"{k[2][0]}x{k[2][1]} {count[k]} ({in_top[k] / count[k]:.3f})" for k in groups))


if __name__ == "__main__":
    main()
