#!/usr/bin/env python3
"""Hand-picked fp32 GEMM schedules in the CUDA sketch's own structure, to measure the
ceiling of the space against cublasLt (benches/gemm_ceiling.sh times them).

Every schedule is what the plain CUDA sketch builds (search_spaces/cuda.toml: a local
accumulator, A and B staged in shared memory at the outer reduction loop, A stored
reduction-major with its rows padded by `storage_align`, cooperative vectorized fetches,
software pipelining, auto-unroll), with the decisions written out instead of sampled,
and the thread level split in two (warp rows and lanes) so that the lanes of a warp can be
arranged 2 x 16 (as the sketch's fused binding does) or 4 x 8 (as CUTLASS's SIMT GEMMs
do). Each variant is a classic register-tiled SGEMM: 8 x 8 or 16 x 8 outputs per thread
in 4 x 4 pieces (vthreads), LDS.128 from shared memory on both operands.

    benches/gemm_ceiling.py OUT N...   writes OUT/<N>_<variant>.sched for matmul:NxNxN
    benches/gemm_ceiling.py --layout L OUT N...   the same for matmul:NxNxN,layout=L: each
        operand whose rows are of the reduction transposed in the fetch (T), kept as
        stored (S, I) or transposed by a kernel of its own (K); see layout_variants
    benches/gemm_ceiling.py --kernels OUT N...   matmul:NxNxN (NN) with A transposed by a
        kernel of its own, around the best tiling; see kernel_variants
"""
import os
import sys


def split_line(loop, factors, interleave):
    """The split of a spatial loop into [blocks, vthreads, warps, lanes, serial, inner].
    Interleaved, the lanes are the innermost part of the index (a thread's rows are a
    lane count apart, so the lanes of a warp read consecutive rows of a shared tile
    stored as in memory: 16-byte reads of rows padded to 36 words then fall on distinct
    banks); the loops keep their names, so the rest of the schedule is the same."""
    names = [f"{loop}_{i}" for i in range(6)]
    if interleave:
        b, v, w, lanes, serial, inner = factors
        factors = [b, v, w, serial, inner, lanes]
        names = [names[i] for i in (0, 1, 2, 4, 5, 3)]
    return f"{', '.join(names)} = split({loop}, factors={factors})"


def transpose_kernel(blk, name, run=64, channels=32, threads=128):
    """The tiled transpose through shared memory that `sketch/staging.rs` builds for a
    copy `name` stored reduction first: tiles of `channels` rows by `run` elements of
    the reduction, read along the reduction and stored along the rows."""
    return [
        f'{blk} = get_block("{name}")',
        f"{blk}_a0, {blk}_a1 = get_loops({blk})",
        f"{blk}_r0, {blk}_r1 = split({blk}_a1, factors=[None, {run}])",
        f"{blk}_c0, {blk}_c1 = split({blk}_a0, factors=[None, {channels}])",
        f"reorder({blk}_r0, {blk}_c0, {blk}_c1, {blk}_r1)",
        f"{blk}_g = fuse({blk}_r0, {blk}_c0)",
        f'bind({blk}_g, thread="blockIdx.x")',
        f'{blk}_w = cache_write({blk}, write_index=0, scope="shared")',
        f"reverse_compute_at({blk}_w, {blk}_g)",
        f"storage_align({blk}, buffer_index=0, axis=0, factor={channels}, offset=1)",
        *[line for b, p in ((blk, "x"), (f"{blk}_w", "y")) for line in (
            f"{blk}_{p}0, {blk}_{p}1, {blk}_{p}2 = get_loops({b})",
            f"{blk}_{p}f = fuse({blk}_{p}1, {blk}_{p}2)",
            f"{blk}_{p}o, {blk}_{p}i = split({blk}_{p}f, factors=[None, {threads}])",
            f'bind({blk}_{p}i, thread="threadIdx.x")',
            f"unroll({blk}_{p}o)")],
    ]


