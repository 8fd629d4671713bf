//! The CPU lane-reduction sketch (`[lane_reduction]` in `search_spaces/cpu.toml`): a
//! reduction that reads its largest input once or a few times, along that input's
//! contiguous axis (a GEMV of a weight stored `[out, in]`, a dense layer of a small batch,
//! `X[i, k] * W[j, k]`), reads that axis a vector at a time into vector accumulators and
//! sums each accumulator's lanes once at the end, the way a BLAS computes such a GEMV with
//! dot products. The register-tile sketch instead packs the weight transposed, so that
//! its output row is the vector axis: where each weight element is used once or a few
//! times, the packing copy moves every byte twice for a product that moves it once (a
//! 1 x 3001 x 1024 GEMV tuned to 0.28x OpenBLAS that way, 2026-11-29).
//!
//! ```text
//! parallel for (rest, j0, i0):                       (the output in tiles of IR x JR)
//!   acc[IR][JR][lanes] = 0                           (C_rf, vector registers)
//!   for ko:                                          (the reduction, a vector a step)
//!     for i in IR (unrolled), j in JR (unrolled), l in lanes (vectorized):
//!       acc[i][j][l] += X[i, ko * lanes + l] * W[j, ko * lanes + l]
//!   for i in IR, j in JR: C[i, j] = sum over l of acc[i][j][l]   (then the epilogues)
//! ```
//!
//! In schedule terms: the last reduction axis is split by the vector width (where the
//! width does not divide it, the last vector adds zeros past its end, a select the
//! lowering peels off all the others), its inner part `rfactor`ed to the last axis of the
//! partial results (so the lanes are contiguous), whose global buffer is replaced by a
//! local one; the original block, now the sum of the lanes, accumulates in a local
//! write-back (the epilogues inlined into it) and takes the output in tiles of `rows` of
//! the largest input's rows by `reused_rows` of the other operand's (decisions of the
//! trace, the pair within the vector registers, imperfect tiles guarded at the edges);
//! the partial results are computed at the parallel loop, the reduction outermost, the
//! tile's rows unrolled and the lanes vectorized.

use super::row_fusion::{self, Fusion};
use super::{at, attempt, fuse, loop_kinds, SketchError, AUTO_UNROLL_KEY};
use crate::ir::{Expr, IterKind, Program};
use crate::schedule::{AnnArg, BlockRv, IntArg, LoopRv, Schedule, Target};
use crate::search::space::SearchSpace;

const RULE: &str = "lane reduction";

/// Whether the last index of `main`'s largest input is `main`'s last reduction variable
/// (the input is read along its contiguous axis).
fn reads_contiguously(p: &Program, main: crate::ir::BlockId) -> bool {
    let blk = p.block(main);
    let Some(last) = blk
        .iter_vars
        .iter()
        .rev()
        .find(|iv| iv.kind == IterKind::Reduce)
    else {
        return false;
    };
    super::cross_thread::largest_input(p, main)
        .is_some_and(|(_, index)| index.last() == Some(&Expr::Var(last.var)))
}

/// Whether the rule applies to `main`: a CPU space with `[lane_reduction]`, a largest
/// input read at most `max_reuse` times an element along its contiguous axis, which is the
/// last reduction axis, at least `min_reduction` long (and a vector).
pub(super) fn applies(space: &SearchSpace, p: &Program, main: crate::ir::BlockId) -> bool {
    let Some(rule) = &space.lane_reduction else {
        return false;
    };
    !space.is_gpu()
        && super::cross_thread::largest_input_reuse(p, main).is_some_and(|r| r <= rule.max_reuse)
        && reads_contiguously(p, main)
        && super::cross_thread::last_reduction(p, main)
            >= rule.min_reduction.max(space.vector_lanes)
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
    super::reduction_sketch(space, sch, across_lanes)
}

/// The main block's output loops by their part: those the largest input does not index
/// (a GEMM's rows `i`, whose operand each weight row is multiplied with), then those it
/// does but the last (a batch), then the last of those (`j`, the weight's rows).
struct OutputLoops {
    reused: Vec<LoopRv>,
    rest: Vec<LoopRv>,
    rows: LoopRv,
}

