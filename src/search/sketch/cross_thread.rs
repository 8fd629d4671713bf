//! The cross-thread reduction sketch (`[cross_thread]`, MetaSchedule's
//! CrossThreadReduction): a reduction that reads its largest input once or a few times,
//! its elements consecutive along the reduced axis (a GEMV of a weight stored `[out, in]`,
//! a dense layer of batch 1, a row sum), is read by a block's lanes side by side rather
//! than one whole row per thread. Each thread of a block computes a partial result over a strided share of the
//! reduction, in a register, and the block sums them through shared memory:
//!
//! ```text
//! for b in blockIdx.x:                       (the output's elements, `rows` a block)
//!   for y in threadIdx.y, t in threadIdx.x:  (rows x lanes threads)
//!     acc = 0; for ko: acc += A[.., ko * lanes + t] * ...      (C_rf, in a register)
//!     C_rf_shared[t, y] = acc
//!   for y in threadIdx.y:                    (after a barrier)
//!     C[b * rows + y] = sum over t of C_rf_shared[t, y]        (then the epilogues)
//! ```
//!
//! In schedule terms: the last reduction axis is split by a sampled lane count, its inner
//! part `rfactor`ed (the partial results indexed by consecutive elements); the rf block
//! writes a shared cache (its global buffer inlined away) through a local accumulator and
//! is computed at the block's loop; the original block, now the sum, takes a sampled count
//! of output elements per block on `threadIdx.y`. Both counts are decisions of the trace.
//! Every thread of a row computes its sum (the same value; no lane is singled out), which
//! costs `lanes` shared reads against the reduction's `extent / lanes` global ones.
//!
//! Where the one stage after the reduction reads it by rows (a softmax's output divides
//! by the row sum) and the space has `fuse_consumer`, a coin of the trace may choose the
//! fused form ([`fused`]): that stage, the reduction and the row reductions before it (a
//! softmax's maximum) in one kernel, a block's rows at a time, where each was a kernel
//! streaming the input of its own.

use super::row_fusion::{self, Fusion};
use super::{at, attempt, loop_kinds, SketchError};
use crate::ir::{Expr, IterKind, Program};
use crate::schedule::{AnnArg, LoopRv, Schedule, Target};
use crate::search::space::SearchSpace;

/// The lane counts of the rule that split `main`'s last reduction axis into parts of more
/// than one step, and that make a block of at most the space's threads with one row. A
/// count need not divide the axis: the lanes past its end add zeros (`rfactor` of an
/// imperfect split).
fn lane_counts(space: &SearchSpace, p: &Program, main: crate::ir::BlockId) -> Vec<i64> {
    let Some(rule) = &space.cross_thread else {
        return Vec::new();
    };
    let last = last_reduction(p, main);
    rule.lanes
        .iter()
        .copied()
        .filter(|l| *l < last)
        .filter(|l| *l <= space.max_threads_per_block)
        .collect()
}

/// Whether the rule applies to `main`: a GPU space with `[cross_thread]`, a largest input
/// whose elements `main` reads at most `max_reuse` times each (a GEMV reads its weight
/// once; a GEMM's tiles are what reuse pays for), a last reduction axis of at least
/// `min_reduction` that a lane count splits into more than one step.
pub(super) fn applies(space: &SearchSpace, p: &Program, main: crate::ir::BlockId) -> bool {
    let Some(rule) = &space.cross_thread else {
        return false;
    };
    space.is_gpu()
        && largest_input_reuse(p, main).is_some_and(|r| r <= rule.max_reuse)
        && last_reduction(p, main) >= rule.min_reduction
        && !lane_counts(space, p, main).is_empty()
}

/// The extent of the reduction `main`'s lanes read side by side: its last reduction axis,
/// or the run of its last reduction axes that its largest input stores contiguously, as
/// one axis ([`contiguous_reduction_run`]: a global average pool's `h` and `w`, a
/// channel's statistics over `h` and `w` of NCHW); 0 when it reduces nothing.
pub(super) fn last_reduction(p: &Program, main: crate::ir::BlockId) -> i64 {
    let run = contiguous_reduction_run(p, main);
    p.block(main)
        .iter_vars
        .iter()
        .rev()
        .filter(|iv| iv.kind == IterKind::Reduce)
        .take(run.max(1))
        .map(|iv| iv.extent)
        .reduce(|a, b| a * b)
        .unwrap_or(0)
}

/// How many of `main`'s last reduction axes its largest input reads as one contiguous
/// run: those axes are the block's last iteration variables and the input's last indices,
/// in the same order, and every one after the first spans its whole dimension, so that
/// fused they step through consecutive elements (`X[n, c, h, w]` summed over `h` and `w`:
/// 2). 1 where only the last one does (or the block reads no input), 0 where it reduces
/// nothing.
pub(super) fn contiguous_reduction_run(p: &Program, main: crate::ir::BlockId) -> usize {
    let blk = p.block(main);
    let trailing: Vec<_> = blk
        .iter_vars
        .iter()
        .rev()
        .take_while(|iv| iv.kind == IterKind::Reduce)
        .collect();
    if trailing.len() < 2 {
        return trailing.len();
    }
    let Some((buf, idx)) = largest_input(p, main) else {
        return 1;
    };
    let shape = &p.buffer(buf).shape;
    let mut run = 0;
    for (k, iv) in trailing.iter().enumerate() {
        let (Some(e), Some(dim)) = (idx.iter().rev().nth(k), shape.iter().rev().nth(k)) else {
            break;
        };
        if !matches!(e, Expr::Var(v) if *v == iv.var) {
            break;
        }
        run = k + 1;
        // An axis short of its whole dimension ends the run: the one before it would
        // step past the elements it skips.
        if iv.extent != *dim {
            break;
        }
    }
    run.max(1)
}

/// How many times `main` reads each element of its largest input, on average: its
/// iterations over the input's elements (`None` when it reads no input).
pub(super) fn largest_input_reuse(p: &Program, main: crate::ir::BlockId) -> Option<i64> {
    let blk = p.block(main);
    let iterations = blk
        .extent_of(IterKind::Spatial)
        .saturating_mul(blk.extent_of(IterKind::Reduce));
    let (largest, _) = largest_input(p, main)?;
    Some(iterations / p.buffer(largest).numel().max(1))
}

/// The input `main` reads that has the most elements, and the index it is read at (the
/// last of equal ones); `None` when it reads no input.
pub(super) fn largest_input(
    p: &Program,
    main: crate::ir::BlockId,
) -> Option<(crate::ir::BufferId, Vec<Expr>)> {
    p.block_reads(main)
        .into_iter()
        .max_by_key(|(buf, _)| p.buffer(*buf).numel())
}

/// The row counts of `rows` a block may take over an output of `extents` (its spatial
/// axes longer than 1): at most the output; over several axes, a divisor of the
/// innermost, so that a block's rows are one box of the output (the box the partial
/// results are computed over) rather than rows of two. The list does not depend on the
/// lane count (a mutation of either decision replays the other); a block of more threads
/// than the device allows is left to the postprocessor.
fn row_counts(rows: &[i64], extents: &[i64]) -> Vec<i64> {
    let outputs: i64 = extents.iter().product();
    rows.iter()
        .copied()
        .filter(|r| *r <= outputs)
        .filter(|r| extents.len() <= 1 || extents.last().is_some_and(|e| e % r == 0))
        .collect()
}

