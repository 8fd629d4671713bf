#!/usr/bin/env python3
"""Task-scheduler policies replayed offline on recorded tuning curves (issue 15).

    python3 benches/scheduler_replay.py [--rounds N] DIR...

(benches/scheduler_curves.tar.gz holds the recorded runs of benches/RESULTS.md: ResNet-50
batch 1 at 3,000 trials, seeds 14-18 and 22 from an empty start, and at 1,000 trials,
seeds 41-43; unpack it and pass its folders.)

Each DIR holds one seed of `benches/network_schedulers.sh`: warm.json (the warm-up run's
report) and gradient.json, round-robin.json (each policy resumed from that warm-up). A
task's curve is its best latency after each round it had; the curve a policy is replayed
on is, per task, the longer of the two runs' curves (held flat past its end, so a policy
that gives a task more rounds than either run did gains nothing from them: the replay is
pessimistic there). Every policy gets the rounds the runs had after the warm-up, or the
first N of them (`--rounds N`: a smaller budget, on the curves' beginnings). Printed
per seed: each policy's estimated network latency (sum of weight x best) at the end, and
the recorded figures of the two runs; then the geomean of each policy over round-robin.
Beside the policies, the bound no scheduler can pass on these curves: the allocation of
the same rounds that minimizes the final estimate knowing every curve in advance
(`best_allocation`, exact by dynamic programming over the tasks).

This is no measurement: a real run's next round depends on the records before it, and
the curves came from two particular allocations. It ranks policies cheaply before a
device run compares the promising ones (`benches/network_schedulers.sh`).

The gradient formula is the tuner's (`src/network/scheduler.rs`: Ansor's, alpha 0.2,
window 3, the similar-task estimate with beta 2 among tasks of one operator), without
its epsilon (deterministic); `t_i` counts the rounds the database had of a task before
the run (its records fed back at the start, in rounds of 16), as the tuner does.
"""
import json
import math
import sys
from pathlib import Path

BATCH = 16


def load(d):
    warm = json.load(open(d / "warm.json"))
    runs = {p: json.load(open(d / f"{p}.json")) for p in ("gradient", "round-robin")}
    tasks = []
    for t in runs["gradient"]["tasks"]:
        rep = t["report"]
        tasks.append({
            "name": t["task"],
            "weight": float(t["weight"]),
            "flops": float(rep.get("flops") or 0.0),
            "group": t["task"].split(":")[0],
            "prior": int(rep.get("fed_back_at_start") or 0) // BATCH,
        })
    start = [t["best_seconds"] for t in warm["tasks"]]
    curves = {}
    for p, run in runs.items():
        c = [[] for _ in tasks]
        for r in run["rounds"]:
            c[r["task"]].append(r["task_best_seconds"])
        curves[p] = c
    rounds = len(runs["round-robin"]["rounds"])
    recorded = {p: run["estimated_seconds"] for p, run in runs.items()}
    return tasks, start, curves, rounds, recorded


def simulate(tasks, start, curve, rounds, choose):
    n = [0] * len(tasks)
    hist = [[] for _ in tasks]  # best after each round in this run

    def best(i):
        return hist[i][-1] if hist[i] else start[i]

    for _ in range(rounds):
        i = choose(tasks, n, hist, best)
        n[i] += 1
        c = curve[i]
        value = c[n[i] - 1] if n[i] <= len(c) else (c[-1] if c else start[i])
        hist[i].append(min(value, best(i)))
    return sum(t["weight"] * best(i) for i, t in enumerate(tasks)), n


def best_allocation(tasks, start, curve, rounds):
    """The least final estimate any split of `rounds` over the tasks reaches on these
    curves (each task's best after n rounds known in advance): a knapsack over tasks,
    `reach[u]` the least weighted sum of the tasks so far with u rounds among them.
    Returns it and the rounds of each task."""

    def after(i, n):
        held = curve[i][:n] + ([curve[i][-1]] if n > len(curve[i]) and curve[i] else [])
        return tasks[i]["weight"] * min([start[i]] + held)

    reach, splits = [0.0] + [math.inf] * rounds, [[] for _ in range(rounds + 1)]
    for i in range(len(tasks)):
        cost = [after(i, n) for n in range(rounds + 1)]
        nxt, nsplits = [math.inf] * (rounds + 1), [None] * (rounds + 1)
        for used, base in enumerate(reach):
            for n in range(rounds + 1 - used):
                if base + cost[n] < nxt[used + n]:
                    nxt[used + n], nsplits[used + n] = base + cost[n], splits[used] + [n]
        reach, splits = nxt, nsplits
    return reach[rounds], splits[rounds]


