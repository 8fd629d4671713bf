#!/usr/bin/env python3
"""Checks benches/probe/wgmma_gemm.cu's shared-memory addressing without a GPU.

For one stage of each of the STAGES buffers it computes
  * where the kernel's cp.async copies put every element: A (m, k) and B (k, n), the same
    formulas as load_tile in the .cu (16-byte chunk, 128-byte swizzle),
  * where wgmma reads that element, from the descriptors the kernel builds (make_desc, the
    per-stage and per-k16 increments), decoded field by field and put through the PTX ISA
    canonical layouts (9.7.15.5.1.2.1.3, in CuTe notation, T = 128 / 16 = 8 for f16):
      K-major,  128B swizzle: ((8,m),(T,2k)) : ((8T,SBO),(1,T))
      MN-major, 128B swizzle: ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))
    element offsets times 2 bytes, added to the start address, then Swizzle<3,4,3> on the
    byte address (bits 4-6 ^= bits 7-9; base offset 0: the pattern repeats on 1024-byte
    boundaries of the shared address),
and asserts they agree for every element, for both warpgroups, every k16 step and stage.
It also checks that the copies cover each stage exactly once, the pipeline schedule (no stage
refilled while a wgmma group may still read it, every tile landed before it is read), and
the epilogue's accumulator mapping against CUTLASS's CLayout_64xN. Negative controls (a wrong
LBO, trans-b = 0, unswizzled copies, a base not 1024-aligned) must fail.

    python3 benches/probe/swizzle_check.py [BN [STAGES [WG_INFLIGHT]]]   (defaults from the .cu)
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = open(os.path.join(HERE, "wgmma_gemm.cu")).read()


def default(name):
    return int(re.search(rf"#define {name} (\d+)", SRC).group(1))


BM, BK, THREADS = default("BM"), default("BK"), default("THREADS")
BN = int(sys.argv[1]) if len(sys.argv) > 1 else default("BN")
STAGES = int(sys.argv[2]) if len(sys.argv) > 2 else default("STAGES")
INFLIGHT = int(sys.argv[3]) if len(sys.argv) > 3 else default("WG_INFLIGHT")
A_STAGE = BM * BK * 2
B_STAGE = BK * BN * 2
STAGE = A_STAGE + B_STAGE
B_LBO = BK * 128
SW_SBO = 1024
T = 8  # f16 elements per 128 bits
MASK64 = (1 << 64) - 1


# ---- the kernel's side -------------------------------------------------------------------
def make_desc(saddr, lbo, sbo):  # make_desc in the .cu
    lo = ((saddr & 0x3FFFF) >> 4) | (((lbo & 0x3FFFF) >> 4) << 16)
    hi = ((sbo & 0x3FFFF) >> 4) | (1 << 30)
    return ((hi << 32) | lo) & MASK64


def copy_addresses(sbase, stage, swizzle=True):
    """{('A', m, k) or ('B', k, n): byte address} written by load_tile(stage, .)."""
    out = {}
    sa = sbase + stage * STAGE
    sb = sa + A_STAGE
    sw = (lambda c, r: c ^ (r & 7)) if swizzle else (lambda c, r: c)
    for tid in range(THREADS):
        a_row, a_c = tid // 8, tid % 8
        a_dst = a_row * 128 + sw(a_c, a_row) * 16
        for p in range(BM * BK // 8 // THREADS):
            m, k0 = a_row + 32 * p, a_c * 8          # global source: row m, columns k0..k0+7
            dst = sa + a_dst + p * 32 * 128
            for e in range(8):
                key = ("A", m, k0 + e)
                assert key not in out, f"A element {key} copied twice"
                out[key] = dst + 2 * e
        b_row, b_cn = tid // (BN // 8), tid % (BN // 8)
        b_dst = (b_cn // 8) * B_LBO + b_row * 128 + sw(b_cn & 7, b_row) * 16
        rows_per_iter = THREADS // (BN // 8)
        for p in range(BK * BN // 8 // THREADS):
            k, n0 = b_row + rows_per_iter * p, b_cn * 8
            dst = sb + b_dst + p * rows_per_iter * 128
            for e in range(8):
                key = ("B", k, n0 + e)
                assert key not in out, f"B element {key} copied twice"
                out[key] = dst + 2 * e
    return out


# ---- the hardware's side (PTX ISA descriptor + canonical layouts) ------------------------
def decode(desc):
    return dict(start=(desc & 0x3FFF) << 4, lbo=((desc >> 16) & 0x3FFF) << 4,
                sbo=((desc >> 32) & 0x3FFF) << 4, base_offset=(desc >> 49) & 7,
                swizzle=(desc >> 62) & 3)


def swz128(addr):  # Swizzle<3,4,3> on a byte address
    return addr ^ (((addr >> 7) & 7) << 4)


def read_k_major(f, row, k):
    """K-major SW128 operand (A, or B with trans-b = 0): row in the M|N extent, k in 0..15."""
    assert f["swizzle"] == 1 and f["base_offset"] == 0
    # ((8,m),(T,2k)) : ((8T,SBO),(1,T)) in elements; SBO given in bytes
    off = 2 * ((row % 8) * 8 * T + (k % T) * 1 + (k // T) * T) + (row // 8) * f["sbo"]
    return swz128(f["start"] + off)


def read_mn_major(f, mn, k):
    """MN-major SW128 operand (B with trans-b = 1): mn in the N extent, k in 0..15."""
    assert f["swizzle"] == 1 and f["base_offset"] == 0
    # ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)) in elements; LBO, SBO given in bytes
    i0, i1, i2 = mn % T, (mn // T) % 8, mn // (8 * T)
    k0, k1 = k % 8, k // 8
    off = 2 * (i0 + i1 * T + k0 * 8 * T) + i2 * f["lbo"] + k1 * f["sbo"]
    return swz128(f["start"] + off)


def check_stage_reads(sbase, stage, written, lbo=B_LBO, trans_b=1):
    """Every element each wgmma of this stage reads, against where it was written."""
    bad = 0
    soff = (stage * STAGE) >> 4                          # as in the kernel's main loop
    for wg in range(2):
        desc_a0 = make_desc(sbase + wg * 64 * 128, 16, SW_SBO)
        desc_b0 = make_desc(sbase + A_STAGE, lbo, SW_SBO)
        for j in range(BK // 16):
            da = decode((desc_a0 + soff + (j * 32 >> 4)) & MASK64)
            db = decode((desc_b0 + soff + (j * 16 * 128 >> 4)) & MASK64)
            for mi in range(64):
                for ki in range(16):
                    if read_k_major(da, mi, ki) != written[("A", 64 * wg + mi, 16 * j + ki)]:
                        bad += 1
            for ni in range(BN):
                for ki in range(16):
                    got = read_mn_major(db, ni, ki) if trans_b else read_k_major(db, ni, ki)
                    if got != written[("B", 16 * j + ki, ni)]:
                        bad += 1
    return bad


def check_footprint(sbase, stage, written):
    lo, hi = sbase + stage * STAGE, sbase + (stage + 1) * STAGE
    addrs = sorted(written.values())
    assert len(set(addrs)) == len(addrs) == BM * BK + BK * BN, "copies overlap"
    assert lo <= addrs[0] and addrs[-1] < hi, "copies leave the stage"
    assert all((a - lo) % 2 == 0 for a in addrs)


def check_schedule(kt_total=16, prefetch=None):
    """Stage reuse and cp.async group accounting of the main loop, abstractly."""
    P = STAGES - 1 - INFLIGHT if prefetch is None else prefetch
    assert P >= 1
    stage_tile = {}            # stage -> tile it holds (last copied)
    groups = []                # cp.async groups in commit order: tile or None
    for s in range(P):
        if s < kt_total:
            stage_tile[s % STAGES] = s
        groups.append(s if s < kt_total else None)
    done_wgmma = -1            # highest tile whose wgmma group every warpgroup retired
    for kt in range(kt_total):
        # cp.async.wait_group P-1: all but the newest P-1 groups complete
        landed = {g for g in groups[: len(groups) - (P - 1)] if g is not None}
        assert kt in landed, f"tile {kt} read before it landed"
        assert stage_tile[kt % STAGES] == kt, f"stage {kt % STAGES} holds the wrong tile"
        # __syncthreads; wgmma reads stage kt % STAGES; then the refill
        nt = kt + P
        if nt < kt_total:
            old = stage_tile.get(nt % STAGES)
            assert nt % STAGES != kt % STAGES
            assert old is None or old <= done_wgmma, \
                f"kt={kt}: refilling stage of tile {old} while wgmma may read it"
            stage_tile[nt % STAGES] = nt
        groups.append(nt if nt < kt_total else None)
        # wgmma.wait_group INFLIGHT, then (next iteration) the barrier makes it CTA-wide
        done_wgmma = kt - INFLIGHT
    return True


def check_epilogue(n=BN):
    """The epilogue's (thread, register) -> (row, col) against CUTLASS CLayout_64xN:
    ((4,8,4),(2,2,N/8)) : ((128,1,16),(64,8,512)), offset = row + 64*col."""
    seen = set()
    for t in range(128):
        t0, t1, t2 = t % 4, (t // 4) % 8, t // 32
        warp, lane = t // 32, t % 32
        for c in range(n // 8):
            for h in range(2):
                for e in range(2):
                    v0, v1, v2 = e, h, c
                    off = 128 * t0 + t1 + 16 * t2 + 64 * v0 + 8 * v1 + 512 * v2
                    ref = (off % 64, off // 64)
                    ours = (16 * warp + lane // 4 + 8 * h, 8 * c + 2 * (lane % 4) + e)
                    assert ours == ref, (t, c, h, e, ours, ref)
                    seen.add(ours)
    assert len(seen) == 64 * n


def main():
    print(f"tile {BM}x{BN}x{BK}, {STAGES} stages of {STAGE} bytes, wgmma m64n{BN}k16, "
          f"{INFLIGHT} wgmma group(s) left in flight")
    total = 0
    for sbase in (0, 1024, 7 * 1024):
        for stage in range(STAGES):
            w = copy_addresses(sbase, stage)
            check_footprint(sbase, stage, w)
            bad = check_stage_reads(sbase, stage, w)
            assert bad == 0, f"base {sbase} stage {stage}: {bad} elements disagree"
            total += 2 * (64 * 16 + BN * 16) * (BK // 16)
    assert sbase + STAGES * STAGE + 1024 <= 227 * 1024
    print(f"ok: {total} wgmma element reads match the cp.async destinations "
          f"(3 base addresses x {STAGES} stages x 2 warpgroups x {BK // 16} k16 steps)")
    check_schedule()
    print("ok: pipeline schedule (tiles landed before read, no stage refilled while read)")
    check_epilogue()
    print("ok: epilogue mapping equals CUTLASS CLayout_64xN")

    w = copy_addresses(0, 1)
    controls = {
        "LBO = 1024 instead of BK*128": check_stage_reads(0, 1, w, lbo=1024),
        "trans-b = 0 (K-major B)": check_stage_reads(0, 1, w, trans_b=0),
        "unswizzled copies": check_stage_reads(0, 1, copy_addresses(0, 1, swizzle=False)),
        "base 512 (not 1024-aligned)": check_stage_reads(512, 1, copy_addresses(512, 1)),
    }
    for name, bad in controls.items():
        assert bad > 0, f"negative control passed: {name}"
        print(f"ok: negative control fails as it should: {name} ({bad} mismatches)")
    try:
        check_schedule(prefetch=STAGES - INFLIGHT)
        raise SystemExit("negative control passed: prefetch one tile too deep")
    except AssertionError as e:
        print(f"ok: negative control fails as it should: prefetch one tile too deep ({e})")


if __name__ == "__main__":
    main()