/// A uniform `sample_categorical` over `values`.
pub(super) fn sample(
    sch: &mut Schedule,
    values: &[i64],
    rule: &'static str,
) -> Result<crate::schedule::ExprRv, SketchError> {
    let probs = vec![1.0 / values.len() as f64; values.len()];
    sch.sample_categorical(values, &probs, None)
        .map_err(at(rule))
}

/// The loop of `loops` that the rf block's factored variable (the partial results' index
/// at `axis`, the `factor_axis` of its `rfactor`) is bound to.
pub(super) fn factored_loop(
    sch: &Schedule,
    rf: crate::schedule::BlockRv,
    loops: &[LoopRv],
    axis: usize,
) -> Result<LoopRv, SketchError> {
    let p = sch.program();
    let blk = p.block(sch.block_id(rf).map_err(at("rfactor"))?);
    let factored = blk.body.indices.get(axis).and_then(|e| match e {
        Expr::Var(v) => blk
            .iter_vars
            .iter()
            .zip(&blk.bindings)
            .find(|(iv, _)| iv.var == *v)
            .and_then(|(_, b)| match b {
                Expr::Var(lv) => Some(*lv),
                _ => None,
            }),
        _ => None,
    });
    loops
        .iter()
        .copied()
        .find(|l| {
            sch.loop_id(*l)
                .is_ok_and(|id| Some(p.lp(id).var) == factored)
        })
        .ok_or(SketchError::CrossThreadNotApplicable)
}

/// Builds one sample of the sketch (see the module's documentation): where the workload's
/// last stage reads the reduction by rows and the space fuses, at a coin's choice the
/// fused form ([`fused`]).
pub(super) fn apply(space: &SearchSpace, sch: &mut Schedule) -> Result<(), SketchError> {
    if let Some(plan) = fusible(space, sch.program())? {
        if super::coin(sch, FUSED)? {
            return fused(space, sch, &plan);
        }
    }
    super::reduction_sketch(space, sch, across_threads)
}

/// Schedules the reduction block `name` (at the root, not yet scheduled) across threads,
/// with the elementwise `epilogues` after it inlined into its write-back where they can
/// be; returns those that could not be. Also what a reduction before the main block (a
/// softmax's row maximum) gets where the rule applies to it ([`super::standalone`]).
pub(super) fn across_threads(
    space: &SearchSpace,
    sch: &mut Schedule,
    name: &str,
    epilogues: &[String],
) -> Result<Vec<String>, SketchError> {
    let rule = space
        .cross_thread
        .clone()
        .ok_or(SketchError::CrossThreadNotApplicable)?;
    let main = sch.get_block(name).map_err(at(RULE))?;
    let (lanes_offered, spatial_extents) = {
        let p = sch.program();
        let id = sch.block_id(main).map_err(at(RULE))?;
        if !applies(space, p, id) {
            return Err(SketchError::CrossThreadNotApplicable);
        }
        (lane_counts(space, p, id), spatial_extents(p, id))
    };
    // 1-2. The last reduction axis split by the lane count, its inner part factored into
    //      partial results in shared memory.
    let lanes = sample(sch, &lanes_offered, RULE)?;
    let rf = factor_lanes(sch, main, lanes)?;
    let folded = fold_lanes(space, sch, main)?;
    // 3. The sum accumulates in a register; the epilogues go into its write-back.
    let write_back = sch.cache_write(main, 0, "local").map_err(at(RULE))?;
    let mut leftovers = Vec::new();
    for epilogue in epilogues {
        let b = sch.get_block(epilogue).map_err(at("epilogue"))?;
        if !(space.inline_epilogue && attempt(sch, |s| s.reverse_compute_inline(b)).is_ok()) {
            leftovers.push(epilogue.clone());
        }
    }
    // 4. The output's elements, `rows` a block on threadIdx.y.
    let offered = row_counts(&rule.rows, &spatial_extents);
    let (by_rows, _, _) = split_rows(sch, main, &offered, RULE)?;
    sch.bind(by_rows[0], "blockIdx.x").map_err(at(RULE))?;
    sch.bind(by_rows[1], "threadIdx.y").map_err(at(RULE))?;
    sch.reverse_compute_at(write_back, by_rows[1])
        .map_err(at(RULE))?;
    unroll_lanes(sch, main)?;
    // 5-6. The partial results computed at the block, summed in one step or two.
    spread_steps(space, sch, folded, rf, by_rows[0])?;
    Ok(leftovers)
}

const RULE: &str = "cross-thread reduction";
const FUSED: &str = "cross-thread reduction fused with its consumer";

/// The extents of `block`'s spatial axes longer than 1.
fn spatial_extents(p: &Program, block: crate::ir::BlockId) -> Vec<i64> {
    p.block(block)
        .iter_vars
        .iter()
        .filter(|iv| iv.kind == IterKind::Spatial && iv.extent > 1)
        .map(|iv| iv.extent)
        .collect()
}

/// Splits `block`'s last reduction axis by `lanes` and factors its inner part: returns
/// the rf block, whose partial results (one a lane) are written to shared memory (their
/// global buffer inlined away) and read by `block`, which now sums them.
fn factor_lanes(
    sch: &mut Schedule,
    block: crate::schedule::BlockRv,
    lanes: crate::schedule::ExprRv,
) -> Result<crate::schedule::BlockRv, SketchError> {
    super::factor_last_reduction(
        sch,
        block,
        crate::schedule::IntArg::Rv(lanes),
        0,
        "shared",
        RULE,
        SketchError::CrossThreadNotApplicable,
    )
}

/// Computes the rf block `rf` at the block's loop `block_loop`: its rows on threadIdx.y,
/// the lanes on threadIdx.x, each lane's share of the reduction serial in a register,
/// auto-unrolled (a decision), its init taken out of the loop.
fn spread_partials(
    space: &SearchSpace,
    sch: &mut Schedule,
    rf: crate::schedule::BlockRv,
    block_loop: LoopRv,
) -> Result<(), SketchError> {
    sch.compute_at(rf, block_loop).map_err(at(RULE))?;
    let rf_loops = sch.get_loops(rf).map_err(at(RULE))?;
    let depth = rf_loops
        .iter()
        .position(|l| *l == block_loop)
        .map_or(1, |d| d + 1);
    let inner = &rf_loops[depth..];
    let lane_loop = factored_loop(sch, rf, inner, 0)?;
    let rf_kinds = loop_kinds(sch, rf, inner)?;
    let row_loops: Vec<LoopRv> = inner
        .iter()
        .zip(&rf_kinds)
        .filter(|(l, k)| **k == IterKind::Spatial && **l != lane_loop)
        .map(|(l, _)| *l)
        .collect();
    let serial: Vec<LoopRv> = inner
        .iter()
        .zip(&rf_kinds)
        .filter(|(_, k)| **k == IterKind::Reduce)
        .map(|(l, _)| *l)
        .collect();
    let row = if row_loops.is_empty() {
        None
    } else {
        Some(super::fuse(sch, &row_loops)?)
    };
    let order: Vec<LoopRv> = row
        .into_iter()
        .chain([lane_loop])
        .chain(serial.iter().copied())
        .collect();
    sch.reorder(&order).map_err(at(RULE))?;
    if let Some(r) = row {
        sch.bind(r, "threadIdx.y").map_err(at(RULE))?;
    }
    sch.bind(lane_loop, "threadIdx.x").map_err(at(RULE))?;
    let acc = sch.cache_write(rf, 0, "local").map_err(at(RULE))?;
    sch.reverse_compute_at(acc, lane_loop).map_err(at(RULE))?;
    let step = sample(sch, &space.unroll_max_steps, "auto-unroll")?;
    for lp in &serial {
        sch.annotate(Target::Loop(*lp), super::AUTO_UNROLL_KEY, AnnArg::Rv(step))
            .map_err(at("auto-unroll"))?;
    }
    if let Some(first) = serial.first() {
        sch.decompose_reduction(rf, *first)
            .map_err(at("decompose_reduction"))?;
    }
    Ok(())
}

