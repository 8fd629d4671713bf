//! The wgmma sketch (`wgmma_probability` in `[tensor_core]` of `search_spaces/cuda.toml`):
//! a GEMM whose 16-bit operands are accumulated in f32, or whose f32 operands are read at
//! TensorFloat-32's precision (`math=tf32`; every tensor-core sample of such a GEMM), runs
//! on Hopper's `wgmma.mma_async` (sm_90a), in the structure of
//! `examples/schedules/wgmma_gemm.sched` (`wgmma_tf32_gemm.sched` for TF32):
//!
//! 0. A 16-bit convolution of batch 1 is first rewritten as its GEMM (`im2col`):
//!    output pixels by channels (NCHW: channels by pixels), reduced over the window and
//!    input channels; its data and weight stages and the conv's padding are inlined into
//!    the shared fetches like the zero-filled copies of step 1. An NCHW conv with a
//!    window has its data and weights stored channels last first, by kernels of their
//!    own (see [`conv_to_gemm`]).
//! 1. The GEMM's axes are padded (`pad_einsum`) to a sampled multiple of 64 each (the
//!    `pad_multiples` of at least 64 that waste at most `max_waste`, and the extent
//!    itself where 64 divides it): a warpgroup computes 64 rows, a 128-byte swizzle
//!    panel is 64 elements of k (and of m or n for operands stored that way). A GEMM
//!    operand whose rows are no whole 16-byte vectors may be padded by a kernel of its
//!    own instead of in the fetch (a decision, `unaligned_pad_kernels` in `sketch.rs`):
//!    tuned on the H100 (2026-11-27), 16 GEMMs with such rows ran 1.8x faster with it
//!    (geomean; 0.88x-3.4x).
//!    Where the space's `[split_k]` applies (a small output against its reduction), the
//!    reduction is split into a sampled count of runs of whole panels (1: none) and
//!    `rfactor`ed into a batch of partial GEMMs, summed by a kernel of their own that
//!    also runs the epilogues (see [`split_reduction`]).
//! 2. `cache_write` of the main block into a `fragment` accumulator, elementwise
//!    epilogues inlined into its write-back (as the tensor-core sketch does).
//! 3. Tiling (decisions of the trace): rows `i` into `[blocks, warpgroups] x 4 x 16`
//!    (1 to 4 warpgroups, four warps of 16 rows each), columns `j` into
//!    `[blocks, chunks] x 64` (the chunks of 64 columns a block, and one wgmma of
//!    `n = 64 * chunks`, at most 256), the reduction into steps of one 128-byte panel (64
//!    16-bit elements, 32 TF32) by one wgmma's k (16, 8), ordered
//!    `bi bj | wg w | k0 kk | 16 n 16`.
//! 4. `bi bj` fused to `blockIdx.x`, in groups of a sampled number of block rows (1, 2, 4
//!    or 8 where it divides them: the blocks running at once then share their panels of B
//!    in L2, worth about a tenth at 4096^3), `wg w` to `threadIdx.y`: the four warps of a
//!    warpgroup are consecutive 16-row slices, as `wgmma` needs.
//! 5. The accumulator written back per warp; A and B staged in shared memory at `k0`
//!    (16-byte vectors fetched by all threads), stored with the 128-byte swizzle
//!    (`storage_swizzle`) that `wgmma` reads, whatever the operands' layouts (TF32
//!    operands, which wgmma reads k-major only, are stored transposed where k is not
//!    their last axis: `transform_layout`, the copy then storing element by element); the
//!    fetch loop software-pipelined by the space's `[pipeline]` rule.
//! 6. `decompose_reduction` at `k0`; the nests tensorized (`wgmma_sync`, `mma_fill`,
//!    `mma_store`), the loops around them unrolled.

use super::staging::{self, store_permuted, Staged};
use super::tensor_core::{
    accumulate, aligned_vector, fetch, fetch_transposed, pad, tensorize, transpose, unroll,
};
use super::{at, stages, standalone, SketchError};
use crate::ir::Program;
use crate::schedule::{BlockRv, IntArg, LoopRv, Schedule};
use crate::search::space::SearchSpace;

