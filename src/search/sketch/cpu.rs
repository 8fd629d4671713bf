//! The CPU register-tile sketch (`[register_tile]` in `search_spaces/cpu.toml`): the
//! schedule of a BLAS micro-kernel, for GEMMs and for convolutions read as GEMMs.
//!
//! The main block's spatial axes play three parts: the **vector axis** (the output's last
//! index, contiguous in the output and in the operand that reads it: a GEMM's `j`, a
//! conv's `q`; or, a decision for a conv that stores its output channels before its
//! pixels (NCHW), the output channel `k`, read by the weights alone, the accumulator then
//! stored with `k` last), the **row axis** (the largest other spatial axis that operand
//! does not read, the later of equal ones: a GEMM's `i`, a conv's output channel `k`, or
//! its `q` where `k` is the vector axis; its operand is read one broadcast scalar per
//! row) and the rest (batch, a conv's `p`), left whole. Then:
//!
//! 1. An einsum whose vector axis is not a multiple of the vector width is padded to one
//!    (`pad_einsum`), and so are a conv's output channels (its weights zero-filled
//!    along them), their zero-filled copies inlined; a conv's widest pixel axis may be
//!    padded too (its data then read through a copy grown by the padded pixels' reach,
//!    the conv's own padded copy inlined into it); a conv's padded input stays a
//!    stage of its own (the panel copies read it in bounds).
//! 2. `cache_write` of the main block into a local accumulator; epilogues (bias, relu)
//!    inlined into its write-back.
//! 3. Tiling (`sample_perfect_tile`, decisions of the trace): the vector axis into
//!    `[N0, N1, NR/lanes, lanes]` (so NR is a multiple of the vector width), the row axis
//!    into `[M0, M1, MR]`, each reduction axis into `[K0, Kc]`, in the order
//!    `rest M0 N0 | K0.. | N1 | M1 | Kc.. | MR | NR`. Drawn jointly so that the MR x NR
//!    accumulators fit the vector registers less the NR / lanes operand vectors and
//!    `reserved_registers` (MR * NR / lanes + NR / lanes + reserved <= registers), the
//!    output block of one parallel iteration
//!    (`max_block_elements`) and the packed panel (`max_panel_elements`) fit, and where
//!    the extents allow, with at least `min_accumulators` accumulator registers (to hide
//!    the FMA latency) and a panel at least `min_panel_depth` deep (to amortize loading
//!    and storing the accumulators around each Kc loop). The other spatial axes that the
//!    packed operand does not read (a conv's output rows `p`, its batch, where the
//!    output channels are the vector axis) are split `[outer, inner]` too, the inner
//!    part placed between N1 and M1 (`rest M0 N0 | K0.. | N1 | inner | M1 | ...`), so
//!    that a packed panel serves that many rows of row tiles. Mutations keep the bounds the
//!    trace records (NR within `max_row_vectors`, MR within the registers left by the
//!    sampled NR), not the joint ones: a mutant may spill, and is measured as it is.
//! 4. The leading loops fused and `parallel`; the accumulator's write-back at that loop
//!    (one output block per iteration, accumulated over every K0 block).
//! 5. Packing: the vector axis's operand (a GEMM's B) is copied at each N1 iteration
//!    into a local panel, Kc x NR, contiguous (`cache_read` + `compute_at`), which the MR
//!    rows of every M1 tile read from L1, or (`panel_at`; where both are offered, a
//!    `sample_compute_location` decision) at each K0 iteration into a Kc x N1*NR panel
//!    read from L2, as GotoBLAS packs its B block; an operand stored with the vector axis
//!    first (an NT GEMM's `B[n, k]`) is packed transposed (`transform_layout`). Where
//!    packing changes the operand's layout (that NT GEMM's B, an NCHW conv's weights
//!    when `k` is the vector axis) and the space lists `call`, a coin may pack the whole
//!    operand once per call instead, into a global buffer by a stage of its own before
//!    the main nest (`cache_read` to `global`, a tiled transpose: `transpose_pack`),
//!    which the micro-kernel reads directly: a conv's per-block panels copied its
//!    weights once per parallel block. The other operand's block (a GEMM's A: the M1 * MR
//!    rows of a parallel iteration x Kc) may be packed at each K0 iteration too,
//!    `[row tile][k][row in tile]` (`split_layout` by MR, `transform_layout`), as
//!    GotoBLAS packs its A block: a coin where it holds at most `max_row_panel_elements`
//!    (`max_half_row_panel_elements` for a 16-bit operand);
//!    or (`row_panel_per_call`) the whole operand packed so once per call by a stage of
//!    its own before the main nest. A packed 16-bit operand is stored in f32
//!    (`storage_widen`): converted once when packed, not at every use.
//! 6. The micro-kernel: the MR loop unrolled, the NR loop vectorized (the C back end
//!    prints it as vector code with FMAs, the accumulators then held in registers across
//!    the Kc loop); the panel copy, the write-back and the accumulator's initialisation
//!    (`decompose_reduction` at K0) vectorized too.
//!
//! The old multi-level tiling stays the `plain` sketch: the search samples both.

use super::{at, attempt, fuse, location, loop_kinds, stages, standalone, SketchError};
use crate::ir::{Expr, IterKind, Program};
use crate::schedule::{sampling, BlockRv, IntArg, LoopRv, Schedule};
use crate::search::space::{PanelAt, RegisterTile, SearchSpace};

/// Draws of the joint tile sizes before giving up on the bounds (free sampling then).
const TRIES: usize = 256;

/// The loops of the main block by their part in the micro-kernel.
struct Axes {
    vector: LoopRv,
    row: Option<LoopRv>,
    rest: Vec<LoopRv>,
    /// The loops of `rest` the packed operand does not read (a conv's batch and output
    /// rows `p` where its output channels are the vector axis): blocked inside a
    /// parallel iteration, they read each packed panel again.
    blockable: Vec<LoopRv>,
    reductions: Vec<LoopRv>,
    /// The read of the main block (its index among the block's reads) that the vector
    /// axis indexes: the operand packed into panels.
    packed_read: Option<i64>,
}

/// Whether the register-tile sketch applies to `main` of `p` under `space`: a CPU space
/// with `[register_tile]`, and a main block whose output's last index is a spatial
/// iteration variable.
pub(super) fn applies(space: &SearchSpace, p: &Program, main: crate::ir::BlockId) -> bool {
    space.register_tile.is_some() && !space.is_gpu() && vector_var(p, main).is_some()
}

/// The spatial iteration variable the main block's output is indexed by last.
fn vector_var(p: &Program, main: crate::ir::BlockId) -> Option<crate::ir::VarId> {
    let blk = p.block(main);
    let Some(Expr::Var(v)) = blk.body.indices.last() else {
        return None;
    };
    blk.iter_vars
        .iter()
        .find(|iv| iv.var == *v && iv.kind == IterKind::Spatial)
        .map(|iv| iv.var)
}

/// A conv's output-channel variable, where its output stores the channel before its
/// last index (NCHW): a spatial variable of extent over 1 that indexes the output and
/// the weights (the operand read at bare variables) but not the data. `None` for an
/// einsum (a GEMM keeps its `j`) and where the output's last index is it already (NHWC).
fn channel_var(p: &Program, main: crate::ir::BlockId) -> Option<crate::ir::VarId> {
    if crate::schedule::pad_einsum::check_einsum(p, main).is_ok() || p.block_reads(main).len() != 2
    {
        return None;
    }
    let blk = p.block(main);
    let last = vector_var(p, main)?;
    let reads = super::staging::conv_reads(p, main)?;
    let uses = |idx: &[Expr], v| idx.iter().any(|e| e.uses_var(v));
    blk.iter_vars
        .iter()
        .filter(|iv| iv.kind == IterKind::Spatial && iv.extent > 1 && iv.var != last)
        .find(|iv| {
            uses(&blk.body.indices, iv.var)
                && uses(&reads.weight_index, iv.var)
                && !uses(&reads.data_index, iv.var)
        })
        .map(|iv| iv.var)
}

/// Step 1b: the vector axis of the micro-kernel. The output's last index (its
/// contiguous axis), or, a decision of the trace where a conv stores its output channels
/// before its pixels ([`channel_var`]), the output channels: the weights are then the
/// packed operand (`[c, r, s, k]` panels) and the data broadcast one scalar a row, as
/// oneDNN's blocked kernels compute an NCHW conv, where the pixels as vector axis leave
/// a conv with few or strided pixels (14 of stride 2) partial vectors of gathered data.
fn vector_axis(sch: &mut Schedule, main: BlockRv) -> Result<crate::ir::VarId, SketchError> {
    let (last, channel) = {
        let p = sch.program();
        let b = sch.block_id(main).map_err(at("vector axis"))?;
        let last = vector_var(p, b).ok_or(SketchError::RegisterTileNotApplicable)?;
        (last, channel_var(p, b))
    };
    match channel {
        Some(k) if super::coin(sch, "vector axis")? => Ok(k),
        _ => Ok(last),
    }
}