/// The output index positions that `main`'s largest input reads (by the same variables).
fn largest_input_positions(p: &Program, main: crate::ir::BlockId) -> Vec<usize> {
    let blk = p.block(main);
    let Some((_, index)) = super::cross_thread::largest_input(p, main) else {
        return Vec::new();
    };
    blk.body
        .indices
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Expr::Var(v) if index.iter().any(|i| i.uses_var(*v))))
        .map(|(pos, _)| pos)
        .collect()
}

/// Splits the sum block's spatial `loops` into [`OutputLoops`]: a loop is the largest
/// input's where the output index it binds is at one of `positions`.
fn output_loops(
    sch: &Schedule,
    sum: crate::schedule::BlockRv,
    loops: &[LoopRv],
    positions: &[usize],
) -> Result<OutputLoops, SketchError> {
    let p = sch.program();
    let blk = p.block(sch.block_id(sum).map_err(at(RULE))?);
    let mut reused = Vec::new();
    let mut reading = Vec::new();
    for lp in loops {
        let var = p.lp(sch.loop_id(*lp).map_err(at(RULE))?).var;
        let position = super::bound_iter_var(blk, var).and_then(|iv| {
            blk.body
                .indices
                .iter()
                .position(|e| *e == Expr::Var(iv.var))
        });
        match position {
            Some(pos) if positions.contains(&pos) => reading.push(*lp),
            _ => reused.push(*lp),
        }
    }
    let rows = reading
        .pop()
        .ok_or(SketchError::LaneReductionNotApplicable)?;
    Ok(OutputLoops {
        reused,
        rest: reading,
        rows,
    })
}

/// The (reused rows, rows) tile pairs of the rule whose accumulators, the operand vectors
/// of a step and one spare fit the vector registers:
/// `IR * JR + IR + JR + 1 <= registers`, each at most its extent (the rule's smallest
/// count where none is).
fn tiles(space: &SearchSpace, reused_extent: i64, rows_extent: i64) -> Vec<(i64, i64)> {
    let Some(rule) = &space.lane_reduction else {
        return Vec::new();
    };
    let within = |counts: &[i64], extent: i64| -> Vec<i64> {
        let fit: Vec<i64> = counts.iter().copied().filter(|c| *c <= extent).collect();
        if fit.is_empty() {
            counts.iter().copied().min().into_iter().collect()
        } else {
            fit
        }
    };
    let mut out = Vec::new();
    for ir in within(&rule.reused_rows, reused_extent) {
        for jr in within(&rule.rows, rows_extent) {
            if ir * jr + ir + jr < space.vector_registers {
                out.push((ir, jr));
            }
        }
    }
    out
}