/// Rows of a warpgroup's tile, and columns of a swizzle panel (16-bit); the axes are
/// padded to multiples of it.
const PANEL: i64 = 64;
/// Bytes of a swizzle panel's row: a reduction step's k (64 16-bit elements, 32 f32).
const PANEL_BYTES: i64 = 128;
/// Warpgroups of a block, at most (four: 512 threads).
const MAX_WARPGROUPS: i64 = 4;
/// Columns of one wgmma, at most, in chunks of 64.
const MAX_CHUNKS: i64 = 4;
/// Warpgroups times chunks a block, at most: 32 accumulator registers a thread per
/// chunk, so 8 keeps a block of 256 threads x 256 columns or 512 x 128 within the
/// register file (a transposed TF32 operand costs a 4-byte copy per element, so its
/// blocks gain from many rows: 256 x 128 ran at 0.60x cublasLt where 128 x 256 ran at
/// 0.34x, 4096^3 NN on the H100).
const MAX_BLOCK_CHUNKS: i64 = 8;
/// Block rows launched side by side (a group), the candidates.
const GROUPS: [i64; 4] = [1, 2, 4, 8];

/// Whether the wgmma sketch applies to `main` of `p` under `space`: a GEMM of 16-bit
/// operands or of TF32 ones, or a convolution that [`conv_gemm`] makes one, on Hopper.
pub(super) fn applies(space: &SearchSpace, p: &Program, main: crate::ir::BlockId) -> bool {
    space.is_gpu()
        && (super::tensor_core::gemm(p, main).is_some() || conv_gemm(p, main))
        && space
            .tensor_core
            .as_ref()
            .is_some_and(|t| t.wgmma_probability > 0.0)
}

/// Whether `main` is a convolution that [`conv_to_gemm`] turns into such a GEMM. With a
/// batch, the GEMM's rows are the batch's pixels one image after another (`n, p, q` as one
/// axis); where the output stores the channel last (NHWC: the digits `m // 3136`,
/// `m // 56 % 56`, `m % 56` fold back into the row) `mma_store` writes the conv's output
/// itself; where the channel comes between the batch and the pixels (NCHW: the image's
/// stride is `k * p * q`) the GEMM stores its own result and the conv's store runs as a
/// kernel of its own (`tensor_core::accumulate`).
pub(super) fn conv_gemm(p: &Program, main: crate::ir::BlockId) -> bool {
    let blk = p.block(main);
    let out_vars: Vec<crate::ir::VarId> = blk.body.indices.iter().flat_map(|e| e.vars()).collect();
    let varying = blk
        .iter_vars
        .iter()
        .filter(|iv| iv.kind == crate::ir::IterKind::Spatial && iv.extent > 1)
        .filter(|iv| out_vars.contains(&iv.var))
        .count();
    if varying > 4 || super::tensor_core::gemm(p, main).is_some() {
        return false;
    }
    let mut sch = Schedule::new(p.clone(), 0);
    let name = blk.name.clone();
    if conv_to_gemm(&mut sch, &name).is_err() {
        return false;
    }
    let q = sch.program();
    q.find_block(&name)
        .first()
        .is_some_and(|b| super::tensor_core::gemm(q, *b).is_some())
}

/// Step 0: the convolution `main` rewritten as its GEMM (`im2col`), its operands fetched
/// by 16-byte copies. Where the data are read with their channel last (NHWC), or a 1x1
/// conv of stride 1 reads its pixels as the output stores them (the rows of NCHW's
/// transposed GEMM are then runs of pixels), `im2col` alone does it. Otherwise (an NCHW
/// conv with a window: its im2col rows are no aligned runs of memory, so its 2-byte
/// elements were copied one by one, and its wgmma samples ran at a third of its FFMA
/// ones on the H100) the data are first stored channels last (the padding block's own
/// buffer, `transform_layout`, else a global copy of the input), and the weights with
/// their reduction axes in the data's order (`k, r, s, c`), as cuDNN's tensor-core
/// kernels do with NCHW tensors; `im2col` then orders K with the channel fastest.
/// Returns those staged stores (each a kernel of its own, before the GEMM's).
fn conv_to_gemm(sch: &mut Schedule, main: &str) -> Result<Vec<Staged>, SketchError> {
    let b = sch.get_block(main).map_err(at("im2col"))?;
    let id = sch.block_id(b).map_err(at("im2col"))?;
    let p = sch.program();
    let reads = staging::conv_reads(p, id).ok_or(SketchError::TensorCoreNotApplicable)?;
    let (channels_last, pixels_as_stored) = (reads.channels_last, reads.pixels_as_stored);
    let mut staged = Vec::new();
    if !channels_last && !pixels_as_stored {
        // The data: its channel axis (read at a reduction variable) last.
        let d_perm = staging::channels_last_order(p, id, &reads)
            .ok_or(SketchError::TensorCoreNotApplicable)?;
        // The weights: spatial axes first, then the reduction's in the data's new order.
        let blk = p.block(id);
        let (d_idx, w_idx) = (&reads.data_index, &reads.weight_index);
        let k_pos = |e: &crate::ir::Expr| {
            d_perm
                .iter()
                .position(|a| e.vars().into_iter().any(|v| d_idx[*a].uses_var(v)))
        };
        let mut w_perm: Vec<usize> = (0..w_idx.len()).collect();
        w_perm.sort_by_key(|a| match staging::kind_of(blk, &w_idx[*a]) {
            Some(crate::ir::IterKind::Reduce) => (1, k_pos(&w_idx[*a])),
            _ => (0, Some(*a)),
        });
        staged.push(staging::store_data(sch, b, &reads, &d_perm)?);
        if w_perm.iter().enumerate().any(|(i, a)| i != *a) {
            let w_stage = sch
                .cache_read(b, reads.weights as i64, "global")
                .map_err(at("cache_read"))?;
            staged.push(store_permuted(sch, w_stage, &w_perm)?);
        }
    }
    let b = sch.get_block(main).map_err(at("im2col"))?;
    let made = sch.im2col(b).map_err(at("im2col"))?;
    if pixels_as_stored && !channels_last {
        // The data's runs are pixels: its im2col stage stored `[k, m]`, so that the shared
        // copy's rows run along them.
        let x = sch.get_block(&made.data).map_err(at("im2col"))?;
        sch.transform_layout(x, 0, &[vec![1], vec![0]])
            .map_err(at("transform_layout"))?;
    }
    Ok(staged)
}

