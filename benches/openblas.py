"""The OpenBLAS figure for the CPU table of benches/RESULTS.md: numpy's matmul (numpy's
wheels bundle OpenBLAS) on the same shape, strict fp32, median of timed runs after a
warm-up, all cores. Usage: python3 benches/openblas.py 512 512 512"""
import sys, time
import numpy as np

m, n, k = (int(x) for x in sys.argv[1:4])
rng = np.random.default_rng(0)
a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
end = time.perf_counter() + 0.2
while time.perf_counter() < end:
    a @ b
times = []
for _ in range(50):
    t = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - t)
times.sort()
med = times[len(times) // 2]
cfg = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
print(f"numpy {np.__version__} ({cfg.get('name', '?')} {cfg.get('version', '')}) matmul {m}x{n}x{k}: median {med*1e3:.3f} ms, {2*m*n*k/med/1e9:.1f} GFLOP/s")
