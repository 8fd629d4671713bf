#!/usr/bin/env python3
"""Workload-language programs nobody wrote, for `benches/sweep.py`: `draw(rng)` returns
(name, text) of one small program drawn from families a model is made of, each with its
shapes, axes, operators and epilogues drawn too:

  rows       a reduction over one axis of a rank-2..4 tensor (any axis, not only the
             innermost), read back broadcast by an elementwise stage: softmax, layer norm,
             RMS norm, a max-shifted log-sum, a centred sum of squares
  gemm_epi   a GEMM of any layout (or batched) followed by one to three epilogue stages:
             bias by row or column, ReLU, GELU (tanh), leaky ReLU by select, a residual
             input, a scale, exp, abs, clamp by min/max
  chain      two GEMMs back to back (C = A B, E = C D) with an elementwise stage between
  eltwise    elementwise stages over two or three inputs of rank 2..4 with broadcasts,
             transposed and flipped reads, a select, and a cast to f16 and back
  multi_red  a sum over two axes at once (the kept axis outermost, in the middle or last)
  concat     two tensors concatenated on a drawn axis, then an elementwise stage

    python3 benches/programs.py SEED COUNT     prints COUNT drawn programs
"""
import random, sys

def dims(rng, n, lo=1, hi=40):
    return [rng.randint(lo, hi) for _ in range(n)]

def idx(names):
    return ', '.join(names)

AX = ['i', 'j', 'l', 'm']

def rows(rng):
    rank = rng.randint(2, 4)
    shape = dims(rng, rank, 1, 33 if rank > 2 else 70)
    r = rng.randrange(rank)            # the reduced axis
    ax = AX[:rank]
    keep = [a for t, a in enumerate(ax) if t != r]
    red = ax[:r] + ['k'] + ax[r + 1:]  # X read with the reduced axis named k
    n = shape[r]
    X = f'X[{idx(red)}]'
    Xa = f'X[{idx(ax)}]'
    S = lambda name: f'{name}[{idx(keep)}]'
    head = f'input X: f32[{idx(map(str, shape))}]\n'
    kind = rng.choice(['softmax', 'layer_norm', 'rms_norm', 'logsumexp', 'centred'])
    if kind == 'softmax':
        body = (f'M[{idx(keep)}] = max_reduce({X}, k: {n})\n'
                f'E[{idx(ax)}] = exp({Xa} - {S("M")})\n'
                f'Z[{idx(keep)}] = sum(E[{idx(red)}], k: {n})\n'
                f'Y[{idx(ax)}] = E[{idx(ax)}] / {S("Z")}\n')
    elif kind == 'layer_norm':
        g = ax[r]
        head += f'input G: f32[{n}]\ninput B: f32[{n}]\n'
        body = (f'S1[{idx(keep)}] = sum({X}, k: {n})\n'
                f'MU[{idx(keep)}] = {S("S1")} / {float(n)}\n'
                f'S2[{idx(keep)}] = sum(({X} - {S("MU")}) * ({X} - {S("MU")}), k: {n})\n'
                f'Y[{idx(ax)}] = ({Xa} - {S("MU")}) / sqrt({S("S2")} / {float(n)} + 0.00001) * G[{g}] + B[{g}]\n')
    elif kind == 'rms_norm':
        g = ax[r]
        head += f'input G: f32[{n}]\n'
        body = (f'S[{idx(keep)}] = sum({X} * {X}, k: {n})\n'
                f'Y[{idx(ax)}] = {Xa} / sqrt({S("S")} / {float(n)} + 0.000001) * G[{g}]\n')
    elif kind == 'logsumexp':
        body = (f'M[{idx(keep)}] = max_reduce({X}, k: {n})\n'
                f'Z[{idx(keep)}] = sum(exp({X} - {S("M")}), k: {n})\n'
                f'Y[{idx(ax)}] = {Xa} - {S("M")} - sqrt({S("Z")})\n')
    else:
        body = (f'S1[{idx(keep)}] = sum({X}, k: {n})\n'
                f'Y[{idx(keep)}] = sum(({X} - {S("S1")} * {1.0 / n:.6f}) * ({X} - {S("S1")} * {1.0 / n:.6f}), k: {n})\n')
    return f'rows_{kind}', head + body

