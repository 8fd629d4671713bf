#!/usr/bin/env python3
"""The instructions of a scheduled kernel's hottest loop as the GPU runs them (SASS), with
no GPU: `tessel build --cubin` (NVRTC), then NVIDIA's disassembler `nvdisasm` (from its
PyPI wheel, installed under ~/.cache on first use, or $NVDISASM). The loop is the one,
closed by a backward branch, that holds the most FFMA/HFMA2/HMMA (the shortest of those
with as many: an inner loop, not the loop around it); printed: its length, the share of
FFMA, and the count of every other opcode, shared loads by width; then the same of the
loop around it, if any (where the hottest is a rolled loop over a tile's steps, the main
loop with the fetch, holding one copy of the inner loop's body).

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


def multiply_add(op, operands):
    """Whether an instruction multiplies and adds: FFMA, HMMA, HFMA2 but its move idiom
    (`HFMA2.MMA R, -RZ, RZ, ...`, which ptxas uses to load a constant)."""
    base = op.split(".")[0]
    return base in ("FFMA", "HMMA") or (base == "HFMA2" and "-RZ, RZ" not in operands)


def loops(sass):
    """Every loop of the SASS, label to backward branch: (first, last) instruction index,
    with the instructions as (opcode, operands)."""
    ops, labels = [], {}
    for line in sass.splitlines():
        m = re.match(r"\s*(\.L_x_\d+):", line)
        if m:
            labels[m[1]] = len(ops)
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*?);", line)
        if m:
            ops.append((m[1], m[2]))
    spans = []
    for i, (op, rest) in enumerate(ops):
        target = re.search(r"\.L_x_\d+", rest) if op.startswith("BRA") else None
        if target and labels.get(target[0], i + 1) <= i:
            spans.append((labels[target[0]], i))
    return spans, ops


def hottest_loops(sass):
    """The opcodes of the loop with the most multiply-adds (of loops with as many, an
    outer loop around a rolled inner one, the shortest), and of the shortest loop around
    it (the main loop, with the fetch, when the hottest is a rolled loop over a tile's
    steps), or None."""
    spans, ops = loops(sass)
    if not spans:
        return [], None
    fmas = lambda span: sum(multiply_add(*ops[k]) for k in range(span[0], span[1] + 1))
    hot = max(spans, key=lambda sp: (fmas(sp), sp[0] - sp[1]))
    around = [sp for sp in spans if sp[0] <= hot[0] and hot[1] <= sp[1] and sp != hot]
    outer = min(around, key=lambda sp: sp[1] - sp[0]) if around else None
    body = lambda sp: [o for o, _ in ops[sp[0]:sp[1] + 1]]
    return body(hot), (body(outer) if outer else None)


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
            hot, outer = hottest_loops(sass)
            print(f"{s} | registers {regs} | {mix(hot)}")
            if outer:
                print(f"    the loop around it: {mix(outer)}")


if __name__ == "__main__":
    main()
