"""The PyTorch peer of the softmax rows of benches/RESULTS.md: torch.softmax over rows, f32,
median with the L2 flushed in between (triton's do_bench), on the GPU tessel ran on.
Usage: python3 benches/torch_softmax.py"""
import torch
from triton.testing import do_bench
for rows, cols in [(4096, 1024), (512, 8192)]:
    x = torch.randn(rows, cols, device="cuda")
    ms = do_bench(lambda: torch.softmax(x, dim=1), warmup=50, rep=300, return_mode="median")
    print(f"torch.softmax {rows}x{cols} f32: median {ms*1e3:.1f} us ({torch.cuda.get_device_name()})")