EPI = ['bias_row', 'bias_col', 'relu', 'gelu', 'leaky', 'residual', 'scale', 'exp', 'abs', 'clamp']

def epilogue(rng, src, out_idx, m, n, head, names):
    """One epilogue stage reading `src`; returns (stage text, head additions)."""
    e = rng.choice(EPI)
    v = f'{src}[{out_idx}]'
    i, j = out_idx.split(', ')[-2:]
    name = f'T{len(names)}'
    names.append(name)
    if e == 'bias_row':
        nm = f'bc{len(names)}'; head.append(f'input {nm}: f32[{n}]'); rhs = f'{v} + {nm}[{j}]'
    elif e == 'bias_col':
        nm = f'br{len(names)}'; head.append(f'input {nm}: f32[{m}]'); rhs = f'{v} + {nm}[{i}]'
    elif e == 'relu':
        rhs = f'relu({v})'
    elif e == 'gelu':
        rhs = f'0.5 * {v} * (1.0 + tanh(0.7978845608 * ({v} + 0.044715 * {v} * {v} * {v})))'
    elif e == 'leaky':
        rhs = f'if_then_else({v} > 0.0, {v}, 0.01 * {v})'
    elif e == 'residual':
        nm = f'R{len(names)}'; head.append(f'input {nm}: f32[{{OUT}}]'); rhs = f'{v} + {nm}[{out_idx}]'
    elif e == 'scale':
        rhs = f'{v} * {rng.choice(["0.125", "2.0", "-1.5"])}'
    elif e == 'exp':
        rhs = f'exp({v} * 0.01)'
    elif e == 'abs':
        rhs = f'abs({v})'
    else:
        rhs = f'min(max({v}, -1.0), 1.0)'
    return f'{name}[{out_idx}] = {rhs}\n'

def gemm(A, B, C, m, n, k, batch, lay):
    a_shape = [k, m] if lay[0] == 't' else [m, k]
    b_shape = [n, k] if lay[1] == 't' else [k, n]
    a_idx = 'k, i' if lay[0] == 't' else 'i, k'
    b_idx = 'j, k' if lay[1] == 't' else 'k, j'
    pre, bi = ([batch], 'b, ') if batch else ([], '')
    inputs = [f'input {A}: f32[{idx(map(str, pre + a_shape))}]',
              f'input {B}: f32[{idx(map(str, pre + b_shape))}]']
    stage = f'{C}[{bi}i, j] = sum({A}[{bi}{a_idx}] * {B}[{bi}{b_idx}], k: {k})\n'
    return inputs, stage, (pre + [m, n]), f'{bi}i, j'

def gemm_epi(rng):
    m, n, k = dims(rng, 3, 1, 70)
    batch = rng.choice([0, 0, rng.randint(1, 4)])
    lay = rng.choice(['nn', 'nt', 'tn', 'tt'])
    head, stage, out_shape, out_idx = gemm('A', 'B', 'C', m, n, k, batch, lay)
    names, body, src = [], stage, 'C'
    for _ in range(rng.randint(1, 3)):
        body += epilogue(rng, src, out_idx, m, n, head, names)
        src = names[-1]
    text = '\n'.join(head).replace('{OUT}', idx(map(str, out_shape))) + '\n' + body
    return f'gemm_{lay}_epi', text

def chain(rng):
    m, n, k, p = dims(rng, 4, 1, 50)
    head, s1, _, _ = gemm('A', 'B', 'C', m, n, k, 0, rng.choice(['nn', 'nt']))
    mid = rng.choice(['relu(C[i, j])', 'C[i, j] * 0.5', 'exp(C[i, j] * 0.01)'])
    dt = rng.choice(['nn', 'nt'])
    d_shape, d_idx = ([n, p], 'j, l') if dt == 'nn' else ([p, n], 'l, j')
    head.append(f'input D: f32[{d_shape[0]}, {d_shape[1]}]')
    body = (s1 + f'H[i, j] = {mid}\n'
            f'E[i, l] = sum(H[i, j] * D[{d_idx}], j: {n})\n')
    return 'gemm_chain', '\n'.join(head) + '\n' + body

