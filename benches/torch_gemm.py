"""The PyTorch cross-check of the GEMM peer (benches/RESULTS.md): torch.matmul (cuBLAS
through cublasLt), strict fp32 (TF32 off), median of timed runs with the L2 flushed in
between (triton's do_bench), in the stored layouts tessel's presets use.
Usage: python3 benches/torch_gemm.py M N K [nn|nt|tn] [dense]
  dense: relu(X @ W^T + bias) with W stored [N, K] (tessel's dense_bias_relu)."""
import sys
import torch
from triton.testing import do_bench

torch.backends.cuda.matmul.allow_tf32 = False
m, n, k = (int(x) for x in sys.argv[1:4])
layout = sys.argv[4] if len(sys.argv) > 4 else "nn"
dense = len(sys.argv) > 5 and sys.argv[5] == "dense"
dev = "cuda"
a = torch.randn(k, m, device=dev).t() if layout == "tn" else torch.randn(m, k, device=dev)
b = torch.randn(n, k, device=dev).t() if (layout == "nt" or dense) else torch.randn(k, n, device=dev)
if dense:
    bias = torch.randn(n, device=dev)
    f = lambda: torch.relu(torch.addmm(bias, a, b))
    name = f"dense_bias_relu {m}x{n}x{k}"
else:
    f = lambda: a @ b
    name = f"gemm {layout} {m}x{n}x{k}"
ms = do_bench(f, warmup=50, rep=300, return_mode="median")
flops = 2.0 * m * n * k
print(f"torch {name}: median {ms*1e3:.1f} us, {flops/ms/1e9:.2f} TFLOP/s ({torch.cuda.get_device_name()})")
