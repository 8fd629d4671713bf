//! Layout-changing stages: an NCHW conv's padded data stored channels last and its
//! weights as `[k, r, s, c]` before its GEMM (the wgmma sketch, see `wgmma.rs`), or its
//! data alone before its own loops (`channels_last_data` in `sketch.rs`), the
//! operands of an FFMA GEMM stored reduction first (`transpose_kernels` in `sketch.rs`:
//! `A[m, k]` as `[k, m]`, the "channel" being m) and a TF32 GEMM's operands stored k last
//! for wgmma (`transpose_kernels` in `wgmma.rs`), the latter two by [`permuted_copies`].
//!
//! A stage is a transpose: the input's fastest axes (a row's pixels, a window) become the
//! slower ones of the stored buffer, whose fastest is the channel. Two ways to schedule
//! it, a decision of the trace per stage:
//!
//! * **direct**: one element a thread, neighbouring threads a run of 4, 8, 16 or all
//!   channels, then the row's pixels: a warp reads several channels' neighbouring pixels
//!   and stores several pixels' neighbouring channels. Cheap where the stage is small
//!   and its launch dominates; on the H100 the c512 conv's weights (2.4M elements) took
//!   14 us so, where their bytes need 3, their reads strided by the window.
//! * **through shared memory**, as a tiled transpose: a thread block takes a tile of a
//!   few channels by a run of the input's fast axes, its threads read it along those
//!   axes into shared memory (consecutive threads, consecutive addresses) and store it
//!   along the channel (again consecutive); the shared rows are padded by a word so that
//!   neither pass conflicts on the banks, and a thread's few elements of each pass are
//!   unrolled so that its loads are in flight together.
//!
//! Both run 128 threads a block, so that the two stages share one launch
//! (`lower/merge.rs`).

use super::{at, fuse, SketchError};
use crate::ir::{BlockId, Expr, IterKind, Program};
use crate::schedule::{IntArg, LoopRv, Schedule};
use crate::search::space::SearchSpace;

/// Elements of the input's fast axes one tile takes at most (a row of a 56-wide padded
/// image, a 3x3 window a few times over).
const RUN: i64 = 64;

/// Channels a tile takes: a decision among these where they divide the channels (a
/// channel axis of at most [`RUN`] may also be taken whole).
const CHANNELS: [i64; 3] = [16, 32, 64];

/// Threads of a staging block: as many as a standalone stage's (a direct one is one).
const THREADS: i64 = super::STANDALONE_THREADS;

/// Runs of channels neighbouring threads of a direct stage take (a decision beside the
/// whole channel axis).
const CHANNEL_RUNS: [i64; 3] = [4, 8, 16];

/// A block whose buffer [`store_permuted`] changed: its name and the permutation.
#[derive(Clone, Debug)]
pub(super) struct Staged {
    pub name: String,
    /// The stored buffer's axes as indices into the input's (the channel last).
    pub perm: Vec<usize>,
}

/// Stores the buffer block `stage` writes with its axes in the order `perm`
/// (`transform_layout`); the loops are scheduled later by [`schedule`].
pub(super) fn store_permuted(
    sch: &mut Schedule,
    stage: crate::schedule::BlockRv,
    perm: &[usize],
) -> Result<Staged, SketchError> {
    let layout: Vec<i64> = perm.iter().map(|a| *a as i64).collect();
    sch.transform_layout(stage, 0, &crate::schedule::layout::singletons(&layout))
        .map_err(at("transform_layout"))?;
    let id = sch.block_id(stage).map_err(at("transform_layout"))?;
    Ok(Staged {
        name: sch.program().block(id).name.clone(),
        perm: perm.to_vec(),
    })
}

/// What a convolution `main` reads: its data (the read whose indices are no bare
/// variables: `x[n, c, p * stride + r, q * stride + s]`) and its weights (bare
/// variables), and how the data are laid out against the loops.
pub(super) struct ConvReads {
    /// Read indices of the data and of the weights among `main`'s reads.
    pub data: usize,
    pub weights: usize,
    /// The data's indices, with the variables of extent 1 gone (a 1x1 window's `r`, `s`).
    pub data_index: Vec<Expr>,
    pub weight_index: Vec<Expr>,
    /// The data's last axis is read at a reduction variable (NHWC: the channel).
    pub channels_last: bool,
    /// The data's last axis is read as the output stores its last (a 1x1 conv of stride
    /// 1 in NCHW: a run of pixels).
    pub pixels_as_stored: bool,
}