/// Schedules the reduction block `name` across vector lanes, with the elementwise
/// `epilogues` after it inlined into its write-back where they can be; returns those that
/// could not be.
pub(super) fn across_lanes(
    space: &SearchSpace,
    sch: &mut Schedule,
    name: &str,
    epilogues: &[String],
) -> Result<Vec<String>, SketchError> {
    let main = sch.get_block(name).map_err(at(RULE))?;
    let (lanes, ndim, positions) = {
        let p = sch.program();
        let id = sch.block_id(main).map_err(at(RULE))?;
        if !applies(space, p, id) {
            return Err(SketchError::LaneReductionNotApplicable);
        }
        let ndim = p.block(id).body.indices.len() as i64;
        (space.vector_lanes, ndim, largest_input_positions(p, id))
    };
    // 1. The partial results, one a lane, in a local buffer.
    let rf = factor_lanes(sch, main, lanes, ndim)?;
    // 2. The sum of the lanes accumulates locally; the epilogues go into its write-back.
    let write_back = sch.cache_write(main, 0, "local").map_err(at(RULE))?;
    let mut leftovers = Vec::new();
    for epilogue in epilogues {
        let b = sch.get_block(epilogue).map_err(at("epilogue"))?;
        if !(space.inline_epilogue && attempt(sch, |s| s.reverse_compute_inline(b)).is_ok()) {
            leftovers.push(epilogue.clone());
        }
    }
    // 3. The output in tiles of IR x JR, one parallel iteration each.
    let sum_loops = sch.get_loops(main).map_err(at(RULE))?;
    let Some((lane_sum, spatial)) = sum_loops.split_last() else {
        return Err(SketchError::LaneReductionNotApplicable);
    };
    let parts = output_loops(sch, main, spatial, &positions)?;
    let order: Vec<LoopRv> = parts
        .rest
        .iter()
        .chain(&parts.reused)
        .chain([&parts.rows])
        .copied()
        .collect();
    sch.reorder(&order).map_err(at(RULE))?;
    let extent = |sch: &Schedule, l: &LoopRv| -> Result<i64, SketchError> {
        let id = sch.loop_id(*l).map_err(at(RULE))?;
        Ok(sch.program().lp(id).extent)
    };
    let reused = if parts.reused.is_empty() {
        None
    } else {
        Some(fuse(sch, &parts.reused)?)
    };
    let reused_extent = reused.map_or(Ok(1), |l| extent(sch, &l))?;
    let rows_extent = extent(sch, &parts.rows)?;
    let offered = tiles(space, reused_extent, rows_extent);
    if offered.is_empty() {
        return Err(SketchError::LaneReductionNotApplicable);
    }
    let jr_counts = counts(offered.iter().map(|t| t.1));
    let jr = super::cross_thread::sample(sch, &jr_counts, RULE)?;
    let jr_value = sch.value(jr).map_err(at(RULE))?;
    let rows = sch
        .split(parts.rows, &[None, Some(IntArg::Rv(jr))])
        .map_err(at(RULE))?;
    let mut outer = parts.rest.clone();
    let mut tile = Vec::new();
    if let Some(r) = reused {
        let ir_counts = counts(offered.iter().filter(|t| t.1 == jr_value).map(|t| t.0));
        let ir = super::cross_thread::sample(sch, &ir_counts, RULE)?;
        let split = sch
            .split(r, &[None, Some(IntArg::Rv(ir))])
            .map_err(at(RULE))?;
        outer.extend([rows[0], split[0]]);
        tile.push(split[1]);
    } else {
        outer.push(rows[0]);
    }
    tile.push(rows[1]);
    let all: Vec<LoopRv> = outer.iter().chain(&tile).copied().collect();
    sch.reorder(&all).map_err(at(RULE))?;
    let parallel = fuse(sch, &outer)?;
    sch.parallel(parallel).map_err(at(RULE))?;
    sch.reverse_compute_at(write_back, parallel)
        .map_err(at(RULE))?;
    sch.unroll(*lane_sum).map_err(at(RULE))?;
    // 4. The partial results at the parallel loop: the reduction outermost, the tile's
    //    rows unrolled, the lanes vectorized.
    sch.compute_at(rf, parallel).map_err(at(RULE))?;
    vectorize_partials(space, sch, rf, ndim)?;
    Ok(leftovers)
}

const FUSED: &str = "lane reduction fused with its consumer";
const KEEP: &str = "lane reduction's stage kept a row at a time";

/// The fused form's plan for `p` ([`row_fusion::plan`]), where the space fuses
/// (`fuse_consumer`) and the rule applies to the main reduction and to each row reduction
/// fused with it.
fn fusible(space: &SearchSpace, p: &Program) -> Result<Option<Fusion>, SketchError> {
    if !space
        .lane_reduction
        .as_ref()
        .is_some_and(|l| l.fuse_consumer)
    {
        return Ok(None);
    }
    row_fusion::plan(p, |b| applies(space, p, b), |_| true)
}

