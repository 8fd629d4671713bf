#!/usr/bin/env python3
"""The table of a tuning run from the logs of benches/gpu_suite.sh (what
benches/validation_run.sh prints): per workload its tuning time, candidates a second,
tessel's TFLOP/s as `tessel run` rebuilt and timed its best, the peer's (cublasLt in the
same process, or cuDNN through PyTorch) and the ratio; then the geomean of the ratios
of the GEMMs and of the convs, their least, and how many are at 0.8x / 1.0x or more.

    python3 benches/suite_table.py LOG...
"""
import math
import re
import sys


def rows(text):
    for block in re.split(r"^== ", text, flags=re.M)[1:]:
        name = block.split(" (")[0]
        get = lambda pattern: re.search(pattern, block)
        tuned = get(r"stopped .* after \d+ rounds, ([\d.]+) s")
        rate = get(r"\(\d+ ok, ([\d.]+)/s\)")
        speed = get(r"\nspeed\s+([\d.]+) TFLOP/s")
        lt = get(r"\npeer .*\(([\d.]+) TFLOP/s\)")
        dnn = get(r"\ncuDNN .*median [\d.]+ us, ([\d.]+) TFLOP/s")
        if not speed or not (lt or dnn):
            print(f"| {name} | no best or no peer timed | | | | |")
            continue
        peer = float((lt or dnn).group(1))
        yield name, tuned and tuned.group(1), rate and rate.group(1), float(speed.group(1)), peer, bool(dnn)


def main():
    table = [r for path in sys.argv[1:] for r in rows(open(path).read())]
    print("| workload | tuning | cand/s | tessel TFLOP/s | peer TFLOP/s | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, tuned, rate, speed, peer, conv in table:
        peer_name = "cuDNN" if conv else "cublasLt"
        print(f"| {name} | {tuned} s | {rate} | {speed:.2f} | {peer:.2f} ({peer_name}) | **{speed / peer:.2f}x** |")
    for conv, kind in ((False, "GEMMs"), (True, "convs")):
        ratios = [s / p for _, _, _, s, p, c in table if c == conv]
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"{kind}: {len(ratios)}, geomean {geo:.3f}x, least {min(ratios):.2f}x, "
                  f">= 0.8x: {sum(r >= 0.8 for r in ratios)}, >= 1.0x: {sum(r >= 1.0 for r in ratios)}")


if __name__ == "__main__":
    main()
