//! The tensor-core sketch (`[tensor_core]` in `search_spaces/cuda.toml`): a GEMM whose
//! 16-bit operands (f16, bf16) are accumulated in f32 runs on `mma.sync.m16n8k16`, one
//! whose f32 operands are read at TensorFloat-32's precision (`math=tf32`) on
//! `mma.sync.m16n8k8`, in the structure of MetaSchedule's multi-level tiling with tensor
//! cores and of `examples/schedules/tensor_core_gemm.sched` (`tensor_core_tf32_gemm.sched`):
//!
//! 1. The GEMM's axes are padded (`pad_einsum`) to a sampled multiple of 32 each (the
//!    multiples of `pad_multiples` that waste at most `max_waste`, and the extent itself
//!    where 32 divides it), so that every tile below divides them; the zero-filled input
//!    copies are inlined into the shared fetches, the copy back into the write-back. An
//!    input whose rows are no whole 16-byte vectors (an odd f16 reduction) is copied
//!    element by element that way; its zero-filled copy may instead run as a kernel of
//!    its own (a decision: `unaligned_pad_kernels` in `sketch.rs`).
//! 2. `cache_write` of the main block into a `fragment` accumulator; elementwise epilogues
//!    (the cast to the output's 16-bit dtype, bias, relu) inlined into its write-back,
//!    which `mma_store` computes per element.
//! 3. Tiling (`sample_perfect_tile`, decisions of the trace): rows `i` into
//!    `[blocks, warps, tiles] x 16`, columns `j` into `[blocks, warps, tiles] x 8`, the
//!    reduction `k` into `[steps, per stage] x 16` (x 8 on TF32), ordered
//!    `bi bj | wi wj | k0 kk | ti tj | 16 8 16`. Drawn jointly so that a block has at most
//!    `max_warps` warps and a lane at most `max_accumulators` f32 accumulators (4 per
//!    16 x 8 tile); mutations keep only the per-axis bounds of the trace.
//! 4. `bi bj` fused to `blockIdx.x`, `wi wj` to `threadIdx.y`: a block is warps in y and
//!    the 32 lanes of a warp in x, which the fetches bind and the instructions imply.
//! 5. The accumulator is written back per warp (`reverse_compute_at` at the warp loop).
//! 6. A and B staged in shared memory at `k0` (16-byte vectors fetched by all the
//!    block's threads; rows padded by 16 bytes against bank conflicts) and in fragments
//!    at `kk` (an operand stored the other way round, `A[k, i]` or `B[j, k]`, is stored
//!    transposed in its fragment, read by `ldmatrix .trans`); the fetch loop is
//!    software-pipelined by the space's `[pipeline]` rule (a sampled stage count). On
//!    TF32, which `ldmatrix .trans` cannot transpose, an operand whose k is not its last
//!    axis (`A[k, i]`, `B[k, j]`) is transposed into shared memory instead, by 4-byte
//!    copies (`fetch_transposed`, which the wgmma sketch uses too).
//! 7. `decompose_reduction` at `k0`; the five nests tensorized (`mma_fill`,
//!    `mma_load_a`, `mma_load_b`, `mma_sync`, `mma_store`), the loops around them
//!    unrolled so that every fragment register is a constant index.

use super::{
    add_multiples, at, attempt, pad_by_choices, padded_extent, prologue_kernels, stages,
    standalone, unaligned_pad_kernels, SketchError,
};
use crate::ir::{BinOp, DType, Expr, FactorRead, IterKind, Program, VarId};
use crate::schedule::{BlockRv, IntArg, LoopRv, Schedule};
use crate::search::space::{SearchSpace, TensorCore};

/// Draws of the joint tile sizes before giving up on the bounds (free sampling then).
const TRIES: usize = 256;

/// The padding every axis gets at least: two mma tiles of 16.
const PAD_BASE: i64 = 32;