/// The kind of the iteration variable `e` is, where `e` is one of `blk`'s variables.
pub(super) fn kind_of(blk: &crate::ir::Block, e: &Expr) -> Option<IterKind> {
    match e {
        Expr::Var(v) => blk
            .iter_vars
            .iter()
            .find(|iv| iv.var == *v)
            .map(|iv| iv.kind),
        _ => None,
    }
}

/// The reads of `main` if it is a convolution (one read at computed indices, one at bare
/// variables); `None` otherwise (a GEMM reads every operand at bare variables).
pub(super) fn conv_reads(p: &Program, main: BlockId) -> Option<ConvReads> {
    let blk = p.block(main);
    let reads = p.block_reads(main);
    let pure = |idx: &[Expr]| idx.iter().all(|e| matches!(e, Expr::Var(_)));
    let data = reads.iter().position(|(_, idx)| !pure(idx))?;
    let weights = reads.iter().position(|(_, idx)| pure(idx))?;
    let unit = |v: crate::ir::VarId| {
        blk.iter_vars
            .iter()
            .any(|iv| iv.var == v && iv.extent == 1)
            .then_some(Expr::Int(0))
    };
    let data_index: Vec<Expr> = reads[data]
        .1
        .iter()
        .map(|e| crate::ir::simplify::simplify_in(&e.substitute(&unit), &Default::default()))
        .collect();
    let channels_last = data_index.last().and_then(|e| kind_of(blk, e)) == Some(IterKind::Reduce);
    let pixels_as_stored = matches!(data_index.last(), Some(Expr::Var(_)))
        && data_index.last() == blk.body.indices.last();
    Some(ConvReads {
        data,
        weights,
        data_index,
        weight_index: reads[weights].1.clone(),
        channels_last,
        pixels_as_stored,
    })
}

/// The order that stores a conv's data channels last (its axis read at a reduction
/// variable moved to the end, the others kept in order): `[0, 2, 3, 1]` for NCHW.
/// `None` where no axis is read at a reduction variable alone.
pub(super) fn channels_last_order(
    p: &Program,
    main: BlockId,
    reads: &ConvReads,
) -> Option<Vec<usize>> {
    let blk = p.block(main);
    let idx = &reads.data_index;
    let channel = idx
        .iter()
        .position(|e| kind_of(blk, e) == Some(IterKind::Reduce))?;
    Some(
        (0..idx.len())
            .filter(|a| *a != channel)
            .chain([channel])
            .collect(),
    )
}

/// Stores the data of the conv `main` in the order `perm` (see [`channels_last_order`]):
/// the buffer of its padding block where the data are padded by a stage the program
/// allocates (the padding then runs in that kernel), else a global copy of the input.
pub(super) fn store_data(
    sch: &mut Schedule,
    main: crate::schedule::BlockRv,
    reads: &ConvReads,
    perm: &[usize],
) -> Result<Staged, SketchError> {
    let pad_block = {
        let p = sch.program();
        let id = sch.block_id(main).map_err(at("transform_layout"))?;
        let data = p.block_reads(id)[reads.data].0;
        match p.writers(data).as_slice() {
            [one] if p.allocs.contains(&data) => Some(p.block(*one).name.clone()),
            _ => None,
        }
    };
    let stage = match pad_block {
        Some(name) => sch.get_block(&name).map_err(at("transform_layout"))?,
        None => sch
            .cache_read(main, reads.data as i64, "global")
            .map_err(at("cache_read"))?,
    };
    store_permuted(sch, stage, perm)
}