/// Builds one sample of the wgmma sketch (see the module doc).
pub(super) fn apply(space: &SearchSpace, sch: &mut Schedule) -> Result<(), SketchError> {
    let rule = space
        .tensor_core
        .clone()
        .ok_or(SketchError::TensorCoreNotApplicable)?;
    // 1. Padding to multiples of 64.
    let multiples: Vec<i64> = rule
        .pad_multiples
        .iter()
        .copied()
        .filter(|m| m % PANEL == 0)
        .collect();
    let st = stages(sch.program())?;
    // 0. A convolution becomes its GEMM first (`im2col`), its stages inlined below.
    let is_gemm = {
        let p = sch.program();
        let [b] = p.find_block(&st.main)[..] else {
            return Err(SketchError::TensorCoreNotApplicable);
        };
        super::tensor_core::gemm(p, b).is_some()
    };
    let (staged, mut kernels) = if is_gemm {
        (Vec::new(), super::prologue_kernels(space, sch, &st)?)
    } else {
        (conv_to_gemm(sch, &st.main)?, Vec::new())
    };
    pad(&multiples, PANEL, space.max_waste, sch, &st.main)?;
    if is_gemm {
        kernels.extend(super::unaligned_pad_kernels(space, sch, &st)?);
    }
    // 1b. Split-K: the reduction split into a batch of partial GEMMs.
    let sum = split_reduction(space, sch, &st.main)?;
    // 2. Accumulator and epilogues.
    let (st, main, g, wb, leftovers) = accumulate(sch, sum.map(|(rf, _)| rf))?;
    // 3. Tiling.
    let loops = sch.get_loops(main).map_err(at("tiling"))?;
    let (batch, [i, j, k]) = match (g.batch, &loops[..]) {
        (false, [i, j, k]) => (None, [*i, *j, *k]),
        (true, [b, i, j, k]) => (Some(*b), [*i, *j, *k]),
        _ => return Err(SketchError::TensorCoreNotApplicable),
    };
    let lit = |v: i64| Some(IntArg::Lit(v));
    let split =
        |sch: &mut Schedule, l: LoopRv, f: &[Option<IntArg>]| sch.split(l, f).map_err(at("tiling"));
    let i_parts = split(sch, i, &[None, lit(4), lit(16)])?;
    let j_parts = split(sch, j, &[None, lit(PANEL)])?;
    let elem = if g.tf32 { 4 } else { 2 };
    let k_inst = crate::ir::tensorize::MMA_K_BYTES / elem;
    let k_parts = split(
        sch,
        k,
        &[None, lit(PANEL_BYTES / elem / k_inst), lit(k_inst)],
    )?;
    let tiles = |sch: &mut Schedule, l: LoopRv, max: i64| {
        let f = sch
            .sample_perfect_tile(l, 2, max, None)
            .map_err(at("tiling"))?;
        let args: Vec<Option<IntArg>> = f.iter().map(|r| Some(IntArg::Rv(*r))).collect();
        let parts = sch.split(l, &args).map_err(at("tiling"))?;
        Ok::<_, SketchError>((parts, f))
    };
    // Rows: the 64-row tiles into blocks and warpgroups; columns: the 64-column chunks
    // into blocks and a block's chunks.
    let (ip, i_f) = tiles(sch, i_parts[0], MAX_WARPGROUPS)?;
    let warpgroups = sch.value(i_f[1]).map_err(at("tiling"))?;
    let (jp, _) = tiles(
        sch,
        j_parts[0],
        MAX_CHUNKS.min(MAX_BLOCK_CHUNKS / warpgroups),
    )?;
    let n = sch.fuse(&[jp[1], j_parts[1]]).map_err(at("tiling"))?;
    let (warp_rows, rows16) = (i_parts[1], i_parts[2]);
    let (k0, kk, k16) = (k_parts[0], k_parts[1], k_parts[2]);
    sch.reorder(&[ip[0], jp[0], ip[1], warp_rows, k0, kk, rows16, n, k16])
        .map_err(at("tiling"))?;
    // 4. Binding: the block rows in groups launched side by side.
    let rows = {
        let id = sch.loop_id(ip[0]).map_err(at("binding"))?;
        sch.program().lp(id).extent
    };
    let groups: Vec<i64> = GROUPS.into_iter().filter(|g| rows % g == 0).collect();
    let probs = vec![1.0 / groups.len() as f64; groups.len()];
    let group = sch
        .sample_categorical(&groups, &probs, None)
        .map_err(at("binding"))?;
    let bi = sch
        .split(ip[0], &[None, Some(IntArg::Rv(group))])
        .map_err(at("binding"))?;
    sch.reorder(&[bi[0], jp[0], bi[1]]).map_err(at("binding"))?;
    let grid: Vec<LoopRv> = batch.into_iter().chain([bi[0], jp[0], bi[1]]).collect();
    let bx = sch.fuse(&grid).map_err(at("binding"))?;
    sch.bind(bx, "blockIdx.x").map_err(at("binding"))?;
    let warp = sch.fuse(&[ip[1], warp_rows]).map_err(at("binding"))?;
    sch.bind(warp, "threadIdx.y").map_err(at("binding"))?;
    let warps = IntArg::Product(vec![IntArg::Rv(i_f[1]), IntArg::Lit(4)]);
    // 5. Write-back, shared stages.
    sch.reverse_compute_at(wb, warp).map_err(at("write-back"))?;
    // TF32 operands are read k-major: A stored `[k, m]` and B stored `[k, n]` are
    // transposed, in shared memory by the fetch (4-byte copies) or, a decision for a
    // GEMM's (a conv's data is gathered by `im2col`), once by kernels of their own, whose
    // copies the fetch then reads as stored.
    let mut to_transpose = [g.tf32 && g.a_k_major, g.tf32 && !g.b_n_major];
    let copies = if is_gemm {
        transpose_kernels(space, sch, main, [g.a, g.b], &kernels, &mut to_transpose)?
    } else {
        Vec::new()
    };
    let a_sh = sch
        .cache_read(main, g.a, "shared")
        .map_err(at("cache_read"))?;
    let b_sh = sch
        .cache_read(main, g.b, "shared")
        .map_err(at("cache_read"))?;
    for sh in [a_sh, b_sh] {
        sch.compute_at(sh, k0).map_err(at("cache_read"))?;
    }
    let transposed = [
        to_transpose[0] && transpose(sch, a_sh)?,
        to_transpose[1] && transpose(sch, b_sh)?,
    ];
    // The zero-filled copies of padded inputs go into the fetches.
    for name in st
        .padding
        .iter()
        .filter(|n| !staged.iter().any(|s| &s.name == *n) && !kernels.contains(n))
    {
        if let Ok(b) = sch.get_block(name) {
            let _ = super::attempt(sch, |s| s.compute_inline(b));
        }
    }
    for (sh, transposed) in [(a_sh, transposed[0]), (b_sh, transposed[1])] {
        if transposed {
            fetch_transposed(sch, sh, &warps)?;
        } else {
            let vector = aligned_vector(sch, sh, 16 / elem)?;
            fetch(sch, sh, &warps, vector)?;
        }
        sch.storage_swizzle(sh, 0).map_err(at("storage_swizzle"))?;
    }
    if let Some(p) = &space.pipeline {
        super::pipeline::pipeline(p, sch, k0, false)?;
    }
    // 6. The instructions.
    let init = sch
        .decompose_reduction(main, k0)
        .map_err(at("decompose_reduction"))?;
    tensorize(sch, rows16, "wgmma_sync")?;
    let init_loops = sch.get_loops(init).map_err(at("tensorize"))?;
    let m = init_loops.len();
    let (r, c) = (init_loops[m - 2], init_loops[m - 1]);
    let ic = split(sch, c, &[None, lit(8)])?;
    sch.reorder(&[ic[0], r, ic[1]]).map_err(at("tensorize"))?;
    tensorize(sch, r, "mma_fill")?;
    let wb_loops = sch.get_loops(wb).map_err(at("tensorize"))?;
    let m = wb_loops.len();
    let (r, c) = (wb_loops[m - 2], wb_loops[m - 1]);
    let cs = split(sch, c, &[None, lit(8)])?;
    sch.reorder(&[cs[0], r, cs[1]]).map_err(at("tensorize"))?;
    tensorize(sch, r, "mma_store")?;
    unroll(sch, &[ic[0], cs[0], kk])?;
    for stage in staged.iter().chain(&copies) {
        staging::schedule(space, sch, stage)?;
    }
    for name in &leftovers {
        standalone(space, sch, name)?;
    }
    if let Some((_, sum)) = sum {
        let threads = vec![
            (warps, "threadIdx.y".to_string()),
            (IntArg::Lit(32), "threadIdx.x".to_string()),
        ];
        sum_partials(space, sch, sum, &st.epilogues, (bx, threads))?;
    }
    Ok(())
}

