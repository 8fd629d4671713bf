#!/usr/bin/env python3
"""Tensor-core GEMM schedules (mma.sync m16n8k16) in the structure of
examples/schedules/tensor_core_gemm.sched, with the tile sizes written out: the warps of a
block (wm x wn), the mma tiles of a warp (tm x tn tiles of 16 x 8), the reduction step (kk
x 16), the pipeline stages and the launch order of the blocks (`group` block rows of C
side by side in consecutive blocks, so that the blocks running at once share their B
panels in L2; 1 = row by row). benches/tensor_core.sh builds, checks and times them
against cublasLt.

    benches/tensor_core.py OUT      writes OUT/<variant>.sched for every variant
"""
import os
import sys


def schedule(wm, wn, tm, tn, kk, stages, group=1, whole_stage=False):
    threads = 32 * wm * wn
    bk = 16 * kk
    bn = 8 * wn * tn

    def pad(row):  # rows of 16-bit elements padded by 16 bytes against bank conflicts
        return min(row, 64)

    if group > 1:
        raster = f"""i00, i01 = split(i0, factors=[None, {group}])
reorder(i00, j0, i01)
bx = fuse(i00, j0, i01)"""
    else:
        raster = "bx = fuse(i0, j0)"
    if whole_stage:
        # The fragments of a whole shared stage loaded at once, before its mma steps.
        fragments = """compute_at(a_fr, k0)
compute_at(b_fr, k0)
_, _, _, fa0, fa1 = get_loops(a_fr)
fa00, fa01 = split(fa0, factors=[None, 16])
fa10, fa11 = split(fa1, factors=[None, 16])
reorder(fa00, fa10, fa01, fa11)
tensorize(fa01, intrin="mma_load_a")
_, _, _, fb0, fb1 = get_loops(b_fr)
fb00, fb01 = split(fb0, factors=[None, 16])
fb10, fb11 = split(fb1, factors=[None, 8])
reorder(fb00, fb10, fb01, fb11)
tensorize(fb01, intrin="mma_load_b")"""
        fragment_unrolls = "unroll(fa00)\nunroll(fa10)\nunroll(fb00)\nunroll(fb10)"
    else:
        fragments = """_, _, _, _, fa0, fa1 = get_loops(a_fr)
fa00, fa01 = split(fa0, factors=[None, 16])
tensorize(fa01, intrin="mma_load_a")
_, _, _, _, fb0, fb1 = get_loops(b_fr)
fb10, fb11 = split(fb1, factors=[None, 8])
reorder(fb10, fb0, fb11)
tensorize(fb0, intrin="mma_load_b")"""
        fragment_unrolls = "unroll(fa00)\nunroll(fb10)"
    lines = f"""b0 = get_block("C_acc")
b1 = cache_write(b0, write_index=0, scope="fragment")
c = get_block("C")
reverse_compute_inline(c)
i, j, k = get_loops(b0)
i0, i1, i2, i3 = split(i, factors=[None, {wm}, {tm}, 16])
j0, j1, j2, j3 = split(j, factors=[None, {wn}, {tn}, 8])
k0, k1, k2 = split(k, factors=[None, {kk}, 16])
reorder(i0, j0, i1, j1, k0, k1, i2, j2, i3, j3, k2)
{raster}
bind(bx, thread="blockIdx.x")
ty = fuse(i1, j1)
bind(ty, thread="threadIdx.y")
reverse_compute_at(b1, ty)
a_sh = cache_read(b0, read_index=0, scope="shared")
b_sh = cache_read(b0, read_index=1, scope="shared")
a_fr = cache_read(b0, read_index=0, scope="fragment")
b_fr = cache_read(b0, read_index=1, scope="fragment")
compute_at(a_fr, k1)
compute_at(b_fr, k1)
compute_at(a_sh, k0)
compute_at(b_sh, k0)
_, _, _, a0, a1 = get_loops(a_sh)
af = fuse(a0, a1)
_, aty, atx, av = split(af, factors=[None, {wm * wn}, 32, 8])
bind(aty, thread="threadIdx.y")
bind(atx, thread="threadIdx.x")
vectorize(av)
_, _, _, b0_, b1_ = get_loops(b_sh)
bf = fuse(b0_, b1_)
_, bty, btx, bv = split(bf, factors=[None, {wm * wn}, 32, 8])
bind(bty, thread="threadIdx.y")
bind(btx, thread="threadIdx.x")
vectorize(bv)
{fragments}
init = decompose_reduction(b0, k0)
tensorize(i3, intrin="mma_sync")
_, _, ii2, ij2, ii3, ij3 = get_loops(init)
tensorize(ii3, intrin="mma_fill")
_, _, w0, w1 = get_loops(b1)
w00, w01 = split(w0, factors=[None, 16])
w10, w11 = split(w1, factors=[None, 8])
reorder(w00, w10, w01, w11)
tensorize(w01, intrin="mma_store")
unroll(i2)
unroll(j2)
unroll(k1)
{fragment_unrolls}
unroll(ii2)
unroll(ij2)
unroll(w00)
unroll(w10)
storage_align(a_sh, buffer_index=0, axis=0, factor={pad(bk)}, offset=8)
storage_align(b_sh, buffer_index=0, axis=0, factor={pad(bn)}, offset=8)
"""
    if stages > 1:
        compute = ", ".join([str(stages - 1)] * (3 if whole_stage else 1))
        lines += f'annotate(k0, key="software_pipeline_stage", value=[0, 0, {compute}])\n'
    return lines