/// The fused form's plan for `p` ([`row_fusion::plan`]), where the space fuses
/// (`fuse_consumer`) and the rule applies to the main reduction; the row reductions before
/// it are fused where the rule applies to them with the same lane counts.
fn fusible(space: &SearchSpace, p: &Program) -> Result<Option<Fusion>, SketchError> {
    if !space.cross_thread.as_ref().is_some_and(|c| c.fuse_consumer) {
        return Ok(None);
    }
    let st = super::stages(p)?;
    let Some(main) = p.find_block(&st.main).first().copied() else {
        return Ok(None);
    };
    let lanes = lane_counts(space, p, main);
    row_fusion::plan(
        p,
        |b| applies(space, p, b),
        |r| lanes.iter().all(|l| lane_counts(space, p, r).contains(l)),
    )
}

/// The fused form: one kernel a block of `rows` of the sink's rows at a time, with the
/// same `lanes` threads of a row throughout:
///
/// ```text
/// for b in blockIdx.x:
///   for y, t: M_rf_shared[t, y] = max over ko X[row, ko * lanes + t]   (each row reduction
///   for y:    M = max over t M_rf_shared[t, y]    (a register)          before the main one)
///   for y, t: S_rf_shared[t, y] = sum over ko exp(X[row, ..] - M)
///   for y in threadIdx.y:
///     S = sum over t S_rf_shared[t, y]                                  (a register)
///     for jo, t in threadIdx.x: Y[row, jo * lanes + t] = exp(X[row, ..] - M) / S
/// ```
///
/// Barriers come from the lowering (shared buffers written, then read). Reductions before
/// the main one that are not read by rows keep kernels of their own. At coins of the
/// trace, where the rows fit `stage_rows_bytes`, the block's rows of the inputs are copied
/// into shared memory first and every pass reads the copy ([`stage_rows`]), or a stage
/// several passes read is kept and computed once into shared memory ([`kept_stage`]).
fn fused(space: &SearchSpace, sch: &mut Schedule, plan: &Fusion) -> Result<(), SketchError> {
    let rule = space
        .cross_thread
        .clone()
        .ok_or(SketchError::CrossThreadNotApplicable)?;
    let st = super::stages(sch.program())?;
    let kept = kept_stage(space, sch, &st, &plan.sink)?;
    super::inline_padding(sch, &st, kept.as_deref())?;
    let main = sch.get_block(&st.main).map_err(at(FUSED))?;
    let sink = sch.get_block(&plan.sink).map_err(at(FUSED))?;
    let (lanes_offered, row_extents) = {
        let p = sch.program();
        let sink_id = sch.block_id(sink).map_err(at(FUSED))?;
        let vars = &p.block(sink_id).iter_vars;
        let rows: Vec<i64> = vars[..vars.len() - 1]
            .iter()
            .map(|iv| iv.extent)
            .filter(|e| *e > 1)
            .collect();
        (
            lane_counts(space, p, sch.block_id(main).map_err(at(FUSED))?),
            rows,
        )
    };
    let lanes = sample(sch, &lanes_offered, FUSED)?;
    // 1. The sink: its rows `rows` a block on threadIdx.y, each row's elements read by
    //    the lanes side by side.
    let offered = row_counts(&rule.rows, &row_extents);
    let (by_rows, col, rows) = split_rows(sch, sink, &offered, FUSED)?;
    let cols = sch
        .split(col, &[None, Some(crate::schedule::IntArg::Rv(lanes))])
        .map_err(at(FUSED))?;
    sch.reorder(&[by_rows[0], by_rows[1], cols[0], cols[1]])
        .map_err(at(FUSED))?;
    sch.bind(by_rows[0], "blockIdx.x").map_err(at(FUSED))?;
    sch.bind(by_rows[1], "threadIdx.y").map_err(at(FUSED))?;
    sch.bind(cols[1], "threadIdx.x").map_err(at(FUSED))?;
    // 2. The main reduction: partial results across the lanes, their sum in a register
    //    of each of the row's threads, which the sink reads.
    let rf = factor_lanes(sch, main, lanes)?;
    let folded = fold_lanes(space, sch, main)?;
    let write_back = sch.cache_write(main, 0, "local").map_err(at(FUSED))?;
    sch.compute_inline(write_back).map_err(at(FUSED))?;
    sch.compute_at(main, by_rows[1]).map_err(at(FUSED))?;
    unroll_lanes(sch, main)?;
    spread_steps(space, sch, folded, rf, by_rows[0])?;
    // 2b. A kept stage into shared memory at the block's loop, now where it reads a row
    //     reduction placed below (a softmax's exponentials read its maximum), or after
    //     them where one of them reads it (a residual layer norm's sum); its loops are
    //     spread over the threads last, so that the reductions placed below it cover
    //     the block's rows (not a box around the fused loop's).
    let mut kept_copy = None;
    if let Some(name) = &kept {
        if let Some(copy) = keep_in_shared(space, sch, name, rows)? {
            let placed = super::attempt(sch, |s| s.compute_at(copy, by_rows[0])).is_ok();
            kept_copy = Some((copy, placed));
        }
    }
    // 3. The row reductions before it, last first (each is computed before its readers):
    //    the partial results as the main one's, the row's value in a register of each of
    //    the row's threads.
    for name in plan.rows.iter().rev() {
        let b = sch.get_block(name).map_err(at(FUSED))?;
        let rf = factor_lanes(sch, b, lanes)?;
        let folded = fold_lanes(space, sch, b)?;
        let local = sch.cache_write(b, 0, "local").map_err(at(FUSED))?;
        sch.compute_inline(local).map_err(at(FUSED))?;
        sch.compute_at(b, by_rows[0]).map_err(at(FUSED))?;
        let loops = sch.get_loops(b).map_err(at(FUSED))?;
        let kinds = loop_kinds(sch, b, &loops[1..])?;
        let row_loops: Vec<LoopRv> = loops[1..]
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| **k == IterKind::Spatial)
            .map(|(l, _)| *l)
            .collect();
        // (A block of one row has no row loop left: each thread computes its row's.)
        if !row_loops.is_empty() {
            let row = super::fuse(sch, &row_loops)?;
            sch.bind(row, "threadIdx.y").map_err(at(FUSED))?;
        }
        unroll_lanes(sch, b)?;
        spread_steps(space, sch, folded, rf, by_rows[0])?;
    }
    if let Some((copy, placed)) = kept_copy {
        if !placed {
            sch.compute_at(copy, by_rows[0]).map_err(at(KEEP))?;
        }
        spread_by_rows(sch, copy, lanes)?;
    }
    if kept.is_none() {
        stage_rows(space, sch, by_rows[0], rows, lanes)?;
    }
    for name in &plan.apart {
        super::standalone(space, sch, name)?;
    }
    Ok(())
}

const STAGE: &str = "cross-thread rows staged";

/// Elements each thread copies at a time where rows are staged and their length allows
/// (16-byte loads and stores of f32).
const STAGE_VECTOR: i64 = 4;