/// The operands of `main` (its reads `reads`: A and B) that `to_transpose` marks,
/// transposed once by kernels of their own at a decision of the trace where the space
/// offers it (`cache_read.transpose_kernels`): each copied into global memory with its
/// last two axes swapped (k last), after which the fetch copies it as stored in 16-byte
/// vectors instead of one 4-byte copy per element, and unmarked. An operand one of
/// `kernels` writes already (a zero-filled copy by a kernel of its own) is not copied a
/// second time: its fetch transposes it. Returns the copies, to be scheduled once the
/// padding they read is inlined into them.
fn transpose_kernels(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: BlockRv,
    reads: [i64; 2],
    kernels: &[String],
    to_transpose: &mut [bool; 2],
) -> Result<Vec<Staged>, SketchError> {
    // Each marked operand's rank, 0 where a kernel of `kernels` writes it.
    let ranks: Vec<usize> = {
        let id = sch.block_id(main).map_err(at("transpose kernels"))?;
        let p = sch.program();
        let bufs = p.block_reads(id);
        reads
            .iter()
            .map(|r| {
                bufs.get(*r as usize).map_or(0, |(b, _)| {
                    if super::written_by(p, *b, |name| kernels.iter().any(|k| k == name)) {
                        0
                    } else {
                        p.buffer(*b).shape.len()
                    }
                })
            })
            .collect()
    };
    let offered = space.transpose_kernels
        && to_transpose
            .iter()
            .zip(&ranks)
            .any(|(t, rank)| *t && *rank >= 2);
    if !(offered && super::coin(sch, "transpose kernels")?) {
        return Ok(Vec::new());
    }
    // Each marked operand stored with its last two axes swapped.
    let mut marked = Vec::new();
    for ((read, rank), mark) in reads.into_iter().zip(ranks).zip(to_transpose.iter_mut()) {
        if *mark && rank >= 2 {
            let mut perm: Vec<usize> = (0..rank).collect();
            perm.swap(rank - 2, rank - 1);
            marked.push((read, perm));
            *mark = false;
        }
    }
    staging::permuted_copies(sch, main, &marked)
}