/// Stores the accumulator `main` writes (its local cache) with the dimension the vector
/// axis `v` indexes last, so that the micro-kernel's NR accumulators of a row are
/// contiguous (vector registers); nothing where it is last already.
fn accumulator_vector_last(
    sch: &mut Schedule,
    main: BlockRv,
    v: crate::ir::VarId,
) -> Result<(), SketchError> {
    let idx = {
        let b = sch.block_id(main).map_err(at("accumulator layout"))?;
        sch.program().block(b).body.indices.clone()
    };
    store_var_last(sch, main, &idx, v, "accumulator layout")
}

/// The dimension that `idx` (how the main block indexes a buffer) indexes by `v`, where
/// it is not the last: the one storing `v` last moves.
fn dim_to_move(idx: &[Expr], v: crate::ir::VarId) -> Option<usize> {
    idx.iter()
        .position(|e| e.uses_var(v))
        .filter(|dim| dim + 1 < idx.len())
}

/// Stores the buffer `block` writes with the dimension that `idx` (how the main block
/// indexes it) indexes by `v` moved last (`transform_layout`); nothing where that
/// dimension is last already or `v` indexes none.
fn store_var_last(
    sch: &mut Schedule,
    block: BlockRv,
    idx: &[Expr],
    v: crate::ir::VarId,
    rule: &'static str,
) -> Result<(), SketchError> {
    let Some(dim) = dim_to_move(idx, v) else {
        return Ok(());
    };
    let mut perm: Vec<i64> = (0..idx.len() as i64).filter(|d| *d != dim as i64).collect();
    perm.push(dim as i64);
    sch.transform_layout(block, 0, &crate::schedule::layout::singletons(&perm))
        .map_err(at(rule))?;
    Ok(())
}

/// Builds one sample of the register-tile sketch (see the module doc).
pub(super) fn apply(space: &SearchSpace, sch: &mut Schedule, seed: u64) -> Result<(), SketchError> {
    let rule = space
        .register_tile
        .clone()
        .ok_or(SketchError::RegisterTileNotApplicable)?;
    let lanes = space.vector_lanes;
    let st = stages(sch.program())?;
    // 1. Padding. A conv's padded copy of its input stays a stage of its own, run before
    //    the main nest: the panel copies read it in bounds (inlined, the copies would
    //    read the input at the halo's negative indices). The zero-filled copies of
    //    `pad_einsum` are inlined after the packing (5b), into the copies that read them.
    let padded = pad_axes(sch, &st.main, lanes, &rule)?;
    let zero_filled: Vec<String> = if padded && space.inline_padding {
        stages(sch.program())?
            .padding
            .into_iter()
            .filter(|name| !st.padding.contains(name))
            .collect()
    } else {
        Vec::new()
    };
    let st = stages(sch.program())?;
    let main = sch.get_block(&st.main).map_err(at("main block"))?;
    // 1b. The vector axis: the output's last index, or a conv's output channels (a
    //     decision where the conv's output stores its channels before its pixels).
    let v_var = vector_axis(sch, main)?;
    // 2. Accumulator and epilogues.
    let wb = sch
        .cache_write(main, 0, "local")
        .map_err(at("cache_write"))?;
    let mut leftovers = Vec::new();
    for name in &st.epilogues {
        let b = sch.get_block(name).map_err(at("epilogue"))?;
        if !(space.inline_epilogue && attempt(sch, |s| s.reverse_compute_inline(b)).is_ok()) {
            leftovers.push(name.clone());
        }
    }
    for name in st.padding.iter().filter(|n| !zero_filled.contains(n)) {
        // Padding that could not be inlined runs on its own, before the main nest.
        if sch.program().find_block(name).len() == 1 {
            leftovers.insert(0, name.clone());
        }
    }
    // 3. Tiling.
    let axes = axes(sch, main, v_var)?;
    let packs_rows = rule.max_row_panel_elements > 0
        || rule.max_half_row_panel_elements > 0
        || rule.row_panel_per_call;
    let row_read = match axes.row {
        Some(row) if packs_rows => row_read(sch, main, row, v_var)?,
        _ => None,
    };
    // A 16-bit row operand has a bound of its own: packing it also converts it once.
    let row_panel_bound = match row_read {
        Some((read, _)) if reads_half(sch, main, read)? => rule.max_half_row_panel_elements,
        _ => rule.max_row_panel_elements,
    };
    let extent = |sch: &Schedule, l: LoopRv| -> Result<i64, SketchError> {
        let id = sch.loop_id(l).map_err(at("tiling"))?;
        Ok(sch.program().lp(id).extent)
    };
    let v_ext = extent(sch, axes.vector)?;
    let u_ext = match axes.row {
        Some(r) => extent(sch, r)?,
        None => 1,
    };
    let r_exts: Vec<i64> = axes
        .reductions
        .iter()
        .map(|l| extent(sch, *l))
        .collect::<Result<_, _>>()?;
    let b_exts: Vec<i64> = axes
        .blockable
        .iter()
        .map(|l| extent(sch, *l))
        .collect::<Result<_, _>>()?;
    let whole_vectors = v_ext % lanes == 0;
    let draw = draw_tiles(
        &rule,
        space,
        v_ext,
        u_ext,
        &r_exts,
        &b_exts,
        whole_vectors,
        seed,
    );
    // The vector axis: [N0, N1, NR/lanes] x lanes, or [N0, N1, NR] when it does not hold
    // whole vectors (a conv's 56 on a 16-lane machine): the back end then finishes each
    // row with scalar lanes.
    let (v_tiles, lane_loop) = if whole_vectors {
        let parts = sch
            .split(axes.vector, &[None, Some(IntArg::Lit(lanes))])
            .map_err(at("split"))?;
        (parts[0], Some(parts[1]))
    } else {
        (axes.vector, None)
    };
    let v_max = if whole_vectors {
        rule.max_row_vectors
    } else {
        rule.max_row_vectors * lanes
    };
    let v_f = sch
        .sample_perfect_tile(v_tiles, 3, v_max, draw.as_ref().map(|d| d.vector.clone()))
        .map_err(at("sample_perfect_tile"))?;
    let v = split_by(sch, v_tiles, &v_f)?;
    let (u, mr) = match axes.row {
        Some(r) => {
            let max = draw.as_ref().map_or(rule.max_rows, |d| d.max_rows);
            let f = sch
                .sample_perfect_tile(r, 3, max, draw.as_ref().map(|d| d.row.clone()))
                .map_err(at("sample_perfect_tile"))?;
            (Some(split_by(sch, r, &f)?), Some(f[2]))
        }
        None => (None, None),
    };
    let (k_outer, k_inner) = split_in_two(
        sch,
        &axes.reductions,
        &r_exts,
        draw.as_ref().map(|d| d.reductions.as_slice()),
    )?;
    // The blockable loops (a conv's output rows beside the row axis's pixels): a block
    // of them inside each parallel iteration, between the N1 tile and the M1 row tiles,
    // so that each packed panel serves them all (the c256 14 x 14 conv's panel served
    // one output row a block: its main nest ran at 93 GFLOP/s, 239 with 7 rows).
    let (b_outer, b_inner) = split_in_two(
        sch,
        &axes.blockable,
        &b_exts,
        draw.as_ref().map(|d| d.blocks.as_slice()),
    )?;
    let mut outer: Vec<LoopRv> = axes
        .rest
        .iter()
        .map(|l| match axes.blockable.iter().position(|b| b == l) {
            Some(i) => b_outer[i],
            None => *l,
        })
        .collect();
    outer.extend(u.as_ref().map(|u| u[0]));
    outer.push(v[0]);
    let mut order = outer.clone();
    order.extend(&k_outer);
    order.push(v[1]);
    order.extend(&b_inner);
    order.extend(u.as_ref().map(|u| u[1]));
    order.extend(&k_inner);
    order.extend(u.as_ref().map(|u| u[2]));
    order.push(v[2]);
    order.extend(lane_loop);
    sch.reorder(&order).map_err(at("reorder"))?;
    // 4. Parallel outer loops; the write-back of each parallel iteration's block.
    let par = fuse(sch, &outer)?;
    sch.parallel(par).map_err(at("parallel"))?;
    sch.reverse_compute_at(wb, par)
        .map_err(at("reverse_compute_at"))?;
    accumulator_vector_last(sch, main, v_var)?;
    vectorize_innermost(sch, wb)?;
    // 5. The packed panel of the vector axis's operand, copied once per N1 tile or once
    //    per K0 block; or the whole operand packed once per call, by a stage of its own.
    if let Some(read) = axes.packed_read {
        let reduction_block = k_outer.last().copied();
        if let Some(dim) = per_call_dim(&rule, sch, main, read, v_var, reduction_block.is_some())? {
            let pack = sch
                .cache_read(main, read, "global")
                .map_err(at("cache_read"))?;
            vector_axis_last(sch, main, pack, v_var)?;
            transpose_pack(sch, pack, dim)?;
            widen_half(sch, pack)?;
        } else {
            let panel = sch
                .cache_read(main, read, "local")
                .map_err(at("cache_read"))?;
            widen_half(sch, panel)?;
            let location = panel_location(&rule, sch, panel, v[1], reduction_block)?;
            sch.compute_at(panel, location).map_err(at("compute_at"))?;
            vector_axis_last(sch, main, panel, v_var)?;
            vectorize_innermost(sch, panel)?;
        }
    }
    // 5c. The row operand's block (a GEMM's A), packed at each K0 iteration as GotoBLAS
    //     packs its A block, `[row tile][k][row in tile]`, so that the micro-kernel reads
    //     the MR scalars of a k step from one run of memory rather than from MR rows a
    //     row of the operand apart; a coin of the trace where the block (M1 * MR rows x
    //     the Kc loops) holds at most `max_row_panel_elements`.
    //     Or, `row_panel_per_call`, the whole operand packed so once per call by a stage
    //     of its own before the main nest; a second coin where both are offered.
    if let (Some((read, dim)), Some(u), Some(mr)) = (row_read, &u, mr) {
        let mut elements = extent(sch, u[1])? * extent(sch, u[2])?;
        for l in &k_inner {
            elements *= extent(sch, *l)?;
        }
        let block = k_outer
            .last()
            .copied()
            .filter(|_| elements <= row_panel_bound);
        let places: Vec<Option<LoopRv>> = block
            .map(Some)
            .into_iter()
            .chain(rule.row_panel_per_call.then_some(None))
            .collect();
        if !places.is_empty() && super::coin(sch, "row panel")? {
            let place = match places[..] {
                [one] => one,
                _ if super::coin(sch, "row panel per call")? => None,
                _ => block,
            };
            pack_rows(sch, main, read, dim, place, mr)?;
        }
    }
    // 5b. The zero-filled copies inlined into the packing copy of the operand they pad,
    //     whose elements past the extent are then zeros, so that the micro-kernel reads
    //     its panel with no guard and stays vector code (inlined into the main block, the
    //     guard was the micro-kernel's, a select in every lane that kept it a scalar
    //     loop: 6 GFLOP/s on a GEMM with n = 1000). The copy of an operand the main block
    //     reads directly (a GEMM's A padded along i or k) runs on its own before the main
    //     nest, rather than as a guard on every broadcast of the micro-kernel.
    for name in &zero_filled {
        let read_by_main = {
            let p = sch.program();
            match p.find_block(name)[..] {
                [b] => p
                    .readers(p.block(b).body.buffer)
                    .iter()
                    .any(|r| p.block(*r).name == st.main),
                _ => continue,
            }
        };
        if read_by_main {
            inline_leftover_producers(sch, name, &mut leftovers)?;
        }
        let b = sch.get_block(name).map_err(at("pad_einsum"))?;
        if read_by_main || attempt(sch, |s| s.compute_inline(b)).is_err() {
            leftovers.insert(0, name.clone());
        }
    }
    // 6. The micro-kernel: MR rows unrolled, NR lanes vectorized.
    if let Some(u) = &u {
        sch.unroll(u[2]).map_err(at("unroll"))?;
    }
    let nr = match lane_loop {
        Some(l) => sch.fuse(&[v[2], l]).map_err(at("fuse"))?,
        None => v[2],
    };
    sch.vectorize(nr).map_err(at("vectorize"))?;
    if let Some(first) = k_outer.first() {
        let init = sch
            .decompose_reduction(main, *first)
            .map_err(at("decompose_reduction"))?;
        vectorize_innermost(sch, init)?;
    }
    for name in &leftovers {
        standalone(space, sch, name)?;
    }
    Ok(())
}