/// A GEMM main block `C[i, j] += f32(A[..]) * f32(B[..])` on 16-bit operands.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Gemm {
    /// The read indices (`cache_read`) of A (indexed by i and k) and B (k and j).
    pub a: i64,
    pub b: i64,
    /// A is read as `A[k, i]`; B as `B[j, k]`.
    pub a_k_major: bool,
    pub b_n_major: bool,
    /// A batch of GEMMs: a leading spatial axis indexing both operands and the output (or
    /// the partial GEMMs of a split reduction, the batch a run of the reduction).
    pub batch: bool,
    /// f32 operands read at TensorFloat-32's precision (`tf32(a) * tf32(b)`), on
    /// `mma.sync.m16n8k8` here and `wgmma` there; otherwise 16-bit operands widened to f32.
    pub tf32: bool,
}

/// Whether the tensor-core sketch applies to `main` of `p` under `space`.
pub(super) fn applies(space: &SearchSpace, p: &Program, main: crate::ir::BlockId) -> bool {
    space.tensor_core.is_some() && space.is_gpu() && gemm(p, main).is_some()
}

pub(super) fn gemm(p: &Program, main: crate::ir::BlockId) -> Option<Gemm> {
    let blk = p.block(main);
    let (spatial, reduce): (Vec<_>, Vec<_>) = blk
        .iter_vars
        .iter()
        .partition(|iv| iv.kind == IterKind::Spatial);
    // `C[i, j]`, or a batch of them `C[b, i, j]` whose operands are indexed by `b` first.
    let (batch, i, j, k) = match (spatial.as_slice(), reduce.as_slice()) {
        ([i, j], [k]) => (None, i.var, j.var, k.var),
        // The batch is the output's first index (a split reduction's `rfactor` puts its
        // variable after i and j among the block's).
        ([_, _, _], [k]) => match blk.body.indices.as_slice() {
            [Expr::Var(b), Expr::Var(i), Expr::Var(j)] => (Some(*b), *i, *j, k.var),
            _ => return None,
        },
        _ => return None,
    };
    let lead: Vec<Expr> = batch.map(Expr::Var).into_iter().collect();
    let out = blk.body.buffer;
    let out_idx: Vec<Expr> = lead
        .iter()
        .cloned()
        .chain([Expr::Var(i), Expr::Var(j)])
        .collect();
    if p.buffer(out).dtype != DType::F32 || blk.body.indices != out_idx {
        return None;
    }
    let Expr::Bin(BinOp::Add, acc, prod) = &blk.body.value else {
        return None;
    };
    if !matches!(&**acc, Expr::Load(b, idx) if *b == out && *idx == blk.body.indices) {
        return None;
    }
    let Expr::Bin(BinOp::Mul, x, y) = &**prod else {
        return None;
    };
    let operand = |e: &Expr| match e.factor_load()? {
        (FactorRead::Cast(DType::F32), b, idx) if p.buffer(b).dtype.is_half() => {
            Some((b, idx.to_vec()))
        }
        (FactorRead::Tf32, b, idx) if p.buffer(b).dtype == DType::F32 => Some((b, idx.to_vec())),
        _ => None,
    };
    let (x, y) = (operand(x)?, operand(y)?);
    if p.buffer(x.0).dtype != p.buffer(y.0).dtype {
        return None;
    }
    let tf32 = p.buffer(x.0).dtype == DType::F32;
    // The two matrix indices after the batch index; or, for the partial GEMMs of a split
    // reduction (`rfactor`: `C_rf[s, i, j] += A[i, K*s + k] * B[K*s + k, j]`), the two
    // indices with the batch in the reduction's (a run of K steps per batch element).
    let split_k_extent = reduce[0].extent;
    let split = |e: &Expr| -> Option<VarId> {
        let b = batch?;
        let rest = crate::ir::simplify::simplify_in(
            &Expr::bin(
                BinOp::Sub,
                e.clone(),
                Expr::bin(BinOp::Mul, Expr::Int(split_k_extent), Expr::Var(b)),
            ),
            &Default::default(),
        );
        match rest {
            Expr::Var(v) if v == k && e.uses_var(b) => Some(v),
            _ => None,
        }
    };
    let vars = |idx: &[Expr]| -> Option<(VarId, VarId)> {
        let (head, tail) = idx.split_at(idx.len().checked_sub(2)?);
        match (head == lead.as_slice(), tail) {
            (true, [Expr::Var(u), Expr::Var(v)]) => Some((*u, *v)),
            (false, [u, v]) if head.is_empty() => match (u, v) {
                (Expr::Var(u), v) => Some((*u, split(v)?)),
                (u, Expr::Var(v)) => Some((split(u)?, *v)),
                _ => None,
            },
            _ => None,
        }
    };
    let (xu, xv) = vars(&x.1)?;
    let (yu, yv) = vars(&y.1)?;
    let ((a, a_idx), (b, b_idx)) = if xu == i || xv == i {
        ((x.0, (xu, xv)), (y.0, (yu, yv)))
    } else {
        ((y.0, (yu, yv)), (x.0, (xu, xv)))
    };
    let a_k_major = match a_idx {
        (u, v) if u == i && v == k => false,
        (u, v) if u == k && v == i => true,
        _ => return None,
    };
    let b_n_major = match b_idx {
        (u, v) if u == k && v == j => false,
        (u, v) if u == j && v == k => true,
        _ => return None,
    };
    let reads: Vec<_> = p
        .block_reads(main)
        .into_iter()
        .map(|(buf, _)| buf)
        .collect();
    let index = |buf| reads.iter().position(|r| *r == buf).map(|n| n as i64);
    Some(Gemm {
        a: index(a)?,
        b: index(b)?,
        a_k_major,
        b_n_major,
        batch: batch.is_some(),
        tf32,
    })
}

