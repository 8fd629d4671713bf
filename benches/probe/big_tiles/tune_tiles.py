#!/usr/bin/env python3
"""What one tune measured, by the outputs a thread computes: the records of a workload
exported as JSON lines (`tessel db export --workload W --format jsonl`), each featurized
by `tessel model features` (feature 7, log_local_elements_per_thread), then per class
how many the tune measured and the fastest. No device.

    python3 benches/probe/big_tiles/tune_tiles.py W RECORDS.jsonl [TESSEL]
"""
import collections
import json
import os
import subprocess
import sys
import tempfile


def outputs_a_thread(tessel, workload, trace):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(trace, f)
    try:
        out = subprocess.run([tessel, "model", "features", workload, "--schedule", f.name],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    value = dict(line.split() for line in out.splitlines())["log_local_elements_per_thread"]
    return round(2 ** float(value))


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    workload, path = sys.argv[1:3]
    tessel = sys.argv[3] if len(sys.argv) == 4 else "./target/release/tessel"
    classes = collections.defaultdict(list)
    for line in open(path):
        r = json.loads(line)
        if r["status"] != "ok":
            continue
        o = outputs_a_thread(tessel, workload, r["trace"])
        label = "<=16" if o <= 16 else "32" if o <= 32 else "64" if o <= 64 else ">64"
        classes[label].append(r["median_secs"])
    for label in ["<=16", "32", "64", ">64"]:
        secs = classes.get(label, [])
        best = f"{min(secs) * 1e6:.1f} us" if secs else "-"
        print(f"{label:>5} outputs a thread: {len(secs):4d} measured, fastest {best}")


if __name__ == "__main__":
    main()
