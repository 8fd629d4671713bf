#!/usr/bin/env python3
"""Whether the fastest records have blocks of whole warps: over BASE's workloads (a
database built by benches/shipped_db.sh's shipped_db) with at least MIN (50) ok records
of the plain sketch's five-level tiles, the threads of a block as the product of the
two first tiles' thread factors (a GEMM's or a conv's GEMM-like nest); how many
workloads have a block of a partial warp (threads not a multiple of 32) as their fastest
record, and the fastest such record's speed over the workload's best (median). No device.

    python3 benches/probe/big_tiles/record_warps.py BASE [MIN]
"""
import json
import sqlite3
import statistics
import sys
from collections import defaultdict


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    least = int(sys.argv[2]) if len(sys.argv) == 3 else 50
    rows = sqlite3.connect(sys.argv[1]).execute(
        "select workload_key, trace_json, median_secs from records where status = 'ok'")
    per = defaultdict(list)
    for key, trace, secs in rows:
        tiles = [i["decision"] for i in json.loads(trace)["insts"]
                 if i["kind"] == "sample_perfect_tile" and i.get("attrs", {}).get("n") == 5]
        if len(tiles) < 2 or not all(isinstance(d, list) and len(d) == 5 for d in tiles[:2]):
            continue
        per[key].append((secs, tiles[0][2] * tiles[1][2]))
    partial_best, speeds = 0, []
    counted = [records for records in per.values() if len(records) >= least]
    for records in counted:
        records.sort()
        best = records[0][0]
        partial_best += records[0][1] % 32 != 0
        partial = [secs for secs, threads in records if threads % 32]
        if partial:
            speeds.append(best / min(partial))
    print(f"{len(counted)} workloads with {least}+ such records; fastest record a partial "
          f"warp's block: {partial_best}; fastest partial-warp record over the best: median "
          f"{statistics.median(speeds):.2f} ({len(speeds)} workloads with one)")


if __name__ == "__main__":
    main()