/// The fused form: one parallel loop over the sink's rows, each row's reductions computed
/// in it across the lanes, then the row's output a vector at a time:
///
/// ```text
/// parallel for row:
///   M_rf[l] = max over ko X[row, ko * lanes + l]; M = max over l M_rf[l]   (each row
///   E[j] = exp(X[row, j] - M)          (a kept stage, a row, at a coin)      reduction
///   S_rf[l] = sum over ko E[ko * lanes + l]; S = sum over l S_rf[l]       before the main)
///   for jo, l (vectorized): Y[row, jo * lanes + l] = E[..] / S
/// ```
///
/// where each was a parallel pass over the whole input of its own. The reductions' partial
/// results, their sums and the kept stage are local buffers of a row (the lowering
/// compacts them). At a coin where the space has `keep_stage`, a stage of the sink's shape
/// that two or more passes read (a softmax's exponentials) is kept and computed once a
/// row, where inlined it is computed again by each pass. Reductions before the main one
/// that are not read by rows keep nests of their own.
fn fused(space: &SearchSpace, sch: &mut Schedule, plan: &Fusion) -> Result<(), SketchError> {
    let st = super::stages(sch.program())?;
    let keep = space.lane_reduction.as_ref().is_some_and(|l| l.keep_stage);
    let kept = match row_fusion::kept_candidate(sch.program(), &st, &plan.sink) {
        Some(name) if keep && super::coin(sch, KEEP)? => Some(name),
        _ => None,
    };
    super::inline_padding(sch, &st, kept.as_deref())?;
    let lanes = space.vector_lanes;
    // 1. Every fused reduction's partial results across the lanes (factored before any
    //    is placed), its value in a local buffer its readers read.
    let mut reductions = Vec::new();
    for name in std::iter::once(&st.main).chain(plan.rows.iter().rev()) {
        let block = sch.get_block(name).map_err(at(FUSED))?;
        let ndim = {
            let id = sch.block_id(block).map_err(at(FUSED))?;
            sch.program().block(id).body.indices.len() as i64
        };
        let rf = factor_lanes(sch, block, lanes, ndim)?;
        let local = sch.cache_write(block, 0, "local").map_err(at(FUSED))?;
        sch.compute_inline(local).map_err(at(FUSED))?;
        reductions.push((block, rf, ndim));
    }
    let kept_block = match &kept {
        Some(name) => {
            let block = sch.get_block(name).map_err(at(KEEP))?;
            let local = sch.cache_write(block, 0, "local").map_err(at(KEEP))?;
            sch.compute_inline(local).map_err(at(KEEP))?;
            Some(block)
        }
        None => None,
    };
    // 2. The sink: its leading axes one parallel loop over rows, a row a vector at a time.
    let sink = sch.get_block(&plan.sink).map_err(at(FUSED))?;
    let loops = sch.get_loops(sink).map_err(at(FUSED))?;
    let Some((col, leading)) = loops.split_last() else {
        return Err(SketchError::LaneReductionNotApplicable);
    };
    let row = fuse(sch, leading)?;
    sch.parallel(row).map_err(at(FUSED))?;
    vector_steps(sch, *col, lanes)?;
    // 3. Placed in the row loop, each before its readers: the main reduction, the kept
    //    stage it reads, then the row reductions, last first.
    let (main_reduction, rows_before) = reductions
        .split_first()
        .ok_or(SketchError::LaneReductionNotApplicable)?;
    place_in_row(space, sch, *main_reduction, row)?;
    if let Some(kept) = kept_block {
        sch.compute_at(kept, row).map_err(at(KEEP))?;
        let loops = sch.get_loops(kept).map_err(at(KEEP))?;
        if let Some(last) = loops.last().filter(|_| loops.len() > 1) {
            vector_steps(sch, *last, lanes)?;
        }
    }
    for reduction in rows_before {
        place_in_row(space, sch, *reduction, row)?;
    }
    for name in &plan.apart {
        super::standalone(space, sch, name)?;
    }
    Ok(())
}

/// Computes a fused reduction (its block, its rf block, its output's axes) at the row loop
/// `row`: the sum of its lanes unrolled, its partial results vectorized below it.
fn place_in_row(
    space: &SearchSpace,
    sch: &mut Schedule,
    (block, rf, ndim): (BlockRv, BlockRv, i64),
    row: LoopRv,
) -> Result<(), SketchError> {
    sch.compute_at(block, row).map_err(at(FUSED))?;
    let loops = sch.get_loops(block).map_err(at(FUSED))?;
    if let Some(lane_sum) = loops.last().filter(|_| loops.len() > 1) {
        sch.unroll(*lane_sum).map_err(at(FUSED))?;
    }
    sch.compute_at(rf, row).map_err(at(FUSED))?;
    vectorize_partials(space, sch, rf, ndim)
}

/// Splits `lp` by the vector width and vectorizes the inner part (a last step shorter than
/// a vector is guarded by the lowering).
fn vector_steps(sch: &mut Schedule, lp: LoopRv, lanes: i64) -> Result<(), SketchError> {
    let parts = sch
        .split(lp, &[None, Some(IntArg::Lit(lanes))])
        .map_err(at(FUSED))?;
    sch.vectorize(parts[1]).map_err(at(FUSED))
}