def round_robin(tasks, n, hist, best):
    return min(range(len(tasks)), key=lambda i: (n[i], i))


def gradient_policy(alpha=0.2, window=3, beta=2.0, min_rounds=0, plateau=None):
    """Ansor's gradient; `min_rounds`: every task gets that many rounds first (round
    robin); `plateau`: a task's forward estimate is scaled by (1 + the rounds of its
    last `plateau` that improved it) / (1 + plateau), so a task that stopped improving
    is expected to gain less."""

    def choose(tasks, n, hist, best):
        if min(n) < min_rounds:
            return round_robin(tasks, n, hist, best)
        rates = {}
        for i, t in enumerate(tasks):
            if t["flops"] > 0:
                g = t["group"]
                rates[g] = max(rates.get(g, 0.0), t["flops"] / best(i))
        sizes = {}
        for t in tasks:
            sizes[t["group"]] = sizes.get(t["group"], 0) + 1
        grads = []
        for i, t in enumerate(tasks):
            b = best(i)
            h = hist[i]
            k = len(h)
            backward = (h[-1] - h[-1 - window]) / window if k > window else 0.0
            r = max(t["prior"] + k + 1, 1)  # the warm-up round counts
            again = b - b / r
            if sizes[t["group"]] > 1 and rates.get(t["group"], 0) > 0 and t["flops"] > 0:
                again = min(again, beta * t["flops"] / rates[t["group"]])
            forward = again - b
            if plateau and k >= plateau:
                moved = sum(1 for a, c in zip(h[-plateau - 1:-1], h[-plateau:]) if c < a)
                forward *= (moved + 1) / (plateau + 1)
            grads.append(t["weight"] * (alpha * backward + (1 - alpha) * forward))
        return min(range(len(tasks)), key=lambda i: (grads[i], i))

    return choose


# The label of `best_allocation` in the output.
BOUND = "bound: the best allocation, curves known"

POLICIES = {
    "round-robin": round_robin,
    "gradient": gradient_policy(),
    "gradient, 3 rounds each first": gradient_policy(min_rounds=3),
    "gradient, alpha 0.5": gradient_policy(alpha=0.5),
    "gradient, plateau 3": gradient_policy(plateau=3),
    "gradient, plateau 3, 2 rounds each first": gradient_policy(plateau=3, min_rounds=2),
}


def main(args):
    limit = None
    if args[:1] == ["--rounds"]:
        limit, args = int(args[1]), args[2:]
    ratios = {p: [] for p in [*POLICIES, BOUND]}
    for d in map(Path, args):
        tasks, start, curves, rounds, recorded = load(d)
        rounds = min(rounds, limit or rounds)
        longer = [max(g, r, key=len) for g, r in zip(curves["gradient"], curves["round-robin"])]
        print(f"{d}: {len(tasks)} tasks, {rounds} rounds; recorded gradient "
              f"{recorded['gradient'] * 1e6:.1f} us, round-robin "
              f"{recorded['round-robin'] * 1e6:.1f} us")
        own = {
            "round-robin": simulate(tasks, start, curves["round-robin"], rounds, round_robin)[0],
            "gradient": simulate(tasks, start, curves["gradient"], rounds, POLICIES["gradient"])[0],
        }
        print(f"  replayed on its own run's curves: gradient {own['gradient'] * 1e6:.1f} us, "
              f"round-robin {own['round-robin'] * 1e6:.1f} us")
        base = None
        for p, choose in POLICIES.items():
            est, n = simulate(tasks, start, longer, rounds, choose)
            base = base or est
            ratios[p].append(est / base)
            print(f"  {p:45s} {est * 1e6:8.1f} us  {est / base:.3f}  rounds {min(n)}-{max(n)}")
        est, n = best_allocation(tasks, start, longer, rounds)
        ratios[BOUND].append(est / base)
        print(f"  {BOUND:45s} {est * 1e6:8.1f} us  {est / base:.3f}  rounds {min(n)}-{max(n)}")
    print("geomean over round-robin (< 1: ahead):")
    for p, r in ratios.items():
        print(f"  {p:45s} {math.exp(sum(map(math.log, r)) / len(r)):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