/// Copies of the reads of `main` that `reads` names (read index, the order to store its
/// axes in) into global memory, each stored permuted ([`store_permuted`]): operands a
/// fetch would transpose, transposed once by kernels of their own. Returns the copies,
/// to be scheduled by [`schedule`] once the padding they read is inlined into them.
pub(super) fn permuted_copies(
    sch: &mut Schedule,
    main: crate::schedule::BlockRv,
    reads: &[(i64, Vec<usize>)],
) -> Result<Vec<Staged>, SketchError> {
    reads
        .iter()
        .map(|(read, perm)| {
            let copy = sch
                .cache_read(main, *read, "global")
                .map_err(at("transpose kernels"))?;
            store_permuted(sch, copy, perm)
        })
        .collect()
}

/// Schedules a stage, directly or through shared memory (a decision; see the module
/// doc).
pub(super) fn schedule(
    space: &SearchSpace,
    sch: &mut Schedule,
    stage: &Staged,
) -> Result<(), SketchError> {
    if super::coin(sch, "staging")? {
        transpose(sch, stage)
    } else {
        direct(space, sch, stage)
    }
}

/// The direct stage: its loops in the stored buffer's order, the channel's split into
/// a sampled run that neighbouring threads take before the last other axis, all fused
/// over blocks of threads.
fn direct(space: &SearchSpace, sch: &mut Schedule, stage: &Staged) -> Result<(), SketchError> {
    let err = at("staging");
    let b = sch.get_block(&stage.name).map_err(&err)?;
    let loops = sch.get_loops(b).map_err(&err)?;
    if loops.len() == stage.perm.len() && loops.len() >= 2 {
        let mut order: Vec<LoopRv> = stage.perm.iter().map(|a| loops[*a]).collect();
        let channels = order.pop().expect("two loops at least");
        let extent = sch
            .program()
            .lp(sch.loop_id(channels).map_err(&err)?)
            .extent;
        let runs: Vec<i64> = CHANNEL_RUNS
            .into_iter()
            .filter(|r| extent % r == 0 && *r < extent)
            .chain([extent])
            .collect();
        let probs = vec![1.0 / runs.len() as f64; runs.len()];
        let run = sch.sample_categorical(&runs, &probs, None).map_err(&err)?;
        let parts = sch
            .split(channels, &[None, Some(IntArg::Rv(run))])
            .map_err(&err)?;
        let last_other = order.pop().expect("two loops at least");
        order.extend([parts[0], last_other, parts[1]]);
        sch.reorder(&order).map_err(&err)?;
    }
    super::standalone(space, sch, &stage.name)
}

/// A tile of `budget` elements at most along a run axis of `extent`: the whole axis where
/// it fits, else its largest divisor within the budget where that is more than half of
/// it, else the multiple of a 32-byte sector's 8 elements, from half the budget up to
/// it, that takes the fewest tiles and of those pads the axis least, its extra
/// iterations masked (an imperfect split). A padded GEMM operand's 1712 rows (16 x 107)
/// are tiled by 64 in 27 tiles, 16 rows masked, rather than by 16 in 107: a tile of 16
/// reads half a 128-byte line a row and gives each block a quarter as much to copy.
fn run_tile(extent: i64, budget: i64) -> i64 {
    if extent <= budget {
        return extent;
    }
    let divisor = (1..=budget).rev().find(|t| extent % t == 0).unwrap_or(1);
    if 2 * divisor > budget || budget < 16 {
        return divisor;
    }
    let tiles = |t: i64| (extent + t - 1) / t;
    (budget / 2..=budget)
        .filter(|t| t % 8 == 0)
        .min_by_key(|t| (tiles(*t), tiles(*t) * t))
        .unwrap_or(divisor)
}