/// Splits `block`'s last reduction axis by the vector width `lanes` (a last part shorter
/// than a vector adds zeros past the end: `rfactor` of an imperfect split) and factors its
/// inner part to the last axis of the partial results (after the `ndim` axes of `block`'s
/// output), which are kept in a local buffer: returns the rf block.
fn factor_lanes(
    sch: &mut Schedule,
    block: BlockRv,
    lanes: i64,
    ndim: i64,
) -> Result<BlockRv, SketchError> {
    super::factor_last_reduction(
        sch,
        block,
        IntArg::Lit(lanes),
        ndim,
        "local",
        RULE,
        SketchError::LaneReductionNotApplicable,
    )
}

/// The loops of the rf block `rf` (of an output of `ndim` axes) below the loop it is
/// computed at: the reduction outermost (auto-unrolled, a decision; its init taken out),
/// the other spatial loops (a tile's rows) unrolled, the lanes vectorized.
fn vectorize_partials(
    space: &SearchSpace,
    sch: &mut Schedule,
    rf: BlockRv,
    ndim: i64,
) -> Result<(), SketchError> {
    let rf_loops = sch.get_loops(rf).map_err(at(RULE))?;
    let inner = &rf_loops[1..];
    let lane_loop = super::cross_thread::factored_loop(sch, rf, inner, ndim as usize)?;
    let rf_kinds = loop_kinds(sch, rf, inner)?;
    let serial: Vec<LoopRv> = inner
        .iter()
        .zip(&rf_kinds)
        .filter(|(_, k)| **k == IterKind::Reduce)
        .map(|(l, _)| *l)
        .collect();
    let unrolled: Vec<LoopRv> = inner
        .iter()
        .zip(&rf_kinds)
        .filter(|(l, k)| **k == IterKind::Spatial && **l != lane_loop)
        .map(|(l, _)| *l)
        .collect();
    let order: Vec<LoopRv> = serial
        .iter()
        .chain(&unrolled)
        .chain([&lane_loop])
        .copied()
        .collect();
    sch.reorder(&order).map_err(at(RULE))?;
    for l in &unrolled {
        sch.unroll(*l).map_err(at(RULE))?;
    }
    sch.vectorize(lane_loop).map_err(at(RULE))?;
    let step = super::cross_thread::sample(sch, &space.unroll_max_steps, "auto-unroll")?;
    if let Some(first) = serial.first() {
        sch.annotate(Target::Loop(*first), AUTO_UNROLL_KEY, AnnArg::Rv(step))
            .map_err(at("auto-unroll"))?;
        sch.decompose_reduction(rf, *first)
            .map_err(at("decompose_reduction"))?;
    }
    Ok(())
}