def schedule(mi, nj, kk, stages, offset=4, vector=4, unroll=512, transpose_a=True,
             transpose_b=None, interleave_i=False, interleave_j=False, local=False,
             kernels=(False, False), registers=False, lone=(False, False)):
    """mi, nj: factors of i and j, [blocks, vthreads, warps, lanes, serial, inner];
    kk: factors of the reduction, [outer (pipelined), middle, inner]. transpose_a=False
    keeps A's shared tile as it is in memory (rows of the reduction: 16-byte copies, and
    a thread reads its rows' inner reduction steps as vectors); None means A is stored
    reduction-major already (layout t). transpose_b likewise for B, whose rows are of the
    reduction in layout t (None: stored reduction-major, layout n). registers: the
    pipeline stages its transposing fetches in registers (`software_pipeline_register_fetch`).
    lone: per operand, a transposing fetch copies one element a thread (consecutive threads
    along the source's contiguous rows) into rows padded by one word, instead of `vector`
    elements a thread into rows padded by `offset`."""
    fetch_vector = [1 if lone[i] else vector for i in (0, 1)]
    row_offset = [1 if lone[i] else offset for i in (0, 1)]
    threads = mi[2] * mi[3] * nj[2] * nj[3]
    # Operands transposed once by kernels of their own (the sketch's `transpose_kernels`
    # decision): a global copy stored reduction first, then read as stored.
    copies = [(i, f"t{i}_global") for i, k in enumerate(kernels) if k]
    lines = [
        'b0 = get_block("t2")',
        'b1 = cache_write(b0, write_index=0, scope="local")',
        "i0, i1, r0 = get_loops(b0)",
        split_line("i0", mi, interleave_i),
        split_line("i1", nj, interleave_j),
        f"r0_0, r0_1, r0_2 = split(r0, factors={kk})",
        "reorder(i0_0, i1_0, i0_1, i1_1, i0_2, i1_2, i0_3, i1_3, r0_0, r0_1, i0_4, i1_4, r0_2, i0_5, i1_5)",
        "bx = fuse(i0_0, i1_0)",
        'bind(bx, thread="blockIdx.x")',
        "vx = fuse(i0_1, i1_1)",
        'bind(vx, thread="vthread.x")',
        "tx = fuse(i0_2, i1_2, i0_3, i1_3)",
        'bind(tx, thread="threadIdx.x")',
        "reverse_compute_at(b1, tx)",
        *[line for i, _ in copies for line in (
            f'g{i} = cache_read(b0, read_index={i}, scope="global")',
            f"transform_layout(g{i}, buffer_index=0, permutation=[1, 0])")],
        'b2 = cache_read(b0, read_index=0, scope="shared")',
        "compute_at(b2, r0_0)",
        *(["transform_layout(b2, buffer_index=0, permutation=[1, 0])"] if transpose_a else []),
        *([f"storage_align(b2, buffer_index=0, axis=0, factor=32, offset={row_offset[0]})"]
          if transpose_a is not None else []),
        "_, _, _, _, a0, a1 = get_loops(b2)",
        "af = fuse(a0, a1)",
        f"_, at, av = split(af, factors=[None, {threads}, {fetch_vector[0]}])",
        'bind(at, thread="threadIdx.x")',
        "vectorize(av)",
        'b3 = cache_read(b0, read_index=1, scope="shared")',
        "compute_at(b3, r0_0)",
        *(["transform_layout(b3, buffer_index=0, permutation=[1, 0])"] if transpose_b else []),
        *([f"storage_align(b3, buffer_index=0, axis=0, factor=32, offset={row_offset[1]})"]
          if transpose_b is not None else []),
        "_, _, _, _, c0, c1 = get_loops(b3)",
        "bf = fuse(c0, c1)",
        f"_, bt, bv = split(bf, factors=[None, {threads}, {fetch_vector[1]}])",
        'bind(bt, thread="threadIdx.x")',
        "vectorize(bv)",
    ]
    if stages > 1:
        lines.append(f'annotate(r0_0, key="software_pipeline_stage", value=[0, 0, {stages - 1}])')
        if registers:
            lines.append('annotate(r0_0, key="software_pipeline_register_fetch", value=1)')
    for loop in ["i0_4", "i1_4", "r0_2", "i0_5", "i1_5"]:
        lines.append(f'annotate({loop}, key="pragma_auto_unroll_max_step", value={unroll})')
    if local:
        # Each reduction step's operands read from shared memory into registers by a
        # stage of their own, 4 consecutive elements of a row as one vector (LDS.128).
        for block, read in (("b5", 0), ("b6", 1)):
            lines += [
                f'{block} = cache_read(b0, read_index={read}, scope="local")',
                f"compute_at({block}, r0_2)",
                f"{block}_l0, {block}_l1, {block}_l2, {block}_l3, {block}_l4, {block}_l5, "
                f"{block}_l6, {block}_l7, {block}_v = get_loops({block})",
                f"vectorize({block}_v)",
            ]
    for i, name in copies:
        lines += transpose_kernel(f"s{i}", name)
    lines.append("b4 = decompose_reduction(b0, r0_0)")
    return "\n".join(lines) + "\n"