/// Inlines into the stage `name` the stages of `leftovers` it reads (a conv's padded
/// copy of its data, read by the copy that grows it for padded pixels), so that the
/// data are copied once, with both guards, where they were copied twice; each inlined
/// stage leaves `leftovers`. A stage that cannot be inlined stays.
fn inline_leftover_producers(
    sch: &mut Schedule,
    name: &str,
    leftovers: &mut Vec<String>,
) -> Result<(), SketchError> {
    let producers: Vec<String> = {
        let p = sch.program();
        let [b] = p.find_block(name)[..] else {
            return Ok(());
        };
        p.block_reads(b)
            .iter()
            .flat_map(|(buf, _)| p.writers(*buf))
            .map(|w| p.block(w).name.clone())
            .filter(|n| leftovers.contains(n))
            .collect()
    };
    for producer in producers {
        let b = sch.get_block(&producer).map_err(at("padding"))?;
        if attempt(sch, |s| s.compute_inline(b)).is_ok() {
            leftovers.retain(|n| *n != producer);
        }
    }
    Ok(())
}

/// The read of `main` (its index among the block's reads) that the row loop `row` indexes
/// as the whole index of one dimension, and no other, and that the vector axis `v` does
/// not index (a GEMM's A, a conv's weights where its output channels are the row axis);
/// with that dimension.
fn row_read(
    sch: &Schedule,
    main: BlockRv,
    row: LoopRv,
    v: crate::ir::VarId,
) -> Result<Option<(i64, usize)>, SketchError> {
    let p = sch.program();
    let b = sch.block_id(main).map_err(at("row panel"))?;
    let blk = p.block(b);
    let var = p.lp(sch.loop_id(row).map_err(at("row panel"))?).var;
    let Some(r) = super::bound_iter_var(blk, var).map(|iv| iv.var) else {
        return Ok(None);
    };
    for (i, (buf, idx)) in p.block_reads(b).iter().enumerate() {
        if *buf == blk.body.buffer || idx.iter().any(|e| e.uses_var(v)) {
            continue;
        }
        let dims: Vec<usize> = (0..idx.len()).filter(|d| idx[*d].uses_var(r)).collect();
        if let [d] = dims[..] {
            if idx[d] == Expr::Var(r) {
                return Ok(Some((i as i64, d)));
            }
        }
    }
    Ok(None)
}

/// Whether the read `read` of `main` is of a 16-bit float buffer.
fn reads_half(sch: &Schedule, main: BlockRv, read: i64) -> Result<bool, SketchError> {
    let p = sch.program();
    let b = sch.block_id(main).map_err(at("row panel"))?;
    Ok(p.block_reads(b)
        .get(read as usize)
        .is_some_and(|(buf, _)| p.buffer(*buf).dtype.is_half()))
}

/// A packing stage of a 16-bit operand stored as f32 (`storage_widen`): each element is
/// converted once, when it is packed, and the micro-kernel reads f32 vectors, where it
/// would convert every element of the panel at each of its uses.
fn widen_half(sch: &mut Schedule, pack: BlockRv) -> Result<(), SketchError> {
    let half = {
        let p = sch.program();
        let b = sch.block_id(pack).map_err(at("storage_widen"))?;
        p.buffer(p.block(b).body.buffer).dtype.is_half()
    };
    if half {
        sch.storage_widen(pack, 0).map_err(at("storage_widen"))?;
    }
    Ok(())
}

/// Packs the operand read `read` of `main` at the loop `k0` into a local block, or with
/// no loop once per call into a global buffer by a stage of its own (its outer loop
/// parallel), whose dimension `dim` (the row axis's) is split by the row tile `mr`
/// (`split_layout`, the sampled factor itself, so that a mutated tile keeps its layout)
/// and the rows within a tile stored last (`transform_layout`): `[row tile][other
/// dimensions][row in tile]`.
fn pack_rows(
    sch: &mut Schedule,
    main: BlockRv,
    read: i64,
    dim: usize,
    k0: Option<LoopRv>,
    mr: crate::schedule::ExprRv,
) -> Result<(), SketchError> {
    let scope = if k0.is_some() { "local" } else { "global" };
    let panel = sch
        .cache_read(main, read, scope)
        .map_err(at("cache_read"))?;
    widen_half(sch, panel)?;
    match k0 {
        Some(k0) => sch.compute_at(panel, k0).map_err(at("compute_at"))?,
        None => {
            let loops = sch.get_loops(panel).map_err(at("row panel"))?;
            if let Some(first) = loops.first() {
                sch.parallel(*first).map_err(at("row panel"))?;
            }
        }
    }
    let d = dim as i64;
    sch.split_layout(panel, 0, d, IntArg::Rv(mr))
        .map_err(at("row panel"))?;
    let rank = {
        let p = sch.program();
        let pb = sch.block_id(panel).map_err(at("row panel"))?;
        p.buffer(p.block(pb).body.buffer).shape.len() as i64
    };
    let mut perm = vec![d];
    perm.extend((0..rank).filter(|a| *a != d && *a != d + 1));
    perm.push(d + 1);
    sch.transform_layout(panel, 0, &crate::schedule::layout::singletons(&perm))
        .map_err(at("row panel"))
}

