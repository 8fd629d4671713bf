#!/usr/bin/env python3
"""Two network tunes' tasks side by side: per task its weighted best latency and trials
in each run, and each run's estimate at a tenth, a quarter, half, three quarters and all
of its rounds (the figures of benches/RESULTS.md's scheduler tables).

    python3 benches/scheduler_tasks.py A.json B.json

A.json, B.json: `tessel tune --network ... --report-json` reports, e.g. the gradient.json
and round-robin.json that benches/network_schedulers.sh writes per seed.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def checkpoints(report):
    est = [r["estimated_seconds"] for r in report["rounds"]]
    n = len(est)
    return [est[max(0, int(n * f) - 1)] * 1e6 for f in (0.1, 0.25, 0.5, 0.75, 1.0)]


def main():
    a_path, b_path = sys.argv[1:3]
    a, b = load(a_path), load(b_path)
    for name, r in ((a_path, a), (b_path, b)):
        marks = ", ".join(f"{x:.1f}" for x in checkpoints(r))
        print(f"{name}: estimate (us) at 10/25/50/75/100% of its rounds: {marks}")
    by_task = {t["task"]: t for t in b["tasks"]}
    rows = []
    for t in a["tasks"]:
        u = by_task.get(t["task"])
        if u is None:
            continue
        rows.append((t["weighted_seconds"] * 1e6, u["weighted_seconds"] * 1e6,
                     t["trials"], u["trials"], t["weight"], t["task"]))
    rows.sort(key=lambda r: -r[1])
    print("| task | weight | A: weighted us, trials | B: weighted us, trials |")
    print("| --- | --- | --- | --- |")
    for wa, wb, ta, tb, w, task in rows:
        print(f"| {task} | {w} | {wa:.1f}, {ta} | {wb:.1f}, {tb} |")
    print(f"| sum | | {sum(r[0] for r in rows):.1f} | {sum(r[1] for r in rows):.1f} |")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # piped into head
        sys.exit(0)
