#!/usr/bin/env python3
"""The library peers of benches/cpu_blas.sh on the host CPU: warm-up, then the median of
back-to-back timed runs. `tessel run` evicts its buffers (clflush) before each timed
run; the peers run with warm caches (flushing 2x the LLC from Python between runs left
OpenBLAS's threads asleep and timed their wake-up instead), which favours the peers;
`tessel run --warm` times tessel the peers' way. Prints one line per peer: `peer NAME
MEDIAN_SECONDS`.

  cpu_peers.py WORKLOAD THREADS
  WORKLOAD: matmul:MxNxK or matmul:m=M,n=N,k=K[,layout=nn|nt|tn|tt], or
  conv2d_nchw:n=..,c=..,h=..,w=..,k=..,r=..,s=..,stride=1,pad=P, conv2d_nhwc:(the same), or
  dense_bias_relu:m=M,n=N,k=K, dense_bias_gelu:m=M,n=N,k=K (GELU's tanh form, as
  benches/dense_bias_gelu_128x3072x768.tw), or softmax:ROWSxCOLS (over each row, as
  benches/softmax_*.tw), softmax:HxRxC (a batch of
  heads), layer_norm:RxC, rms_norm:RxC (as benches/layer_norm_*.tw, rms_norm_*.tw)

GEMMs: numpy's matmul (OpenBLAS sgemm). Dense layers: the same, then the bias and relu
in place, and PyTorch's `linear` (its sgemm). Convs: PyTorch's conv2d (oneDNN) when torch
imports (an NHWC conv on channels-last tensors), and numpy im2col + OpenBLAS sgemm. `dense_bias_gelu`: PyTorch's `linear` then
`gelu(approximate="tanh")`. Softmax: PyTorch's `softmax` and numpy's (max, exp, sum,
divide, in place where it can). THREADS sets OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS and torch.set_num_threads before the libraries load.
"""
import os
import sys
import time

spec, threads = sys.argv[1], sys.argv[2]
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = threads

import numpy as np  # noqa: E402