/// The distinct `values`, ascending (the rule's counts ascend: the order they are offered
/// in).
fn counts(values: impl Iterator<Item = i64>) -> Vec<i64> {
    let mut out: Vec<i64> = values.collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::super::{apply_sketch, sketches, SketchKind};
    use crate::schedule::Schedule;
    use crate::search::space::SearchSpace;

    fn program(spec: &str) -> crate::ir::Program {
        crate::workload::preset(spec).unwrap().to_program()
    }

    /// Eight samples of the sketch for `spec` on a CPU of `lanes` x `registers`, each
    /// lowered and checked against the reference; returns their C sources.
    fn samples_check(spec: &str, lanes: i64, registers: i64) -> Vec<String> {
        let p = program(spec);
        let space = SearchSpace::cpu_default().with_vector_unit(lanes, registers);
        assert!(
            sketches(&space, &p)
                .unwrap()
                .contains(&SketchKind::LaneReduction),
            "{spec}"
        );
        checked_sources(&space, &p, 8)
    }

    /// A GEMV of a weight stored by rows on AVX-512 and AVX2 vector units: the weight is
    /// read a vector at a time where it lies (no packed copy), into vector accumulators
    /// whose lanes are summed at the end; an output of a prime length (37) leaves a
    /// guarded tile at its end.
    #[test]
    fn a_gemv_of_a_weight_stored_by_rows_is_read_a_vector_at_a_time() {
        for (lanes, registers) in [(16, 32), (8, 16)] {
            for src in samples_check("matmul:m=1,n=37,k=512,layout=nt", lanes, registers) {
                assert!(src.contains("tessel_vload(&B["), "{src}");
                assert!(src.contains("C_rf_local"), "{src}");
                assert!(!src.contains("B_local"), "{src}");
            }
        }
    }

    /// A dense layer of a batch of 3 (each weight element used three times): the batch's
    /// rows share a tile's weight vectors, the bias and relu go into the write-back.
    #[test]
    fn a_dense_layer_of_a_small_batch_keeps_its_epilogue_in_the_kernel() {
        for src in samples_check("dense_bias_relu:m=3,n=20,k=256", 16, 32) {
            assert!(src.contains("fmaxf("), "{src}");
        }
    }

    /// A reduction of a prime length (211 = 13 vectors of 16 and 3): every vector step but
    /// the last adds unguarded, the last adds zeros past the end, and the result is the
    /// reference's.
    #[test]
    fn a_reduction_that_no_vector_divides_adds_zeros_past_its_end() {
        for src in samples_check("matmul:m=2,n=9,k=211,layout=nt", 16, 32) {
            assert!(src.contains("< 211) ?"), "{src}");
            assert!(src.contains("ax3 < 13;"), "{src}");
        }
    }

    /// A softmax's row sum read across lanes; its row maximum, a stage of its own, at a
    /// coin's choice too (vector maxima, `tessel_vmax`, where it was a serial `fmaxf` an
    /// element); each sample computes the reference.
    #[test]
    fn a_softmax_reads_its_row_sum_and_maximum_across_lanes() {
        let p = crate::workload::parse(&super::super::tests::softmax(6, 509))
            .unwrap()
            .to_program();
        let space = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let mut maxima_across_lanes = 0;
        for seed in 0..8 {
            let mut sch = Schedule::new(p.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::LaneReduction)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cpu).unwrap();
            let err = crate::interp::check_lowered(&p, &lowered, seed).unwrap();
            assert!(err < 1e-4, "seed {seed}: relative error {err}");
            let code = crate::codegen::cpu::generate(&lowered).unwrap().code;
            maxima_across_lanes += code.contains("tessel_vmax(") as usize;
        }
        assert!(
            (1..8).contains(&maxima_across_lanes),
            "{maxima_across_lanes} of 8"
        );
    }

    /// `count` samples of the sketch for `p` in `space`, each lowered and checked against
    /// the reference: their C sources.
    fn checked_sources(space: &SearchSpace, p: &crate::ir::Program, count: u64) -> Vec<String> {
        (0..count)
            .map(|seed| {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(space, &mut sch, seed, SketchKind::LaneReduction)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cpu)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                let err = crate::interp::check_lowered(p, &lowered, seed)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                assert!(err < 1e-4, "seed {seed}: relative error {err}");
                crate::codegen::cpu::generate(&lowered).unwrap().code
            })
            .collect()
    }

    /// A softmax (rows of 509: the last vector step guarded), a batched attention softmax,
    /// a layer norm and an RMS norm: at a coin's choice the reductions and the output in
    /// one parallel loop over rows; a softmax's exponentials, at a second coin, kept in a
    /// row's local buffer and computed once (one vector `exp` in the code, where the
    /// inlined form computes them in the sum and again in the output). Every sample
    /// computes the reference. Without `fuse_consumer` none is fused.
    #[test]
    fn rows_are_reduced_and_normalised_in_one_parallel_loop_at_a_coins_choice() {
        let mut space = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let rule = space.lane_reduction.as_mut().unwrap();
        rule.fuse_consumer = true;
        rule.keep_stage = true;
        let attention = "workload attention_softmax\ninput X: f32[3, 5, 200]\n\
                         M[h, i] = max_reduce(X[h, i, k], k: 200)\n\
                         E[h, i, j] = exp(X[h, i, j] - M[h, i])\n\
                         S[h, i] = sum(E[h, i, k], k: 200)\nY[h, i, j] = E[h, i, j] / S[h, i]\n";
        let layer_norm = "workload layer_norm\ninput X: f32[6, 300]\ninput G: f32[300]\n\
                          input B: f32[300]\nS1[i] = sum(X[i, k], k: 300)\nMU[i] = S1[i] / 300.0\n\
                          S2[i] = sum((X[i, k] - MU[i]) * (X[i, k] - MU[i]), k: 300)\n\
                          Y[i, j] = (X[i, j] - MU[i]) / sqrt(S2[i] / 300.0 + 0.00001) * G[j] + B[j]\n";
        let rms_norm = "workload rms_norm\ninput X: f32[7, 256]\ninput G: f32[256]\n\
                        S[i] = sum(X[i, k] * X[i, k], k: 256)\n\
                        Y[i, j] = X[i, j] / sqrt(S[i] / 256.0 + 0.000001) * G[j]\n";
        let softmax = super::super::tests::softmax(6, 509);
        let parse = |text: &str| crate::workload::parse(text).unwrap().to_program();
        let one_loop = |src: &String| src.matches("#pragma omp parallel for").count() == 1;
        for text in [softmax.as_str(), attention, layer_norm, rms_norm] {
            let sources = checked_sources(&space, &parse(text), 16);
            let fused = sources.iter().filter(|s| one_loop(s)).count();
            assert!((1..16).contains(&fused), "{fused} of 16 fused: {text}");
        }
        let sources = checked_sources(&space, &parse(&softmax), 16);
        let kept: Vec<&String> = sources.iter().filter(|s| s.contains("E_local[")).collect();
        assert!(!kept.is_empty(), "no sample keeps the exponentials");
        for src in kept {
            assert!(one_loop(src), "{src}");
            assert_eq!(src.matches("tessel_vexp(").count(), 1, "{src}");
        }
        space.lane_reduction.as_mut().unwrap().fuse_consumer = false;
        assert!(!checked_sources(&space, &parse(&softmax), 8)
            .iter()
            .any(one_loop));
    }

    /// Offered on the CPU only, where the largest input is read at most `max_reuse` times
    /// along its contiguous axis (not a GEMV whose weight is stored `[in, out]`, not a
    /// GEMM whose tiles reuse it), over a reduction of at least `min_reduction`.
    #[test]
    fn the_rule_keeps_to_reductions_along_a_barely_reused_inputs_rows() {
        let cpu = SearchSpace::cpu_default().with_vector_unit(16, 32);
        let offered = |space: &SearchSpace, spec: &str| {
            sketches(space, &program(spec))
                .unwrap()
                .contains(&SketchKind::LaneReduction)
        };
        assert!(offered(&cpu, "matmul:m=1,n=4096,k=4096,layout=nt"));
        assert!(offered(&cpu, "dense_bias_relu:m=16,n=3072,k=768"));
        assert!(!offered(&cpu, "dense_bias_relu:m=17,n=3072,k=768"));
        assert!(!offered(&cpu, "matmul:m=1,n=4096,k=4096,layout=nn"));
        assert!(!offered(&cpu, "matmul:m=512,n=512,k=512,layout=nt"));
        assert!(!offered(&cpu, "matmul:m=1,n=4096,k=48,layout=nt"));
        assert!(offered(&cpu, "matmul:m=1,n=4096,k=1021,layout=nt"));
        assert!(!offered(
            &SearchSpace::cuda_default(),
            "matmul:m=1,n=4096,k=4096,layout=nt"
        ));
    }

    /// Every tile pair offered keeps its accumulators and a step's operand vectors within
    /// the registers, and the rows of an extent are offered up to it.
    #[test]
    fn the_tiles_offered_fit_the_vector_registers() {
        for (lanes, registers) in [(16, 32), (8, 16)] {
            let space = SearchSpace::cpu_default().with_vector_unit(lanes, registers);
            let offered = super::tiles(&space, 16, 4096);
            assert!(!offered.is_empty());
            for (ir, jr) in &offered {
                assert!(ir * jr + ir + jr < registers, "{ir} x {jr} on {registers}");
            }
            assert!(super::tiles(&space, 1, 3)
                .iter()
                .all(|(ir, jr)| *ir == 1 && *jr <= 3));
        }
        let wide = SearchSpace::cpu_default().with_vector_unit(16, 32);
        assert!(super::tiles(&wide, 16, 4096).contains(&(4, 4)));
        assert!(!super::tiles(&wide, 16, 4096).contains(&(4, 8)));
    }
}