/// Whether the operand read `read` of `main` is packed once per call (`PanelAt::Call`),
/// and then the dimension that packing moves last: where the space offers it and the
/// vector axis `v` indexes a dimension other than the last (a copy in the stored layout
/// would gain nothing); a decision of the trace (a coin) where a loop of the nest is
/// offered too.
fn per_call_dim(
    rule: &RegisterTile,
    sch: &mut Schedule,
    main: BlockRv,
    read: i64,
    v: crate::ir::VarId,
    has_reduction_block: bool,
) -> Result<Option<usize>, SketchError> {
    if !rule.panel_at.contains(&PanelAt::Call) {
        return Ok(None);
    }
    let moved = {
        let p = sch.program();
        let mb = sch.block_id(main).map_err(at("panel layout"))?;
        let reads = p.block_reads(mb);
        let idx = usize::try_from(read)
            .ok()
            .and_then(|r| reads.get(r))
            .map(|(_, idx)| idx.clone())
            .unwrap_or_default();
        dim_to_move(&idx, v)
    };
    let in_the_nest = rule.panel_at.iter().any(|at| match at {
        PanelAt::ColumnTile => true,
        PanelAt::ReductionBlock => has_reduction_block,
        PanelAt::Call => false,
    });
    match (moved, in_the_nest) {
        (None, _) => Ok(None),
        (Some(dim), false) => Ok(Some(dim)),
        (Some(dim), true) => Ok(super::coin(sch, "panel per call")?.then_some(dim)),
    }
}

/// Schedules the once-per-call pack of an operand whose dimension `dim` moves last: a
/// tiled transpose of that dimension against the ones after it (fused), each tile read
/// along the stored rows and written along the packed ones while it is in L1, the
/// tiles parallel. Element by element, a conv's 2.4 MB of weights (c256 3x3) took
/// 1.65 ms of a 3.2 ms call on two AVX-512 cores, writing each float a row apart.
fn transpose_pack(sch: &mut Schedule, pack: BlockRv, dim: usize) -> Result<(), SketchError> {
    let loops = sch.get_loops(pack).map_err(at("pack"))?;
    let (Some(&moved), Some(after)) = (loops.get(dim), loops.get(dim + 1..)) else {
        return Err(SketchError::RegisterTileNotApplicable);
    };
    let rest = fuse(sch, after)?;
    let mut outer = loops[..dim].to_vec();
    let mut inner = Vec::new();
    for lp in [rest, moved] {
        let extent = {
            let id = sch.loop_id(lp).map_err(at("pack"))?;
            sch.program().lp(id).extent
        };
        match PACK_TILES
            .iter()
            .find(|t| extent % **t == 0 && extent > **t)
        {
            Some(t) => {
                let parts = sch
                    .split(lp, &[None, Some(IntArg::Lit(*t))])
                    .map_err(at("pack"))?;
                outer.push(parts[0]);
                inner.push(parts[1]);
            }
            None => inner.push(lp),
        }
    }
    // Tiles (rest, moved); within one, the moved dimension outer and the rest inner:
    // reads along the stored rows, each packed row filled by the inner loop's turns.
    inner.reverse();
    let order: Vec<LoopRv> = outer.iter().chain(&inner).copied().collect();
    sch.reorder(&order).map_err(at("pack"))?;
    if !outer.is_empty() {
        let par = fuse(sch, &outer)?;
        sch.parallel(par).map_err(at("pack"))?;
    }
    Ok(())
}

/// Tile sizes of a pack's transpose, the largest that divides the extent.
const PACK_TILES: [i64; 4] = [16, 8, 4, 2];

/// The loop the panel is copied at: the N1 loop `column_tile`, the last K0 loop
/// `reduction_block` (where the space offers it and the workload has a reduction), by
/// `sample_compute_location` where both are offered.
fn panel_location(
    rule: &RegisterTile,
    sch: &mut Schedule,
    panel: BlockRv,
    column_tile: LoopRv,
    reduction_block: Option<LoopRv>,
) -> Result<LoopRv, SketchError> {
    let offered: Vec<LoopRv> = rule
        .panel_at
        .iter()
        .filter_map(|at| match at {
            PanelAt::ColumnTile => Some(column_tile),
            PanelAt::ReductionBlock => reduction_block,
            PanelAt::Call => None,
        })
        .collect();
    Ok(location(sch, panel, &offered, "panel location")?.unwrap_or(column_tile))
}

/// Stores the panel `panel` writes with the axis the main block indexes by the vector
/// axis last (`transform_layout`), so that the micro-kernel reads NR contiguous floats:
/// an NT GEMM's `B[n, k]` (a dense layer's weights) is packed as `[k][n]`.
fn vector_axis_last(
    sch: &mut Schedule,
    main: BlockRv,
    panel: BlockRv,
    v: crate::ir::VarId,
) -> Result<(), SketchError> {
    let idx = {
        let p = sch.program();
        let mb = sch.block_id(main).map_err(at("panel layout"))?;
        let pb = sch.block_id(panel).map_err(at("panel layout"))?;
        let buf = p.block(pb).body.buffer;
        let Some((_, idx)) = p.block_reads(mb).into_iter().find(|(b, _)| *b == buf) else {
            return Ok(());
        };
        idx
    };
    store_var_last(sch, panel, &idx, v, "panel layout")
}

/// Splits `lp` by sampled factors.
fn split_by(
    sch: &mut Schedule,
    lp: LoopRv,
    factors: &[crate::schedule::ExprRv],
) -> Result<Vec<LoopRv>, SketchError> {
    let args: Vec<Option<IntArg>> = factors.iter().map(|f| Some(IntArg::Rv(*f))).collect();
    sch.split(lp, &args).map_err(at("split"))
}

/// Splits each of `loops` in two (`sample_perfect_tile`, the inner part at most the
/// loop's extent in `extents`), hinted by the draw's `[outer, inner]` pairs; the outer
/// parts and the inner parts, in the order of `loops`.
fn split_in_two(
    sch: &mut Schedule,
    loops: &[LoopRv],
    extents: &[i64],
    hints: Option<&[Vec<i64>]>,
) -> Result<(Vec<LoopRv>, Vec<LoopRv>), SketchError> {
    let mut outer = Vec::new();
    let mut inner = Vec::new();
    for (i, l) in loops.iter().enumerate() {
        let hint = hints.map(|h| h[i].clone());
        let f = sch
            .sample_perfect_tile(*l, 2, extents[i], hint)
            .map_err(at("sample_perfect_tile"))?;
        let parts = split_by(sch, *l, &f)?;
        outer.push(parts[0]);
        inner.push(parts[1]);
    }
    Ok((outer, inner))
}

/// Vectorizes the innermost loop of `block` unless it is already (an initialisation
/// that `decompose_reduction` made inherits the loop kinds); the C back end keeps it
/// scalar where its accesses are not contiguous.
fn vectorize_innermost(sch: &mut Schedule, block: BlockRv) -> Result<(), SketchError> {
    if let Some(last) = sch.get_loops(block).map_err(at("vectorize"))?.last() {
        let id = sch.loop_id(*last).map_err(at("vectorize"))?;
        if sch.program().lp(id).kind == crate::ir::LoopKind::Serial {
            sch.vectorize(*last).map_err(at("vectorize"))?;
        }
    }
    Ok(())
}