/// Builds one sample of the tensor-core sketch (see the module doc).
pub(super) fn apply(space: &SearchSpace, sch: &mut Schedule, seed: u64) -> Result<(), SketchError> {
    let rule = space
        .tensor_core
        .clone()
        .ok_or(SketchError::TensorCoreNotApplicable)?;
    // 1. Stages that compute run as kernels of their own; padding.
    let st = stages(sch.program())?;
    let mut kernels = prologue_kernels(space, sch, &st)?;
    pad(
        &rule.pad_multiples,
        PAD_BASE,
        space.max_waste,
        sch,
        &st.main,
    )?;
    kernels.extend(unaligned_pad_kernels(space, sch, &st)?);
    // 2. Accumulator and epilogues.
    let (st, main, g, wb, leftovers) = accumulate(sch, None)?;
    // 3. Tiling.
    let loops = sch.get_loops(main).map_err(at("tiling"))?;
    let (batch, [i, j, k]) = match (g.batch, &loops[..]) {
        (false, [i, j, k]) => (None, [*i, *j, *k]),
        (true, [b, i, j, k]) => (Some(*b), [*i, *j, *k]),
        _ => return Err(SketchError::TensorCoreNotApplicable),
    };
    let split =
        |sch: &mut Schedule, l: LoopRv, inner: i64| -> Result<(LoopRv, LoopRv), SketchError> {
            let parts = sch
                .split(l, &[None, Some(IntArg::Lit(inner))])
                .map_err(at("tiling"))?;
            Ok((parts[0], parts[1]))
        };
    let (io, i16) = split(sch, i, 16)?;
    let (jo, j8) = split(sch, j, 8)?;
    let (ko, k16) = split(sch, k, crate::lower::mma_k(g.tf32))?;
    let extent = |sch: &Schedule, l: LoopRv| -> Result<i64, SketchError> {
        let id = sch.loop_id(l).map_err(at("tiling"))?;
        Ok(sch.program().lp(id).extent)
    };
    let (mi, nj, kk) = (extent(sch, io)?, extent(sch, jo)?, extent(sch, ko)?);
    let hint = draw_tiles(&rule, mi, nj, kk, seed);
    let tiles = |sch: &mut Schedule, l: LoopRv, n: i64, max: i64, h: Option<Vec<i64>>| {
        let f = sch
            .sample_perfect_tile(l, n, max, h)
            .map_err(at("tiling"))?;
        let args: Vec<Option<IntArg>> = f.iter().map(|r| Some(IntArg::Rv(*r))).collect();
        let parts = sch.split(l, &args).map_err(at("tiling"))?;
        Ok::<_, SketchError>((parts, f))
    };
    let (ip, i_f) = tiles(
        sch,
        io,
        3,
        rule.max_tiles_m,
        hint.as_ref().map(|h| h.0.clone()),
    )?;
    let (jp, j_f) = tiles(
        sch,
        jo,
        3,
        rule.max_tiles_n,
        hint.as_ref().map(|h| h.1.clone()),
    )?;
    let (kp, _) = tiles(
        sch,
        ko,
        2,
        rule.max_reduction_steps,
        hint.as_ref().map(|h| h.2.clone()),
    )?;
    sch.reorder(&[
        ip[0], jp[0], ip[1], jp[1], kp[0], kp[1], ip[2], jp[2], i16, j8, k16,
    ])
    .map_err(at("tiling"))?;
    // 4. Binding (a batch's GEMMs side by side in the grid).
    let grid: Vec<LoopRv> = batch.into_iter().chain([ip[0], jp[0]]).collect();
    let bx = sch.fuse(&grid).map_err(at("binding"))?;
    sch.bind(bx, "blockIdx.x").map_err(at("binding"))?;
    let warp = sch.fuse(&[ip[1], jp[1]]).map_err(at("binding"))?;
    sch.bind(warp, "threadIdx.y").map_err(at("binding"))?;
    let warps = IntArg::Product(vec![IntArg::Rv(i_f[1]), IntArg::Rv(j_f[1])]);
    // 5. The warp's write-back.
    sch.reverse_compute_at(wb, warp).map_err(at("write-back"))?;
    // 6. Shared and fragment stages.
    let a_sh = sch
        .cache_read(main, g.a, "shared")
        .map_err(at("cache_read"))?;
    let b_sh = sch
        .cache_read(main, g.b, "shared")
        .map_err(at("cache_read"))?;
    let a_fr = sch
        .cache_read(main, g.a, "fragment")
        .map_err(at("cache_read"))?;
    let b_fr = sch
        .cache_read(main, g.b, "fragment")
        .map_err(at("cache_read"))?;
    for (b, l) in [(a_fr, kp[1]), (b_fr, kp[1]), (a_sh, kp[0]), (b_sh, kp[0])] {
        sch.compute_at(b, l).map_err(at("cache_read"))?;
    }
    // The zero-filled copies of padded inputs go into the fetches.
    for name in st.padding.iter().filter(|n| !kernels.contains(n)) {
        if let Ok(b) = sch.get_block(name) {
            let _ = attempt(sch, |s| s.compute_inline(b));
        }
    }
    // TF32 operands reach their fragments with k as the shared copy's last axis.
    let transposed = [
        g.tf32 && g.a_k_major && transpose(sch, a_sh)?,
        g.tf32 && !g.b_n_major && transpose(sch, b_sh)?,
    ];
    // Rows padded by 16 bytes, their length kept a multiple of 128 bytes otherwise.
    let elem = if g.tf32 { 4 } else { 2 };
    for (sh, transposed) in [(a_sh, transposed[0]), (b_sh, transposed[1])] {
        if transposed {
            fetch_transposed(sch, sh, &warps)?;
        } else if g.tf32 {
            let vector = aligned_vector(sch, sh, 4)?;
            fetch(sch, sh, &warps, vector)?;
        } else {
            fetch(sch, sh, &warps, 8)?;
        }
        sch.storage_align(sh, 0, 0, 128 / elem, 16 / elem)
            .map_err(at("storage_align"))?;
    }
    load(sch, a_fr, g.a_k_major, true)?;
    load(sch, b_fr, g.b_n_major, false)?;
    if let Some(p) = &space.pipeline {
        super::pipeline::pipeline(p, sch, kp[0], false)?;
    }
    // 7. The instructions.
    let init = sch
        .decompose_reduction(main, kp[0])
        .map_err(at("decompose_reduction"))?;
    tensorize(sch, i16, "mma_sync")?;
    let init_loops = sch.get_loops(init).map_err(at("tensorize"))?;
    let n = init_loops.len();
    tensorize(sch, init_loops[n - 2], "mma_fill")?;
    unroll(sch, &init_loops[n - 4..n - 2])?;
    let wb_loops = sch.get_loops(wb).map_err(at("tensorize"))?;
    let n = wb_loops.len();
    let (ro, r16) = split(sch, wb_loops[n - 2], 16)?;
    let (co, c8) = split(sch, wb_loops[n - 1], 8)?;
    sch.reorder(&[ro, co, r16, c8]).map_err(at("tensorize"))?;
    tensorize(sch, r16, "mma_store")?;
    unroll(sch, &[ro, co, ip[2], jp[2], kp[1]])?;
    for name in &leftovers {
        standalone(space, sch, name)?;
    }
    Ok(())
}