def variants(n):
    """name -> (i factors, j factors, reduction factors, stages, A transposed)."""
    lanes_2x16 = ([n // 128, 2, 8, 2, 1, 4], [n // 128, 2, 1, 16, 1, 4])
    lanes_4x8 = ([n // 128, 2, 4, 4, 1, 4], [n // 128, 2, 2, 8, 1, 4])
    tall_4x8 = ([n // 256, 4, 4, 4, 1, 4], [n // 128, 2, 2, 8, 1, 4])
    out = {}
    for k, kk in [(8, [n // 8, 1, 8]), (16, [n // 16, 1, 16]), (32, [n // 32, 2, 16])]:
        for stages in (2, 3):
            out[f"128x128_lanes2x16_k{k}_s{stages}"] = (*lanes_2x16, kk, stages, True)
            out[f"128x128_lanes4x8_k{k}_s{stages}"] = (*lanes_4x8, kk, stages, True)
            out[f"256x128_lanes4x8_k{k}_s{stages}"] = (*tall_4x8, kk, stages, True)
    # A as stored (k-rows, "a"): a thread reads 4 reduction steps of each of its rows at
    # once, so the inner reduction factor is 4 (or 8).
    for k, kk in [(16, [n // 16, 4, 4]), (32, [n // 32, 8, 4]), (32, [n // 32, 4, 8])]:
        for stages in (2, 3):
            inner = kk[2]
            out[f"a_128x128_lanes4x8_k{k}i{inner}_s{stages}"] = (*lanes_4x8, kk, stages, False)
            out[f"a_128x128_lanes2x16_k{k}i{inner}_s{stages}"] = (*lanes_2x16, kk, stages, False)
            out[f"a_256x128_lanes4x8_k{k}i{inner}_s{stages}"] = (*tall_4x8, kk, stages, False)
    return out


def layout_variants(n, layout):
    """name -> keyword arguments of `schedule` for a GEMM of `layout` (nn, nt, tn, tt),
    on the two best tilings of the NN ceiling. Each operand whose rows are of the
    reduction (A in n, B in t) is transposed into shared memory as the sketch does (T),
    kept as stored (S; with the lanes interleaved, I), or transposed once by a kernel of
    its own and read as stored after (K, the sketch's `transpose_kernels`), or transposed
    by the fetch through registers (R: T with `software_pipeline_register_fetch`); "_vl"
    variants read each step's operands into registers by vector loads. E: T with one
    element a thread, consecutive threads along the source's rows, into rows padded by one
    word (each warp's 4-byte copies read 128 contiguous bytes; T's lanes of 4 read 16 bytes
    of each of 8 rows a copy)."""
    a_rows = layout[0] == "n"
    b_rows = layout[1] == "t"
    tilings = {
        "128x128_lanes4x8": ([n // 128, 2, 4, 4, 1, 4], [n // 128, 2, 2, 8, 1, 4], 3),
        "256x128_lanes4x8": ([n // 256, 4, 4, 4, 1, 4], [n // 128, 2, 2, 8, 1, 4], 2),
    }
    forms = {
        "T": dict(t=True),
        "S": dict(t=False),
        "I": dict(t=False, i=True),
        "K": dict(t=None, k=True),
        "R": dict(t=True, r=True),
        "E": dict(t=True, lone=True),
    }
    out = {}
    for tname, (mi, nj, stages) in tilings.items():
        for kname, kk in [("k32i16", [n // 32, 2, 16]), ("k32i8", [n // 32, 4, 8])]:
            for fa in (forms if a_rows else ["-"]):
                for fb in (forms if b_rows else ["-"]):
                    if "K" in (fa, fb) and ({fa, fb} - {"K", "-"} or kname != "k32i16"):
                        continue
                    # Staging in registers is the pipeline's, for every transposing fetch.
                    if "R" in (fa, fb) and {fa, fb} & {"T", "K"}:
                        continue
                    if "E" in (fa, fb) and {fa, fb} - {"E", "-"}:
                        continue
                    a = forms.get(fa, dict(t=None))
                    b = forms.get(fb, dict(t=None))
                    args = dict(mi=mi, nj=nj, kk=kk, stages=stages,
                                transpose_a=a["t"], transpose_b=b["t"],
                                interleave_i=a.get("i", False), interleave_j=b.get("i", False),
                                kernels=(a.get("k", False), b.get("k", False)),
                                registers=a.get("r", False) or b.get("r", False),
                                lone=(a.get("lone", False), b.get("lone", False)))
                    name = f"{layout}_{fa}{fb}_{tname}_{kname}_s{stages}"
                    out[name] = args
                    if {fa, fb} <= {"T", "-"}:
                        out[name + "_vl"] = dict(args, local=True)
    return out


def kernel_variants(n):
    """name -> keyword arguments of `schedule` for matmul:NxNxN (NN) with A transposed by
    a kernel of its own: tilings, lane arrangements, reduction steps and stage counts
    around the best K variant (issue 17's fp32 item)."""
    tilings = {
        "256x128_l4x8": ([n // 256, 4, 4, 4, 1, 4], [n // 128, 2, 2, 8, 1, 4]),
        "128x128_l4x8": ([n // 128, 2, 4, 4, 1, 4], [n // 128, 2, 2, 8, 1, 4]),
        "128x256_l4x8": ([n // 128, 2, 4, 4, 1, 4], [n // 256, 4, 2, 8, 1, 4]),
        "256x128_l8x4": ([n // 256, 4, 2, 8, 1, 4], [n // 128, 2, 4, 4, 1, 4]),
    }
    steps = {"k32i16": [n // 32, 2, 16], "k16i16": [n // 16, 1, 16], "k32i8": [n // 32, 4, 8]}
    out = {}
    for tname, (mi, nj) in tilings.items():
        for kname, kk in steps.items():
            for stages in (2, 3, 4):
                if tname != "256x128_l4x8" and kname != "k32i16":
                    continue
                if tname == "128x128_l4x8" and stages == 2:
                    continue
                out[f"nn_K-_{tname}_{kname}_s{stages}"] = dict(
                    mi=mi, nj=nj, kk=kk, stages=stages, transpose_a=None, transpose_b=None,
                    kernels=(True, False))
    return out


def main():
    args = sys.argv[1:]
    layout = None
    if len(args) >= 2 and args[0] == "--layout":
        layout, args = args[1], args[2:]
    kernels = bool(args) and args[0] == "--kernels"
    if kernels:
        args = args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    out = args[0]
    os.makedirs(out, exist_ok=True)
    for n in map(int, args[1:]):
        if n % 256:
            sys.exit(f"N = {n}: the variants tile by 256")
        if kernels:
            for name, args in kernel_variants(n).items():
                with open(os.path.join(out, f"{n}_{name}.sched"), "w") as f:
                    f.write(schedule(**args))
            continue
        if layout:
            for name, args in layout_variants(n, layout).items():
                with open(os.path.join(out, f"{n}_{name}.sched"), "w") as f:
                    f.write(schedule(**args))
            continue
        for name, (mi, nj, kk, stages, transpose_a) in variants(n).items():
            with open(os.path.join(out, f"{n}_{name}.sched"), "w") as f:
                f.write(schedule(mi, nj, kk, stages, transpose_a=transpose_a))


if __name__ == "__main__":
    main()