/// The main block's loops by part (see [`Axes`]).
fn axes(sch: &mut Schedule, main: BlockRv, v_var: crate::ir::VarId) -> Result<Axes, SketchError> {
    let loops = sch.get_loops(main).map_err(at("tiling"))?;
    let kinds = loop_kinds(sch, main, &loops)?;
    let p = sch.program();
    let b = sch.block_id(main).map_err(at("tiling"))?;
    let blk = p.block(b);
    // The iteration variable each loop is bound to (directly), if any.
    let iv_of = |l: &LoopRv| -> Option<crate::ir::VarId> {
        let var = p.lp(sch.loop_id(*l).ok()?).var;
        super::bound_iter_var(blk, var).map(|iv| iv.var)
    };
    let vector = loops
        .iter()
        .find(|l| iv_of(l) == Some(v_var))
        .copied()
        .ok_or(SketchError::RegisterTileNotApplicable)?;
    let reads: Vec<(crate::ir::BufferId, Vec<Expr>)> = p
        .block_reads(b)
        .into_iter()
        .filter(|(buf, _)| *buf != blk.body.buffer)
        .collect();
    let all_reads = p.block_reads(b);
    let packed = reads
        .iter()
        .find(|(_, idx)| idx.iter().any(|e| e.uses_var(v_var)))
        .cloned();
    let packed_read = packed
        .as_ref()
        .and_then(|r| all_reads.iter().position(|x| *x == *r))
        .map(|i| i as i64);
    let extent = |l: &LoopRv| sch.loop_id(*l).map_or(0, |id| p.lp(id).extent);
    let mut row: Option<LoopRv> = None;
    let mut rest = Vec::new();
    let mut blockable = Vec::new();
    let mut reductions = Vec::new();
    for (l, kind) in loops.iter().zip(&kinds) {
        if *l == vector {
            continue;
        }
        if *kind == IterKind::Reduce {
            reductions.push(*l);
            continue;
        }
        let read_by_packed = match (iv_of(l), &packed) {
            (Some(iv), Some((_, idx))) => idx.iter().any(|e| e.uses_var(iv)),
            _ => false,
        };
        // Of equal extents the later loop: nearer the data's contiguous axis (a conv's q
        // before its p), so that neighbouring rows broadcast neighbouring words.
        if !read_by_packed && row.is_none_or(|r| extent(l) >= extent(&r)) {
            if let Some(r) = row.replace(*l) {
                rest.push(r);
                blockable.push(r);
            }
        } else {
            rest.push(*l);
            if !read_by_packed {
                blockable.push(*l);
            }
        }
    }
    // `rest` and `blockable` keep nest order.
    rest.sort_by_key(|l| loops.iter().position(|x| x == l));
    blockable.retain(|l| extent(l) > 1);
    blockable.sort_by_key(|l| loops.iter().position(|x| x == l));
    Ok(Axes {
        vector,
        row,
        rest,
        blockable,
        reductions,
        packed_read,
    })
}

/// Tile sizes drawn jointly to fit the rule's bounds.
struct Draw {
    /// [N0, N1, NR / lanes] (or [N0, N1, NR] without whole vectors).
    vector: Vec<i64>,
    /// [M0, M1, MR].
    row: Vec<i64>,
    /// [K0, Kc] per reduction axis.
    reductions: Vec<Vec<i64>>,
    /// [outer, inner] per blockable loop (`Axes::blockable`).
    blocks: Vec<Vec<i64>>,
    /// The MR bound the row's `sample_perfect_tile` records: the accumulator registers
    /// over the drawn NR's vectors.
    max_rows: i64,
}

/// Draws tile sizes whose MR x NR accumulators fit the registers and whose output block
/// and panel fit the rule's bounds (hard), preferring, where the extents allow, tiles
/// that use at least `min_accumulators` registers and a panel at least
/// `min_panel_depth` deep (soft: [`TRIES`] draws with both, then as many with the hard
/// bounds alone); `None` when no draw fits.
#[allow(clippy::too_many_arguments)]
fn draw_tiles(
    rule: &RegisterTile,
    space: &SearchSpace,
    v_ext: i64,
    u_ext: i64,
    r_exts: &[i64],
    b_exts: &[i64],
    whole_vectors: bool,
    seed: u64,
) -> Option<Draw> {
    use rand::SeedableRng;
    let lanes = space.vector_lanes;
    // The registers an MR x NR tile's accumulators may take: all but the NR / lanes
    // operand vectors of a k step and the rule's reserve (the broadcast, spares).
    let budget =
        |nr_vectors: i64| (space.vector_registers - rule.reserved_registers - nr_vectors).max(1);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7e61_5eed_0000_0003);
    let depth_wanted = rule.min_panel_depth.min(r_exts.iter().product());
    for soft in [true, false] {
        for _ in 0..TRIES {
            let (vector, nr_vectors, nr) = if whole_vectors {
                let t =
                    sampling::sample_tile(&mut rng, v_ext / lanes, 3, rule.max_row_vectors).ok()?;
                let nv = t[2];
                (t, nv, nv * lanes)
            } else {
                let t =
                    sampling::sample_tile(&mut rng, v_ext, 3, rule.max_row_vectors * lanes).ok()?;
                let nr = t[2];
                (t, (nr + lanes - 1) / lanes, nr)
            };
            let budget = budget(nr_vectors);
            let max_rows = (budget / nr_vectors).clamp(1, rule.max_rows);
            let row = sampling::sample_tile(&mut rng, u_ext, 3, max_rows).ok()?;
            let reductions: Vec<Vec<i64>> = r_exts
                .iter()
                .map(|e| sampling::sample_tile(&mut rng, *e, 2, *e).ok())
                .collect::<Option<_>>()?;
            let blocks: Vec<Vec<i64>> = b_exts
                .iter()
                .map(|e| sampling::sample_tile(&mut rng, *e, 2, *e).ok())
                .collect::<Option<_>>()?;
            let accumulators = row[2] * nr_vectors;
            let depth = reductions.iter().map(|r| r[1]).product::<i64>();
            let block =
                row[1] * row[2] * vector[1] * nr * blocks.iter().map(|b| b[1]).product::<i64>();
            let hard = accumulators <= budget
                && block <= rule.max_block_elements
                && depth * nr <= rule.max_panel_elements;
            let preferred =
                accumulators >= rule.min_accumulators.min(budget) && depth >= depth_wanted;
            if hard && (preferred || !soft) {
                return Some(Draw {
                    vector,
                    row,
                    reductions,
                    blocks,
                    max_rows,
                });
            }
        }
    }
    None
}

/// Pads the main block (`pad_einsum`) where its axes tile badly: a GEMM's axes
/// ([`gemm_pad_choices`]) or a conv's output channels and widest pixel axis
/// ([`conv_pad_choices`]), each a
/// list of the multiples an iteration variable may be padded to (`[1]`: unpadded), a
/// decision of the trace where there are several. Returns whether it padded.
fn pad_axes(
    sch: &mut Schedule,
    main: &str,
    lanes: i64,
    rule: &RegisterTile,
) -> Result<bool, SketchError> {
    let choices = {
        let p = sch.program();
        let [b] = p.find_block(main)[..] else {
            return Ok(false);
        };
        if crate::schedule::pad_einsum::check_einsum(p, b).is_ok() {
            gemm_pad_choices(p, b, lanes, rule)
        } else {
            conv_pad_choices(p, b, lanes, rule)
        }
    };
    let Some(choices) = choices.filter(|c| c.iter().any(|c| c != &[1])) else {
        return Ok(false);
    };
    let b = sch.get_block(main).map_err(at("pad_einsum"))?;
    super::pad_by_choices(sch, b, &choices)?;
    Ok(true)
}

/// The multiples a vector axis of `extent` is padded to: whole vectors where it is not a
/// whole number of them (1, 2 or 4 vectors at a time, those that waste at most
/// `max_waste`, else one); where it is, unpadded, or padded to 2 or 4 vectors where its
/// vectors have few divisors.
fn vector_pad_choices(extent: i64, lanes: i64, rule: &RegisterTile) -> Vec<i64> {
    let whole = extent % lanes == 0;
    let c = multiples_within(
        extent,
        &[lanes, 2 * lanes, 4 * lanes],
        rule.max_waste,
        whole && !super::few_divisors(extent / lanes),
    );
    match (c.is_empty(), whole) {
        (false, _) => c,
        (true, false) => vec![lanes],
        (true, true) => vec![1],
    }
}

/// An einsum's padding: its vector axis as [`vector_pad_choices`], and, with the rule's
/// `pad_multiples`, its reduction axes and the spatial axes the operand read along the
/// vector axis does not read (a GEMM's `i`, `k`) to a multiple drawn among those that
/// waste at most `max_waste`, or unpadded (`k = 1322 = 2 x 661` leaves the panel 2 or
/// 661 deep unpadded). `None` without a vector axis.
fn gemm_pad_choices(
    p: &Program,
    b: crate::ir::BlockId,
    lanes: i64,
    rule: &RegisterTile,
) -> Option<Vec<Vec<i64>>> {
    let v = vector_var(p, b)?;
    let packed: Vec<Expr> = p
        .block_reads(b)
        .into_iter()
        .find(|(_, idx)| idx.iter().any(|e| e.uses_var(v)))
        .map(|(_, idx)| idx)
        .unwrap_or_default();
    Some(
        p.block(b)
            .iter_vars
            .iter()
            .map(|iv| {
                if iv.var == v {
                    vector_pad_choices(iv.extent, lanes, rule)
                } else if iv.kind == IterKind::Reduce || !packed.iter().any(|x| x.uses_var(iv.var))
                {
                    // Unpadded stays a choice: padding A's rows or reduction costs a copy
                    // of A, which a skinny GEMM (703 x 67 x 1420) reads only once.
                    multiples_within(iv.extent, &rule.pad_multiples, rule.max_waste, true)
                } else {
                    vec![1]
                }
            })
            .collect(),
    )
}