/// Where the space has `stage_rows_bytes` and a block's rows of the inputs the fused
/// kernel reads whole (those as large as its largest: a softmax's input, a residual
/// layer norm's two) take at most that many bytes, at a coin of the trace: those rows
/// copied into shared memory at the block's loop (`rows` on threadIdx.y, `lanes` side by
/// side on threadIdx.x, as the passes read them), and every pass over them (each row
/// reduction's partial results, the sink) reading the copies, so the inputs leave global
/// memory once where each pass read them again (from L2, when a block's rows outgrow L1).
/// Where a thread's share of the rows is at most `stage_registers` elements, a second
/// coin may make the copies each thread's registers instead: spread as the passes read
/// the rows (`rows` on threadIdx.y, each row's elements `lanes` side by side), so a
/// thread copies the elements it reads, and every loop over them unrolled (constant
/// indices: the compiler keeps the copy in registers).
fn stage_rows(
    space: &SearchSpace,
    sch: &mut Schedule,
    block_loop: LoopRv,
    rows: crate::schedule::ExprRv,
    lanes: crate::schedule::ExprRv,
) -> Result<(), SketchError> {
    if space
        .cross_thread
        .as_ref()
        .is_none_or(|c| c.stage_rows_bytes < 1)
    {
        return Ok(());
    }
    // Per input: its readers under the block's loop, by name, with the read's index.
    let (staged, vector, lengths): (Vec<Readers>, bool, Vec<i64>) = {
        let p = sch.program();
        let under = p.blocks_under(crate::ir::Node::Loop(
            sch.loop_id(block_loop).map_err(at(STAGE))?,
        ));
        let mut inputs: Vec<crate::ir::BufferId> = under
            .iter()
            .flat_map(|b| p.block_reads(*b))
            .map(|(buf, _)| buf)
            .filter(|buf| p.buffer(*buf).kind == crate::ir::BufferKind::Input)
            .collect();
        inputs.sort_by_key(|b| b.0);
        inputs.dedup();
        let largest = inputs
            .iter()
            .map(|b| p.buffer(*b).numel())
            .max()
            .unwrap_or(0);
        inputs.retain(|b| p.buffer(*b).numel() == largest);
        let lengths: Vec<i64> = inputs
            .iter()
            .map(|b| p.buffer(*b).shape.last().copied().unwrap_or(1))
            .collect();
        if inputs.is_empty() || !rows_fit(space, sch, rows, lengths.iter().sum())? {
            return Ok(());
        }
        let vector = inputs.iter().all(|b| {
            p.buffer(*b)
                .shape
                .last()
                .is_some_and(|r| r % STAGE_VECTOR == 0)
        });
        let readers = inputs
            .iter()
            .map(|input| {
                under
                    .iter()
                    .filter_map(|b| {
                        let reads = p.block_reads(*b);
                        let index = reads.iter().position(|(r, _)| r == input)?;
                        Some((p.block(*b).name.clone(), index as i64))
                    })
                    .collect()
            })
            .collect();
        (readers, vector, lengths)
    };
    if !super::coin(sch, STAGE)? {
        return Ok(());
    }
    let registers = lanes_hold(space, sch, lanes, &lengths)? && super::coin(sch, REGISTERS)?;
    for readers in &staged {
        let Some(((first, index), rest)) = readers.split_first() else {
            continue;
        };
        let reader = sch.get_block(first).map_err(at(STAGE))?;
        let scope = if registers { "local" } else { "shared" };
        let copy = sch.cache_read(reader, *index, scope).map_err(at(STAGE))?;
        for (name, _) in rest {
            let b = sch.get_block(name).map_err(at(STAGE))?;
            sch.read_cache(b, copy).map_err(at(STAGE))?;
        }
        sch.compute_at(copy, block_loop).map_err(at(STAGE))?;
        if registers {
            spread_by_rows(sch, copy, lanes)?;
            let name = sch
                .program()
                .block(sch.block_id(copy).map_err(at(STAGE))?)
                .name
                .clone();
            for name in readers.iter().map(|(n, _)| n).chain([&name]) {
                unroll_serial(sch, name, block_loop)?;
            }
        } else {
            spread_copy(sch, copy, rows, lanes, vector)?;
        }
    }
    Ok(())
}

/// Whether a block's `rows` rows of `row` elements (counted as f32: an upper bound for
/// 16-bit ones) fit in the space's `stage_rows_bytes`.
fn rows_fit(
    space: &SearchSpace,
    sch: &Schedule,
    rows: crate::schedule::ExprRv,
    row: i64,
) -> Result<bool, SketchError> {
    let limit = space
        .cross_thread
        .as_ref()
        .map_or(0, |c| c.stage_rows_bytes);
    Ok(sch.value(rows).map_err(at(STAGE))? * row * 4 <= limit)
}

/// Whether a thread's share of a row of each input (of `lengths`), read by `lanes`
/// lanes side by side, holds at most the space's `stage_registers` elements in all.
fn lanes_hold(
    space: &SearchSpace,
    sch: &Schedule,
    lanes: crate::schedule::ExprRv,
    lengths: &[i64],
) -> Result<bool, SketchError> {
    let limit = space.cross_thread.as_ref().map_or(0, |c| c.stage_registers);
    let lanes = sch.value(lanes).map_err(at(STAGE))?.max(1);
    let held: i64 = lengths.iter().map(|l| (l + lanes - 1) / lanes).sum();
    Ok(held <= limit)
}

/// Unrolls the loops of block `name` below `block_loop` that are bound to no thread
/// (a register copy's elements and every pass over them: each index a constant, so
/// that the copy stays in registers).
fn unroll_serial(sch: &mut Schedule, name: &str, block_loop: LoopRv) -> Result<(), SketchError> {
    let block = sch.get_block(name).map_err(at(REGISTERS))?;
    let outer = sch.loop_id(block_loop).map_err(at(REGISTERS))?;
    let loops = sch.get_loops(block).map_err(at(REGISTERS))?;
    let mut below = false;
    for l in loops {
        let id = sch.loop_id(l).map_err(at(REGISTERS))?;
        let serial = sch.program().lp(id).kind == crate::ir::LoopKind::Serial;
        if below && serial {
            sch.unroll(l).map_err(at(REGISTERS))?;
        }
        below |= id == outer;
    }
    Ok(())
}

const REGISTERS: &str = "cross-thread rows staged in registers";

/// The blocks that read one staged input, by name, each with the read's index.
type Readers = Vec<(String, i64)>;

/// The loops of `copy` below the block's loop (its rows and columns) fused and spread
/// over the block's threads, `rows` on threadIdx.y and `lanes` side by side on
/// threadIdx.x, `STAGE_VECTOR` elements at a time with `vector`.
fn spread_copy(
    sch: &mut Schedule,
    copy: crate::schedule::BlockRv,
    rows: crate::schedule::ExprRv,
    lanes: crate::schedule::ExprRv,
    vector: bool,
) -> Result<(), SketchError> {
    let loops = sch.get_loops(copy).map_err(at(STAGE))?;
    let fused = super::fuse(sch, &loops[1..])?;
    let mut factors = vec![
        None,
        Some(crate::schedule::IntArg::Rv(rows)),
        Some(crate::schedule::IntArg::Rv(lanes)),
    ];
    if vector {
        factors.push(Some(crate::schedule::IntArg::Lit(STAGE_VECTOR)));
    }
    let parts = sch.split(fused, &factors).map_err(at(STAGE))?;
    sch.bind(parts[1], "threadIdx.y").map_err(at(STAGE))?;
    sch.bind(parts[2], "threadIdx.x").map_err(at(STAGE))?;
    if vector {
        sch.vectorize(parts[3]).map_err(at(STAGE))?;
    }
    Ok(())
}

