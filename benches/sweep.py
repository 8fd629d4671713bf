#!/usr/bin/env python3
"""A robustness sweep over workloads nobody wrote: COUNT small workloads drawn with SEED
from every preset (GEMMs of every layout, batched GEMMs, dense layers, NCHW / NHWC /
depthwise / concatenated convs with strides, padding and dilation; f32, f16, bf16, TF32)
or, with SWEEP_ONLY=programs, workload-language programs (`benches/programs.py`:
normalizations over any axis, GEMMs with epilogues, GEMM chains, broadcasts, multi-axis
reductions, concat), PER candidates of each sampled for CUDA and for the CPU (`tessel sample --json`), each
checked against the reference by the interpreter (`tessel check`); the first of each
compiled by NVRTC (`tessel build`, needs NVRTC, not a GPU) and, on the CPU, built by the
C compiler, run and checked (`tessel run --target cpu`). Prints each failure and, last,
`bad N`; DIR keeps the traces.

    python3 benches/sweep.py SEED COUNT PER DIR
    e.g. python3 benches/sweep.py 20261156 40 4 /tmp/sweep     (about 2 minutes here)

TESSEL_BIN names the binary (default target/release/tessel). A seed draws the same
workloads as before programs were added.
"""
import json, random, subprocess, sys, os, pathlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs
T = os.environ.get('TESSEL_BIN', 'target/release/tessel')
ONLY_PROGRAMS = os.environ.get('SWEEP_ONLY') == 'programs'
seed = int(sys.argv[1]); count = int(sys.argv[2]); per = int(sys.argv[3])
rng = random.Random(seed)
out = pathlib.Path(sys.argv[4]); out.mkdir(parents=True, exist_ok=True)
def dim(lo, hi): return rng.randint(lo, hi)
def draw():
    if ONLY_PROGRAMS:
        return programs.draw(rng)[1]
    k = rng.choice(['mm', 'mm', 'bmm', 'nchw', 'nhwc', 'dw', 'dense', 'concat'])
    dt = rng.choice(['f32', 'f32', 'f16', 'bf16'])
    if k == 'mm':
        lay = rng.choice(['nn', 'nt', 'tn', 'tt'])
        math = ',math=tf32' if dt == 'f32' and rng.random() < 0.2 else ''
        return f'matmul:m={dim(1,70)},n={dim(1,70)},k={dim(1,70)},layout={lay},dtype={dt}{math}'
    if k == 'bmm':
        return f'batch_matmul:b={dim(1,4)},m={dim(1,40)},n={dim(1,40)},k={dim(1,40)},dtype={dt}'
    if k == 'dense':
        return f'dense_bias_relu:m={dim(1,50)},n={dim(1,50)},k={dim(1,50)},dtype={dt}'
    r = rng.choice([1, 3, 5]); st = rng.choice([1, 2]); pad = rng.choice([0, r // 2]); dil = rng.choice([1, 1, 2])
    h = dim(r * dil, 14); w = dim(r * dil, 14)
    if k == 'dw':
        return f'depthwise_conv2d_nchw:n={dim(1,2)},c={dim(1,9)},h={h},w={w},r={r},s={r},stride={st},pad={pad},dilation={dil},dtype={dt}'
    if k == 'concat':
        return f'concat_conv2d_relu_nchw:n=1,c1={dim(1,6)},c2={dim(1,6)},h={h},w={w},k={dim(1,9)},r={r},s={r},stride={st},pad={pad},dilation={dil},dtype={dt}'
    op = 'conv2d_nchw' if k == 'nchw' else 'conv2d_nhwc'
    return f'{op}:n={dim(1,3)},c={dim(1,11)},h={h},w={w},k={dim(1,13)},r={r},s={r},stride={st},pad={pad},dilation={dil},dtype={dt}'
def sh(args, timeout=300):
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return 'timeout', ''
bad = 0
for i in range(count):
    w = draw()
    if '\n' in w:  # a drawn program: the workload is its file
        f = out / f'{i}.tw'; f.write_text(w); w = str(f)
    for target in ['cuda', 'cpu']:
        if target == 'cpu' and 'tf32' in w: continue
        s = rng.randint(0, 10**6)
        rc, o = sh([T, 'sample', w, '--target', target, '-n', str(per), '--seed', str(s), '--json'])
        if rc != 0:
            print(f'SAMPLE FAIL {target} {w} seed {s}: {o[-400:]}', flush=True); bad += 1; continue
        try: cands = json.loads(o[o.index('['):])
        except Exception as e:
            print(f'JSON FAIL {target} {w}: {e} {o[-300:]}'); bad += 1; continue
        for j, c in enumerate(cands):
            f = out / f'{i}_{target}_{j}.sched'; f.write_text(c['trace'])
            rc, o = sh([T, 'check', w, '--schedule', str(f)])
            if rc != 0:
                print(f'CHECK FAIL {target} {w} {f}: {o[-500:]}', flush=True); bad += 1; continue
            if target == 'cuda' and j == 0:
                rc, o = sh([T, 'build', w, '--schedule', str(f)])
                if rc != 0:
                    print(f'BUILD FAIL {w} {f}: {o[-500:]}', flush=True); bad += 1
            if target == 'cpu' and j == 0:
                rc, o = sh([T, 'run', w, '--schedule', str(f), '--target', 'cpu', '--threads', '1'])
                if rc != 0:
                    print(f'RUN FAIL {w} {f}: {o[-500:]}', flush=True); bad += 1
    print(f'{i} {w} done', flush=True)
print('bad', bad)
