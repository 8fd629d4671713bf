#!/usr/bin/env python3
"""The workload specs of a set file (benches/validation.toml, tuning.toml, training.toml),
one a line, for the bench scripts that tune them.

    benches/set_workloads.py SET [--suffix S] [--first N] [--count M] [--layouts L,...] KIND...

KIND: the set's tables (gemm, conv, tensor_core; `workload` for the suite's file,
bench/suite.toml, whose entries name theirs `name`), in order; --first/--count a slice of
them; --layouts keeps the GEMMs of those layouts (`nn,tn`); --suffix is appended to every
spec (`,math=tf32`: the f32 GEMMs on TF32 tensor cores).
"""
import argparse
import re
import tomllib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("set")
    ap.add_argument("kinds", nargs="+")
    ap.add_argument("--suffix", default="")
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=None)
    ap.add_argument("--layouts", default="")
    a = ap.parse_args()
    with open(a.set, "rb") as f:
        doc = tomllib.load(f)
    specs = [e.get("workload", e.get("name")) for kind in a.kinds for e in doc[kind]]
    end = None if a.count is None else a.first + a.count
    specs = specs[a.first:end]
    if a.layouts:
        keep = set(a.layouts.split(","))
        specs = [s for s in specs if (m := re.search(r"layout=(\w+)", s)) and m.group(1) in keep]
    for s in specs:
        print(s + a.suffix)


if __name__ == "__main__":
    main()