def eltwise(rng):
    rank = rng.randint(2, 4)
    shape = dims(rng, rank, 1, 24)
    ax = AX[:rank]
    sh = lambda s: idx(map(str, s))
    head = [f'input X: f32[{sh(shape)}]']
    y = rng.choice(['bcast', 'transposed', 'flipped'])
    if y == 'bcast':          # Y broadcasts over a drawn axis
        d = rng.randrange(rank)
        ys = [s for t, s in enumerate(shape) if t != d]
        yi = [a for t, a in enumerate(ax) if t != d]
        head.append(f'input Y: f32[{sh(ys)}]'); yread = f'Y[{idx(yi)}]'
    elif y == 'transposed':   # Y stored with its last two axes swapped
        ys = shape[:-2] + [shape[-1], shape[-2]]
        yi = ax[:-2] + [ax[-1], ax[-2]]
        head.append(f'input Y: f32[{sh(ys)}]'); yread = f'Y[{idx(yi)}]'
    else:                     # Y read back to front along its last axis
        head.append(f'input Y: f32[{sh(shape)}]')
        last = shape[-1]
        yread = f'Y[{idx(ax[:-1] + [f"{last - 1} - {ax[-1]}"])}]'
    x = f'X[{idx(ax)}]'
    op = rng.choice([f'{x} * {yread} + {x}', f'max({x}, {yread})', f'if_then_else({x} < {yread}, {x} - {yread}, tanh({yread}))',
                     f'sqrt(abs({x})) + {yread} * {yread}'])
    body = f'T[{idx(ax)}] = {op}\n'
    if rng.random() < 0.3:
        body += f'H[{idx(ax)}]: f16 = cast(f16, T[{idx(ax)}])\nO[{idx(ax)}] = cast(f32, H[{idx(ax)}]) * 2.0\n'
    else:
        body += f'O[{idx(ax)}] = relu(T[{idx(ax)}]) - 0.5\n'
    return f'eltwise_{y}', '\n'.join(head) + '\n' + body

def multi_red(rng):
    a, b, c = dims(rng, 3, 1, 40)
    where = rng.choice(['first', 'middle', 'last'])
    if where == 'first':
        shape, read = [a, b, c], 'X[i, k, l]'
    elif where == 'middle':
        shape, read = [b, a, c], 'X[k, i, l]'
    else:
        shape, read = [b, c, a], 'X[k, l, i]'
    op = rng.choice(['sum', 'max_reduce'])
    body = (f'S[i] = {op}({read} * {read}, k: {b}, l: {c})\n'
            f'O[i] = S[i] * 0.5 + 1.0\n')
    return f'multi_red_{where}', f'input X: f32[{idx(map(str, shape))}]\n' + body

def concat(rng):
    rank = rng.randint(2, 3)
    s1 = dims(rng, rank, 1, 20)
    axis = rng.randrange(rank)
    s2 = list(s1); s2[axis] = rng.randint(1, 20)
    out = list(s1); out[axis] = s1[axis] + s2[axis]
    ax = AX[:rank]
    head = (f'input P: f32[{idx(map(str, s1))}]\ninput Q: f32[{idx(map(str, s2))}]\n')
    body = (f'K = concat(P, Q, axis={axis})\n'
            f'O[{idx(ax)}] = K[{idx(ax)}] * K[{idx(ax)}] + 1.0\n')
    return 'concat', head + body

FAMILIES = [rows, rows, gemm_epi, gemm_epi, chain, eltwise, multi_red, concat]

def draw(rng):
    name, text = rng.choice(FAMILIES)(rng)
    return name, f'workload {name}\n{text}'

if __name__ == '__main__':
    rng = random.Random(int(sys.argv[1]))
    for _ in range(int(sys.argv[2])):
        print(draw(rng)[1])