# name -> (warps m, warps n, mma tiles m, mma tiles n, k steps of 16, stages, group[,
#          fragments of a whole shared stage loaded at once: "_ws"])
VARIANTS = {
    "b128x128_w2x2_k32_s3": (2, 2, 4, 8, 2, 3, 1),
    "b128x128_w2x2_k64_s3": (2, 2, 4, 8, 4, 3, 1),
    "b128x128_w2x2_k64_s4": (2, 2, 4, 8, 4, 4, 1),
    "b128x128_w2x2_k32_s3_g4": (2, 2, 4, 8, 2, 3, 4),
    "b128x128_w2x2_k32_s3_g8": (2, 2, 4, 8, 2, 3, 8),
    "b128x128_w2x2_k64_s3_g8": (2, 2, 4, 8, 4, 3, 8),
    "b128x128_w2x2_k64_s4_g8": (2, 2, 4, 8, 4, 4, 8),
    "b128x128_w2x2_k64_s3_g16": (2, 2, 4, 8, 4, 3, 16),
    "b128x256_w2x4_k64_s3": (2, 4, 4, 8, 4, 3, 1),
    "b128x256_w2x4_k64_s3_g8": (2, 4, 4, 8, 4, 3, 8),
    "b256x128_w4x2_k32_s3_g4": (4, 2, 4, 8, 2, 3, 4),
    "b128x128_w2x4_k32_s4": (2, 4, 4, 4, 2, 4, 1),
    # 16 warps: larger blocks (fewer L2 reads per FLOP) with 32 x 64 / 64 x 32 warp tiles.
    "b128x256_w4x4_k64_s3": (4, 4, 2, 8, 4, 3, 1),
    "b128x256_w4x4_k32_s4": (4, 4, 2, 8, 2, 4, 1),
    "b256x128_w4x4_k64_s3": (4, 4, 4, 4, 4, 3, 1),
    "b256x128_w8x2_k64_s3_g8": (8, 2, 2, 8, 4, 3, 8),
    "b128x256_w4x4_k64_s3_g8": (4, 4, 2, 8, 4, 3, 8),
    "b128x128_w2x2_k32_s3_ws": (2, 2, 4, 8, 2, 3, 1, True),
    "b128x128_w4x2_k32_s3_ws": (4, 2, 2, 8, 2, 3, 1, True),
    "b128x128_w4x2_k64_s3_ws": (4, 2, 2, 8, 4, 3, 1, True),
    "b128x256_w4x4_k32_s3_ws": (4, 4, 2, 8, 2, 3, 1, True),
    "b128x128_w4x2_k32_s4_ws_g8": (4, 2, 2, 8, 2, 4, 8, True),
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, v in VARIANTS.items():
        with open(os.path.join(out, f"{name}.sched"), "w") as f:
            f.write(schedule(*v))


if __name__ == "__main__":
    main()