/// A conv's padding: its output channels `k`, the vector axis of an NHWC conv and one of
/// an NCHW conv's two (step 1b), as [`vector_pad_choices`]; and its widest output pixel
/// axis (the later of equal ones: `q`, the micro-kernel's row axis where the channels are
/// its vector axis) to a multiple of the rule's `pad_multiples` within `max_waste`, or
/// unpadded, as a GEMM's rows. The weights are zero-filled along `k` (inlined into their
/// packing) and the output written back where it exists; the data, which the pixels read
/// at `q * stride + s`, through a zero-filled copy grown to the padded pixels' reach.
/// (k = 413 ran as 25 vectors and 13 scalar lanes, or as rows of 7 and 59 beside 22
/// pixels of a stride-2 row; 23 pixels a row left row tiles of 1 or 23.) The reduction
/// axes stay: padding the input channels would copy the data for a deeper panel. `None`
/// for a block that is no conv or whose channels `k` also index the data (a depthwise
/// conv).
fn conv_pad_choices(
    p: &Program,
    b: crate::ir::BlockId,
    lanes: i64,
    rule: &RegisterTile,
) -> Option<Vec<Vec<i64>>> {
    let paddable = crate::schedule::pad_einsum::paddable(p, b).ok()?;
    let reads = super::staging::conv_reads(p, b)?;
    let k = channel_var(p, b).or_else(|| vector_var(p, b))?;
    let blk = p.block(b);
    let pos = blk.iter_vars.iter().position(|iv| iv.var == k)?;
    if !paddable[pos]
        || !reads.weight_index.iter().any(|e| e.uses_var(k))
        || reads.data_index.iter().any(|e| e.uses_var(k))
    {
        return None;
    }
    // The output pixels: spatial, stored, and read by the data inside expressions.
    let pixel = blk
        .iter_vars
        .iter()
        .zip(&paddable)
        .filter(|(iv, ok)| {
            !**ok && iv.kind == IterKind::Spatial && blk.body.indices.contains(&Expr::Var(iv.var))
        })
        .map(|(iv, _)| iv)
        .max_by_key(|iv| iv.extent) // the last of equal ones
        .map(|iv| iv.var);
    Some(
        blk.iter_vars
            .iter()
            .map(|iv| {
                if iv.var == k && iv.extent % lanes != 0 {
                    vector_pad_choices(iv.extent, lanes, rule)
                } else if Some(iv.var) == pixel {
                    multiples_within(iv.extent, &rule.pad_multiples, rule.max_waste, true)
                } else {
                    vec![1]
                }
            })
            .collect(),
    )
}

/// The multiples among `multiples` (smallest first) that pad `extent` by at most
/// `max_waste` of the padded extent, one per padded extent, led by 1 (unpadded) where
/// `unpadded` is allowed; a multiple that divides the extent counts as 1. (The CUDA
/// rule, `sketch::pad_choices`, keeps every multiple, so that its traces' choices carry
/// over between workloads; here one per extent keeps the draw even between the padded
/// extents: 127 by 8, 16, 32 and 64 is four times 128.)
fn multiples_within(extent: i64, multiples: &[i64], max_waste: f64, unpadded: bool) -> Vec<i64> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    if unpadded {
        out.push((1, extent));
    }
    let mut multiples = multiples.to_vec();
    multiples.sort_unstable();
    for m in multiples {
        let padded = super::padded_extent(extent, m);
        let m = if padded == extent { 1 } else { m };
        let waste = (padded - extent) as f64 / padded as f64;
        if waste <= max_waste && !out.iter().any(|&(_, e)| e == padded) {
            out.push((m, padded));
        }
    }
    out.into_iter().map(|(m, _)| m).collect()
}

#[cfg(test)]
mod tests {
    use super::super::{apply_sketch, sketches, SketchKind};
    use crate::lower::{lower, Backend};
    use crate::schedule::Schedule;
    use crate::search::SearchSpace;
    use crate::workload::preset;

    /// Samples of the register-tile sketch of `spec` for seeds `0..n`: each applies,
    /// lowers for the CPU and computes what the unscheduled program computes.
    fn check_samples(spec: &str, space: &SearchSpace, n: u64) -> Vec<Schedule> {
        let w = preset(spec).unwrap();
        let program = w.to_program();
        assert!(
            sketches(space, &program)
                .unwrap()
                .contains(&SketchKind::RegisterTile),
            "{spec}"
        );
        (0..n)
            .map(|seed| {
                let mut sch = Schedule::new(program.clone(), seed);
                apply_sketch(space, &mut sch, seed, SketchKind::RegisterTile)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                lower(sch.program(), Backend::Cpu)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                let err = crate::interp::check(&program, sch.program(), seed)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                assert!(err < 1e-4, "{spec} seed {seed}: relative error {err}");
                sch
            })
            .collect()
    }

