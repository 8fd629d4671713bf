"""Which cuDNN kernels PyTorch runs for fp32 convs (benchmark mode, TF32 off): each conv
run 20 times to let cuDNN pick, then ten calls under torch.profiler; prints per kernel the
calls and the mean device time. Convs as N C H W K R STRIDE PAD (square windows), or, with
no arguments, the suite's batch-16 3x3 conv and the convs benches/RESULTS.md names
(2026-12-02).

    python3 benches/cudnn_kernels.py [N,C,H,W,K,R,STRIDE,PAD ...]
"""
import sys
import torch
from torch.profiler import profile, ProfilerActivity

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
DEFAULT = [(16, 64, 56, 56, 64, 3, 1, 1), (8, 25, 113, 113, 463, 7, 1, 3),
           (11, 135, 83, 83, 403, 5, 1, 2), (16, 128, 28, 28, 128, 3, 1, 1),
           (8, 256, 14, 14, 256, 3, 1, 1), (1, 64, 56, 56, 64, 3, 1, 1)]
shapes = [tuple(int(v) for v in a.split(",")) for a in sys.argv[1:]] or DEFAULT
for n, c, h, w, k, r, st, pad in shapes:
    x = torch.randn(n, c, h, w, device="cuda")
    wt = torch.randn(k, c, r, r, device="cuda")
    f = lambda: torch.nn.functional.conv2d(x, wt, stride=st, padding=pad)
    for _ in range(20):
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            f()
        torch.cuda.synchronize()
    print(f"== conv n{n} c{c} {h}x{w} k{k} {r}x{r} s{st} p{pad}")
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" or "CUDA" in str(e.device_type):
            t = e.device_time_total / e.count if e.count else 0
            print(f"  {e.count:4d} x {t:9.1f} us  {e.key[:150]}")