/// The stage as a tiled transpose through shared memory. Its loops run in the input's
/// axis order: the axes before the channel (`n`, `k`) stay outside the tile; the input's
/// axes after the channel (the run: `h, w` or `r, s`) are tiled innermost first within
/// [`RUN`] elements in all ([`run_tile`]); the channels by a sampled count.
fn transpose(sch: &mut Schedule, stage: &Staged) -> Result<(), SketchError> {
    let err = at("staging");
    let b = sch.get_block(&stage.name).map_err(&err)?;
    let loops = sch.get_loops(b).map_err(&err)?;
    let ch = *stage
        .perm
        .last()
        .ok_or(SketchError::TensorCoreNotApplicable)?;
    if loops.len() != stage.perm.len() || ch + 1 >= loops.len() {
        return Err(SketchError::TensorCoreNotApplicable);
    }
    let extent = |sch: &Schedule, l: LoopRv| -> Result<i64, SketchError> {
        let id = sch.loop_id(l).map_err(&err)?;
        Ok(sch.program().lp(id).extent)
    };
    // The run's tiles, innermost axis first.
    let (mut run_out, mut run_in) = (Vec::new(), Vec::new());
    let mut budget = RUN;
    for l in loops[ch + 1..].iter().rev() {
        let e = extent(sch, *l)?;
        let t = run_tile(e, budget);
        budget /= t;
        let parts = sch.split(*l, &[None, Some(IntArg::Lit(t))]).map_err(&err)?;
        run_out.insert(0, parts[0]);
        run_in.insert(0, parts[1]);
    }
    // The channels' tile.
    let c = extent(sch, loops[ch])?;
    let mut counts: Vec<i64> = CHANNELS
        .into_iter()
        .filter(|t| c % t == 0 && *t < c)
        .collect();
    if c <= RUN {
        counts.push(c);
    }
    if counts.is_empty() {
        counts.push(run_tile(c, RUN));
    }
    let probs = vec![1.0 / counts.len() as f64; counts.len()];
    let count = sch
        .sample_categorical(&counts, &probs, None)
        .map_err(&err)?;
    let c_parts = sch
        .split(loops[ch], &[None, Some(IntArg::Rv(count))])
        .map_err(&err)?;
    // Blocks over the tiles; inside, the input's order (the channel, then its run).
    let tiles: Vec<LoopRv> = loops[..ch]
        .iter()
        .copied()
        .chain(run_out)
        .chain([c_parts[0]])
        .collect();
    let order: Vec<LoopRv> = tiles
        .iter()
        .copied()
        .chain([c_parts[1]])
        .chain(run_in.iter().copied())
        .collect();
    sch.reorder(&order).map_err(&err)?;
    let grid = fuse(sch, &tiles)?;
    sch.bind(grid, "blockIdx.x").map_err(&err)?;
    // The tile computed into shared memory and stored from there.
    let back = sch.cache_write(b, 0, "shared").map_err(&err)?;
    sch.reverse_compute_at(back, grid).map_err(&err)?;
    let rank = stage.perm.len() as i64;
    let elem = {
        let id = sch.block_id(b).map_err(&err)?;
        let p = sch.program();
        let buf = p.block(id).body.buffer;
        p.buffer(buf).dtype.bytes() as i64
    };
    let row = extent(sch, c_parts[1])?;
    sch.storage_align(b, 0, rank - 2, row, (4 / elem).max(1) % row)
        .map_err(&err)?;
    for blk in [b, back] {
        let inner = sch.get_loops(blk).map_err(&err)?;
        let inner = fuse(sch, &inner[1..])?;
        let threads = THREADS.min(extent(sch, inner)?);
        let parts = sch
            .split(inner, &[None, Some(IntArg::Lit(threads))])
            .map_err(&err)?;
        sch.bind(parts[1], "threadIdx.x").map_err(&err)?;
        // A thread's loads issued together, not one latency after another.
        sch.unroll(parts[0]).map_err(&err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::run_tile;

    #[test]
    fn a_run_without_a_good_divisor_is_tiled_by_whole_sectors_padding_least() {
        // Whole where it fits; a divisor above half the budget as before.
        assert_eq!(run_tile(56, 64), 56);
        assert_eq!(run_tile(9, 64), 9);
        assert_eq!(run_tile(1024, 64), 64);
        assert_eq!(run_tile(800, 64), 50);
        // 1712 = 16 x 107: 64 in 27 tiles (16 masked) rather than 16 in 107.
        assert_eq!(run_tile(1712, 64), 64);
        // 73 (prime): two tiles at least; 40 pads it least (to 80).
        assert_eq!(run_tile(73, 64), 40);
        assert_eq!(run_tile(103, 64), 56);
        // A budget too small for whole sectors keeps to divisors.
        assert_eq!(run_tile(73, 8), 1);
        assert_eq!(run_tile(12, 8), 6);
    }
}