/// The padded GEMM's stages, main block and operands, after `cache_write` of the main
/// block into a `fragment` accumulator: its write-back, and the epilogues left to run as
/// kernels of their own. Elementwise epilogues (the copy back from the padded shape, the
/// conversion to the output's dtype, a bias, a relu) go into the accumulator's store
/// (`mma_store`) while every earlier one did. `partial`: the partial GEMMs of a split
/// reduction are the main block instead, their epilogues left to the sum of them.
pub(super) fn accumulate(
    sch: &mut Schedule,
    partial: Option<BlockRv>,
) -> Result<(super::Stages, BlockRv, Gemm, BlockRv, Vec<String>), SketchError> {
    let st = stages(sch.program())?;
    let main = match partial {
        Some(rf) => rf,
        None => sch.get_block(&st.main).map_err(at("main block"))?,
    };
    let g = {
        let id = sch.block_id(main).map_err(at("main block"))?;
        gemm(sch.program(), id).ok_or(SketchError::TensorCoreNotApplicable)?
    };
    let wb = sch
        .cache_write(main, 0, "fragment")
        .map_err(at("cache_write"))?;
    let mut leftovers = Vec::new();
    if partial.is_some() {
        return Ok((st, main, g, wb, leftovers));
    }
    for name in &st.epilogues {
        let b = sch.get_block(name).map_err(at("epilogue"))?;
        if !leftovers.is_empty() || !inline_into_store(sch, b, wb) {
            leftovers.push(name.clone());
        }
    }
    Ok((st, main, g, wb, leftovers))
}