    #[test]
    fn register_tile_samples_compute_the_workload() {
        let avx2 = SearchSpace::cpu_default();
        for spec in [
            "matmul:64x64x32",
            "matmul:37x29x11",
            "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1",
            "dense_bias_relu:m=16,n=24,k=8",
        ] {
            check_samples(spec, &avx2, 6);
        }
        // AVX-512 widths: 16 lanes, a conv row of 8 that holds no whole vector.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        check_samples(
            "conv2d_nchw:n=1,c=4,h=8,w=8,k=8,r=3,s=3,stride=1,pad=1",
            &avx512,
            3,
        );
        check_samples("matmul:40x20x8", &avx512, 3);
    }

    #[test]
    fn a_gemms_row_operand_may_be_packed_by_row_tiles() {
        // With `max_row_panel_elements`, the A block of a parallel iteration (`A_local`,
        // or `A_pad_local` where A is padded) packed `[row tile][k][row in tile]` in some
        // samples (a coin), and those
        // samples compute the reference (`check_samples`), padded or not, NN or TN.
        let a_block = |sch: &Schedule| {
            sch.program()
                .buffers
                .iter()
                .find(|b| b.name.starts_with('A') && b.name.ends_with("_local"))
                .map(|b| b.shape.clone())
        };
        let mut space = SearchSpace::cpu_default();
        space.register_tile.as_mut().unwrap().max_row_panel_elements = 65536;
        for spec in [
            "matmul:64x64x32",
            "matmul:37x29x11",
            "matmul:m=48,n=32,k=16,layout=tn",
        ] {
            let samples = check_samples(spec, &space, 12);
            let packed: Vec<&Schedule> = samples.iter().filter(|s| a_block(s).is_some()).collect();
            assert!(!packed.is_empty(), "{spec}: no sample packs A");
            for sch in packed {
                let shape = a_block(sch).unwrap();
                let trace = crate::schedule::text::print(sch.trace());
                assert_eq!(shape.len(), 3, "{spec}: {shape:?}\n{trace}");
                assert!(trace.contains("split_layout("), "{spec}: {trace}");
            }
        }
        // 0 (the shipped space) turns it off.
        let off = SearchSpace::cpu_default();
        for sch in check_samples("matmul:64x64x32", &off, 8) {
            assert_eq!(a_block(&sch), None);
        }
        // Once per call: the whole of A packed so into a global buffer by a stage of its
        // own, parallel over row tiles.
        let mut per_call = SearchSpace::cpu_default();
        per_call.register_tile.as_mut().unwrap().row_panel_per_call = true;
        for spec in ["matmul:64x64x32", "matmul:37x29x11"] {
            let packed: Vec<Vec<i64>> = check_samples(spec, &per_call, 12)
                .iter()
                .filter_map(|sch| {
                    sch.program()
                        .buffers
                        .iter()
                        .find(|b| b.name.starts_with('A') && b.name.ends_with("_global"))
                        .map(|b| b.shape.clone())
                })
                .collect();
            assert!(!packed.is_empty(), "{spec}: no sample packs A per call");
            for shape in packed {
                // [M / MR][K][MR], K padded to 16 on 37 x 29 x 11 where it is.
                assert_eq!(shape.len(), 3, "{spec}: {shape:?}");
                assert!(
                    shape[0] * shape[2] >= 37 && shape[1] >= 11,
                    "{spec}: {shape:?}"
                );
            }
        }
    }

    #[test]
    fn an_nchw_conv_may_take_its_output_channels_as_the_vector_axis() {
        // An NCHW conv of stride 2: its pixels (the output's last index) hold 7 floats a
        // row, read two apart. A decision takes the output channels instead: the weights
        // are packed `[c, r, s, k]` (k last), the accumulator stored with k last, and the
        // micro-kernel loads the panel's k as vectors. Both branches compute the reference.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let spec = "conv2d_nchw:n=1,c=8,h=13,w=13,k=32,r=3,s=3,stride=2,pad=1";
        let mut seen = [false; 2];
        for sch in check_samples(spec, &avx512, 12) {
            let trace = crate::schedule::text::print(sch.trace());
            let channels = trace.contains("decision=1)\nb1 = cache_write(");
            seen[usize::from(channels)] = true;
            let p = sch.program();
            let (weights, out) = (&p.buffer(p.params[1]).name, &p.buffer(p.params[2]).name);
            let local = |of: &str| {
                p.buffers
                    .iter()
                    .find(|b| b.name == format!("{of}_local"))
                    .map(|b| b.shape.clone())
            };
            if channels {
                // The accumulator [n, p, q, k]; the weights' panel [c, r, s, k]; the MR
                // rows (unrolled) along q, whose neighbours read neighbouring data.
                // (The panel is local, or the whole `[c, r, s, k]` once per call.)
                assert_eq!(local(out), Some(vec![1, 7, 7, 32]), "{trace}");
                assert!(trace.contains("unroll(xx_2)"), "{trace}");
                let scope = if local(weights).is_some() {
                    "local"
                } else {
                    "global"
                };
                let packed = p
                    .buffers
                    .iter()
                    .find(|b| b.name == format!("{weights}_{scope}"));
                assert_eq!(packed.and_then(|b| b.shape.last().copied()), Some(32));
                let lowered = lower(p, Backend::Cpu).unwrap();
                let code = crate::codegen::cpu::generate(&lowered).unwrap().code;
                let load = format!("tessel_vload(&{weights}_{scope}[");
                assert!(code.contains(&load), "{code}");
            } else {
                assert_eq!(local(out), Some(vec![1, 32, 7, 7]), "{trace}");
            }
        }
        assert_eq!(seen, [true, true]);
        // An NHWC conv's output stores its channels last already, a GEMM is an einsum:
        // no decision (the trace starts with the accumulator).
        for spec in [
            "conv2d_nhwc:n=1,c=8,h=13,w=13,k=32,r=3,s=3,stride=2,pad=1",
            "matmul:64x64x32",
        ] {
            for sch in check_samples(spec, &avx512, 3) {
                let trace = crate::schedule::text::print(sch.trace());
                assert!(
                    trace
                        .lines()
                        .nth(1)
                        .is_some_and(|l| l.contains("cache_write(")),
                    "{spec}:\n{trace}"
                );
            }
        }
    }

    #[test]
    fn a_convs_output_rows_are_blocked_inside_a_parallel_iteration() {
        // An NCHW conv of 14 x 14 pixels with its output channels as the vector axis: the
        // rows of the micro-kernel are pixels of one output row (q), and the output rows
        // (p), which the packed weights do not read, are blocked (a decision) inside each
        // parallel iteration, after the column tile and before the row tiles, so that a
        // packed panel serves several output rows. Where the pixels are the vector axis
        // the packed operand is the data, which reads p: no block.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let spec = "conv2d_nchw:n=1,c=8,h=14,w=14,k=32,r=3,s=3,stride=1,pad=1";
        let mut blocks = std::collections::BTreeSet::new();
        for sch in check_samples(spec, &avx512, 16) {
            let trace = crate::schedule::text::print(sch.trace());
            let channels = trace.contains("decision=1)\nb1 = cache_write(");
            let line = trace
                .lines()
                .find(|l| l.contains("sample_perfect_tile(yy, n=2, max_innermost_factor=14,"));
            if !channels {
                assert!(line.is_none(), "{trace}");
                continue;
            }
            let line = line.unwrap_or_else(|| panic!("{trace}"));
            let inner: i64 = line
                .rsplit_once(", ")
                .and_then(|(_, x)| x.trim_end_matches("])").parse().ok())
                .unwrap_or_else(|| panic!("{line}"));
            blocks.insert(inner);
            // The block's loop (`yy_1`) sits between the column tile and the row tiles.
            let order = trace
                .lines()
                .find(|l| l.starts_with("reorder("))
                .unwrap_or_else(|| panic!("{trace}"));
            let at = |name: &str| {
                order
                    .find(name)
                    .unwrap_or_else(|| panic!("{name}: {order}"))
            };
            assert!(at("ff_0_1, yy_1, ") < at("xx_1, "), "{order}");
        }
        assert!(
            blocks.len() > 1 && blocks.iter().any(|b| *b > 1),
            "{blocks:?}"
        );
    }

    #[test]
    fn a_convs_padded_copy_is_parallel_over_rows_each_row_vectorized() {
        // The padded copy of a conv's data, a stage of its own before the main nest:
        // its outer loops fused and parallel, each padded row of 15 loops of its own:
        // the row partitioned (`lower::partition`) into its left pad, its 13 elements
        // read without a guard (a half vector and scalars on 16 lanes; zeros for the
        // rows of the top and bottom pad) and its right pad.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let spec = "conv2d_nchw:n=1,c=8,h=13,w=13,k=32,r=3,s=3,stride=2,pad=1";
        for sch in check_samples(spec, &avx512, 4) {
            let code = crate::codegen::cpu::generate(&lower(sch.program(), Backend::Cpu).unwrap())
                .unwrap()
                .code;
            let lines: Vec<&str> = code.lines().collect();
            let rows = lines
                .iter()
                .position(|l| l.contains("< 120;"))
                .unwrap_or_else(|| panic!("{code}"));
            assert!(lines[rows - 1].contains("omp parallel for"), "{code}");
            let copy: Vec<&str> = lines[rows..]
                .iter()
                .take_while(|l| !l.starts_with("  }"))
                .copied()
                .collect();
            assert!(
                copy.iter().any(|l| l.trim() == "// block pad_temp"),
                "{code}"
            );
            assert!(
                copy.iter().any(|l| l.contains("tessel_hload(&data[")),
                "{code}"
            );
            assert!(!copy.iter().any(|l| l.contains("? data[")), "{code}");
        }
    }

    #[test]
    fn an_operand_whose_layout_packing_changes_may_be_packed_once_per_call() {
        // Packed once per call (`panel_at = "call"`, a coin where a loop of the nest is
        // offered too): the operand copied whole into a global buffer with the vector
        // axis's dimension last, by a stage of its own before the main nest, which the
        // micro-kernel reads directly (no local panel). An NCHW conv's weights [k, c, r, s]
        // where k is the vector axis, an NT GEMM's B[n, k]; never a GEMM's B[k, n], which
        // is stored that way already. Every sample computes the reference.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let packed = |sch: &Schedule, operand: usize| {
            let p = sch.program();
            let name = format!("{}_global", p.buffer(p.params[operand]).name);
            let panel = format!("{}_local", p.buffer(p.params[operand]).name);
            let global = p.buffers.iter().find(|b| b.name == name);
            let local = p.buffers.iter().any(|b| b.name == panel);
            global.map(|b| {
                assert!(!local, "a global pack and a local panel of one operand");
                let code = crate::codegen::cpu::generate(&lower(p, Backend::Cpu).unwrap())
                    .unwrap()
                    .code;
                assert!(code.contains(&format!("tessel_vload(&{name}[")), "{code}");
                b.shape.clone()
            })
        };
        let conv = "conv2d_nchw:n=1,c=8,h=13,w=13,k=32,r=3,s=3,stride=2,pad=1";
        let conv_shapes: Vec<_> = check_samples(conv, &avx512, 24)
            .iter()
            .map(|sch| packed(sch, 1))
            .collect();
        assert!(
            conv_shapes.contains(&Some(vec![8, 3, 3, 32])),
            "{conv_shapes:?}"
        );
        assert!(conv_shapes.contains(&None));
        assert!(conv_shapes.iter().flatten().all(|s| *s == [8, 3, 3, 32]));
        // The pack is a tiled transpose: 16 channels k against 8 of the 72 (c, r, s),
        // the 2 x 9 tiles parallel, within a tile k outer and (c, r, s) inner.
        let pack = check_samples(conv, &avx512, 24)
            .into_iter()
            .find(|sch| packed(sch, 1).is_some())
            .unwrap();
        let code = crate::codegen::cpu::generate(&lower(pack.program(), Backend::Cpu).unwrap())
            .unwrap()
            .code;
        let nest: Vec<&str> = code
            .lines()
            .skip_while(|l| !l.contains("omp parallel for"))
            .take(4)
            .collect();
        assert!(nest[1].contains("< 18;"), "{code}");
        assert!(nest[2].contains("< 16;"), "{code}");
        assert!(nest[3].contains("< 8;"), "{code}");
        let nt = "matmul:64x48x32,layout=nt";
        let nt_shapes: Vec<_> = check_samples(nt, &avx512, 12)
            .iter()
            .map(|sch| packed(sch, 1))
            .collect();
        assert!(nt_shapes.contains(&Some(vec![32, 48])), "{nt_shapes:?}");
        assert!(nt_shapes.contains(&None));
        for sch in check_samples("matmul:64x48x32", &avx512, 8) {
            assert_eq!(packed(&sch, 1), None);
        }
        // A space that does not list it never packs per call.
        let mut without = avx512.clone();
        let rule = without.register_tile.as_mut().unwrap();
        rule.panel_at.retain(|at| *at != super::PanelAt::Call);
        for sch in check_samples(conv, &without, 12) {
            assert_eq!(packed(&sch, 1), None);
        }
    }

    #[test]
    fn an_operand_padded_to_whole_vectors_is_zero_filled_by_its_packing_copy() {
        // n = 40 on a 16-lane machine: the vector axis is padded to 48 (`pad_einsum`),
        // and the operand read along it (B) is zero-filled where it is packed, so that
        // the micro-kernel loads its panel as whole vectors with no guard (a select in the
        // micro-kernel kept it a scalar loop). Every sample computes the reference.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        for (spec, operand) in [
            ("matmul:24x40x16", 1),
            ("matmul:24x40x16,layout=nt", 1),
            ("dense_bias_relu:m=8,n=40,k=16", 1),
        ] {
            let mut vector_loads = 0;
            for sch in check_samples(spec, &avx512, 8) {
                let p = sch.program();
                let name = &p.buffer(p.params[operand]).name;
                let code = crate::codegen::cpu::generate(&lower(p, Backend::Cpu).unwrap())
                    .unwrap()
                    .code;
                for scope in ["local", "global"] {
                    let panel = format!("{name}_pad_{scope}[");
                    assert!(
                        !code.contains(&format!("? {panel}")),
                        "{spec}: the panel read under a guard:\n{code}"
                    );
                    vector_loads += usize::from(code.contains(&format!("tessel_vload(&{panel}")));
                }
            }
            assert!(
                vector_loads > 0,
                "{spec}: no sample loads a padded panel as vectors"
            );
        }
    }
    #[test]
    fn a_convs_output_channels_are_padded_to_whole_vectors() {
        // k = 40 output channels on 16 lanes: padded to 48 (`pad_einsum`; 64 would waste
        // more than max_waste), the weights zero-filled along k, the data read as they
        // are, the output written back where it exists. Where the channels are the
        // vector axis (NHWC; NCHW by a decision) the micro-kernel loads the padded
        // weights' panel as vectors. Every sample computes the reference.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        for spec in [
            "conv2d_nchw:n=1,c=8,h=13,w=13,k=40,r=3,s=3,stride=2,pad=1",
            "conv2d_nhwc:n=1,c=8,h=9,w=9,k=40,r=3,s=3,stride=1,pad=1",
        ] {
            let mut vector_loads = 0;
            for sch in check_samples(spec, &avx512, 8) {
                let p = sch.program();
                let trace = crate::schedule::text::print(sch.trace());
                let weights = &p.buffer(p.params[1]).name;
                let padded = p
                    .buffers
                    .iter()
                    .find(|b| b.name == format!("{weights}_pad"))
                    .unwrap_or_else(|| panic!("{spec}: weights not padded:\n{trace}"));
                let stored = &p.buffer(p.params[1]).shape;
                let k_dim = stored.iter().position(|e| *e == 40).unwrap();
                let mut expected = stored.clone();
                expected[k_dim] = 48;
                assert_eq!(padded.shape, expected, "{spec}:\n{trace}");
                assert_eq!(
                    p.buffer(*p.params.last().unwrap())
                        .shape
                        .iter()
                        .filter(|e| **e == 48)
                        .count(),
                    0
                );
                let code = crate::codegen::cpu::generate(&lower(p, Backend::Cpu).unwrap())
                    .unwrap()
                    .code;
                for scope in ["local", "global"] {
                    let panel = format!("{weights}_pad_{scope}[");
                    assert!(!code.contains(&format!("? {panel}")), "{spec}:\n{code}");
                    vector_loads += usize::from(code.contains(&format!("tessel_vload(&{panel}")));
                }
            }
            assert!(
                vector_loads > 0,
                "{spec}: no sample loads the padded weights as vectors"
            );
        }
        // Channels that are whole vectors stay as they are.
        for sch in check_samples(
            "conv2d_nhwc:n=1,c=8,h=9,w=9,k=32,r=3,s=3,stride=1,pad=1",
            &avx512,
            3,
        ) {
            let trace = crate::schedule::text::print(sch.trace());
            assert!(!trace.contains("pad_einsum"), "{trace}");
        }
    }

    #[test]
    fn a_convs_row_of_a_prime_number_of_pixels_may_be_padded() {
        // 23 output pixels a row (a prime) left the micro-kernel row tiles of 1 or 23
        // pixels. The widest pixel axis (q, the later of two equal ones) is offered padded
        // to 24 (by 8: 16 and up would waste more than max_waste) or unpadded, a decision
        // of the trace; padded, the output is written back where it exists and the data
        // are read through a copy grown by the padded pixels' reach, into which the conv's
        // own padded copy is inlined. Every sample computes the reference.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let spec = "conv2d_nhwc:n=1,c=4,h=23,w=23,k=16,r=3,s=3,stride=1,pad=1";
        let mut outputs = std::collections::BTreeSet::new();
        for sch in check_samples(spec, &avx512, 12) {
            let trace = crate::schedule::text::print(sch.trace());
            assert!(
                trace.contains("sample_categorical(candidates=[1, 8], "),
                "{trace}"
            );
            let p = sch.program();
            let out = &p.buffer(*p.params.last().unwrap()).name;
            let padded = p.buffers.iter().find(|b| b.name == format!("{out}_pad"));
            outputs.insert(padded.map(|b| b.shape.clone()));
            // The data are copied once: the conv's padded copy (25 x 25) inlined into the
            // grown one (25 x 26), which then reads the input itself.
            let [copy] = p.readers(p.params[0])[..] else {
                panic!("the data read by more than one stage:\n{trace}");
            };
            let copied = &p.buffer(p.block(copy).body.buffer).shape;
            let width = if padded.is_some() { 26 } else { 25 };
            assert_eq!(copied, &vec![1, 25, width, 4], "{trace}");
            // Lowered for the CPU (the one copy's two guards partitioned away), the
            // kernels compute the reference too.
            let program = crate::workload::preset(spec).unwrap().to_program();
            let lowered = lower(p, Backend::Cpu).unwrap();
            let err = crate::interp::check_lowered(&program, &lowered, 2).unwrap();
            assert!(err < 1e-4, "relative error {err}:\n{trace}");
        }
        assert_eq!(
            outputs,
            [None, Some(vec![1, 23, 24, 16])].into_iter().collect(),
            "{outputs:?}"
        );
    }

    #[test]
    fn a_gemms_axes_without_small_factors_are_padded_to_multiples_within_the_waste() {
        // 127 x 40 x 661 on 16 lanes: n = 40 is padded to whole vectors (48; 64 would waste
        // more than max_waste), m = 127 and k = 661 (primes) to a multiple of the rule's
        // `pad_multiples` wasting at most max_waste, or not: m by 8 (128), k by 8, 16 or
        // 64 (664, 672, 704), decisions of the trace. B's zero-fill is inlined into its
        // packing copy; A's, which the micro-kernel reads directly, runs as a stage of
        // its own.
        let avx512 = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let rule = avx512.register_tile.as_ref().unwrap();
        assert_eq!(
            (rule.pad_multiples.as_slice(), rule.max_waste),
            (&[8, 16, 32, 64][..], 0.0625)
        );
        let spec = "matmul:127x40x661";
        let mut a_shapes = std::collections::BTreeSet::new();
        for sch in check_samples(spec, &avx512, 12) {
            let trace = crate::schedule::text::print(sch.trace());
            assert!(
                trace.contains("sample_categorical(candidates=[1, 8], "),
                "{trace}"
            );
            assert!(
                trace.contains("sample_categorical(candidates=[1, 8, 16, 64], "),
                "{trace}"
            );
            let p = sch.program();
            let a = &p.buffer(p.params[0]).name;
            let Some(pad) = p.buffers.iter().find(|b| b.name == format!("{a}_pad")) else {
                a_shapes.insert(vec![127, 661]);
                continue;
            };
            a_shapes.insert(pad.shape.clone());
            let code = crate::codegen::cpu::generate(&lower(p, Backend::Cpu).unwrap())
                .unwrap()
                .code;
            assert!(code.contains(&format!("// block {a}_pad")), "{code}");
            let b = &p.buffer(p.params[1]).name;
            assert!(!code.contains(&format!("// block {b}_pad\n")), "{code}");
        }
        assert!(a_shapes.len() > 1, "{a_shapes:?}");
        for shape in &a_shapes {
            assert!([127, 128].contains(&shape[0]), "{a_shapes:?}");
            assert!([661, 664, 672, 704].contains(&shape[1]), "{a_shapes:?}");
        }
        // Extents with factors to tile by stay as they are.
        for sch in check_samples("matmul:64x48x32", &avx512, 3) {
            let trace = crate::schedule::text::print(sch.trace());
            assert!(!trace.contains("pad_einsum"), "{trace}");
        }
    }
}
