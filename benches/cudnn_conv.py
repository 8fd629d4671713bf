"""The cuDNN peer for conv2d rows of benches/RESULTS.md, timed on the GPU tessel ran on
(benchmark mode on: cuDNN picks its fastest algorithm for the shape):
torch.nn.functional.conv2d (cuDNN), strict fp32 (TF32 off), or f16 / bf16 tensors (cuDNN
accumulates them in f32, as tessel's `acc=f32`), median of timed runs with the L2 flushed
in between, optionally followed by relu; `nhwc` stores data and weights channels last
(`torch.channels_last`, the layout of tessel's conv2d_nhwc), which cuDNN's tensor-core
kernels read without a transpose.
Usage: python3 benches/cudnn_conv.py N C H W K R S STRIDE PAD [f16|bf16] [f32] [relu] [nhwc]
[dilation=D] (the words after PAD may come in any order: benches/gpu_suite.sh passes a
spec's values)"""
import sys
import torch
from triton.testing import do_bench

torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
n, c, h, w, k, r, s, st, p = (int(x) for x in sys.argv[1:10])
words = sys.argv[10:]
relu = "relu" in words
d = int(next((w.split("=")[1] for w in words if w.startswith("dilation=")), 1))
dtype = {"f16": torch.float16, "bf16": torch.bfloat16}.get(next((w for w in words if w in ("f16", "bf16")), None), torch.float32)
x = torch.randn(n, c, h, w, device="cuda", dtype=dtype)
wt = torch.randn(k, c, r, s, device="cuda", dtype=dtype)
if "nhwc" in words:
    x, wt = x.to(memory_format=torch.channels_last), wt.to(memory_format=torch.channels_last)
ho, wo = (h + 2 * p - d * (r - 1) - 1) // st + 1, (w + 2 * p - d * (s - 1) - 1) // st + 1
flops = 2.0 * n * k * ho * wo * c * r * s
conv = lambda: torch.nn.functional.conv2d(x, wt, stride=st, padding=p, dilation=d)
f = (lambda: torch.relu(conv())) if relu else conv
ms = do_bench(f, warmup=50, rep=300, return_mode="median")
print(f"cuDNN conv2d{'+relu' if relu else ''} {str(dtype).replace('torch.', '')}{' nhwc' if 'nhwc' in words else ''} n{n}c{c}h{h}w{w}k{k}r{r}s{s} stride{st} pad{p}{f' dilation{d}' if d > 1 else ''}: median {ms*1e3:.1f} us, {flops/ms/1e9:.2f} TFLOP/s ({torch.cuda.get_device_name()})")
