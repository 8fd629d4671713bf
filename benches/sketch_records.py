#!/usr/bin/env python3
"""Which tensor-core path a database's records took: per kind (wgmma, mma.sync, neither:
FFMA), the records that passed and the fastest of them.

    tessel db export --db DB --out R.jsonl --target cuda --format jsonl
    python3 benches/sketch_records.py R.jsonl
"""
import json
import sys


def kind(trace: str) -> str:
    if "wgmma_sync" in trace:
        return "wgmma"
    if "mma_sync" in trace:
        return "mma.sync"
    return "ffma"


best = {"mma.sync": [], "wgmma": [], "ffma": []}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("status") == "ok" and r.get("median_secs"):
        best[kind(json.dumps(r.get("trace", "")))].append(r["median_secs"])
for k, v in best.items():
    fastest = f"{min(v) * 1e6:.1f} us" if v else "-"
    print(f"{k:9} {len(v):4} ok, fastest {fastest}")
