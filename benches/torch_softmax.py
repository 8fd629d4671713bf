"""The PyTorch peer of the row workloads of benches/RESULTS.md (softmaxes, layer and RMS
norms over the last axis, f32): median with the L2 flushed in between (triton's
do_bench), on the GPU tessel ran on.

Usage: python3 benches/torch_softmax.py [SHAPE | FILE ...]
  SHAPE: RxC or BxRxC, a softmax (default 4096x1024 512x8192); FILE: a workload file
  (benches/softmax_*.tw, layer_norm_*.tw, rms_norm_*.tw) whose name line and input X's
  shape are read: `softmax`/`attention_softmax` -> torch.softmax, `layer_norm` ->
  F.layer_norm (eps 1e-5, weight and bias), `rms_norm` -> F.rms_norm (eps 1e-6, weight)."""
import re
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench


def parse(arg):
    if not arg.endswith(".tw"):
        return "softmax", [int(d) for d in arg.split("x")]
    text = open(arg).read()
    kind = re.search(r"^workload (\w+)", text, re.M).group(1)
    dims = re.search(r"input X: f32\[([0-9, ]+)\]", text).group(1)
    return kind, [int(d) for d in dims.split(",")]


for arg in sys.argv[1:] or ["4096x1024", "512x8192"]:
    kind, shape = parse(arg)
    x = torch.randn(*shape, device="cuda")
    w = torch.randn(shape[-1], device="cuda")
    b = torch.randn(shape[-1], device="cuda")
    op = {
        "softmax": lambda: torch.softmax(x, dim=-1),
        "attention_softmax": lambda: torch.softmax(x, dim=-1),
        "layer_norm": lambda: F.layer_norm(x, shape[-1:], w, b, eps=1e-5),
        "rms_norm": lambda: F.rms_norm(x, shape[-1:], w, eps=1e-6),
    }[kind]
    ms = do_bench(op, warmup=50, rep=300, return_mode="median")
    name = "x".join(str(d) for d in shape)
    print(f"torch {kind} {name} f32: median {ms*1e3:.1f} us ({torch.cuda.get_device_name()})")
