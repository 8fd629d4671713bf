"""The cuDNN peer for conv2d rows of benches/RESULTS.md, timed on the GPU tessel ran on
(benchmark mode on: cuDNN picks its fastest algorithm for the shape):
torch.nn.functional.conv2d (cuDNN), strict fp32 (TF32 off), median of timed runs with the
L2 flushed in between, optionally followed by relu.
Usage: python3 benches/cudnn_conv.py N C H W K R S STRIDE PAD [relu]"""
import sys
import torch
from triton.testing import do_bench

torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
n, c, h, w, k, r, s, st, p = (int(x) for x in sys.argv[1:10])
relu = len(sys.argv) > 10 and sys.argv[10] == "relu"
x = torch.randn(n, c, h, w, device="cuda")
wt = torch.randn(k, c, r, s, device="cuda")
ho, wo = (h + 2 * p - r) // st + 1, (w + 2 * p - s) // st + 1
flops = 2.0 * n * k * ho * wo * c * r * s
f = (lambda: torch.relu(torch.nn.functional.conv2d(x, wt, stride=st, padding=p))) if relu else (lambda: torch.nn.functional.conv2d(x, wt, stride=st, padding=p))
ms = do_bench(f, warmup=50, rep=300, return_mode="median")
print(f"cuDNN conv2d{'+relu' if relu else ''} n{n}c{c}h{h}w{w}k{k}r{r}s{s} stride{st} pad{p}: median {ms*1e3:.1f} us, {flops/ms/1e9:.2f} TFLOP/s ({torch.cuda.get_device_name()})")