/// Step 1b (`[split_k]` of the space): where the GEMM's output is small against its
/// reduction (at most `max_output_elements` outputs, at least `min_reduction` steps), the
/// reduction is split into a sampled count of runs (a decision of the trace: 1, or one
/// of `splits` leaving each run whole 64-step panels), `rfactor`ed into a batch of
/// partial GEMMs that the blocks compute side by side: the 196-pixel convs, whose 16
/// blocks of 64 x 64 each reduced 2,304 steps alone on 132 SMs. Returns the partial
/// GEMMs' block and the block summing them.
fn split_reduction(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: &str,
) -> Result<Option<(BlockRv, BlockRv)>, SketchError> {
    let Some(rule) = &space.split_k else {
        return Ok(None);
    };
    let b = sch.get_block(main).map_err(at("split-K"))?;
    let counts: Vec<i64> = {
        let p = sch.program();
        let id = sch.block_id(b).map_err(at("split-K"))?;
        let blk = p.block(id);
        let g = super::tensor_core::gemm(p, id).ok_or(SketchError::TensorCoreNotApplicable)?;
        if g.batch || !super::small_output(rule, blk) {
            return Ok(None);
        }
        let k = blk.extent_of(crate::ir::IterKind::Reduce);
        let outputs = super::outputs(blk);
        std::iter::once(1)
            .chain(
                rule.splits
                    .iter()
                    .copied()
                    .filter(|s| k % (s * PANEL) == 0 && rule.partials_fit(*s, outputs)),
            )
            .collect()
    };
    if counts.len() < 2 {
        return Ok(None);
    }
    let probs = vec![1.0 / counts.len() as f64; counts.len()];
    let count = sch
        .sample_categorical(&counts, &probs, None)
        .map_err(at("split-K"))?;
    if sch.value(count).map_err(at("split-K"))? == 1 {
        return Ok(None);
    }
    let [i, j, k] = sch.get_loops(b).map_err(at("split-K"))?[..] else {
        return Err(SketchError::TensorCoreNotApplicable);
    };
    let parts = sch
        .split(k, &[Some(IntArg::Rv(count)), None])
        .map_err(at("split-K"))?;
    let rf = sch.rfactor(parts[0], 0).map_err(at("rfactor"))?;
    sch.reorder(&[parts[0], i, j]).map_err(at("split-K"))?;
    Ok(Some((rf, b)))
}