/// Inlines epilogue `b` into the accumulator's write-back `wb` where the store that makes
/// stays affine in the write-back's variables, as `mma_store` needs (its tiles address
/// their destination one to one); otherwise leaves the schedule as it was and says no.
/// A batch of NCHW convolutions is the case: its GEMM's rows are the images' pixels one
/// after another, and the output puts the channels between images, so the store of a
/// row reached through the conv's epilogue divides by the pixels an image has. The GEMM
/// then stores its own output and the epilogue runs as a kernel of its own.
fn inline_into_store(sch: &mut Schedule, b: BlockRv, wb: BlockRv) -> bool {
    let before = sch.clone();
    if attempt(sch, |s| s.reverse_compute_inline(b)).is_err() {
        return false;
    }
    let affine = sch.block_id(wb).is_ok_and(|id| {
        let p = sch.program();
        let blk = p.block(id);
        let flat = crate::ir::tensorize::flat_store_index(p, blk);
        blk.iter_vars
            .iter()
            .all(|iv| crate::ir::tensorize::step(&flat, iv.var).is_some())
    });
    if !affine {
        *sch = before;
    }
    affine
}

/// The cooperative fetch of a shared stage: its loops fused and spread over the warps
/// (`threadIdx.y`) and lanes (`threadIdx.x`) in 16-byte vectors of `vector` elements.
pub(super) fn fetch(
    sch: &mut Schedule,
    sh: BlockRv,
    warps: &IntArg,
    vector: i64,
) -> Result<(), SketchError> {
    let loops = sch.get_loops(sh).map_err(at("fetch"))?;
    let n = loops.len();
    let f = sch.fuse(&loops[n - 2..]).map_err(at("fetch"))?;
    let parts = sch
        .split(
            f,
            &[
                None,
                Some(warps.clone()),
                Some(IntArg::Lit(32)),
                Some(IntArg::Lit(vector)),
            ],
        )
        .map_err(at("fetch"))?;
    sch.bind(parts[1], "threadIdx.y").map_err(at("fetch"))?;
    sch.bind(parts[2], "threadIdx.x").map_err(at("fetch"))?;
    sch.vectorize(parts[3]).map_err(at("fetch"))?;
    Ok(())
}

