"""The PyTorch peer of the row workloads of benches/RESULTS.md (softmaxes, layer and RMS
norms over the last axis, f32): median with the L2 flushed in between (triton's
do_bench), on the GPU tessel ran on.

Usage: python3 benches/torch_softmax.py [SHAPE | FILE ...]
  SHAPE: RxC or BxRxC, a softmax (default 4096x1024 512x8192); FILE: a workload file
  (benches/softmax_*.tw, layer_norm_*.tw, rms_norm_*.tw, attention_softmax_masked_*.tw)
  whose name line, inputs' shapes and constants are read: `softmax`/`attention_softmax`
  -> torch.softmax, `attention_softmax_masked` -> torch.softmax(S * scale + mask) with the
  mask broadcast over heads and rows, `layer_norm` -> F.layer_norm (weight and bias),
  `add_layer_norm` -> F.layer_norm(X + R) (a residual add, then the norm), `rms_norm` ->
  F.rms_norm (weight); the norms' eps as the file's sqrt adds it; and reductions over
  other axes: `column_softmax` -> torch.softmax(X, dim=0), `channel_sumsq` -> (X * X)
  summed over dims 0, 2, 3, `channel_norm` -> X over the root mean square of dim 1, times
  the weight, `global_avg_pool` -> X.mean over dims 2, 3.
`row_op(text)` gives the call for a workload's text (benches/network_peers.py uses it)."""
import re
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench


def inputs(text):
    return {m[0]: [int(d) for d in m[1].split(",")]
            for m in re.findall(r"^input (\w+): f32\[([0-9, ]+)\]", text, re.M)}


def row_op(text):
    """The PyTorch call computing the workload `text` (None for another kind of workload)."""
    kind = re.search(r"^workload (\w+)", text, re.M)
    kind = kind[1] if kind else ""
    shapes = inputs(text)
    t = {name: torch.randn(*shape, device="cuda") for name, shape in shapes.items()}
    eps = re.search(r"sqrt\([^\n]*\+ ([0-9.e-]+)\)", text)
    eps = float(eps[1]) if eps else None
    if kind in ("softmax", "attention_softmax"):
        x = next(iter(t.values()))
        return lambda: torch.softmax(x, dim=-1)
    if kind == "attention_softmax_masked":
        scale = float(re.search(r"\* ([0-9.]+) \+ mask", text)[1])
        s, mask = t["S"], t["mask"][:, None, None, :]
        return lambda: torch.softmax(s * scale + mask, dim=-1)
    if kind == "layer_norm":
        x = t["X"]
        return lambda: F.layer_norm(x, x.shape[-1:], t["G"], t["B"], eps=eps)
    if kind == "add_layer_norm":
        x, r = t["X"], t["R"]
        return lambda: F.layer_norm(x + r, x.shape[-1:], t["G"], t["B"], eps=eps)
    # Reductions over axes other than the innermost (benches/reductions_run.sh).
    if kind == "column_softmax":
        x = t["X"]
        return lambda: torch.softmax(x, dim=0)
    if kind == "channel_sumsq":
        x = t["X"]
        return lambda: (x * x).sum(dim=(0, 2, 3))
    if kind == "channel_norm":
        x, g = t["X"], t["G"]
        return lambda: x / torch.sqrt((x * x).mean(dim=1, keepdim=True) + eps) * g[None, :, None]
    if kind == "global_avg_pool":
        x = t["X"]
        return lambda: x.mean(dim=(2, 3))
    if kind == "rms_norm":
        x = t["X"]
        return lambda: F.rms_norm(x, x.shape[-1:], t["G"], eps=eps)
    return None


def main():
    for arg in sys.argv[1:] or ["4096x1024", "512x8192"]:
        if arg.endswith(".tw"):
            text = open(arg).read()
        else:
            text = f"workload softmax\ninput X: f32[{arg.replace('x', ', ')}]\n"
        kind = re.search(r"^workload (\w+)", text, re.M)[1]
        op = row_op(text)
        ms = do_bench(op, warmup=50, rep=300, return_mode="median")
        name = "x".join(str(d) for d in next(iter(inputs(text).values())))
        print(f"torch {kind} {name} f32: median {ms*1e3:.1f} us ({torch.cuda.get_device_name()})")


if __name__ == "__main__":
    main()