/// The partial results summed by a kernel of its own (the plain sketch's split-K sum),
/// the epilogues (the conversion to f16, the copy back to the conv's layout) computed
/// per element in the same thread where they read the sum as it is indexed, else on
/// their own. Neither the sum nor an epilogue before the last leaves a buffer in global
/// memory where that can be avoided: each epilogue but the last is inlined into the next
/// (a crop, a copy), and the sum accumulates in a register that the epilogues placed in
/// its thread read.
fn sum_partials(
    space: &SearchSpace,
    sch: &mut Schedule,
    sum: BlockRv,
    epilogues: &[String],
    main: super::MainKernel,
) -> Result<(), SketchError> {
    let mut kept = Vec::new();
    for (i, name) in epilogues.iter().enumerate() {
        let inlined = i + 1 < epilogues.len() && {
            let b = sch.get_block(name).map_err(at("epilogue"))?;
            super::attempt(sch, |s| s.compute_inline(b)).is_ok()
        };
        if !inlined {
            kept.push(name.clone());
        }
    }
    let write_back = super::attempt(sch, |s| s.cache_write(sum, 0, "local")).ok();
    let thread = super::split_k_sum(space, sch, sum, Some(main))?;
    let mut all_placed = true;
    for b in write_back.into_iter().chain(
        kept.iter()
            .map(|name| sch.get_block(name).map_err(at("epilogue")))
            .collect::<Result<Vec<_>, _>>()?,
    ) {
        let placed =
            thread.is_some_and(|t| super::attempt(sch, |s| s.reverse_compute_at(b, t)).is_ok());
        if !placed {
            all_placed = false;
            let id = sch.block_id(b).map_err(at("epilogue"))?;
            let name = sch.program().block(id).name.clone();
            standalone(space, sch, &name)?;
        }
    }
    // The sum's write-back into its global buffer, inlined into the epilogues in its
    // thread: they read the register.
    if let (Some(wb), true) = (write_back, all_placed) {
        let _ = super::attempt(sch, |s| s.compute_inline(wb));
    }
    Ok(())
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
    fn applies_where_the_tensor_core_sketch_does_on_hopper_only() {
        let space = SearchSpace::cuda_default();
        let p = program("matmul:m=64,n=64,k=64,layout=tn,dtype=bf16,acc=f32");
        assert!(sketches(&space, &p).unwrap().contains(&SketchKind::Wgmma));
        let older = SearchSpace::cuda_default().with_wgmma(false);
        let kinds = sketches(&older, &p).unwrap();
        assert!(!kinds.contains(&SketchKind::Wgmma), "{kinds:?}");
        assert!(kinds.contains(&SketchKind::TensorCore), "{kinds:?}");
        let f32_gemm = program("matmul:64x64x64");
        assert!(!sketches(&space, &f32_gemm)
            .unwrap()
            .contains(&SketchKind::Wgmma));
        // TF32: wgmma and mma.sync on Hopper, mma.sync alone on older GPUs.
        let tf32 = program("matmul:m=64,n=64,k=64,math=tf32");
        let kinds = sketches(&space, &tf32).unwrap();
        assert!(kinds.contains(&SketchKind::Wgmma), "{kinds:?}");
        assert!(kinds.contains(&SketchKind::TensorCore), "{kinds:?}");
        let kinds = sketches(&older, &tf32).unwrap();
        assert!(!kinds.contains(&SketchKind::Wgmma), "{kinds:?}");
        assert!(kinds.contains(&SketchKind::TensorCore), "{kinds:?}");
    }

    #[test]
    fn a_split_reduction_sums_its_partial_gemms_in_a_kernel_of_its_own() {
        // 128 x 64 outputs reducing 1,024 steps: split into runs of whole 64-step panels
        // (a decision; 1 leaves the GEMM whole).
        let space = SearchSpace::cuda_default();
        let p = program("matmul:m=128,n=64,k=1024,dtype=f16,acc=f32");
        let mut seen = [false; 2];
        let mut seen_global = false;
        for seed in 0..8 {
            let mut sch = Schedule::new(p.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma).unwrap();
            let trace = crate::schedule::text::print(sch.trace());
            let split = trace.contains("rfactor(");
            seen[usize::from(split)] = true;
            crate::interp::check(&p, sch.program(), seed).unwrap();
            let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{trace}"));
            assert_eq!(lowered.kernels.len(), 1 + usize::from(split), "{trace}");
            if split && !seen_global {
                // The sum reads the partial results into a register and converts it for
                // the output there: the partials are the one buffer left in global memory
                // (`interp::check` above runs the local accumulator).
                let ir = crate::ir::printer::print_program(sch.program());
                let global: Vec<&str> = ir
                    .lines()
                    .filter(|l| l.contains("alloc_buffer") && l.contains("\"global\""))
                    .collect();
                assert_eq!(global.len(), 1, "{ir}");
                assert!(global[0].contains("_rf ="), "{ir}");
                seen_global = true;
            }
            assert!(trace.contains("wgmma_sync"), "{trace}");
        }
        assert_eq!(seen, [true, true]);
        // A large output keeps its reduction whole.
        let big = program("matmul:m=2048,n=2048,k=1024,dtype=f16,acc=f32");
        let mut sch = Schedule::new(big, 0);
        apply_sketch(&space, &mut sch, 0, SketchKind::Wgmma).unwrap();
        assert!(!crate::schedule::text::print(sch.trace()).contains("rfactor("));
    }

    #[test]
    fn a_serial_split_sums_the_partial_gemms_in_their_own_kernel_under_gpu_semantics() {
        // With `split_k.serial_sum` at 1 the partials are summed, converted to f16 and
        // stored by the block that arrives last at its tile: one kernel, as the
        // unsplit GEMM, which computes the reference with the blocks' arrivals counted.
        let mut space = SearchSpace::cuda_default();
        let rule = space.split_k.as_mut().unwrap();
        rule.serial_sum = 1.0;
        rule.min_reduction = 1;
        let p = program("matmul:m=64,n=64,k=256,dtype=f16,acc=f32");
        let mut serial = 0;
        for seed in 0..12 {
            if serial == 2 {
                break;
            }
            let mut sch = Schedule::new(p.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma).unwrap();
            let trace = crate::schedule::text::print(sch.trace());
            if !trace.contains("rfactor(") {
                continue;
            }
            assert!(trace.contains("serial_sum_at("), "{trace}");
            serial += 1;
            crate::interp::check(&p, sch.program(), seed).unwrap();
            let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{trace}"));
            assert_eq!(lowered.kernels.len(), 1, "{trace}");
            assert_eq!(lowered.kernels[0].block, [32, 4, 1], "{trace}");
            crate::interp::gpu::check_lowered(&p, &lowered, seed)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{trace}"));
        }
        assert_eq!(serial, 2, "split samples of 12");
    }

    #[test]
    fn unaligned_operands_are_padded_in_the_fetch_or_by_kernels_of_their_own() {
        // k = 37 and n = 100 leave A's rows 74 bytes and B's 200: no 16-byte vectors. Both
        // tensor-core sketches either zero-fill them in the shared fetch or (a decision)
        // pad them once by a kernel of their own, whose padded rows the fetch then reads
        // in 16-byte `cp.async` copies.
        let space = SearchSpace::cuda_default();
        let p = program("matmul:m=64,n=100,k=37,dtype=f16,acc=f32");
        for kind in [SketchKind::Wgmma, SketchKind::TensorCore] {
            let mut seen = [false; 2];
            for seed in 0..12 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, kind).unwrap();
                crate::interp::check(&p, sch.program(), seed)
                    .unwrap_or_else(|e| panic!("{kind:?} seed {seed}: {e}"));
                let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                    .unwrap_or_else(|e| panic!("{kind:?} seed {seed}: {e}"));
                let code = crate::codegen::cuda::generate(&lowered).unwrap().code;
                // The padding as a kernel of its own: its block is one; the shared fetch
                // reads the padded rows without a guard on the reduction's 37.
                let own = code.contains("// block A_pad\n");
                let fetch: Vec<&str> = code
                    .lines()
                    .filter(|l| l.contains("A_pad_shared[") || l.contains("(A_pad_shared +"))
                    .collect();
                assert!(!fetch.is_empty(), "{code}");
                let guarded = fetch.iter().any(|l| l.contains("< 37"));
                assert_eq!(guarded, !own, "{kind:?} seed {seed}:\n{code}");
                seen[usize::from(own)] = true;
            }
            assert_eq!(seen, [true, true], "{kind:?}");
        }
        // Aligned operands get no such decision: one kernel.
        let aligned = program("matmul:m=64,n=128,k=64,dtype=f16,acc=f32");
        for seed in 0..4 {
            let mut sch = Schedule::new(aligned.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma).unwrap();
            let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda).unwrap();
            assert_eq!(lowered.kernels.len(), 1);
        }
    }

    #[test]
    fn tf32_operands_read_along_the_rows_may_be_transposed_by_kernels_of_their_own() {
        // wgmma reads TF32 operands k-major only: B of an NN GEMM (`[k, n]`), and A and B
        // of a TN one, are transposed, in shared memory by the fetch (4-byte copies into a
        // transposed tile) or, a decision, once by kernels of their own, after which the
        // fetch copies them as stored; an operand a padding kernel wrote is not copied
        // again, its fetch transposes it. Both compute the reference and lower.
        let space = SearchSpace::cuda_default();
        for (spec, operands) in [
            ("matmul:m=64,n=128,k=64,math=tf32", 1),
            ("matmul:m=70,n=100,k=40,layout=tn,math=tf32", 2),
            ("batch_matmul:b=2,m=64,n=64,k=64,math=tf32", 1),
        ] {
            let p = program(spec);
            let mut seen = [false; 2];
            for seed in 0..16 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                crate::interp::check(&p, sch.program(), seed)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                let trace = crate::schedule::text::print(sch.trace());
                let copies = trace.matches("scope=\"global\")").count();
                // Operands padded by kernels of their own (`A_pad`, `B_pad` standalone).
                let padded = ["A_pad", "B_pad"]
                    .iter()
                    .filter(|name| !sch.program().find_block(name).is_empty())
                    .count();
                assert!(
                    copies == 0 || copies == operands - padded.min(operands),
                    "{spec} seed {seed}:\n{trace}"
                );
                let own = copies > 0;
                seen[usize::from(own)] = true;
                // The shared tiles the fetch transposes: none with the kernels.
                let transposed_tiles = trace
                    .lines()
                    .filter(|l| l.contains("scope=\"shared\")"))
                    .filter_map(|l| l.split(" = ").next())
                    .filter(|b| trace.contains(&format!("transform_layout({b},")))
                    .count();
                assert_eq!(
                    transposed_tiles,
                    operands - copies,
                    "{spec} seed {seed}:\n{trace}"
                );
                let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}\n{trace}"));
                assert!(!own || lowered.kernels.len() >= 2, "{spec} seed {seed}");
                let again = crate::schedule::replay(sch.trace(), p.clone(), seed).unwrap();
                assert_eq!(again.program(), sch.program(), "{spec} seed {seed}");
            }
            assert_eq!(seen, [true, true], "{spec}");
        }
        // An NT GEMM's operands are k-major as stored: no decision, no copies.
        let nt = program("matmul:m=64,n=128,k=64,layout=nt,math=tf32");
        for seed in 0..4 {
            let mut sch = Schedule::new(nt.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma).unwrap();
            let trace = crate::schedule::text::print(sch.trace());
            assert!(!trace.contains("scope=\"global\""), "{trace}");
        }
    }

    #[test]
    fn samples_compute_the_reference_and_lower_for_every_layout() {
        let space = SearchSpace::cuda_default();
        for spec in [
            "matmul:m=128,n=128,k=192,dtype=f16,acc=f32",
            "matmul:m=70,n=100,k=130,layout=tn,dtype=bf16,acc=f32",
            "matmul:m=64,n=64,k=64,layout=nt,dtype=f16,acc=f32",
            "matmul:m=64,n=128,k=64,layout=tt,dtype=f16,acc=f32",
            "batch_matmul:b=2,m=64,n=64,k=64,dtype=f16,acc=f32",
            "dense_bias_relu:m=64,n=64,k=64,dtype=bf16,acc=f32",
            "matmul:m=64,n=64,k=64,math=tf32",
            "matmul:m=70,n=100,k=40,layout=tn,math=tf32",
            "matmul:m=64,n=128,k=64,layout=nt,math=tf32",
            "matmul:m=64,n=64,k=96,layout=tt,math=tf32",
            "batch_matmul:b=2,m=64,n=64,k=64,math=tf32",
            "dense_bias_relu:m=64,n=64,k=64,math=tf32",
        ] {
            let p = program(spec);
            for seed in 0..3 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, SketchKind::Wgmma)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                let trace = crate::schedule::text::print(sch.trace());
                assert!(trace.contains("wgmma_sync"), "{spec}: {trace}");
                crate::interp::check(&p, sch.program(), seed)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}\n{trace}"));
            }
        }
    }
}
