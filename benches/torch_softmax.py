"""The PyTorch peer of the softmax rows of benches/RESULTS.md: torch.softmax over the last
axis, f32, median with the L2 flushed in between (triton's do_bench), on the GPU tessel ran
on.

Usage: python3 benches/torch_softmax.py [SHAPE...]   SHAPE: RxC or BxRxC (default 4096x1024
512x8192); or a workload file benches/softmax_*.tw, whose input's shape is read."""
import re
import sys

import torch
from triton.testing import do_bench


def shape_of(arg):
    if arg.endswith(".tw"):
        text = open(arg).read()
        dims = re.search(r"input X: f32\[([0-9, ]+)\]", text).group(1)
        return [int(d) for d in dims.split(",")]
    return [int(d) for d in arg.split("x")]


for arg in sys.argv[1:] or ["4096x1024", "512x8192"]:
    shape = shape_of(arg)
    x = torch.randn(*shape, device="cuda")
    ms = do_bench(lambda: torch.softmax(x, dim=-1), warmup=50, rep=300, return_mode="median")
    name = "x".join(str(d) for d in shape)
    print(f"torch.softmax {name} f32: median {ms*1e3:.1f} us ({torch.cuda.get_device_name()})")
