"""The vendor libraries' latency of each task of a network file, for `tessel report --peers`:
cuDNN (torch.nn.functional.conv2d, benchmark mode: it picks its fastest algorithm) for the
convolutions, cuBLAS (torch.matmul / bmm / F.linear) for the dense layers and batched
matmuls, with the task's epilogue (relu, bias, GELU in its tanh form, tanh) in PyTorch after
it; PyTorch's softmax and layer norm for the row workloads (benches/torch_softmax.py).
Strict fp32 (TF32 off), median of timed runs with the L2 flushed in between (triton's
do_bench), as benches/cudnn_conv.py.
Usage: python3 benches/network_peers.py NETWORK.toml > peers.json
Prints a JSON object from each task's workload (as the file gives it) to seconds; a task it
cannot map to a library call is left out and named on stderr."""
import json
import os
import re
import sys
import tomllib

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_softmax import row_op  # noqa: E402

torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"


def preset_args(spec):
    name, _, rest = spec.partition(":")
    if name == "matmul" and "=" not in rest:
        m, n, k = (int(x) for x in rest.split("x"))
        return name, {"m": m, "n": n, "k": k}
    args = {}
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=")
        args[k.strip()] = v.strip()
    return name, args


def conv(a, relu):
    i = lambda k, d: int(a.get(k, d))
    x = torch.randn(i("n", 1), i("c", 1), i("h", 1), i("w", 1), device=dev)
    w = torch.randn(i("k", 1), i("c", 1), i("r", 1), i("s", 1), device=dev)
    st, p, d = i("stride", 1), i("pad", 0), i("dilation", 1)
    f = lambda: F.conv2d(x, w, stride=st, padding=p, dilation=d)
    return (lambda: torch.relu(f())) if relu else f


def preset_call(spec):
    name, a = preset_args(spec)
    if name in ("conv2d_nchw", "conv2d_relu_nchw"):
        return conv(a, name == "conv2d_relu_nchw")
    if name == "matmul":
        m, n, k = int(a["m"]), int(a["n"]), int(a["k"])
        layout = a.get("layout", "nn")
        A = torch.randn((k, m) if layout[0] == "t" else (m, k), device=dev)
        B = torch.randn((n, k) if layout[1] == "t" else (k, n), device=dev)
        ta = (lambda t: t.t()) if layout[0] == "t" else (lambda t: t)
        tb = (lambda t: t.t()) if layout[1] == "t" else (lambda t: t)
        return lambda: torch.matmul(ta(A), tb(B))
    if name == "batch_matmul":
        b, m, n, k = (int(a[x]) for x in "bmnk")
        A, B = torch.randn(b, m, k, device=dev), torch.randn(b, k, n, device=dev)
        return lambda: torch.bmm(A, B)
    if name == "dense_bias_relu":
        m, n, k = int(a["m"]), int(a["n"]), int(a["k"])
        X, W, bias = (torch.randn(m, k, device=dev), torch.randn(n, k, device=dev),
                      torch.randn(n, device=dev))
        return lambda: torch.relu(F.linear(X, W, bias))
    return None


def text_call(text):
    name = re.search(r"^workload (\w+)", text, re.M)
    shapes = {m[0]: [int(x) for x in m[1].split(",")]
              for m in re.findall(r"^input (\w+): f32\[([\d, ]+)\]", text, re.M)}
    name = name[1] if name else ""
    if name.startswith("dense_bias") and {"X", "W", "bias"} <= shapes.keys():
        X, W, bias = (torch.randn(*shapes[t], device=dev) for t in ("X", "W", "bias"))
        epilogue = {"dense_bias": lambda y: y,
                    "dense_bias_gelu": lambda y: F.gelu(y, approximate="tanh"),
                    "dense_bias_tanh": torch.tanh,
                    "dense_bias_relu": torch.relu}.get(name)
        if epilogue:
            return lambda: epilogue(F.linear(X, W, bias))
    if name == "batch_matmul_nt" and {"Q", "K"} <= shapes.keys():
        Q, K = torch.randn(*shapes["Q"], device=dev), torch.randn(*shapes["K"], device=dev)
        return lambda: torch.bmm(Q, K.transpose(1, 2))
    return row_op(text)


def main():
    with open(sys.argv[1], "rb") as f:
        net = tomllib.load(f)
    peers = {}
    for i, task in enumerate(net["task"], 1):
        spec = task["workload"]
        call = text_call(spec) if "\n" in spec else preset_call(spec)
        if call is None:
            print(f"task {i}: no library call for {spec.strip().splitlines()[0]}", file=sys.stderr)
            continue
        ms = do_bench(call, warmup=50, rep=300, return_mode="median")
        peers[spec] = ms * 1e-3
        print(f"task {i}: {ms * 1e3:.1f} us  {spec.strip().splitlines()[0]}", file=sys.stderr)
    print(f"on {torch.cuda.get_device_name()}, torch {torch.__version__}", file=sys.stderr)
    json.dump(peers, sys.stdout, indent=1)
    print()


main()
