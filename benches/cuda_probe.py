#!/usr/bin/env python3
"""Times hand-edited CUDA GEMM kernels beside PyTorch's matmul (cublasLt) on the device,
to find out what a kernel structure reaches before the code generator learns to emit it.

Each FILE.cu holds one `extern "C" __global__` kernel taking (A, B, C) pointers to
row-major matrices of the dtype (f16, bf16 or f32; C = A x B, A: M x K, B: K x N,
C: M x N, fp32 accumulation), and
two comment lines the generated CUDA of `tessel build --emit cuda` already carries or
that a hand-written probe adds:

    // launch: grid=(GX, GY, GZ) block=(BX, BY, BZ) shared=BYTES bytes (dynamic)
    // problem: m=M n=N k=K dtype=f16

(`a=t` after the dtype: the kernel reads A transposed, K x M row-major, as a transposing
kernel of tessel's leaves it; the transposition is not timed.) The kernel is compiled by NVRTC through CuPy for sm_90a, run on fresh random inputs with a
NaN-poisoned output, checked against torch.matmul in float64 (relative Frobenius error)
and timed with CUDA events (median of REPS launches after a warm-up); the peer is
torch.matmul on the same inputs, timed the same way (TF32 off for f32). A file with a
`// peak: flops=F` line instead of the problem line is only launched and timed, its
rate reported (an instruction's issue ceiling).

    python3 benches/cuda_probe.py FILE.cu...     (prints a table, one row per file)
"""
import re
import sys

import cupy as cp
import torch

REPS = 50


def parse(src, path):
    launch = re.search(
        r"launch: grid=\((\d+), (\d+), (\d+)\) block=\((\d+), (\d+), (\d+)\) shared=(\d+) bytes",
        src,
    )
    problem = re.search(r"problem: m=(\d+) n=(\d+) k=(\d+) dtype=(\w+)", src)
    name = re.search(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)', src)
    if not (launch and problem and name):
        sys.exit(f"{path}: needs the launch and problem comment lines and an extern \"C\" kernel")
    g = tuple(int(x) for x in launch.groups()[:3])
    b = tuple(int(x) for x in launch.groups()[3:6])
    m, n, k = (int(x) for x in problem.groups()[:3])
    a_transposed = re.search(r"problem: .* a=t\b", src) is not None
    return name.group(1), g, b, int(launch.group(7)), m, n, k, problem.group(4), a_transposed


def median_ms(fn):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def peak(path, src):
    """A kernel with a `// peak: flops=F` line: run it alone and report its rate."""
    launch = re.search(
        r"launch: grid=\((\d+), (\d+), (\d+)\) block=\((\d+), (\d+), (\d+)\) shared=(\d+) bytes",
        src,
    )
    flops = float(re.search(r"peak: flops=(\d+)", src).group(1))
    name = re.search(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)', src)
    kern = cp.RawModule(code=src, options=("--gpu-architecture=sm_90a",)).get_function(name.group(1))
    g = tuple(int(x) for x in launch.groups()[:3])
    b = tuple(int(x) for x in launch.groups()[3:6])
    dummy = torch.zeros(1024, device="cuda", dtype=torch.float16)
    ms = median_ms(lambda: kern(g, b, (dummy.data_ptr(), dummy.data_ptr(), dummy.data_ptr())))
    print(f"| {path.split('/')[-1]} | peak | - | {ms * 1e3:.1f} us {flops / ms / 1e9:.1f} TFLOP/s | - | - |")


def probe(path):
    src = open(path).read()
    if "// peak:" in src:
        return peak(path, src)
    name, grid, block, smem, m, n, k, dtype, a_transposed = parse(src, path)
    tdtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    mod = cp.RawModule(code=src, options=("--gpu-architecture=sm_90a", "-std=c++17"))
    kern = mod.get_function(name)
    kern.max_dynamic_shared_size_bytes = smem
    a = torch.randn(m, k, device="cuda").to(tdtype)
    b = torch.randn(k, n, device="cuda").to(tdtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=tdtype)
    a_arg = a.t().contiguous() if a_transposed else a

    def run():
        kern(grid, block, (a_arg.data_ptr(), b.data_ptr(), c.data_ptr()), shared_mem=smem)

    run()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    ok = "ok" if err < (1e-5 if dtype == "f32" else 1e-2) and not torch.isnan(c).any().item() else f"FAIL ({err:.2e})"
    ours = median_ms(run)
    peer = median_ms(lambda: torch.matmul(a, b, out=c))
    flop = 2.0 * m * n * k
    print(
        f"| {path.split('/')[-1]} | {m}x{n}x{k} {dtype} | {ok} {err:.1e} | "
        f"{ours * 1e3:.1f} us {flop / ours / 1e9:.1f} TFLOP/s | "
        f"{flop / peer / 1e9:.1f} TFLOP/s | {peer / ours:.3f}x |",
        flush=True,
    )


def main():
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 peer is strict fp32, as ours
    print(f"device: {torch.cuda.get_device_name()}")
    print("| kernel | GEMM | check (rel. err) | probe | torch.matmul | ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for path in sys.argv[1:]:
        try:
            probe(path)
        except Exception as e:  # one broken probe must not hide the others' rows
            print(f"| {path.split('/')[-1]} | - | error: {str(e).splitlines()[0][:200]} | - | - | - |")


if __name__ == "__main__":
    main()
