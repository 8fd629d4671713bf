"""Selects samples of a conv's CUDA space (`tessel sample --json` outputs) to time by hand
(benches/conv_space_probe.sh), writing each as DIR/NNN_KIND_<threads>t_<outputs>o_<shared>b_<stages>s.sched.

near: samples near cuDNN's implicit-GEMM kernel for the batch-16 conv (benches/RESULTS.md,
  2026-12-02): of those with 128 or 256 threads, at least 8,192 outputs a block and at
  most 100 KB of shared memory, the first 90 of the GEMM view whose trace names no
  `t2_im2col_global` stage (kind `imp`: they gather in the fetch or write the gathered
  data padded, `t2_im2col_pad_global`), sorted pipelined first, then by distance from
  16,384 outputs, then by shared bytes; 15 drawn (random.Random(7)) of those that name it
  (`mat`); and 20 drawn of the conv's own loops (`plain`, any threads).
unroll: the first 14, in the same order, of the samples whose fetch walks the gathered
  pixels (`reorder(ax1, ax0)`), each written as sampled and again with
  `unroll(ax1_ax0_fused_0)` after its fetch's vectorize (`.unrolled.sched`).

    python3 benches/conv_space_probe.py near|unroll DIR SAMPLES.json...
"""
import json, os, random, re, sys

mode, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
samples = [x for f in files for x in json.load(open(f))]
os.makedirs(out, exist_ok=True)


def fits(x):
    return (x['threads_per_block'] in (128, 256) and x['outputs_per_block'] >= 8192
            and x['shared_bytes'] <= 100000)


def near_cudnn(x):
    return (-(x['pipeline_stages'] > 1), abs(x['outputs_per_block'] - 16384), x['shared_bytes'])


def name(i, kind, x):
    return (f"{out}/{i:03d}_{kind}_{x['threads_per_block']}t_{x['outputs_per_block']}o_"
            f"{x['shared_bytes']}b_{x['pipeline_stages']}s")


if mode == 'near':
    view = [x for x in samples if 'im2col(' in x['trace'] and fits(x)]
    imp = sorted((x for x in view if 't2_im2col_global' not in x['trace']), key=near_cudnn)[:90]
    mat = [x for x in view if 't2_im2col_global' in x['trace']]
    plain = [x for x in samples if 'im2col(' not in x['trace'] and x['outputs_per_block'] >= 8192
             and x['shared_bytes'] <= 100000]
    rng = random.Random(7)
    pick = ([('imp', x) for x in imp] + [('mat', x) for x in rng.sample(mat, min(15, len(mat)))]
            + [('plain', x) for x in rng.sample(plain, min(20, len(plain)))])
    for i, (kind, x) in enumerate(pick):
        open(name(i, kind, x) + '.sched', 'w').write(x['trace'])
    print(len(pick))
elif mode == 'unroll':
    walked = sorted((x for x in samples if 'reorder(ax1, ax0)' in x['trace'] and fits(x)),
                    key=near_cudnn)[:14]
    for i, x in enumerate(walked):
        unrolled, done = [], False
        for line in x['trace'].splitlines():
            unrolled.append(line)
            m = re.match(r'vectorize\((ax1_ax0_fused_2\w*)\)', line)
            if m and not done:
                unrolled.append(f"unroll({m[1].replace('_fused_2', '_fused_0', 1)})")
                done = True
        base = name(i, 'walk', x)
        open(base + '.sched', 'w').write(x['trace'])
        open(base + '.unrolled.sched', 'w').write('\n'.join(unrolled) + '\n')
    print(len(walked))
else:
    sys.exit(f"unknown mode {mode}")