/// The loops of the kept stage `block` below the block's loop spread over the threads
/// as the passes are: its rows on threadIdx.y, each row's elements on the lanes side by
/// side, so that each thread reads the row values (a softmax's maximum) its own row's
/// threads hold in registers.
fn spread_by_rows(
    sch: &mut Schedule,
    block: crate::schedule::BlockRv,
    lanes: crate::schedule::ExprRv,
) -> Result<(), SketchError> {
    let loops = sch.get_loops(block).map_err(at(KEEP))?;
    let Some((col, rows)) = loops[1..].split_last() else {
        return Err(SketchError::CrossThreadNotApplicable);
    };
    let cols = sch
        .split(*col, &[None, Some(crate::schedule::IntArg::Rv(lanes))])
        .map_err(at(KEEP))?;
    if !rows.is_empty() {
        let row = super::fuse(sch, rows)?;
        sch.bind(row, "threadIdx.y").map_err(at(KEEP))?;
    }
    sch.bind(cols[1], "threadIdx.x").map_err(at(KEEP))?;
    Ok(())
}

/// The stage before the main reduction that the fused form may keep (not inline) and
/// compute into shared memory at the block's loop, at a coin of the trace where the
/// space has `stage_rows_bytes` and `keep_stage`: one of the sink's shape that two or
/// more blocks read (a softmax's exponentials, read by its sum and its output: computed
/// once where each read recomputed them; a residual layer norm's sum, read by both sums
/// and the output: two inputs read once into one copy).
fn kept_stage(
    space: &SearchSpace,
    sch: &mut Schedule,
    st: &super::Stages,
    sink: &str,
) -> Result<Option<String>, SketchError> {
    if space
        .cross_thread
        .as_ref()
        .is_none_or(|c| c.stage_rows_bytes < 1 || !c.keep_stage)
    {
        return Ok(None);
    }
    let candidate = row_fusion::kept_candidate(sch.program(), st, sink);
    match candidate {
        Some(name) if super::coin(sch, KEEP)? => Ok(Some(name)),
        _ => Ok(None),
    }
}

const KEEP: &str = "cross-thread stage kept in shared memory";

/// The kept stage `name` written into shared memory, its readers reading that (its
/// write-back inlined), where a block's rows of it fit in `stage_rows_bytes`: returns
/// the stage's block to place; otherwise inlines it as the other stages were.
fn keep_in_shared(
    space: &SearchSpace,
    sch: &mut Schedule,
    name: &str,
    rows: crate::schedule::ExprRv,
) -> Result<Option<crate::schedule::BlockRv>, SketchError> {
    let block = sch.get_block(name).map_err(at(KEEP))?;
    let row = {
        let p = sch.program();
        let b = sch.block_id(block).map_err(at(KEEP))?;
        p.buffer(p.block(b).body.buffer)
            .shape
            .last()
            .copied()
            .unwrap_or(1)
    };
    if !rows_fit(space, sch, rows, row)? {
        sch.compute_inline(block).map_err(at(KEEP))?;
        return Ok(None);
    }
    let write_back = sch.cache_write(block, 0, "shared").map_err(at(KEEP))?;
    sch.compute_inline(write_back).map_err(at(KEEP))?;
    Ok(Some(block))
}

/// `block`'s loops but the last fused into one over its rows and split by a count drawn
/// from `offered` (none offered: the rule does not apply): returns the two parts (the
/// block's rows, the rows within a block), not yet bound, the last loop and the count.
fn split_rows(
    sch: &mut Schedule,
    block: crate::schedule::BlockRv,
    offered: &[i64],
    rule: &'static str,
) -> Result<(Vec<LoopRv>, LoopRv, crate::schedule::ExprRv), SketchError> {
    if offered.is_empty() {
        return Err(SketchError::CrossThreadNotApplicable);
    }
    let rows = sample(sch, offered, rule)?;
    let loops = sch.get_loops(block).map_err(at(rule))?;
    let Some((last, leading)) = loops.split_last() else {
        return Err(SketchError::CrossThreadNotApplicable);
    };
    let fused = super::fuse(sch, leading)?;
    let by_rows = sch
        .split(fused, &[None, Some(crate::schedule::IntArg::Rv(rows))])
        .map_err(at(rule))?;
    Ok((by_rows, *last, rows))
}

/// The threads of a row that sum the lanes' partial results in [`fold_lanes`]'s first
/// step, `lanes / FOLDED` each.
const FOLDED: i64 = 8;

/// Where the space has `fold_lanes`, at a coin of the trace, the lanes' partial results
/// that `block` sums (its last loop, right after [`factor_lanes`]) are summed in two
/// steps: returns the block of the first, whose [`FOLDED`] threads of each row each sum
/// every `FOLDED`-th of them into shared memory (an `rfactor` of the inner part of the
/// lane loop split by `FOLDED`: side by side, no two threads in one bank), for
/// [`spread_partials`] to place; then every thread of the row sums those `FOLDED`.
/// Without it every thread of a row reads all `lanes` partial results (a block's warps
/// each read 256 at 256 lanes, where the row's share of the input was 32 loads a
/// thread).
fn fold_lanes(
    space: &SearchSpace,
    sch: &mut Schedule,
    block: crate::schedule::BlockRv,
) -> Result<Option<crate::schedule::BlockRv>, SketchError> {
    let offered = space.cross_thread.as_ref().is_some_and(|c| c.fold_lanes);
    if !(offered && super::coin(sch, FOLD)?) {
        return Ok(None);
    }
    let loops = sch.get_loops(block).map_err(at(FOLD))?;
    let Some(lanes) = loops.last() else {
        return Err(SketchError::CrossThreadNotApplicable);
    };
    let parts = sch
        .split(*lanes, &[None, Some(crate::schedule::IntArg::Lit(FOLDED))])
        .map_err(at(FOLD))?;
    let folded = sch.rfactor(parts[1], 0).map_err(at(FOLD))?;
    let shared = sch.cache_write(folded, 0, "shared").map_err(at(FOLD))?;
    sch.compute_inline(shared).map_err(at(FOLD))?;
    Ok(Some(folded))
}

/// [`spread_partials`] of the first step of a two-step sum, if any, then of the rf block.
fn spread_steps(
    space: &SearchSpace,
    sch: &mut Schedule,
    folded: Option<crate::schedule::BlockRv>,
    rf: crate::schedule::BlockRv,
    block_loop: LoopRv,
) -> Result<(), SketchError> {
    if let Some(f) = folded {
        spread_partials(space, sch, f, block_loop)?;
    }
    spread_partials(space, sch, rf, block_loop)
}

const FOLD: &str = "cross-thread reduction's lanes summed in two steps";