def timed(fn, runs=30, max_seconds=3.0):
    fn()
    start = time.perf_counter()
    while time.perf_counter() - start < 0.2:
        fn()
    times = []
    begin = time.perf_counter()
    while len(times) < 5 or (len(times) < runs and time.perf_counter() - begin < max_seconds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


rng = np.random.default_rng(0)
kind, _, args = spec.partition(":")
if kind == "matmul":
    # `matmul:MxNxK` or `matmul:m=M,n=N,k=K[,layout=nt|tn|tt]`: A stored [k, m] where the
    # layout's first letter is t, B stored [n, k] where its second is; numpy hands the
    # transposed views to BLAS as they are (its transpose flags, no copy).
    if "=" in args:
        p = dict(kv.split("=") for kv in args.split(","))
        m, n, k, layout = int(p["m"]), int(p["n"]), int(p["k"]), p.get("layout", "nn")
    else:
        (m, n, k), layout = (int(x) for x in args.split("x")), "nn"
    a = rng.standard_normal((m, k) if layout[0] == "n" else (k, m), dtype=np.float32)
    b = rng.standard_normal((k, n) if layout[1] == "n" else (n, k), dtype=np.float32)
    a, b = (a if layout[0] == "n" else a.T), (b if layout[1] == "n" else b.T)
    c = np.empty((m, n), dtype=np.float32)
    print(f"peer numpy-openblas {timed(lambda: np.matmul(a, b, out=c)):.9f}")
elif kind in ("conv2d_nchw", "conv2d_nhwc"):
    p = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in args.split(",")}
    n, c, h, w, k, r, s = (p[x] for x in "nchwkrs")
    stride, pad = p.get("stride", 1), p.get("pad", 0)
    nhwc = kind == "conv2d_nhwc"
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((k, c, r, s), dtype=np.float32)
    oh, ow = (h + 2 * pad - r) // stride + 1, (w + 2 * pad - s) // stride + 1
    try:
        import torch

        torch.set_num_threads(int(threads))
        tx, tw = torch.from_numpy(x), torch.from_numpy(wt)
        if nhwc:
            # Data and weights stored channels last, as the NHWC workload stores them;
            # oneDNN then computes and returns channels last.
            tx = tx.contiguous(memory_format=torch.channels_last)
            tw = tw.contiguous(memory_format=torch.channels_last)
        with torch.no_grad():
            f = lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)  # noqa: E731
            print(f"peer torch-{torch.__version__}-onednn {timed(f):.9f}")
    except ImportError:
        print("peer torch unavailable (no PyTorch on this machine)")

    if nhwc:
        x_nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        w_rsck = np.ascontiguousarray(wt.transpose(2, 3, 1, 0)).reshape(r * s * c, k)

        def im2col_gemm():
            xp = np.pad(x_nhwc, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            sn, sh, sw, sc = xp.strides
            cols = np.lib.stride_tricks.as_strided(
                xp, (n, oh, ow, r, s, c), (sn, sh * stride, sw * stride, sh, sw, sc)
            ).reshape(n * oh * ow, r * s * c)
            return np.matmul(cols, w_rsck)
    else:
        def im2col_gemm():
            xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
            sn, sc, sh, sw = xp.strides
            cols = np.lib.stride_tricks.as_strided(
                xp, (n, c, r, s, oh, ow), (sn, sc, sh, sw, sh * stride, sw * stride)
            ).reshape(n, c * r * s, oh * ow)
            return np.matmul(wt.reshape(k, c * r * s), cols)

    print(f"peer numpy-im2col-openblas {timed(im2col_gemm):.9f}")
elif kind == "dense_bias_relu":
    # relu(X W^T + bias), W stored [n, k] as a PyTorch Linear layer's weight: numpy's
    # matmul of the transposed view (OpenBLAS sgemm, no copy) then the bias and relu in
    # place, and PyTorch's `linear` + `relu_` when torch imports.
    p = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in args.split(",")}
    m, n, k = p["m"], p["n"], p["k"]
    x = rng.standard_normal((m, k), dtype=np.float32)
    wt = rng.standard_normal((n, k), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    c = np.empty((m, n), dtype=np.float32)

    def dense():
        out = np.matmul(x, wt.T, out=c)
        out += bias
        np.maximum(out, 0.0, out=out)

    print(f"peer numpy-openblas {timed(dense):.9f}")
    try:
        import torch

        torch.set_num_threads(int(threads))
        tx, tw, tb = torch.from_numpy(x), torch.from_numpy(wt), torch.from_numpy(bias)
        with torch.no_grad():
            f = lambda: torch.nn.functional.linear(tx, tw, tb).relu_()  # noqa: E731
            print(f"peer torch-{torch.__version__}-linear {timed(f):.9f}")
    except ImportError:
        print("peer torch unavailable (no PyTorch on this machine)")
elif kind == "dense_bias_gelu":
    p = {kv.split("=")[0]: int(kv.split("=")[1]) for kv in args.split(",")}
    m, n, k = p["m"], p["n"], p["k"]
    import torch

    torch.set_num_threads(int(threads))
    tx = torch.from_numpy(rng.standard_normal((m, k), dtype=np.float32))
    tw = torch.from_numpy(rng.standard_normal((n, k), dtype=np.float32))
    tb = torch.from_numpy(rng.standard_normal(n, dtype=np.float32))
    with torch.no_grad():
        f = lambda: torch.nn.functional.gelu(  # noqa: E731
            torch.nn.functional.linear(tx, tw, tb), approximate="tanh"
        )
        print(f"peer torch-{torch.__version__}-linear-gelu {timed(f):.9f}")
elif kind == "softmax":
    # `softmax:RxC` or `softmax:HxRxC` (a batch of heads): over the last axis.
    shape = tuple(int(v) for v in args.split("x"))
    x = rng.standard_normal(shape, dtype=np.float32)
    y = np.empty_like(x)

    def softmax():
        np.subtract(x, x.max(axis=-1, keepdims=True), out=y)
        np.exp(y, out=y)
        np.divide(y, y.sum(axis=-1, keepdims=True), out=y)

    print(f"peer numpy {timed(softmax):.9f}")
    try:
        import torch

        torch.set_num_threads(int(threads))
        tx = torch.from_numpy(x)
        with torch.no_grad():
            f = lambda: torch.softmax(tx, dim=-1)  # noqa: E731
            print(f"peer torch-{torch.__version__}-softmax {timed(f):.9f}")
    except ImportError:
        print("peer torch unavailable (no PyTorch on this machine)")
elif kind in ("layer_norm", "rms_norm"):
    # `layer_norm:RxC` (eps 1e-5, a weight and a bias a column, as
    # benches/layer_norm_*.tw) or `rms_norm:RxC` (eps 1e-6, a weight a column, as
    # benches/rms_norm_*.tw): PyTorch's over each row.
    rows, cols = (int(v) for v in args.split("x"))
    import torch

    torch.set_num_threads(int(threads))
    tx = torch.from_numpy(rng.standard_normal((rows, cols), dtype=np.float32))
    tg = torch.from_numpy(rng.standard_normal(cols, dtype=np.float32))
    tb = torch.from_numpy(rng.standard_normal(cols, dtype=np.float32))
    with torch.no_grad():
        if kind == "layer_norm":
            f = lambda: torch.nn.functional.layer_norm(tx, (cols,), tg, tb, 1e-5)  # noqa: E731
        else:
            f = lambda: torch.nn.functional.rms_norm(tx, (cols,), tg, 1e-6)  # noqa: E731
        print(f"peer torch-{torch.__version__}-{kind.replace('_', '-')} {timed(f):.9f}")
else:
    sys.exit(f"cpu_peers.py: no peer for {spec}")