/// Stores the shared copy `sh` with its last two axes swapped (`transform_layout`);
/// returns true.
pub(super) fn transpose(sch: &mut Schedule, sh: BlockRv) -> Result<bool, SketchError> {
    let rank = {
        let id = sch.block_id(sh).map_err(at("transform_layout"))?;
        let p = sch.program();
        p.buffer(p.block(id).body.buffer).shape.len()
    };
    let mut perm: Vec<i64> = (0..rank as i64).collect();
    perm.swap(rank - 2, rank - 1);
    sch.transform_layout(sh, 0, &crate::schedule::layout::singletons(&perm))
        .map_err(at("transform_layout"))?;
    Ok(true)
}

/// The longest vector, of `lanes` elements at most, that the rows of the buffer the copy
/// `sh` reads keep aligned (a row of 311 floats takes single elements). Called once the
/// padding and `im2col`'s stages are inlined into the copy: what it reads then is what
/// the kernel loads (an input, or a buffer a kernel before stored in a new layout).
pub(super) fn aligned_vector(sch: &Schedule, sh: BlockRv, lanes: i64) -> Result<i64, SketchError> {
    let id = sch.block_id(sh).map_err(at("fetch"))?;
    let p = sch.program();
    let row = match p.block_reads(id).as_slice() {
        // Trailing axes of extent 1 (a 1x1 conv's weights `k, c, 1, 1`) leave the row.
        [(buf, _)] => p
            .buffer(*buf)
            .shape
            .iter()
            .rev()
            .find(|e| **e > 1)
            .copied()
            .unwrap_or(1),
        _ => 1,
    };
    let mut vector = lanes;
    while row % vector != 0 {
        vector /= 2;
    }
    Ok(vector)
}

/// The cooperative fetch of an operand stored transposed in shared memory (the source's
/// rows `k` become the copy's columns): the 32 lanes of a warp copy 4 rows of k by 8
/// consecutive elements of the source's row, one element each (4-byte copies). A warp's
/// loads then fill whole 32-byte sectors of 4 source rows, and its stores land in 8
/// shared rows 4 elements apart, which the swizzle (wgmma) or rows padded by 16 bytes
/// (mma.sync) spread over all 32 banks (lanes along
/// the source's row alone, or vectors along it, put 4 to 16 stores in one bank).
pub(super) fn fetch_transposed(
    sch: &mut Schedule,
    sh: BlockRv,
    warps: &IntArg,
) -> Result<(), SketchError> {
    let loops = sch.get_loops(sh).map_err(at("fetch"))?;
    let n = loops.len();
    let lit = |v: i64| Some(IntArg::Lit(v));
    let k = sch
        .split(loops[n - 2], &[None, lit(4)])
        .map_err(at("fetch"))?;
    let mn = sch
        .split(loops[n - 1], &[None, lit(8)])
        .map_err(at("fetch"))?;
    sch.reorder(&[k[0], mn[0], k[1], mn[1]])
        .map_err(at("fetch"))?;
    let outer = sch.fuse(&[k[0], mn[0]]).map_err(at("fetch"))?;
    let lanes = sch.fuse(&[k[1], mn[1]]).map_err(at("fetch"))?;
    let w = sch
        .split(outer, &[None, Some(warps.clone())])
        .map_err(at("fetch"))?;
    sch.bind(w[1], "threadIdx.y").map_err(at("fetch"))?;
    sch.bind(lanes, "threadIdx.x").map_err(at("fetch"))?;
    Ok(())
}