/// Unrolls the loop over the lanes' partial results of `block` (its last loop).
fn unroll_lanes(sch: &mut Schedule, block: crate::schedule::BlockRv) -> Result<(), SketchError> {
    let loops = sch.get_loops(block).map_err(at(FUSED))?;
    if let Some(last) = loops.last() {
        sch.unroll(*last).map_err(at(FUSED))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{apply_sketch, sketches, SketchKind};
    use crate::schedule::Schedule;
    use crate::search::space::SearchSpace;

    fn program(spec: &str) -> crate::ir::Program {
        crate::workload::preset(spec).unwrap().to_program()
    }

    /// Samples of the sketch lowered to one CUDA kernel (no global partial results) whose
    /// threads, run with a GPU's semantics (barriers, shared memory), compute the
    /// reference; returns the kernels' source. Samples of more threads than a block may
    /// have (rows x lanes above 1,024) are the postprocessor's to refuse and are skipped;
    /// most of eight are not.
    fn samples_check(spec: &str) -> Vec<String> {
        samples_check_of(&program(spec), spec)
    }

    /// [`samples_check`] of a program (`spec` names it in failures).
    fn samples_check_of(p: &crate::ir::Program, spec: &str) -> Vec<String> {
        let p = p.clone();
        let space = SearchSpace::cuda_default();
        assert!(
            sketches(&space, &p)
                .unwrap()
                .contains(&SketchKind::CrossThread),
            "{spec}"
        );
        let sources: Vec<String> = (0..8)
            .filter_map(|seed| {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, SketchKind::CrossThread)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                assert_eq!(lowered.kernels.len(), 1, "{spec} seed {seed}");
                assert!(lowered.workspaces.is_empty(), "{spec} seed {seed}");
                if lowered.kernels[0].threads() > space.max_threads_per_block {
                    return None;
                }
                let err = crate::interp::check_lowered(&p, &lowered, seed)
                    .unwrap_or_else(|e| panic!("{spec} seed {seed}: {e}"));
                assert!(err < 1e-4, "{spec} seed {seed}: relative error {err}");
                Some(crate::codegen::cuda::generate(&lowered).unwrap().code)
            })
            .collect();
        assert!(
            sources.len() >= 5,
            "{spec}: {} of 8 samples fit",
            sources.len()
        );
        sources
    }

    /// A GEMV of a weight stored by rows: the lanes read a row's consecutive elements (the
    /// load's index moves by one with threadIdx.x), the partial results meet in a warp's
    /// shuffles (lanes of one warp), or also in shared memory after a barrier (more).
    #[test]
    fn a_gemv_of_a_weight_stored_by_rows_is_read_by_lanes_side_by_side() {
        for src in samples_check("matmul:m=1,n=24,k=512,layout=nt") {
            let shared = src.contains("__shared__") && src.contains("__syncthreads()");
            assert!(shared || src.contains("__shfl_xor_sync"), "{src}");
            assert!(src.contains("+ ((int)threadIdx.x))]"), "{src}");
        }
        // Outputs that no row count divides (7), and a batch of them.
        samples_check("matmul:m=7,n=1,k=768,layout=nt");
        samples_check("batch_matmul:b=3,m=1,n=5,k=256");
    }

    /// A reduction over axes stored one after the other (a global average pool of NCHW
    /// over `h` and `w`, a channel's sum of squares over `n`, `h` and `w`): the lanes read
    /// the run of the last ones as one axis (their loops fused, then split by the lane
    /// count), so a short `w` (11, 13) no longer keeps the sketch away; the loads move by
    /// one with threadIdx.x and every sample computes the reference with a GPU's
    /// semantics. Where the last reduction axis is not the input's last (NHWC pooled over
    /// `h` and `w`), the run is that axis alone and too short for lanes.
    #[test]
    fn reductions_over_contiguous_axes_are_read_by_lanes_as_one_axis() {
        let parse = |t: &str| crate::workload::parse(t).unwrap().to_program();
        let main = |p: &crate::ir::Program| p.find_block("S")[0];
        let pool = parse(
            "input X: f32[3, 37, 9, 11]\nS[n, c] = sum(X[n, c, h, w], h: 9, w: 11)\n\
             Y[n, c] = S[n, c] / 99.0\n",
        );
        assert_eq!(super::contiguous_reduction_run(&pool, main(&pool)), 2);
        assert_eq!(super::last_reduction(&pool, main(&pool)), 99);
        let stats = parse(
            "input X: f32[5, 24, 7, 13]\n\
             S[c] = sum(X[n, c, h, w] * X[n, c, h, w], n: 5, h: 7, w: 13)\n",
        );
        assert_eq!(super::contiguous_reduction_run(&stats, main(&stats)), 2);
        for (p, name) in [(&pool, "pool"), (&stats, "stats")] {
            for src in samples_check_of(p, name) {
                assert!(src.contains("+ ((int)threadIdx.x))]"), "{name}: {src}");
            }
        }
        let nhwc = parse("input X: f32[3, 9, 11, 37]\nS[n, c] = sum(X[n, h, w, c], h: 9, w: 11)\n");
        assert_eq!(super::contiguous_reduction_run(&nhwc, main(&nhwc)), 1);
        assert_eq!(super::last_reduction(&nhwc, main(&nhwc)), 11);
        let space = SearchSpace::cuda_default();
        assert!(!sketches(&space, &nhwc)
            .unwrap()
            .contains(&SketchKind::CrossThread));
    }

    /// A dense layer of batch 1: the bias and the relu go into the sum's write-back.
    #[test]
    fn a_dense_layer_of_batch_one_keeps_its_epilogue_in_the_kernel() {
        for src in samples_check("dense_bias_relu:m=1,n=20,k=512") {
            assert!(src.contains("fmaxf("), "{src}");
        }
    }

    /// A softmax over rows of 512: its row sum (the main block) across threads, and its
    /// row maximum (a reduction before it) across threads or one row a thread at a coin's
    /// choice; both kinds of sample compute the reference with a GPU's semantics.
    #[test]
    fn a_softmax_reads_its_rows_across_threads() {
        let mut max_across = [0, 0];
        for (sch, _) in checked_samples(&super::super::tests::softmax(6, 512), 8) {
            let across = sch
                .program()
                .buffers
                .iter()
                .any(|b| b.name.starts_with("M_rf"));
            max_across[usize::from(across)] += 1;
        }
        assert!(max_across[0] > 0 && max_across[1] > 0, "{max_across:?}");
    }

    /// The lanes' partial results of a softmax's row maximum and sum are combined by warp
    /// shuffles (`lower/warp_reduce.rs`): lanes of one warp in registers alone, more lanes
    /// each warp's in registers and the warps' through shared memory. Samples of both
    /// forms, each computing the reference with a GPU's semantics.
    #[test]
    fn a_softmaxs_lanes_are_combined_by_warp_shuffles() {
        let mut forms = [0, 0];
        for (_, lowered) in checked_samples(&super::super::tests::softmax(6, 123), 16) {
            for k in &lowered.kernels {
                let shuffled = k
                    .body
                    .iter()
                    .any(|s| s.contains(&|x| matches!(x, crate::lower::KStmt::WarpReduce { .. })));
                if shuffled {
                    forms[usize::from(k.block[0] > 32)] += 1;
                }
            }
        }
        assert!(forms[0] > 0 && forms[1] > 0, "{forms:?}");
    }

    /// `count` samples of the cross-thread sketch of `text` lowered for CUDA, each checked
    /// against the reference with a GPU's semantics; samples of more threads than a block
    /// may have (the postprocessor's to refuse) are left out.
    fn checked_samples(text: &str, count: u64) -> Vec<(Schedule, crate::lower::Lowered)> {
        checked_samples_in(&SearchSpace::cuda_default(), text, count)
    }

    /// [`checked_samples`] of `space`.
    fn checked_samples_in(
        space: &SearchSpace,
        text: &str,
        count: u64,
    ) -> Vec<(Schedule, crate::lower::Lowered)> {
        let p = crate::workload::parse(text).unwrap().to_program();
        (0..count)
            .filter_map(|seed| {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(space, &mut sch, seed, SketchKind::CrossThread)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                if lowered
                    .kernels
                    .iter()
                    .any(|k| k.threads() > space.max_threads_per_block)
                {
                    return None;
                }
                let err = crate::interp::check_lowered(&p, &lowered, seed)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                assert!(err < 1e-4, "seed {seed}: relative error {err}");
                Some((sch, lowered))
            })
            .collect()
    }

    /// The kernel count of each of 16 checked samples of the sketch of `text`.
    fn kernel_counts(text: &str) -> Vec<usize> {
        checked_samples(text, 16)
            .iter()
            .map(|(_, lowered)| lowered.kernels.len())
            .collect()
    }

    /// A softmax's row maximum, row sum and output in one kernel at a coin's choice (the
    /// others in three: maximum, sum, output); both forms compute the reference with a
    /// GPU's semantics, rows of a prime length (the lanes past its end add nothing) too.
    #[test]
    fn a_softmax_is_fused_into_one_kernel_at_a_coins_choice() {
        for row in [512, 521] {
            let counts = kernel_counts(&super::super::tests::softmax(6, row));
            assert!(counts.contains(&1), "{row}: {counts:?}");
            assert!(counts.iter().any(|c| *c > 1), "{row}: {counts:?}");
        }
    }

    /// Rows over two axes (a batch of matrices), each divided by its sum: the fused form
    /// takes a block's rows from both.
    #[test]
    fn rows_of_a_batch_are_normalised_in_one_kernel() {
        let counts = kernel_counts(
            "workload rownorm\ninput X: f32[2, 3, 300]\n\
             S[b, i] = sum(X[b, i, k], k: 300)\n\
             Y[b, i, j] = X[b, i, j] / S[b, i]\n",
        );
        assert!(counts.contains(&1), "{counts:?}");
    }

    /// BERT's attention softmax: rows over three axes, 128 keys (under 256), a scale and
    /// an additive mask a key, read by all heads and query rows; fused too.
    #[test]
    fn a_masked_attention_softmax_of_short_rows_is_fused_into_one_kernel() {
        let counts = kernel_counts(
            "workload attention_softmax_masked\ninput S: f32[2, 3, 5, 128]\n\
             input mask: f32[2, 128]\n\
             M[b, h, i] = max_reduce(S[b, h, i, k] * 0.125 + mask[b, k], k: 128)\n\
             E[b, h, i, j] = exp(S[b, h, i, j] * 0.125 + mask[b, j] - M[b, h, i])\n\
             Z[b, h, i] = sum(E[b, h, i, k], k: 128)\n\
             Y[b, h, i, j] = E[b, h, i, j] / Z[b, h, i]\n",
        );
        assert!(counts.contains(&1), "{counts:?}");
    }

    /// A layer norm of a residual sum over rows of 100 (BERT's, narrowed): the sum is a
    /// stage that both sums and the output read.
    const ADD_LAYER_NORM: &str = "workload add_layer_norm\ninput X: f32[6, 100]\n\
        input R: f32[6, 100]\ninput G: f32[100]\ninput B: f32[100]\n\
        T[i, j] = X[i, j] + R[i, j]\nS1[i] = sum(T[i, k], k: 100)\nMU[i] = S1[i] / 100.0\n\
        S2[i] = sum((T[i, k] - MU[i]) * (T[i, k] - MU[i]), k: 100)\n\
        Y[i, j] = (T[i, j] - MU[i]) / sqrt(S2[i] / 100.0 + 0.000000000001) * G[j] + B[j]\n";

    /// A layer norm (the mean's sum before the variance's, both read by rows), an RMS
    /// norm (one sum, a weight per column) and a layer norm of a residual sum of rows of
    /// 100 (the sum inlined into both reductions and the output) fuse too.
    #[test]
    fn layer_and_rms_norms_are_fused_into_one_kernel() {
        let layer_norm = "workload layer_norm\ninput X: f32[6, 512]\ninput G: f32[512]\n\
                          input B: f32[512]\nS1[i] = sum(X[i, k], k: 512)\n\
                          MU[i] = S1[i] / 512.0\n\
                          S2[i] = sum((X[i, k] - MU[i]) * (X[i, k] - MU[i]), k: 512)\n\
                          Y[i, j] = (X[i, j] - MU[i]) / sqrt(S2[i] / 512.0 + 0.00001) * G[j] + B[j]\n";
        let rms_norm = "workload rms_norm\ninput X: f32[6, 512]\ninput G: f32[512]\n\
                        S[i] = sum(X[i, k] * X[i, k], k: 512)\n\
                        Y[i, j] = X[i, j] / sqrt(S[i] / 512.0 + 0.000001) * G[j]\n";
        for text in [layer_norm, rms_norm, ADD_LAYER_NORM] {
            let counts = kernel_counts(text);
            assert!(counts.contains(&1), "{text}: {counts:?}");
        }
    }

    /// A fused block's rows staged in shared memory at a coin's choice
    /// (`stage_rows_bytes`): either its inputs' rows (the copies then the only blocks
    /// that read the inputs, every pass reading them; rows of a multiple of 4 copied in
    /// 16-byte vectors), or a stage before the main reduction that several passes read,
    /// kept and computed once into shared memory (a softmax's exponentials: one `expf` in
    /// the kernel where the sum and the output each computed it; a residual layer norm's
    /// sum; with `keep_stage`). Every kind of sample computes the reference with a GPU's
    /// semantics; rows over the limit are never staged, nor any without the key.
    #[test]
    fn a_fused_blocks_rows_are_staged_in_shared_memory_at_a_coins_choice() {
        for (text, kept, vector) in [
            (super::super::tests::softmax(6, 123), "E", false),
            (ADD_LAYER_NORM.to_string(), "T", true),
        ] {
            let mut space = SearchSpace::cuda_default();
            space.cross_thread.as_mut().unwrap().keep_stage = true;
            let mut kinds = [0; 3];
            for (sch, lowered) in checked_samples_in(&space, &text, 16) {
                let p = sch.program();
                let id = |name: &str| {
                    let at = p.buffers.iter().position(|b| b.name == name)?;
                    Some(crate::ir::BufferId(at as u32))
                };
                let code = crate::codegen::cuda::generate(&lowered).unwrap().code;
                let copies: Vec<_> = ["X", "R"]
                    .into_iter()
                    .filter_map(|x| Some((id(x)?, id(&format!("{x}_shared"))?)))
                    .collect();
                for (x, copy) in &copies {
                    assert_eq!(p.readers(*x).len(), 1, "{text}: {}", sch.trace());
                    assert!(p.readers(*copy).len() >= 3, "{text}: {}", sch.trace());
                }
                let vectors = code.contains("_shared + ") && code.contains("*(float4*)");
                assert_eq!(vectors, vector && !copies.is_empty(), "{code}");
                let kept_here = id(&format!("{kept}_shared")).is_some();
                if kept_here && kept == "E" {
                    assert_eq!(code.matches("expf(").count(), 1, "{code}");
                }
                kinds[usize::from(!copies.is_empty()) + 2 * usize::from(kept_here)] += 1;
            }
            assert!(kinds.iter().all(|k| *k > 0), "{text}: {kinds:?}");
        }
        let p = crate::workload::parse(&super::super::tests::softmax(6, 123))
            .unwrap()
            .to_program();
        let mut space = SearchSpace::cuda_default();
        space.cross_thread.as_mut().unwrap().keep_stage = true;
        for limit in [0, 123 * 4 - 1] {
            space.cross_thread.as_mut().unwrap().stage_rows_bytes = limit;
            for seed in 0..16 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, SketchKind::CrossThread).unwrap();
                assert!(!sch.trace().to_string().contains("read_cache"), "{limit}");
                let names = sch.program().buffers.iter().map(|b| b.name.as_str());
                assert!(!names.clone().any(|n| n == "E_shared"), "{limit}");
            }
        }
    }

    /// Rows staged in registers at a second coin (`stage_registers`, off in the default
    /// space, on here): the copy a local
    /// buffer, the only reader of the input, every pass reading it; no shared copy. Every
    /// sample computes the reference with a GPU's semantics, and NVRTC keeps the copy in
    /// registers (each loop over it unrolled: no stack frame). Not offered where a
    /// thread would hold more than `stage_registers` elements.
    #[test]
    fn a_fused_blocks_rows_are_staged_in_registers_at_a_coins_choice() {
        let nvrtc = match crate::measure::cuda::nvrtc_available() {
            Ok(()) => true,
            Err(_) if std::env::var("TESSEL_NO_NVRTC").as_deref() == Ok("1") => false,
            Err(e) => panic!("{e} (set TESSEL_NO_NVRTC=1 to skip NVRTC tests deliberately)"),
        };
        let mut space = SearchSpace::cuda_default();
        space.cross_thread.as_mut().unwrap().stage_registers = 32;
        for text in [
            super::super::tests::softmax(6, 123),
            ADD_LAYER_NORM.to_string(),
        ] {
            let mut in_registers = 0;
            for (sch, lowered) in checked_samples_in(&space, &text, 24) {
                let p = sch.program();
                let find = |name: &str| p.buffers.iter().position(|b| b.name == name);
                let Some(copy) = find("X_local") else {
                    continue;
                };
                in_registers += 1;
                let (x, copy) = (crate::ir::BufferId(find("X").unwrap() as u32), copy);
                assert_eq!(p.readers(x).len(), 1, "{}", sch.trace());
                let copy = crate::ir::BufferId(copy as u32);
                assert!(p.readers(copy).len() >= 3, "{}", sch.trace());
                assert!(find("X_shared").is_none(), "{}", sch.trace());
                if nvrtc {
                    let code = crate::codegen::cuda::generate(&lowered).unwrap().code;
                    let cubin = crate::measure::cuda::compile(&code, "sm_90a").unwrap();
                    assert_eq!(cubin.info.stack_bytes, Some(0), "{code}");
                }
            }
            assert!(in_registers > 0, "{text}");
        }
        let p = crate::workload::parse(&super::super::tests::softmax(6, 123))
            .unwrap()
            .to_program();
        let mut space = SearchSpace::cuda_default();
        // Rows of 123 read by 32 or 64 lanes: 4 or 2 elements a thread.
        space.cross_thread.as_mut().unwrap().stage_registers = 1;
        for seed in 0..16 {
            let mut sch = Schedule::new(p.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::CrossThread).unwrap();
            let mut names = sch.program().buffers.iter().map(|b| b.name.as_str());
            assert!(!names.any(|n| n == "X_local"), "seed {seed}");
        }
    }

    /// The lanes' partial results summed in two steps at a coin's choice (`fold_lanes`):
    /// 8 threads of a row each sum every 8th, behind a guard, then every thread those 8;
    /// both kinds of sample compute the reference with a GPU's semantics, on a GEMV and a
    /// fused softmax; not offered without `fold_lanes`.
    #[test]
    fn the_lanes_partial_results_are_summed_in_two_steps_at_a_coins_choice() {
        let gemv = "workload gemv\ninput A: f32[3, 600]\ninput B: f32[600]\n\
                    C[i] = sum(A[i, k] * B[k], k: 600)\n";
        for text in [gemv.to_string(), super::super::tests::softmax(6, 512)] {
            let folded: Vec<bool> = checked_samples(&text, 16)
                .iter()
                .map(|(sch, _)| {
                    sch.program()
                        .buffers
                        .iter()
                        .any(|b| b.name.contains("_rf_shared_1"))
                })
                .collect();
            assert!(
                folded.contains(&true) && folded.contains(&false),
                "{text}: {folded:?}"
            );
        }
        let p = crate::workload::parse(gemv).unwrap().to_program();
        let mut space = SearchSpace::cuda_default();
        space.cross_thread.as_mut().unwrap().fold_lanes = false;
        for seed in 0..8 {
            let mut sch = Schedule::new(p.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::CrossThread).unwrap();
            assert!(!sch
                .program()
                .buffers
                .iter()
                .any(|b| b.name.contains("_rf_shared_1")));
        }
    }

    /// Not fused: without `fuse_consumer`, and where the stage after the reduction is not
    /// the last or does not read it by rows (a GEMV's output, its consumer of the same
    /// shape).
    #[test]
    fn the_fused_form_needs_a_consumer_that_reads_the_reduction_by_rows() {
        let parse = |t: &str| crate::workload::parse(t).unwrap().to_program();
        let mut space = SearchSpace::cuda_default();
        let softmax = parse(&super::super::tests::softmax(6, 512));
        let plan = super::fusible(&space, &softmax)
            .unwrap()
            .expect("a softmax fuses");
        assert_eq!(plan.rows.len(), 1, "{plan:?}");
        assert!(plan.apart.is_empty(), "{plan:?}");
        let gemv = program("dense_bias_relu:m=1,n=20,k=512");
        assert!(super::fusible(&space, &gemv).unwrap().is_none());
        let column = parse(
            "workload colnorm\ninput X: f32[300, 6]\n\
             S[j] = sum(X[k, j], k: 300)\n\
             Y[i, j] = X[i, j] / S[j]\n",
        );
        assert!(super::fusible(&space, &column).unwrap().is_none());
        space.cross_thread.as_mut().unwrap().fuse_consumer = false;
        assert!(super::fusible(&space, &softmax).unwrap().is_none());
    }

    /// Not offered: on the CPU, for a GEMM whose tiles reuse its inputs, for a last
    /// reduction axis shorter than `min_reduction` (a conv's window); offered where no
    /// lane count divides the reduction.
    #[test]
    fn the_rule_keeps_to_long_reductions_that_barely_reuse_their_input_on_a_gpu() {
        let cuda = SearchSpace::cuda_default();
        let offered = |space: &SearchSpace, spec: &str| {
            sketches(space, &program(spec))
                .unwrap()
                .contains(&SketchKind::CrossThread)
        };
        assert!(offered(&cuda, "matmul:m=1,n=4096,k=4096,layout=nt"));
        assert!(!offered(
            &SearchSpace::cpu_default(),
            "matmul:m=1,n=4096,k=4096,layout=nt"
        ));
        assert!(!offered(&cuda, "matmul:m=2048,n=2048,k=2048"));
        assert!(!offered(&cuda, "matmul:m=512,n=768,k=3072"));
        assert!(!offered(&cuda, "matmul:m=64,n=64,k=65536"));
        assert!(offered(&cuda, "dense_bias_relu:m=1,n=3072,k=768"));
        assert!(offered(&cuda, "dense_bias_relu:m=2,n=3072,k=768"));
        assert!(!offered(&cuda, "dense_bias_relu:m=8,n=3072,k=768"));
        assert!(offered(&cuda, "matmul:m=1,n=4096,k=128"));
        assert!(!offered(&cuda, "matmul:m=1,n=4096,k=48"));
        assert!(!offered(
            &cuda,
            "conv2d_nchw:n=1,c=64,h=14,w=14,k=64,r=3,s=3,pad=1"
        ));
        assert!(offered(&cuda, "matmul:m=1,n=64,k=521"));
    }

    /// A reduction of a prime length (521): the lanes past its end add zeros, and the
    /// kernel computes the reference with a GPU's semantics.
    #[test]
    fn a_gemv_of_a_prime_reduction_is_read_across_threads_too() {
        for src in samples_check("matmul:m=1,n=12,k=521,layout=nt") {
            assert!(src.contains("< 521) ?"), "{src}");
        }
    }
}
