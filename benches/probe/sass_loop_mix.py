#!/usr/bin/env python3
"""The instructions of a scheduled kernel's hottest loop as the GPU runs them (SASS), with
no GPU: `tessel build --cubin` (NVRTC), then NVIDIA's disassembler `nvdisasm` (from its
PyPI wheel, installed under ~/.cache on first use, or $NVDISASM). The loop is the one,
closed by a backward branch, that holds the most FFMA/HFMA2/HMMA; printed: its length,
the share of FFMA, and the count of every other opcode, shared loads by width.

PTX is not what runs: ptxas pairs and widens shared loads that NVRTC's PTX makes a float at
a time (the fp32 ceiling's kernels load their fragments as LDS.128 in SASS whether their
PTX loads are `ld.shared.f32` or `.v4`), so counts of PTX loads say little of the kernel.

    eval "$(../shared/tools/nvrtc-local)"
    python3 benches/probe/sass_loop_mix.py WORKLOAD SCHED [SCHED...]
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

NVDISASM_WHEEL = "nvidia-cuda-nvdisasm==13.5.37"


def nvdisasm():
    if os.environ.get("NVDISASM"):
        return os.environ["NVDISASM"]
    d = os.path.expanduser("~/.cache/nvdisasm-13.5")
    path = os.path.join(d, "nvidia/cu13/bin/nvdisasm")
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "--target", d, NVDISASM_WHEEL],
                       check=True, stdout=sys.stderr)
    return path


def hottest_loop(sass):
    """The opcodes of the loop (label to backward branch) with the most multiply-adds."""
    ops, labels = [], {}
    for line in sass.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            labels[m[1]] = len(ops)
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*?);", line)
        if m:
            ops.append((m[1], m[2]))
    best = None
    for i, (op, rest) in enumerate(ops):
        target = re.search(r"\.L_x_\d+", rest) if op.startswith("BRA") else None
        if target and labels.get(target[0], i + 1) <= i:
            body = [o for o, _ in ops[labels[target[0]]:i + 1]]
            fmas = sum(o.split(".")[0] in ("FFMA", "HFMA2", "HMMA") for o in body)
            if best is None or fmas > best[0]:
                best = (fmas, body)
    return best[1] if best else []


def mix(body):
    counts = collections.Counter()
    for op in body:
        base = op.split(".")[0]
        if base == "LDS":
            base += next((w for w in (".128", ".64", ".U8", ".U16") if w in op), ".32")
        counts[base] += 1
    n = len(body) or 1
    rest = ", ".join(f"{k} {v}" for k, v in counts.most_common() if k != "FFMA")
    return f"loop of {len(body)} instructions, FFMA {counts['FFMA']} ({counts['FFMA'] / n:.1%}); {rest}"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    workload, scheds = sys.argv[1], sys.argv[2:]
    tessel = os.environ.get("TESSEL_BIN", "target/release/tessel")
    dis = nvdisasm()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        for s in scheds:
            b = subprocess.run([tessel, "build", workload, "--schedule", s, "--target", "cuda",
                                "--cubin", cubin], capture_output=True, text=True)
            if b.returncode != 0:
                print(f"{s}: build failed: {b.stderr.strip().splitlines()[-1:]}")
                continue
            regs = " ".join(re.findall(r"(\d+) registers", b.stderr + b.stdout))
            sass = subprocess.run([dis, cubin], capture_output=True, text=True, check=True).stdout
            print(f"{s} | registers {regs} | {mix(hottest_loop(sass))}")


if __name__ == "__main__":
    main()