/// A fragment stage's nest tensorized. Its two loops run over the source's axes; the
/// loop over the tile's split axis (A: rows m, by 16; B: columns n, by 8) is split, the
/// tile's `rows x cols` nest (A: m, k; B: k, n) goes inside and the loop over the other
/// tiles outside, unrolled. A source stored the other way round (`A[k, m]`, `B[n, k]`,
/// `transposed`) gives a fragment stored transposed (`transform_layout`), so that its
/// tiles run along its rows.
fn load(sch: &mut Schedule, fr: BlockRv, transposed: bool, is_a: bool) -> Result<(), SketchError> {
    let loops = sch.get_loops(fr).map_err(at("tensorize"))?;
    let n = loops.len();
    let (first, second) = (loops[n - 2], loops[n - 1]);
    let split_first = is_a != transposed;
    let (tiled, other) = if split_first {
        (first, second)
    } else {
        (second, first)
    };
    if transposed {
        sch.transform_layout(fr, 0, &[vec![1], vec![0]])
            .map_err(at("tensorize"))?;
    }
    let size = if is_a { 16 } else { 8 };
    let parts = sch
        .split(tiled, &[None, Some(IntArg::Lit(size))])
        .map_err(at("tensorize"))?;
    let (outer, inner) = (parts[0], parts[1]);
    let nest = if is_a { [inner, other] } else { [other, inner] };
    sch.reorder(&[outer, nest[0], nest[1]])
        .map_err(at("tensorize"))?;
    tensorize(sch, nest[0], if is_a { "mma_load_a" } else { "mma_load_b" })?;
    unroll(sch, &[outer])
}

pub(super) fn tensorize(sch: &mut Schedule, l: LoopRv, intrin: &str) -> Result<(), SketchError> {
    sch.tensorize(l, intrin).map_err(at("tensorize"))
}

pub(super) fn unroll(sch: &mut Schedule, loops: &[LoopRv]) -> Result<(), SketchError> {
    for l in loops {
        sch.unroll(*l).map_err(at("unroll"))?;
    }
    Ok(())
}

/// Pads the GEMM's three axes to sampled multiples of `multiples` (see the module doc),
/// each at least to a multiple of `base`.
pub(super) fn pad(
    multiples: &[i64],
    base: i64,
    max_waste: f64,
    sch: &mut Schedule,
    main: &str,
) -> Result<(), SketchError> {
    let extents: Vec<i64> = {
        let p = sch.program();
        let [b] = p.find_block(main)[..] else {
            return Err(SketchError::TensorCoreNotApplicable);
        };
        p.block(b).iter_vars.iter().map(|iv| iv.extent).collect()
    };
    // A batch axis (the fourth, first of the three spatial ones) is never padded.
    let batch = extents.len() == 4;
    let choices: Vec<Vec<i64>> = extents
        .iter()
        .enumerate()
        .map(|(n, e)| {
            if batch && n == 0 {
                vec![1]
            } else {
                pad_choices(multiples, base, max_waste, *e)
            }
        })
        .collect();
    if choices.iter().all(|c| c == &[1]) {
        return Ok(());
    }
    let b = sch.get_block(main).map_err(at("pad_einsum"))?;
    pad_by_choices(sch, b, &choices)
}

/// The multiples an axis may be padded to: 1 where `base` divides it, each multiple
/// that wastes at most `max_waste` of the padded extent (two that pad to one extent both
/// stay: see `sketch::pad_choices`), and the smallest multiple where nothing else is
/// left.
fn pad_choices(multiples: &[i64], base: i64, max_waste: f64, extent: i64) -> Vec<i64> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    if extent % base == 0 {
        out.push((1, extent));
    }
    add_multiples(multiples, max_waste, extent, &mut out);
    if out.is_empty() {
        out.push((base, padded_extent(extent, base)));
    }
    out.into_iter().map(|(m, _)| m).collect()
}

/// Tile sizes drawn jointly within the rule's bounds: rows `(blocks, warps, tiles)` of
/// `mi` tiles of 16, columns of `nj` tiles of 8, the reduction `(steps, per stage)` of
/// `kk` steps of 16; `None` when no draw fits in `TRIES`.
#[allow(clippy::type_complexity)]
fn draw_tiles(
    rule: &TensorCore,
    mi: i64,
    nj: i64,
    kk: i64,
    seed: u64,
) -> Option<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7e45_0c03_0000_0017);
    let divisors =
        |n: i64, max: i64| -> Vec<i64> { (1..=n.min(max)).filter(|d| n % d == 0).collect() };
    for _ in 0..TRIES {
        let pick = |rng: &mut rand_chacha::ChaCha8Rng, v: &[i64]| v[rng.gen_range(0..v.len())];
        let tm = pick(&mut rng, &divisors(mi, rule.max_tiles_m));
        let tn = pick(&mut rng, &divisors(nj, rule.max_tiles_n));
        let wm = pick(&mut rng, &divisors(mi / tm, rule.max_warps));
        let wn = pick(&mut rng, &divisors(nj / tn, rule.max_warps));
        let ks = pick(&mut rng, &divisors(kk, rule.max_reduction_steps));
        if wm * wn > rule.max_warps || tm * tn * 4 > rule.max_accumulators {
            continue;
        }
        return Some((
            vec![mi / (wm * tm), wm, tm],
            vec![nj / (wn * tn), wn, tn],
            vec![kk / ks, ks],
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::sketch::{apply_sketch, sketches, SketchKind};
    use crate::workload::preset;

    fn program(spec: &str) -> Program {
        preset(spec).unwrap().to_program()
    }

    #[test]
    fn applies_to_16_bit_and_tf32_gemms_accumulated_in_f32_of_every_layout() {
        let space = SearchSpace::cuda_default();
        for spec in [
            "batch_matmul:b=2,m=16,n=16,k=16,dtype=f16,acc=f32",
            "dense_bias_relu:m=16,n=16,k=16,dtype=f16,acc=f32",
        ] {
            assert!(
                sketches(&space, &program(spec))
                    .unwrap()
                    .contains(&SketchKind::TensorCore),
                "{spec}"
            );
        }
        for layout in ["nn", "nt", "tn", "tt"] {
            for types in ["dtype=f16,acc=f32", "dtype=bf16,acc=f32", "math=tf32"] {
                let p = program(&format!("matmul:m=64,n=32,k=48,layout={layout},{types}"));
                let kinds = sketches(&space, &p).unwrap();
                assert!(
                    kinds.contains(&SketchKind::TensorCore),
                    "{layout} {types}: {kinds:?}"
                );
            }
        }
        // Not: f32 operands at f32's precision, the CPU space.
        let f32_gemm = program("matmul:64x64x64");
        assert!(!sketches(&space, &f32_gemm)
            .unwrap()
            .contains(&SketchKind::TensorCore));
        let cpu = SearchSpace::cpu_default();
        let p = program("matmul:m=64,n=32,k=48,dtype=f16,acc=f32");
        assert!(!sketches(&cpu, &p)
            .unwrap()
            .contains(&SketchKind::TensorCore));
    }

    #[test]
    fn samples_compute_the_reference_in_the_interpreter() {
        let space = SearchSpace::cuda_default();
        for spec in [
            "matmul:m=64,n=64,k=64,dtype=f16,acc=f32",
            "matmul:m=40,n=24,k=50,layout=tn,dtype=bf16,acc=f32",
            "matmul:m=33,n=70,k=20,layout=nt,dtype=f16,acc=f32",
            "batch_matmul:b=3,m=32,n=40,k=24,dtype=f16,acc=f32",
            "dense_bias_relu:m=24,n=40,k=32,dtype=bf16,acc=f32",
            // TF32: A or B transposed into shared memory where k is not its last axis.
            "matmul:m=40,n=24,k=50,math=tf32",
            "matmul:m=33,n=70,k=20,layout=tn,math=tf32",
            "matmul:m=32,n=32,k=40,layout=nt,math=tf32",
            "matmul:m=32,n=40,k=24,layout=tt,math=tf32",
            "batch_matmul:b=2,m=32,n=24,k=16,math=tf32",
            "dense_bias_relu:m=24,n=40,k=32,math=tf32",
        ] {
            let p = program(spec);
            for seed in 0..4 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, SketchKind::TensorCore)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                crate::interp::check(&p, sch.program(), seed)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                crate::lower::lower(sch.program(), crate::lower::Backend::Cuda).unwrap_or_else(
                    |e| {
                        panic!(
                            "{spec} seed {seed}: {e}\n{}",
                            crate::schedule::text::print(sch.trace())
                        )
                    },
                );
            }
        }
    }
}
