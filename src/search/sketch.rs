//! Sketch rules: a workload's design space as a function that schedules its program with
//! sampling instructions, reading its parameters from a [`SearchSpace`].
//!
//! A workload has one or more sketches ([`sketches`]): the plain one; on spaces with
//! `[split_k]` and for a reduction long against its output, the split-K one; on spaces
//! with `[cross_thread]` and for a reduction that reads its largest input a few times at
//! most, the cross-thread one (`sketch/cross_thread.rs`); on CPU spaces with
//! `[register_tile]`, the register-tile one (`sketch/cpu.rs`); the tensor-core ones (their
//! own rules). Running
//! [`apply_sketch`] on a fresh [`Schedule`] seeded differently samples a different
//! candidate of that sketch; its trace (decisions included) replays to the same program,
//! and which sketch it belongs to is visible in it (the split-K count is a
//! `sample_categorical` decision followed by `rfactor`). [`apply`] picks the sketch by the
//! space's split-K and register-tile probabilities, drawn from the seed. The rules of the
//! plain and split-K sketches, in the order they are applied:
//!
//! 1. **Inline padding**: spatial stages before the main block (conv2d's `pad_temp`)
//!    are `compute_inline`d into it.
//!
//!    **1a. Channels last** (CUDA spaces with `cache_read.channels_last_kernels`): a
//!    conv whose data are read with the channel before the pixels through a window or a
//!    stride (NCHW) may have them stored channels last once, by its padding block as a
//!    kernel of its own (a decision, [`channels_last_data`]); that block is then not
//!    inlined.
//!
//!    **1b. Padding** (spaces with `tiling.pad_multiples`): an einsum main block (a GEMM,
//!    batched GEMM, dense layer; with `tiling.pad_convolutions` a convolution's batch
//!    and channel axes) has each
//!    iteration variable it may pad padded to a sampled multiple by `pad_einsum`
//!    ([`pad`]); its zero-filling input stages count as padding below, its copy back to
//!    the original shape as an epilogue. On CUDA, where an operand's rows are no whole
//!    16-byte vectors and its padded rows are, a decision ([`unaligned_pad_kernels`])
//!    runs its zero-filling copy as a kernel of its own instead of inlining it into the
//!    fetch (step 7), which then reads whole vectors.
//! 2. **Split-K** (the split-K sketch): the first reduction axis is split by a sampled
//!    count and `rfactor`ed; the rf block is the main block below, and the original
//!    block, now the sum of the partial results, is scheduled on its own at the end.
//! 3. **Cache write**: the main block (the last reduction block) accumulates in a local
//!    cache; elementwise epilogues after it (bias, relu) are `reverse_compute_inline`d
//!    into the write-back. Then, sometimes (see [`implicit_gemm`]), the spatial axes
//!    that the same inputs read (a conv's n, p, q) are fused into one, or only the
//!    window axes p, q.
//! 4. **Multi-level tiling**: every spatial axis is split into as many tiles as the
//!    structure has S levels, every reduction axis into as many as it has R levels, by
//!    `sample_tile` (factors whose product may exceed the extent by at most
//!    `tiling.max_waste` of it; the extra iterations are masked by predicates) or, where
//!    the space allows no waste, `sample_perfect_tile`; the tiles are reordered level by
//!    level (`SSSRRSRS`). An n*p*q axis the implicit-GEMM view fused is tiled in sizes
//!    aligned to the loops fused into it ([`aligned_tile`]); a p*q axis like any other.
//! 5. **Binding**: the loops of each leading S level are fused and bound (blockIdx,
//!    vthread, threadIdx on CUDA; `parallel` on the CPU).
//! 6. **Write-back placement**: `reverse_compute_at` at the last loop of the last S level
//!    before the first R level (the thread on CUDA, the serial outer tile on the CPU), or
//!    where the space offers several levels (`cache_write.levels`: on the CPU the
//!    parallel loop too, MetaSchedule's CPU write-cache levels) at one of them by
//!    `sample_compute_location`, a decision of the trace ([`write_back_location`]).
//!    Then the accumulator of a sample that fused p, q alone is stored with their two
//!    axes as one (`transform_layout`), so it is indexed by the fused loop.
//! 7. **Cache read + cooperative fetch** (CUDA): every global input is staged in shared
//!    memory at the last loop of the first R level, its loops fused, split over the
//!    block's threads (a product of the sampled thread tiles, so a changed decision keeps
//!    the split consistent) and vectorized by a sampled length. With
//!    `cache_read.reduction_major`, an operand whose last axis is a reduction is stored
//!    reduction axes first ([`reduction_major`]), rows padded against bank conflicts or
//!    to 16 bytes ([`pad_rows`]), its fetch vectorized by the lengths
//!    [`transposed_lengths`] offers or walking its source's contiguous axis
//!    ([`walk_contiguous`]); or, a decision
//!    (`cache_read.transpose_kernels`), such operands are transposed once by kernels of
//!    their own ([`transpose_kernels`]) and the fetch copies them as stored.
//!
//!    **7b. Software pipelining** (spaces with `pipeline.stages`): the loop the fetches
//!    are computed at gets a sampled `software_pipeline_stage` ([`pipeline`]).
//! 8. **Vectorize** (CPU): the innermost loop of the main block and of the write-back.
//! 9. **Auto-unroll**: a sampled `pragma_auto_unroll_max_step` on the loops of the last
//!    three levels.
//!
//!    **9b. Blocks a multiprocessor holds** (CUDA spaces with `threads.min_blocks_per_sm`):
//!    a sampled count annotated on the blockIdx loop, which caps a thread's registers
//!    ([`min_blocks`]).
//! 10. **decompose_reduction** at the first reduction loop.
//!
//! Stages that a rule cannot handle stay as they are (an epilogue that cannot be inlined is
//! bound on its own); what no candidate can survive is a [`SketchError`].

mod cpu;
mod cross_thread;
mod fetch_order;
mod lane_reduction;
mod row_fusion;
mod staging;
mod tensor_core;
mod wgmma;

use super::space::{Binding, Level, SearchSpace};
use crate::ir::{BlockId, BufferId, BufferKind, Expr, IterKind, Program};
use crate::lower::LAUNCH_MIN_BLOCKS_KEY;
use crate::schedule::{pad_einsum, sampling};
use crate::schedule::{AnnArg, BlockRv, ExprRv, IntArg, LoopRv, Schedule, ScheduleError, Target};
use thiserror::Error;

mod pipeline;

/// Why a workload has no design space, or a sample could not be built.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SketchError {
    #[error("the workload has no reduction block to tile")]
    NoReduction,
    #[error("the split-K sketch does not apply to this workload (see `[split_k]`)")]
    SplitKNotApplicable,
    #[error("the register-tile sketch does not apply to this workload (see `[register_tile]`)")]
    RegisterTileNotApplicable,
    #[error("the tensor-core sketch does not apply to this workload (see `[tensor_core]`)")]
    TensorCoreNotApplicable,
    #[error(
        "the cross-thread reduction sketch does not apply to this workload (see `[cross_thread]`)"
    )]
    CrossThreadNotApplicable,
    #[error("the lane-reduction sketch does not apply to this workload (see `[lane_reduction]`)")]
    LaneReductionNotApplicable,
    #[error("{rule}: {source}")]
    Schedule {
        rule: &'static str,
        #[source]
        source: ScheduleError,
    },
}

/// Step 0 of the plain and split-K sketches on a GPU: a convolution is, at a coin's
/// choice recorded in the trace (a branch no later instruction reads, so the evolutionary
/// search flips it), rewritten as its GEMM first (`im2col`: its data a gather of rows, its
/// weights a matrix, its output stored back by an epilogue), so that the GEMM's padding
/// (`pad_einsum`) and staging apply to it; the gather goes into the shared fetch. The
/// coin's weight is `tiling.gemm_view` for a pointwise (1x1) conv and
/// `tiling.gemm_view_windowed` for one with a window. Tuned as a conv, the validation
/// set's 1x1 stride-2 NHWC conv reached 9.6 TFLOP/s on an H100 where its own GEMM reached
/// 12.9-14.1 (benches/RESULTS.md, 2026-11-27). With a window, the view pays where the
/// transposing-kernel decision then writes the gathered data once, as the GEMM's operand
/// (an im2col by a kernel of its own): large NCHW convs 1.3x-1.4x (2026-11-30).
fn gemm_view(space: &SearchSpace, sch: &mut Schedule) -> Result<(), SketchError> {
    if !space.is_gpu() {
        return Ok(());
    }
    let st = stages(sch.program())?;
    let weight = {
        let p = sch.program();
        let [b] = p.find_block(&st.main)[..] else {
            return Ok(());
        };
        let reductions: Vec<i64> = p
            .block(b)
            .iter_vars
            .iter()
            .filter(|iv| iv.kind == IterKind::Reduce)
            .map(|iv| iv.extent)
            .collect();
        // A conv's reduction is its channels and window; a 1x1 window leaves one axis.
        let pointwise = reductions.iter().filter(|e| **e > 1).count() == 1;
        let weight = if pointwise {
            space.gemm_view
        } else {
            space.gemm_view_windowed
        };
        let takes = reductions.len() >= 3 && weight > 0.0 && {
            let mut probe = Schedule::new(p.clone(), 0);
            probe
                .get_block(&st.main)
                .and_then(|b| probe.im2col(b))
                .is_ok()
        };
        if !takes {
            return Ok(());
        }
        weight
    };
    let choice = sch
        .sample_categorical(&[0, 1], &[1.0 - weight, weight], None)
        .map_err(at("gemm view"))?;
    if sch.value(choice).map_err(at("gemm view"))? == 1 {
        let b = sch.get_block(&st.main).map_err(at("im2col"))?;
        sch.im2col(b).map_err(at("im2col"))?;
    }
    Ok(())
}

fn at(rule: &'static str) -> impl Fn(ScheduleError) -> SketchError {
    move |source| SketchError::Schedule { rule, source }
}

/// A choice between two ways, equally likely, recorded in the trace (a
/// `sample_categorical` of `[0, 1]`): whether the second is taken.
fn coin(sch: &mut Schedule, rule: &'static str) -> Result<bool, SketchError> {
    let choice = sch
        .sample_categorical(&[0, 1], &[0.5, 0.5], None)
        .map_err(at(rule))?;
    Ok(sch.value(choice).map_err(at(rule))? == 1)
}

/// The annotation the auto-unroll rule sets.
pub const AUTO_UNROLL_KEY: &str = "pragma_auto_unroll_max_step";

/// Threads per block of a stage left outside the main nest (an epilogue not inlined).
const STANDALONE_THREADS: i64 = 128;

/// Elements each thread of such a stage takes, the candidates of a decision: a block's
/// threads take `STANDALONE_THREADS` neighbours at a time (each access coalesced), each
/// thread its elements one block-width apart, unrolled. With one element a thread, a
/// split-K sum of 800K outputs ran 6,272 blocks doing two loads a thread (7.4 us on the
/// H100, where reading its 6.4 MB at HBM speed takes about 2).
const STANDALONE_ELEMENTS: [i64; 4] = [1, 2, 4, 8];

/// The stages of the program the rules act on, by block name.
struct Stages {
    padding: Vec<String>,
    /// Reductions before the main one (a softmax's row maximum before its row sum): each
    /// computed by a nest of its own, spread over the device ([`standalone`]).
    reductions: Vec<String>,
    main: String,
    epilogues: Vec<String>,
}

fn stages(p: &Program) -> Result<Stages, SketchError> {
    let order = p.blocks_in_order();
    let main_pos = order
        .iter()
        .rposition(|b| p.block(*b).is_reduction())
        .ok_or(SketchError::NoReduction)?;
    let spatial_intermediate = |b: &crate::ir::BlockId| {
        let blk = p.block(*b);
        !blk.is_reduction() && p.buffer(blk.body.buffer).kind == BufferKind::Intermediate
    };
    Ok(Stages {
        padding: order[..main_pos]
            .iter()
            .filter(|b| spatial_intermediate(b))
            .map(|b| p.block(*b).name.clone())
            .collect(),
        reductions: order[..main_pos]
            .iter()
            .filter(|b| p.block(**b).is_reduction())
            .map(|b| p.block(*b).name.clone())
            .collect(),
        main: p.block(order[main_pos]).name.clone(),
        epilogues: order[main_pos + 1..]
            .iter()
            .filter(|b| !p.block(**b).is_reduction())
            .map(|b| p.block(*b).name.clone())
            .collect(),
    })
}

/// A sketch: the structure of a family of candidates, whose members differ only in their
/// decisions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SketchKind {
    /// Multi-level tiling of the main block, whole reductions per thread.
    Plain,
    /// The first reduction axis split by a sampled count and `rfactor`ed (`[split_k]`).
    SplitK,
    /// The CPU micro-kernel: register tile, packed panel, parallel blocks
    /// (`[register_tile]`, `sketch/cpu.rs`).
    RegisterTile,
    /// A 16-bit GEMM on tensor cores: mma.sync tiles in warps' fragments
    /// (`[tensor_core]`, `sketch/tensor_core.rs`).
    TensorCore,
    /// A 16-bit GEMM on Hopper's wgmma, operands read from swizzled shared memory
    /// (`[tensor_core]`'s `wgmma_probability`, `sketch/wgmma.rs`).
    Wgmma,
    /// A reduction read by a block's lanes side by side, their partial results summed
    /// through shared memory (`[cross_thread]`, `sketch/cross_thread.rs`).
    CrossThread,
    /// A CPU reduction read a vector at a time along its largest input's contiguous axis,
    /// each accumulator's lanes summed at the end (`[lane_reduction]`,
    /// `sketch/lane_reduction.rs`).
    LaneReduction,
}

impl SketchKind {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            SketchKind::Plain => "plain",
            SketchKind::SplitK => "split_k",
            SketchKind::RegisterTile => "register_tile",
            SketchKind::TensorCore => "tensor_core",
            SketchKind::Wgmma => "wgmma",
            SketchKind::CrossThread => "cross_thread",
            SketchKind::LaneReduction => "lane_reduction",
        }
    }
}

/// The sketches of `program`'s design space: always the plain one (for a program without
/// a reduction, [`elementwise`]), and each other one (split-K, register tile, tensor
/// core, wgmma, cross-thread) where the space has its section and the workload fits its
/// rule.
pub fn sketches(space: &SearchSpace, program: &Program) -> Result<Vec<SketchKind>, SketchError> {
    if !has_reduction(program) {
        return Ok(vec![SketchKind::Plain]);
    }
    let st = stages(program)?;
    let main = program
        .blocks_in_order()
        .into_iter()
        .find(|b| program.block(*b).name == st.main)
        .ok_or(SketchError::NoReduction)?;
    let mut out = vec![SketchKind::Plain];
    if split_k_counts(space, program, main, true).is_some() {
        out.push(SketchKind::SplitK);
    }
    if cpu::applies(space, program, main) {
        out.push(SketchKind::RegisterTile);
    }
    if tensor_core::applies(space, program, main) {
        out.push(SketchKind::TensorCore);
    }
    if wgmma::applies(space, program, main) {
        out.push(SketchKind::Wgmma);
    }
    if cross_thread::applies(space, program, main) {
        out.push(SketchKind::CrossThread);
    }
    if lane_reduction::applies(space, program, main) {
        out.push(SketchKind::LaneReduction);
    }
    Ok(out)
}

/// Builds one sample of the design space of `sch`'s program: the split-K sketch with the
/// space's `split_k.probability` (a coin drawn from `seed`) where it applies, else the
/// plain one. See [`apply_sketch`].
pub fn apply(space: &SearchSpace, sch: &mut Schedule, seed: u64) -> Result<(), SketchError> {
    use rand::{Rng, SeedableRng};
    let kinds = sketches(space, sch.program())?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5b11_7c0f_0000_0001);
    let kind = match (&space.split_k, &space.register_tile) {
        (_, _)
            if (kinds.contains(&SketchKind::TensorCore) || kinds.contains(&SketchKind::Wgmma))
                && space
                    .tensor_core
                    .as_ref()
                    .is_some_and(|t| rng.gen::<f64>() < t.probability) =>
        {
            // On Hopper, wgmma takes `wgmma_probability` of the tensor-core samples, and
            // all of a TF32 GEMM's (it has no mma.sync sketch).
            let wgmma = space
                .tensor_core
                .as_ref()
                .map_or(0.0, |t| t.wgmma_probability);
            match (
                kinds.contains(&SketchKind::Wgmma),
                kinds.contains(&SketchKind::TensorCore),
            ) {
                (true, false) => SketchKind::Wgmma,
                (true, true) if rng.gen::<f64>() < wgmma => SketchKind::Wgmma,
                _ => SketchKind::TensorCore,
            }
        }
        _ if kinds.contains(&SketchKind::CrossThread)
            && space
                .cross_thread
                .as_ref()
                .is_some_and(|c| rng.gen::<f64>() < c.probability) =>
        {
            SketchKind::CrossThread
        }
        _ if kinds.contains(&SketchKind::LaneReduction)
            && space
                .lane_reduction
                .as_ref()
                .is_some_and(|l| rng.gen::<f64>() < l.probability) =>
        {
            SketchKind::LaneReduction
        }
        (Some(rule), _)
            if kinds.contains(&SketchKind::SplitK) && rng.gen::<f64>() < rule.probability =>
        {
            SketchKind::SplitK
        }
        (_, Some(rule))
            if kinds.contains(&SketchKind::RegisterTile) && rng.gen::<f64>() < rule.probability =>
        {
            SketchKind::RegisterTile
        }
        _ => SketchKind::Plain,
    };
    apply_sketch(space, sch, seed, kind)
}

/// Builds one sample of sketch `kind` of the design space of `sch`'s program, drawing
/// decisions from the schedule's generator.
///
/// On a GPU space the spatial tile sizes are drawn jointly (from `seed`) until the thread
/// block and the virtual threads fit the space's limits, then passed to `sample_tile`
/// (`sample_perfect_tile`) as its decisions: the trace is the same as with free sampling,
/// but far fewer samples are rejected by the postprocessors.
/// Runs a primitive the sketch goes on without if it fails, with the program restored
/// on failure even where the schedule otherwise keeps no copy to restore it from (the
/// evolutionary search's fresh samples, see `Schedule::set_rollback`).
pub(crate) fn attempt<T>(
    sch: &mut Schedule,
    primitive: impl FnOnce(&mut Schedule) -> Result<T, ScheduleError>,
) -> Result<T, ScheduleError> {
    let was = sch.rolls_back();
    sch.set_rollback(true);
    let out = primitive(sch);
    sch.set_rollback(was);
    out
}

/// A sample of sketch `kind` of `program` drawn from `seed`, each sampling instruction
/// taking a fitting decision of `hints` first where given; `None` where the sketch fails.
/// Dropped on failure, so sampled without the program copies that restore a failed
/// primitive (the sketch's own attempts aside).
pub(crate) fn sample_afresh(
    space: &SearchSpace,
    program: &Program,
    kind: SketchKind,
    seed: u64,
    hints: Option<crate::schedule::hints::Hints>,
) -> Option<Schedule> {
    let mut sch = Schedule::new(program.clone(), seed);
    sch.set_rollback(false);
    if let Some(h) = hints {
        sch.set_hints(h);
    }
    let applied = apply_sketch(space, &mut sch, super::random::splitmix(seed), kind).is_ok();
    sch.set_rollback(true);
    (applied && !sch.abandoned()).then_some(sch)
}

/// A mutant whose changed sketch choice (the `sample_categorical` at `inst` of `trace`, a
/// branch of the sketch: the trace's instructions after it are the old branch's) grown
/// again: each sketch of `kinds` is sampled afresh with the trace's decisions as hints
/// (`crate::schedule::hints`), and the first that makes the trace's decisions up to and
/// including `inst` is the mutant (the decisions after it kept where the sketch meets the
/// same instructions again, else drawn from `seed`). `None` when no sketch does.
pub fn regrow(
    space: &SearchSpace,
    program: &Program,
    kinds: &[SketchKind],
    trace: &crate::schedule::Trace,
    inst: usize,
    seed: u64,
) -> Option<Schedule> {
    let through = trace
        .insts
        .get(..=inst)?
        .iter()
        .filter(|i| i.kind.is_sampling())
        .count();
    let hints = crate::schedule::hints::Hints::from_trace(trace);
    kinds.iter().find_map(|&kind| {
        let mut sch = sample_afresh(space, program, kind, seed, Some(hints.clone()))?;
        let same = sch.take_hints().is_some_and(|h| h.took_first(through));
        same.then_some(sch)
    })
}

pub fn apply_sketch(
    space: &SearchSpace,
    sch: &mut Schedule,
    seed: u64,
    kind: SketchKind,
) -> Result<(), SketchError> {
    if kind == SketchKind::RegisterTile {
        return cpu::apply(space, sch, seed);
    }
    if kind == SketchKind::TensorCore {
        return tensor_core::apply(space, sch, seed);
    }
    if kind == SketchKind::Wgmma {
        return wgmma::apply(space, sch);
    }
    if kind == SketchKind::CrossThread {
        return cross_thread::apply(space, sch);
    }
    if kind == SketchKind::LaneReduction {
        return lane_reduction::apply(space, sch);
    }
    if !has_reduction(sch.program()) {
        return elementwise(space, sch);
    }
    // 0. A convolution may be tiled as its GEMM (a branch of the sketch).
    gemm_view(space, sch)?;
    let st = stages(sch.program())?;
    // 1a. An NCHW conv's data read through a window or a stride may be stored channels
    //     last by a kernel of its own (a decision).
    let channels_last = channels_last_data(space, sch, &st.main)?;
    let staged = |name: &String| channels_last.iter().any(|s| &s.name == name);
    // 1. Padding (on a space with a read cache, after the cache is placed: the padding
    //    goes into the cooperative fetch, as MetaSchedule does).
    if space.inline_padding && space.cache_read.is_none() {
        for name in st.padding.iter().filter(|n| !staged(n)) {
            let b = sch.get_block(name).map_err(at("inline padding"))?;
            // A stage that cannot be inlined stays (and is scheduled on its own below).
            let _ = attempt(sch, |s| s.compute_inline(b));
        }
    }
    // 1b. Padding an einsum to multiples: the new stages are padding and an epilogue.
    //     Zero-filled copies of operands whose rows are no whole 16-byte vectors may run
    //     as kernels of their own (a decision), so that the fetch reads whole vectors.
    //     With `cache_read.transpose_padding_kernels` they are scheduled once the
    //     fetches are placed (step 7): one the fetch would transpose may be stored
    //     transposed as well, by the same kernel.
    let padded = pad(space, sch, &st.main, kind)?;
    let padding_kernels = match padded {
        Some(_) if space.is_gpu() && space.transpose_padding_kernels => {
            unaligned_pad_copies(sch, &st)?
        }
        Some(_) if space.is_gpu() => unaligned_pad_kernels(space, sch, &st)?,
        _ => Vec::new(),
    };
    let st = stages(sch.program())?;
    // 2. Split-K: the main block becomes the rf block; the original one sums its
    //    partial results in a nest of its own.
    let split = match kind {
        SketchKind::Plain
        | SketchKind::RegisterTile
        | SketchKind::TensorCore
        | SketchKind::Wgmma
        | SketchKind::CrossThread
        | SketchKind::LaneReduction => None,
        SketchKind::SplitK => Some(split_k(space, sch, &st.main, padded)?),
    };
    // 3. Cache write and epilogues.
    let main = match (split, padded) {
        (Some((rf, _, _)), _) => rf,
        (None, Some(b)) => b,
        (None, None) => sch.get_block(&st.main).map_err(at("main block"))?,
    };
    let write_back = match &space.cache_write {
        Some(scope) => Some(sch.cache_write(main, 0, scope).map_err(at("cache_write"))?),
        None => None,
    };
    let mut leftovers = Vec::new();
    for name in &st.epilogues {
        let b = sch.get_block(name).map_err(at("epilogue"))?;
        // After split-K the epilogue reads the sum of the partial results: it cannot go
        // into the rf block's write-back.
        if split.is_some()
            || !(space.inline_epilogue
                && write_back.is_some()
                && attempt(sch, |s| s.reverse_compute_inline(b)).is_ok())
        {
            leftovers.push(name.clone());
        }
    }
    // 3b. The implicit-GEMM view (convolutions): spatial axes read by the same inputs
    //     (n, p, q of a conv) become one axis before tiling.
    let implicit = match split {
        None => implicit_gemm(space, sch, main, write_back.is_some(), seed)?,
        Some(_) => ImplicitGemm::default(),
    };
    let fused_axes = &implicit.aligned;
    // 4. Tiling. The split-K loop is not tiled: it goes whole to the outermost level
    //    (blockIdx), so that each thread block computes one partial result.
    let rf_loop = match split {
        Some((_, _, l)) => Some(sch.loop_id(l).map_err(at("tiling"))?),
        None => None,
    };
    let mut loops = sch.get_loops(main).map_err(at("tiling"))?;
    let mut rf_outer = None;
    if let Some(pos) =
        rf_loop.and_then(|id| loops.iter().position(|l| sch.loop_id(*l).ok() == Some(id)))
    {
        rf_outer = Some(loops.remove(pos));
    }
    let kinds = loop_kinds(sch, main, &loops)?;
    let n_s = space
        .levels
        .iter()
        .filter(|l| **l == Level::Spatial)
        .count();
    let n_r = space.levels.len() - n_s;
    // Each spatial axis: its extent and, for an axis the implicit-GEMM view fused, the
    // extents of the loops fused into it (its digits).
    let spatial_axes: Vec<(i64, Option<Vec<i64>>)> = {
        let p = sch.program();
        loops
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| **k == IterKind::Spatial)
            .map(|(l, _)| {
                sch.loop_id(*l).map(|id| {
                    let digits = fused_axes
                        .iter()
                        .find(|(f, _)| *f == id)
                        .map(|(_, d)| d.clone());
                    (p.lp(id).extent, digits)
                })
            })
            .collect::<Result<_, _>>()
            .map_err(at("tiling"))?
    };
    let mut joint = joint_spatial_tiles(space, &spatial_axes, n_s, seed).into_iter();
    let last_spatial = kinds.iter().rposition(|k| *k == IterKind::Spatial);
    // tiles[axis][level-of-that-kind] and the sampled factors.
    let mut s_tiles: Vec<(Vec<LoopRv>, Vec<ExprRv>)> = Vec::new();
    let mut r_tiles: Vec<(Vec<LoopRv>, Vec<ExprRv>)> = Vec::new();
    for (i, (lp, kind)) in loops.iter().zip(&kinds).enumerate() {
        let n = if *kind == IterKind::Spatial { n_s } else { n_r };
        let max = space.max_innermost(Some(i) == last_spatial);
        let hint = if *kind == IterKind::Spatial {
            joint.next().flatten()
        } else {
            None
        };
        let factors = sample_tiles(space, sch, *lp, n, max, hint)?;
        let args: Vec<Option<IntArg>> = factors.iter().map(|f| Some(IntArg::Rv(*f))).collect();
        let tiles = sch.split(*lp, &args).map_err(at("split"))?;
        if *kind == IterKind::Spatial {
            s_tiles.push((tiles, factors));
        } else {
            r_tiles.push((tiles, factors));
        }
    }
    // Loops of each level, in structure order.
    let mut levels: Vec<Vec<LoopRv>> = Vec::new();
    let (mut si, mut ri) = (0, 0);
    for level in &space.levels {
        let (tiles, i) = match level {
            Level::Spatial => (&s_tiles, &mut si),
            Level::Reduce => (&r_tiles, &mut ri),
        };
        levels.push(tiles.iter().map(|(t, _)| t[*i]).collect());
        *i += 1;
    }
    if let Some(l) = rf_outer {
        levels[0].insert(0, l);
    }
    let order: Vec<LoopRv> = levels.iter().flatten().copied().collect();
    sch.reorder(&order).map_err(at("reorder"))?;
    let first_r = space
        .levels
        .iter()
        .position(|l| *l == Level::Reduce)
        .unwrap_or(space.levels.len());
    // 5. Bindings of the leading S levels.
    let mut thread_factors: Vec<ExprRv> = Vec::new();
    for (li, binding) in space.bindings.iter().enumerate() {
        let fused = fuse(sch, &levels[li])?;
        match binding {
            Binding::Parallel => sch.parallel(fused).map_err(at("parallel"))?,
            Binding::Thread(tag) => {
                sch.bind(fused, tag).map_err(at("bind"))?;
                if tag.starts_with("threadIdx") {
                    thread_factors = s_tiles.iter().map(|(_, f)| f[li]).collect();
                }
            }
        }
        levels[li] = vec![fused];
    }
    // 6. Write-back placement.
    if let Some(wb) = write_back {
        if let Some(lp) = write_back_location(space, sch, wb, &levels, first_r)? {
            sch.reverse_compute_at(wb, lp)
                .map_err(at("reverse_compute_at"))?;
        }
    }
    //    The accumulator of an implicit-GEMM sample that fused the window axes alone is
    //    stored with them as one axis (once placed: `reverse_compute_at` reads it at its
    //    iteration variables).
    if let Some(layout) = &implicit.acc_layout {
        sch.transform_layout(main, 0, layout)
            .map_err(at("implicit GEMM"))?;
    }
    // 7. Cache read with cooperative fetch (operands it would transpose may be
    //    transposed by kernels of their own first).
    let fetch_at = levels[first_r].last().copied();
    let mut transposed_copies = Vec::new();
    // Whether some fetch may transpose an operand by vectors (the pipeline may stage
    // those in registers).
    let mut transposing = false;
    if let (Some(scope), Some(fetch_at)) = (&space.cache_read, fetch_at) {
        let n_reads = {
            let p = sch.program();
            let b = sch.block_id(main).map_err(at("cache_read"))?;
            p.block_reads(b)
                .iter()
                .filter(|(buf, _)| p.buffer(*buf).kind != BufferKind::Output)
                .count()
        };
        let fetch_depth = {
            let p = sch.program();
            let l = sch.loop_id(fetch_at).map_err(at("cache_read"))?;
            p.ancestors(crate::ir::Node::Loop(l)).len() + 1
        };
        if !thread_factors.is_empty() {
            transposed_copies =
                transpose_kernels(space, sch, main, n_reads, &channels_last, &padding_kernels)?;
        }
        for idx in 0..n_reads {
            let cached = sch
                .cache_read(main, idx as i64, scope)
                .map_err(at("cache_read"))?;
            sch.compute_at(cached, fetch_at).map_err(at("compute_at"))?;
            let transposed = space.reduction_major && reduction_major(sch, main, cached)?;
            let fetch = match thread_factors.is_empty() {
                true => None,
                false => Some(sch.get_loops(cached).map_err(at("cooperative fetch"))?)
                    .filter(|cl| cl.len() > fetch_depth),
            };
            let walked = match &fetch {
                Some(cl) if transposed && space.walk_contiguous => {
                    walk_contiguous(sch, cached, &cl[fetch_depth..])?
                }
                _ => false,
            };
            let aligned = transposed && pad_rows(space, sch, cached, walked)?;
            let chunked = match &fetch {
                Some(cl) if aligned && !walked => chunk_rows(sch, cached, &cl[fetch_depth..])?,
                _ => false,
            };
            let Some(cl) = fetch else {
                continue;
            };
            let cl = match walked || chunked {
                true => sch.get_loops(cached).map_err(at("cooperative fetch"))?,
                false => cl,
            };
            let fused = fuse(sch, &cl[fetch_depth..])?;
            let lengths = if walked || chunked {
                vec![1]
            } else if transposed {
                transposed_lengths(space, sch, cached)?
            } else {
                space.fetch_vector_lengths.clone()
            };
            transposing |= transposed && lengths.iter().any(|l| *l > 1);
            let probs = vec![1.0 / lengths.len() as f64; lengths.len()];
            let vec = sch
                .sample_categorical(&lengths, &probs, None)
                .map_err(at("cooperative fetch"))?;
            let threads = IntArg::Product(thread_factors.iter().map(|f| IntArg::Rv(*f)).collect());
            let parts = sch
                .split(fused, &[None, Some(threads), Some(IntArg::Rv(vec))])
                .map_err(at("cooperative fetch"))?;
            let tag = thread_tag(space);
            sch.bind(parts[1], &tag).map_err(at("cooperative fetch"))?;
            sch.vectorize(parts[2]).map_err(at("cooperative fetch"))?;
            if walked {
                unroll_walk(space, sch, parts[0])?;
            }
        }
    }
    // The padding kernels of step 1b left to this step that no transposing copy took.
    if space.transpose_padding_kernels {
        for name in &padding_kernels {
            if !transposed_copies.iter().any(|c| &c.name == name) {
                standalone(space, sch, name)?;
            }
        }
    }
    if space.inline_padding && space.cache_read.is_some() {
        for name in st
            .padding
            .iter()
            .filter(|n| !padding_kernels.contains(n) && !staged(n))
        {
            let b = sch.get_block(name).map_err(at("inline padding"))?;
            if attempt(sch, |s| s.compute_inline(b)).is_err() {
                leftovers.insert(0, name.clone());
            }
        }
    }
    for copy in channels_last.iter().chain(&transposed_copies) {
        staging::schedule(space, sch, copy)?;
    }
    // 7b. Software pipelining of the shared fetch.
    if let (Some(_), Some(rule), Some(fetch_at)) = (&space.cache_read, &space.pipeline, fetch_at) {
        pipeline::pipeline(rule, sch, fetch_at, transposing)?;
    }
    // 8. Vectorize (CPU) the innermost loop and the write-back's, where they can be: in
    //    a degenerate nest (extents of 1 in a tiny workload) the last loop may not be
    //    innermost, and the sample keeps it serial rather than failing.
    if !space.is_gpu() && space.max_vector_extent > 0 {
        if let Some(last) = order.last() {
            let _ = attempt(sch, |s| s.vectorize(*last));
        }
        if let Some(wb) = write_back {
            if let Some(last) = sch.get_loops(wb).map_err(at("vectorize"))?.last() {
                let _ = attempt(sch, |s| s.vectorize(*last));
            }
        }
    }
    // 9. Auto-unroll.
    let steps = &space.unroll_max_steps;
    let probs = vec![1.0 / steps.len() as f64; steps.len()];
    let step = sch
        .sample_categorical(steps, &probs, None)
        .map_err(at("auto-unroll"))?;
    //    The loops of the last three levels; with `unroll.tile_steps` from the level after
    //    the first reduction level (the loop over a staged tile's reduction steps too).
    let inner_from = match space.unroll_tile_steps {
        true => first_r + 1,
        false => space.levels.len().saturating_sub(3).max(first_r + 1),
    };
    for lp in levels[inner_from.min(levels.len())..].iter().flatten() {
        sch.annotate(Target::Loop(*lp), AUTO_UNROLL_KEY, AnnArg::Rv(step))
            .map_err(at("auto-unroll"))?;
    }
    // 9b. The blocks a multiprocessor should hold (CUDA), on the blockIdx loop.
    min_blocks(space, sch, &levels[0])?;
    // 10. decompose_reduction.
    if let Some(first) = levels[first_r].first() {
        sch.decompose_reduction(main, *first)
            .map_err(at("decompose_reduction"))?;
    }
    // Stages left outside the main nest.
    if let Some((_, wb, _)) = split {
        let grid = levels[0].first().copied();
        let threads = IntArg::Product(thread_factors.iter().map(|f| IntArg::Rv(*f)).collect());
        split_k_sum(
            space,
            sch,
            wb,
            grid.map(|g| (g, vec![(threads, thread_tag(space))])),
        )?;
    }
    for name in st.reductions.iter().chain(&leftovers) {
        standalone(space, sch, name)?;
    }
    Ok(())
}

/// Step 9b: on spaces with `threads.min_blocks_per_sm`, a sampled count of blocks a
/// multiprocessor should hold at once, annotated on the outermost level's loop where it
/// is bound to blockIdx ([`LAUNCH_MIN_BLOCKS_KEY`]): NVRTC then fits a thread's registers
/// to that many blocks (`__launch_bounds__`), trading registers (and spills, which the
/// postprocessor refuses) for resident warps: with 101 registers a thread, a block of 384
/// threads holds an H200's multiprocessor alone, and 200 such blocks ran in two waves of
/// 132 (benches/RESULTS.md, 2026-11-28; capped to fit two, that kernel spilled). Not in
/// the default space: tuned with it, the tuning set's GEMMs were no faster.
fn min_blocks(
    space: &SearchSpace,
    sch: &mut Schedule,
    outer: &[LoopRv],
) -> Result<(), SketchError> {
    let counts = &space.min_blocks_per_sm;
    let bound =
        matches!(space.bindings.first(), Some(Binding::Thread(t)) if t.starts_with("blockIdx"));
    let [lp] = outer else {
        return Ok(());
    };
    if counts.is_empty() || !space.is_gpu() || !bound {
        return Ok(());
    }
    let probs = vec![1.0 / counts.len() as f64; counts.len()];
    let m = sch
        .sample_categorical(counts, &probs, None)
        .map_err(at("min blocks"))?;
    sch.annotate(Target::Loop(*lp), LAUNCH_MIN_BLOCKS_KEY, AnnArg::Rv(m))
        .map_err(at("min blocks"))
}

/// Whether `p` has a reduction block (a main nest to tile).
fn has_reduction(p: &Program) -> bool {
    p.blocks_in_order()
        .iter()
        .any(|b| p.block(*b).is_reduction())
}

/// The sketch of a program without a reduction (elementwise stages, a transpose, a
/// broadcast): each intermediate stage inlined into its consumers where it can be, each
/// remaining stage spread over the device as an epilogue left outside a main nest is.
fn elementwise(space: &SearchSpace, sch: &mut Schedule) -> Result<(), SketchError> {
    let names: Vec<(String, bool)> = {
        let p = sch.program();
        p.blocks_in_order()
            .iter()
            .map(|b| {
                let blk = p.block(*b);
                let intermediate = p.buffer(blk.body.buffer).kind == BufferKind::Intermediate;
                (blk.name.clone(), intermediate)
            })
            .collect()
    };
    let mut left = Vec::new();
    for (name, intermediate) in names {
        let b = sch.get_block(&name).map_err(at("inline"))?;
        if !(intermediate && attempt(sch, |s| s.compute_inline(b)).is_ok()) {
            left.push(name);
        }
    }
    for name in &left {
        standalone(space, sch, name)?;
    }
    Ok(())
}

/// The split counts the space's split-K rule allows for `main` (those of `splits` that
/// divide its first reduction axis; `padded`: that axis as it is or as [`pad`] may pad
/// it), or `None` when the rule does not apply: no `[split_k]`, an output larger than
/// `max_output_elements`, a reduction shorter than `min_reduction`, or no count that
/// divides.
fn split_k_counts(
    space: &SearchSpace,
    p: &Program,
    main: crate::ir::BlockId,
    padded: bool,
) -> Option<Vec<i64>> {
    let rule = space.split_k.as_ref()?;
    let blk = p.block(main);
    let first_extent = blk
        .iter_vars
        .iter()
        .find(|iv| iv.kind == IterKind::Reduce)?
        .extent;
    let mut extents = vec![first_extent];
    if padded && !space.pad_multiples.is_empty() && pad_einsum::check_einsum(p, main).is_ok() {
        extents.extend(
            pad_choices(space, first_extent)
                .into_iter()
                .map(|m| padded_extent(first_extent, m)),
        );
    }
    let mut splits: Vec<i64> = extents
        .into_iter()
        .flat_map(|e| split_counts(space, e, outputs(blk)))
        .collect();
    splits.sort_unstable();
    splits.dedup();
    (!splits.is_empty() && small_output(rule, blk)).then_some(splits)
}

/// Whether `blk`'s output is small against its reduction by the split-K rule's bounds:
/// at most `max_output_elements` outputs, at least `min_reduction` steps.
fn small_output(rule: &crate::search::space::SplitK, blk: &crate::ir::Block) -> bool {
    outputs(blk) <= rule.max_output_elements
        && blk.extent_of(IterKind::Reduce) >= rule.min_reduction
}

/// The output elements of `blk` (the product of its spatial extents).
fn outputs(blk: &crate::ir::Block) -> i64 {
    blk.extent_of(IterKind::Spatial)
}

/// The counts of the space's `split_k.splits` that split a reduction of `extent` evenly,
/// their partial results for `outputs` output elements within the rule's bound.
fn split_counts(space: &SearchSpace, extent: i64, outputs: i64) -> Vec<i64> {
    space
        .split_k
        .as_ref()
        .map_or_else(Vec::new, |rule| rule.counts(extent, outputs))
}

/// The split-K rule: the first reduction loop of `main` is split by a sampled count
/// (`sample_categorical` over [`split_k_counts`], a decision of the trace) and
/// `rfactor`ed. Returns the rf block, the write-back (the original block) and the split-K
/// loop.
fn split_k(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: &str,
    got: Option<BlockRv>,
) -> Result<(BlockRv, BlockRv, LoopRv), SketchError> {
    let b = match got {
        Some(b) => b,
        None => sch.get_block(main).map_err(at("split-K"))?,
    };
    // Whether split-K applies was decided on the unpadded workload (`sketches`); here
    // only the counts that divide the (possibly padded) first reduction remain. Asking
    // `split_k_counts` again would test the padded output against `max_output_elements`
    // and refuse samples whose padding grew it past the bound (17% of the split-K
    // samples of a 390x2159x2532 GEMM).
    let (first_reduce, outputs) = {
        let p = sch.program();
        let blk = p.block(sch.block_id(b).map_err(at("split-K"))?);
        let first = blk
            .iter_vars
            .iter()
            .find(|iv| iv.kind == IterKind::Reduce)
            .map(|iv| iv.extent);
        (first, outputs(blk))
    };
    let splits = first_reduce.map_or_else(Vec::new, |e| split_counts(space, e, outputs));
    if splits.is_empty() {
        return Err(SketchError::SplitKNotApplicable);
    }
    let loops = sch.get_loops(b).map_err(at("split-K"))?;
    let kinds = loop_kinds(sch, b, &loops)?;
    let lr = loops
        .iter()
        .zip(&kinds)
        .find(|(_, k)| **k == IterKind::Reduce)
        .map(|(l, _)| *l)
        .ok_or(SketchError::SplitKNotApplicable)?;
    let probs = vec![1.0 / splits.len() as f64; splits.len()];
    let count = sch
        .sample_categorical(&splits, &probs, None)
        .map_err(at("split-K"))?;
    let parts = sch
        .split(lr, &[Some(IntArg::Rv(count)), None])
        .map_err(at("split-K"))?;
    let rf = sch.rfactor(parts[0], 0).map_err(at("rfactor"))?;
    Ok((rf, b, parts[0]))
}

/// Shared-memory banks of 4 bytes (every CUDA architecture since Maxwell).
const SHARED_BANKS: i64 = 32;

/// The widest shared-memory load a thread issues (`LDS.128`), in bytes: the row padding
/// of a copy whose rows are read as vectors ([`pad_rows`]).
const ALIGNED_ROW_BYTES: i64 = 16;

/// The reduction-major rule (`cache_read.reduction_major`): when `main` reads the buffer
/// `cached` writes with a reduction variable alone in the last index and a spatial one
/// before it (a GEMM's `A[m, k]`, an NT GEMM's `B[n, k]`), the copy is stored with the
/// reduction axes first (`transform_layout`), so that the threads of a warp, which own
/// neighbouring outputs, read neighbouring words instead of words a row apart in the
/// same memory bank; its rows are then padded by [`pad_rows`]. Returns whether it
/// transposed.
fn reduction_major(
    sch: &mut Schedule,
    main: BlockRv,
    cached: BlockRv,
) -> Result<bool, SketchError> {
    let perm = {
        let p = sch.program();
        let mb = sch.block_id(main).map_err(at("reduction-major"))?;
        let cb = sch.block_id(cached).map_err(at("reduction-major"))?;
        let buf = p.block(cb).body.buffer;
        match reduction_first(p, mb, buf) {
            Some(perm) => perm,
            None => return Ok(false),
        }
    };
    let perm: Vec<i64> = perm.into_iter().map(|d| d as i64).collect();
    sch.transform_layout(cached, 0, &crate::schedule::layout::singletons(&perm))
        .map_err(at("reduction-major"))?;
    Ok(true)
}

/// The row stride of a copy stored reduction first ([`reduction_major`]), padded past
/// the 32 banks by `storage_align`. Its fetch stores down the columns, a row apart: one
/// element of padding spreads those stores over the banks (and keeps the threads' reads
/// along the rows on distinct banks). Where the fetch walks the rows instead
/// ([`walk_contiguous`], `walked`) its stores are neighbouring words either way, and with
/// `cache_read.walk_aligned` the rows are padded to 16 bytes, so that a thread's
/// neighbouring elements of a row are read as one vector; elsewhere, with
/// `cache_read.aligned_rows`, a coin chooses between the two paddings (then
/// [`chunk_rows`] orders the fetch so that its stores down the columns stay on distinct
/// banks). Returns whether the rows were padded to 16 bytes.
fn pad_rows(
    space: &SearchSpace,
    sch: &mut Schedule,
    cached: BlockRv,
    walked: bool,
) -> Result<bool, SketchError> {
    let (rank, elem) = {
        let p = sch.program();
        let cb = sch.block_id(cached).map_err(at("reduction-major"))?;
        let buf = p.buffer(p.block(cb).body.buffer);
        (buf.shape.len() as i64, buf.dtype.bytes() as i64)
    };
    let aligned = match walked {
        true => space.walk_aligned,
        false => space.aligned_rows && coin(sch, "reduction-major")?,
    };
    let offset = match aligned {
        true => (ALIGNED_ROW_BYTES / elem).max(1),
        false => 1,
    };
    sch.storage_align(cached, 0, rank - 2, SHARED_BANKS, offset)
        .map_err(at("reduction-major"))?;
    Ok(aligned)
}

/// Rows a warp's fetch stores at once into a copy whose rows are padded to 16 bytes past
/// the banks ([`chunk_rows`]): consecutive rows start 16 bytes further along the banks, so
/// 8 of them, 4 words from each, cover the 32 banks once.
const CHUNK_ROWS: i64 = SHARED_BANKS * 4 / ALIGNED_ROW_BYTES;

/// Step 7's fetch of a copy stored reduction first ([`reduction_major`]) with rows padded
/// to 16 bytes past the banks ([`pad_rows`]) that does not walk its rows: its loops
/// `fetch` reordered so that the fetch's threads take [`CHUNK_ROWS`] consecutive rows
/// (the reduction, along which the source is stored) fastest and the columns next, one
/// element each. A warp then stores 8 rows by 4 columns, on 32 distinct banks, and reads
/// 32 contiguous bytes of 4 of the source's rows; walked along the reduction alone it
/// would store 32 rows of one column, 4 to a bank (the row padding's cost that the
/// one-element padding avoids, but which leaves the compute's reads of a row unaligned).
/// Returns whether it reordered: not where the row or column index is not one loop's,
/// where the rows are not a multiple of 8 or the columns fewer than 4.
fn chunk_rows(sch: &mut Schedule, cached: BlockRv, fetch: &[LoopRv]) -> Result<bool, SketchError> {
    let p = sch.program();
    let b = sch.block_id(cached).map_err(at("cooperative fetch"))?;
    let blk = p.block(b);
    let [.., row, col] = blk.body.indices.as_slice() else {
        return Ok(false);
    };
    // The fetch loop that alone gives an index of the copy, with its extent.
    let loop_of = |index: &Expr| -> Result<Option<(LoopRv, i64)>, SketchError> {
        let axes: Vec<usize> = (0..blk.iter_vars.len())
            .filter(|a| index.uses_var(blk.iter_vars[*a].var))
            .collect();
        let [axis] = axes[..] else {
            return Ok(None);
        };
        let mut found = None;
        for lp in fetch {
            let l = p.lp(sch.loop_id(*lp).map_err(at("cooperative fetch"))?);
            let uses = |a: usize| blk.bindings[a].uses_var(l.var);
            match (
                uses(axis),
                (0..blk.bindings.len()).filter(|a| uses(*a)).count(),
            ) {
                (true, 1) if found.is_none() => found = Some((*lp, l.extent)),
                (false, _) => {}
                _ => return Ok(None),
            }
        }
        Ok(found)
    };
    let (Some((rows, n_rows)), Some((cols, n_cols))) = (loop_of(row)?, loop_of(col)?) else {
        return Ok(false);
    };
    if n_rows % CHUNK_ROWS != 0 || n_cols < SHARED_BANKS / CHUNK_ROWS {
        return Ok(false);
    }
    let mut order: Vec<LoopRv> = fetch
        .iter()
        .copied()
        .filter(|lp| *lp != rows && *lp != cols)
        .collect();
    let parts = sch
        .split(rows, &[None, Some(IntArg::Lit(CHUNK_ROWS))])
        .map_err(at("cooperative fetch"))?;
    order.extend([parts[0], cols, parts[1]]);
    sch.reorder(&order).map_err(at("cooperative fetch"))?;
    Ok(true)
}

/// Step 7's fetch of a copy stored reduction first ([`reduction_major`]) whose source
/// is stored contiguously along another axis ([`fetch_order::contiguous_axis`]: an NCHW
/// conv's gathered data, a row's pixels in `m` of `X_im2col[m, kk]`): its loops `fetch`
/// reordered so that it walks that axis fastest, which is then the fastest axis of the
/// copy too (stored `[kk, m]`), so a warp reads a row's neighbouring pixels and stores
/// neighbouring words, one element a thread. Returns whether it reordered.
fn walk_contiguous(
    sch: &mut Schedule,
    cached: BlockRv,
    fetch: &[LoopRv],
) -> Result<bool, SketchError> {
    let p = sch.program();
    let b = sch.block_id(cached).map_err(at("cooperative fetch"))?;
    let Some(axis) = fetch_order::contiguous_axis(p, b) else {
        return Ok(false);
    };
    let binding = &p.block(b).bindings[axis];
    let mut order = Vec::with_capacity(fetch.len());
    let mut walk = None;
    for lp in fetch {
        let var = p.lp(sch.loop_id(*lp).map_err(at("cooperative fetch"))?).var;
        match binding.uses_var(var) {
            true if walk.is_none() => walk = Some(*lp),
            true => return Ok(false),
            false => order.push(*lp),
        }
    }
    let Some(walk) = walk else {
        return Ok(false);
    };
    order.push(walk);
    sch.reorder(&order).map_err(at("cooperative fetch"))?;
    Ok(true)
}

/// The walked fetch's loop over its steps (one gathered element a thread each, its
/// index a chain of divisions) annotated to be unrolled where its extent is at most a
/// drawn `cache_read.walk_unroll` value: unrolled, the compiler computes the digits a
/// step shares with the others once. A decision, not a rule: by hand on 14 samples of the
/// batch-16 conv (H200, 2026-12-02) unrolling ran 1.06x-1.87x faster in eight and 0.42x
/// in one; in tuning level (0.994x over nine pairs), so off by default (`[]`).
fn unroll_walk(space: &SearchSpace, sch: &mut Schedule, steps: LoopRv) -> Result<(), SketchError> {
    let candidates = &space.walk_unroll;
    if candidates.is_empty() {
        return Ok(());
    }
    let probs = vec![1.0 / candidates.len() as f64; candidates.len()];
    let step = sch
        .sample_categorical(candidates, &probs, None)
        .map_err(at("cooperative fetch"))?;
    sch.annotate(Target::Loop(steps), AUTO_UNROLL_KEY, AnnArg::Rv(step))
        .map_err(at("cooperative fetch"))?;
    Ok(())
}

/// The order that stores `buf`, as block `main` reads it, reduction axes first, where
/// its last index is a reduction variable alone and some index of a dimension longer than
/// 1 is not (a GEMM's `A[m, k]`: `[1, 0]`); `None` where it is stored so already (a
/// GEMV's `A[1, k]` too) or `main` does not read it.
fn reduction_first(p: &Program, main: BlockId, buf: BufferId) -> Option<Vec<usize>> {
    let blk = p.block(main);
    let (_, idx) = p.block_reads(main).into_iter().find(|(b, _)| *b == buf)?;
    let uses = |e: &Expr, kind| {
        blk.iter_vars
            .iter()
            .any(|iv| iv.kind == kind && e.uses_var(iv.var))
    };
    let reduce_only: Vec<bool> = idx
        .iter()
        .map(|e| uses(e, IterKind::Reduce) && !uses(e, IterKind::Spatial))
        .collect();
    // A dimension of extent 1 orders nothing: [1, K] is stored as [K, 1] already.
    let shape = &p.buffer(buf).shape;
    let spatial_before = reduce_only
        .iter()
        .zip(shape)
        .any(|(r, extent)| !r && *extent > 1);
    if !(reduce_only.last() == Some(&true) && spatial_before) {
        return None;
    }
    let (mut first, rest): (Vec<usize>, Vec<usize>) = (0..idx.len()).partition(|d| reduce_only[*d]);
    first.extend(rest);
    Some(first)
}

/// Whether `main` reads each element of `buf` more than once: some spatial axis of `main`
/// longer than 1 indexes no dimension of it (a GEMM's A is read once per column of the
/// output, a conv's weights once per pixel). A GEMV's weight, or the row a reduction sums,
/// is read once: a kernel that transposed it would move every byte twice for a fetch that
/// moves it once.
fn reused(p: &Program, main: BlockId, buf: BufferId) -> bool {
    let blk = p.block(main);
    let Some((_, idx)) = p.block_reads(main).into_iter().find(|(b, _)| *b == buf) else {
        return false;
    };
    blk.iter_vars
        .iter()
        .filter(|iv| iv.kind == IterKind::Spatial && iv.extent > 1)
        .any(|iv| !idx.iter().any(|e| e.uses_var(iv.var)))
}

/// Step 1a (CUDA spaces with `cache_read.channels_last_kernels`): a convolution whose
/// data are read with the channel before the pixels and not as its output stores them
/// (NCHW through a window or a stride, whose fetch reads a row's pixels `stride` apart,
/// 4 bytes at a time) may have them stored channels last once, by a kernel of its own
/// (a decision of the trace) that also zero-fills the padding; the main block then reads
/// them as it reads an NHWC conv's, and the fetch copies runs of channels. On four H200s
/// (2026-11-28, issue 14's protocol, 300 trials), NHWC convs ran 1.37x and 1.69x the
/// same NCHW convs of stride 2, 0.96x and 1.05x of stride 1. Returns the stage, to be
/// scheduled by [`staging::schedule`] once the fetches are placed.
fn channels_last_data(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: &str,
) -> Result<Vec<staging::Staged>, SketchError> {
    if !(space.is_gpu() && space.channels_last_kernels) {
        return Ok(Vec::new());
    }
    let b = sch.get_block(main).map_err(at("channels last"))?;
    let id = sch.block_id(b).map_err(at("channels last"))?;
    let p = sch.program();
    let Some(reads) = staging::conv_reads(p, id) else {
        return Ok(Vec::new());
    };
    let order = match reads.channels_last || reads.pixels_as_stored {
        true => None,
        false => staging::channels_last_order(p, id, &reads),
    };
    let Some(order) = order else {
        return Ok(Vec::new());
    };
    if !coin(sch, "channels last")? {
        return Ok(Vec::new());
    }
    Ok(vec![staging::store_data(sch, b, &reads, &order)?])
}

/// The operands of `main` the fetch would transpose ([`reduction_major`]) and reads more
/// than once ([`reused`]) transposed instead once, by kernels of their own, at a decision of the trace
/// (`cache_read.transpose_kernels`): each is copied (`cache_read` into global memory)
/// with its reduction axes first, the copy scheduled as a tiled transpose or a direct
/// one ([`staging`]), and the fetch then copies the new buffer as it is stored, 16-byte
/// vectors where its rows allow, with no transposing 4-byte copies. An operand a stage of
/// `staged` writes (an NCHW conv's data stored channels last) is stored as it is to be
/// read already. One a padding kernel of `pad_kernels` writes is not copied a second
/// time (two passes: on the H200, 2026-11-30, a strided conv's GEMM view ran 18-22
/// TFLOP/s with two copies, 29.5 with one); with `cache_read.transpose_padding_kernels`
/// that kernel, not yet scheduled, stores it transposed itself, so that an NN GEMM of
/// odd K and N gets both A transposed and B's rows whole vectors. Returns the copies
/// (padding kernels among them), to be scheduled once the padding they read is inlined
/// into them.
fn transpose_kernels(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: BlockRv,
    reads: usize,
    staged: &[staging::Staged],
    pad_kernels: &[String],
) -> Result<Vec<staging::Staged>, SketchError> {
    if !(space.is_gpu() && space.reduction_major && space.transpose_kernels) {
        return Ok(Vec::new());
    }
    // Each operand: its read, the order to store it in, and the padding kernel that
    // writes it (if one does).
    let perms: Vec<(i64, Vec<usize>, Option<String>)> = {
        let p = sch.program();
        let mb = sch.block_id(main).map_err(at("transpose kernels"))?;
        let read_bufs: Vec<BufferId> = p.block_reads(mb).iter().map(|(b, _)| *b).collect();
        read_bufs
            .iter()
            .take(reads)
            .enumerate()
            .filter(|(_, buf)| reused(p, mb, **buf))
            .filter(|(_, buf)| !written_by(p, **buf, |name| staged.iter().any(|s| s.name == name)))
            .filter_map(|(i, buf)| {
                let perm = reduction_first(p, mb, *buf)?;
                let writer = p
                    .writers(*buf)
                    .iter()
                    .map(|w| p.block(*w).name.clone())
                    .find(|name| pad_kernels.contains(name));
                if writer.is_some() && !space.transpose_padding_kernels {
                    return None;
                }
                Some((i as i64, perm, writer))
            })
            .collect()
    };
    if perms.is_empty() || !coin(sch, "transpose kernels")? {
        return Ok(Vec::new());
    }
    let (mut copied, mut own) = (Vec::new(), Vec::new());
    for (read, perm, writer) in perms {
        match writer {
            Some(name) => own.push((name, perm)),
            None => copied.push((read, perm)),
        }
    }
    let mut stages = staging::permuted_copies(sch, main, &copied)?;
    for (name, perm) in own {
        let b = sch.get_block(&name).map_err(at("transpose kernels"))?;
        stages.push(staging::store_permuted(sch, b, &perm)?);
    }
    Ok(stages)
}

/// Whether `buf` is written by a block whose name `kernel` accepts (a copy run as a
/// kernel of its own): such an operand is not copied by another kernel again.
fn written_by(p: &Program, buf: BufferId, kernel: impl Fn(&str) -> bool) -> bool {
    p.writers(buf).iter().any(|w| kernel(&p.block(*w).name))
}

/// The vector lengths offered to the fetch of a reduction-major operand: a transposed
/// copy stores its vectors' lanes apart (one vector load into a register, a store per
/// lane), offered with `cache_read.vector_transposed`, else one lane per load. Only the
/// lengths that divide the row of the global input the fetch reads (through a
/// zero-filling padding stage) are offered: the lowering proves every vector aligned,
/// which a row of 311 floats never is.
fn transposed_lengths(
    space: &SearchSpace,
    sch: &Schedule,
    cached: BlockRv,
) -> Result<Vec<i64>, SketchError> {
    if !space.vector_transposed {
        return Ok(vec![1]);
    }
    let block = sch.block_id(cached).map_err(at("reduction-major"))?;
    let row = input_row(sch.program(), block);
    let lengths: Vec<i64> = space
        .fetch_vector_lengths
        .iter()
        .copied()
        .filter(|l| *l == 1 || row.is_some_and(|r| r % l == 0))
        .collect();
    Ok(if lengths.is_empty() { vec![1] } else { lengths })
}

/// The row length (last extent) of the global input a copy `block` reads, following
/// single-input stages (a padding) back to it; `None` where it reads several buffers.
pub(super) fn input_row(p: &Program, mut block: crate::ir::BlockId) -> Option<i64> {
    loop {
        let reads = p.block_reads(block);
        let [(buf, _)] = reads.as_slice() else {
            return None;
        };
        if p.buffer(*buf).kind == BufferKind::Input {
            return p.buffer(*buf).shape.last().copied();
        }
        match p.writers(*buf).as_slice() {
            [w] => block = *w,
            _ => return None,
        }
    }
}

/// The padding rule (spaces with `tiling.pad_multiples`): where the main block is an
/// einsum ([`pad_einsum::paddable`]), each iteration variable it may pad is padded to a
/// multiple drawn from [`pad_choices`] (`sample_categorical`, a decision of the trace; a
/// literal where there is one choice) by `pad_einsum`. With `tiling.pad_convolutions`, a
/// convolution's n, k and c may be padded, not its window axes (read at
/// `p * stride + r`), which keep `sample_tile`.
/// Returns the main block's rv when the rule applied, and leaves the trace untouched when
/// it did not (extents with nothing to pad).
fn pad(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: &str,
    kind: SketchKind,
) -> Result<Option<BlockRv>, SketchError> {
    if space.pad_multiples.is_empty() {
        return Ok(None);
    }
    let choices = {
        let p = sch.program();
        let [b] = p.find_block(main)[..] else {
            return Ok(None);
        };
        let Ok(paddable) = pad_einsum::paddable(p, b) else {
            return Ok(None);
        };
        if !space.pad_convolutions && paddable.contains(&false) {
            return Ok(None);
        }
        let ivs = &p.block(b).iter_vars;
        let first_reduce = ivs.iter().position(|iv| iv.kind == IterKind::Reduce);
        let outputs = outputs(p.block(b));
        let choices: Vec<Vec<i64>> = ivs
            .iter()
            .enumerate()
            .map(|(i, iv)| {
                if !paddable[i] {
                    return vec![1];
                }
                let mut c = pad_choices(space, iv.extent);
                // The split-K sketch keeps paddings of its reduction that a count divides.
                if kind == SketchKind::SplitK && Some(i) == first_reduce {
                    c.retain(|m| {
                        !split_counts(space, padded_extent(iv.extent, *m), outputs).is_empty()
                    });
                }
                if c.is_empty() {
                    c.push(1);
                }
                c
            })
            .collect();
        choices
    };
    if choices.iter().all(|c| c == &[1]) {
        return Ok(None);
    }
    let b = sch.get_block(main).map_err(at("pad_einsum"))?;
    pad_by_choices(sch, b, &choices)?;
    Ok(Some(b))
}

/// `pad_einsum` of block `b`, each iteration variable padded to a multiple of its
/// `choices` (one: that multiple; several: a `sample_categorical` decision among them).
fn pad_by_choices(sch: &mut Schedule, b: BlockRv, choices: &[Vec<i64>]) -> Result<(), SketchError> {
    let mut padding = Vec::new();
    for c in choices {
        padding.push(match c.as_slice() {
            [one] => IntArg::Lit(*one),
            many => {
                let probs = vec![1.0 / many.len() as f64; many.len()];
                IntArg::Rv(
                    sch.sample_categorical(many, &probs, None)
                        .map_err(at("pad_einsum"))?,
                )
            }
        });
    }
    sch.pad_einsum(b, &padding).map_err(at("pad_einsum"))?;
    Ok(())
}

/// The multiples an extent may be padded to: 1 (unpadded) where the extent has a good
/// divisor ([`pads`] is false), and each of the space's `pad_multiples` that pads by at
/// most `max_waste` of the padded extent. Two multiples may pad to the same extent (1319
/// to 1344 by 32 and by 64): both stay, so that the list holds the same values for every
/// extent they fit, and a trace of another workload that chose 64 keeps its choice
/// when it is grown again here (`crate::schedule::hints`); the candidates they make are
/// the same program, which the search proposes once. Empty for a short prime such as 19
/// (its axis is left to `sample_tile`).
fn pad_choices(space: &SearchSpace, extent: i64) -> Vec<i64> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    if !pads(space, extent) {
        out.push((1, extent));
    }
    add_multiples(&space.pad_multiples, space.max_waste, extent, &mut out);
    out.into_iter().map(|(m, _)| m).collect()
}

/// Appends to `out` (multiple, padded extent) for each of `multiples`, smallest first,
/// that pads `extent` by at most `max_waste` of the padded extent, unless `out` holds
/// that extent unpadded (multiple 1) already.
fn add_multiples(multiples: &[i64], max_waste: f64, extent: i64, out: &mut Vec<(i64, i64)>) {
    let mut multiples = multiples.to_vec();
    multiples.sort_unstable();
    for m in multiples {
        let padded = padded_extent(extent, m);
        let waste = (padded - extent) as f64 / padded as f64;
        if waste <= max_waste && !out.iter().any(|&(m, e)| m == 1 && e == padded) {
            out.push((m, padded));
        }
    }
}

/// `extent` rounded up to a multiple of `multiple`.
pub(crate) fn padded_extent(extent: i64, multiple: i64) -> i64 {
    (extent + multiple - 1) / multiple * multiple
}

/// What the implicit-GEMM rule did to the main block.
#[derive(Default)]
struct ImplicitGemm {
    /// Each fused loop tiled by [`aligned_tile`], with the extents of the loops fused into
    /// it (outermost first).
    aligned: Vec<(crate::ir::LoopId, Vec<i64>)>,
    /// For a sample that fused the window axes alone: the accumulator's layout with those
    /// axes as one (`transform_layout`), applied once the write-back is placed.
    acc_layout: Option<Vec<Vec<i64>>>,
}

/// The implicit-GEMM rule: with the space's `tiling.implicit_gemm` probability (drawn
/// from `seed`, outside the trace; the `fuse` it adds is in the trace), the spatial loops
/// of `main` are grouped by the set of inputs whose indices use them (a conv's n, p and q
/// are read by the data only, k by the weights only) and the groups made adjacent by a
/// `reorder`. A GEMM (one axis per group) is left as it is. Then either
///
/// * every group of two or more loops is `fuse`d, so that tiling sees one M axis of extent
///   N*P*Q, tiled by [`aligned_tile`] (the fused loops are returned in
///   [`ImplicitGemm::aligned`] with their digits); or, with the share
///   `tiling.implicit_gemm_rows` of the samples and where the output is accumulated in a
///   cache (`accumulates`),
/// * only the last two loops of each such group (the window axes p, q) are fused, the
///   fused axis tiled like any other (imperfect tiles allowed), and the accumulator gets
///   the layout [`ImplicitGemm::acc_layout`] that stores their two axes as one: indexed
///   by the fused loop itself, a thread's tile is a range of it whatever rows it crosses.
///   Where the two axes are not neighbours in the accumulator, in loop order, the aligned
///   view is used instead.
fn implicit_gemm(
    space: &SearchSpace,
    sch: &mut Schedule,
    main: BlockRv,
    accumulates: bool,
    seed: u64,
) -> Result<ImplicitGemm, SketchError> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x1317_9e77_0000_0002);
    if space.implicit_gemm <= 0.0 || rng.gen::<f64>() >= space.implicit_gemm {
        return Ok(ImplicitGemm::default());
    }
    let rows = accumulates && rng.gen::<f64>() < space.implicit_gemm_rows;
    let loops = sch.get_loops(main).map_err(at("implicit GEMM"))?;
    let groups = input_groups(sch, main, &loops)?;
    if groups.iter().all(|g| g.len() < 2) {
        return Ok(ImplicitGemm::default());
    }
    let ordered: Vec<LoopRv> = groups.iter().flatten().copied().collect();
    sch.reorder(&ordered).map_err(at("implicit GEMM"))?;
    let windows: Vec<&[LoopRv]> = groups
        .iter()
        .filter(|g| g.len() >= 2)
        .map(|g| &g[g.len() - 2..])
        .collect();
    if rows {
        if let Some(layout) = window_layout(sch, main, &windows)? {
            for w in windows {
                sch.fuse(w).map_err(at("implicit GEMM"))?;
            }
            return Ok(ImplicitGemm {
                aligned: Vec::new(),
                acc_layout: Some(layout),
            });
        }
    }
    let mut aligned = Vec::new();
    for g in groups.iter().filter(|g| g.len() >= 2) {
        let digits = g
            .iter()
            .map(|l| sch.loop_id(*l).map(|id| sch.program().lp(id).extent))
            .collect::<Result<Vec<i64>, _>>()
            .map_err(at("implicit GEMM"))?;
        let f = sch.fuse(g).map_err(at("implicit GEMM"))?;
        aligned.push((sch.loop_id(f).map_err(at("implicit GEMM"))?, digits));
    }
    Ok(ImplicitGemm {
        aligned,
        acc_layout: None,
    })
}

/// The layout of `main`'s output (its accumulator) with the axes that each pair of
/// `windows` loops indexes as one: `None` unless each loop is bound to an iteration
/// variable that is one whole index of the store and each pair's indices are neighbours
/// in loop order.
fn window_layout(
    sch: &Schedule,
    main: BlockRv,
    windows: &[&[LoopRv]],
) -> Result<Option<Vec<Vec<i64>>>, SketchError> {
    let p = sch.program();
    let b = sch.block_id(main).map_err(at("implicit GEMM"))?;
    let blk = p.block(b);
    let store = &blk.body.indices;
    let axis_of = |lp: LoopRv| -> Result<Option<usize>, SketchError> {
        let var = p.lp(sch.loop_id(lp).map_err(at("implicit GEMM"))?).var;
        let iv = bound_iter_var(blk, var).map(|iv| iv.var);
        Ok(iv.and_then(|iv| store.iter().position(|e| *e == Expr::Var(iv))))
    };
    let mut merged: Vec<usize> = Vec::new();
    for w in windows {
        let (Some(a), Some(b)) = (axis_of(w[0])?, axis_of(w[1])?) else {
            return Ok(None);
        };
        if b != a + 1 {
            return Ok(None);
        }
        merged.push(a);
    }
    let mut layout = Vec::new();
    let mut axis = 0;
    while axis < store.len() {
        if merged.contains(&axis) {
            layout.push(vec![axis as i64, axis as i64 + 1]);
            axis += 2;
        } else {
            layout.push(vec![axis as i64]);
            axis += 1;
        }
    }
    Ok(Some(layout))
}

/// The tile sizes of a fused axis whose every level is aligned to its digits (the
/// extents of the loops fused into it, outermost first: a conv's N, P, Q).
///
/// A level's extent, the product of the factors from it inwards, is aligned when it is a
/// divisor of the innermost digit, or that digit times a divisor of the next one, and so
/// on (for N, P, Q: `d | Q`, `Q*d` with `d | P`, `P*Q*d` with `d | N`); each level's
/// extent divides the next outer one's. A tile of such an axis covers a box of the digits
/// at every level, so the write-back, the local accumulator and the shared fetch keep to
/// what one thread (block) computes. Unaligned tiles are correct too (`reverse_compute_at`
/// replays the thread's loops where the box is not exact), but a tile crossing a row of
/// Q spans the whole range of P and N in the bounding box the local and shared buffers
/// are allocated for: a 16 x 56 x 56 accumulator per thread.
///
/// Drawn from the inside out, each level's extent uniformly among the aligned multiples
/// of the one inside it, the innermost at most `max_innermost`; the outermost is the
/// whole axis.
fn aligned_tile(
    rng: &mut rand_chacha::ChaCha8Rng,
    digits: &[i64],
    n: usize,
    max_innermost: i64,
) -> Option<Vec<i64>> {
    use rand::seq::SliceRandom;
    let extent: i64 = digits.iter().product();
    let mut sizes = Vec::new();
    let mut span = 1;
    for digit in digits.iter().rev() {
        sizes.extend((1..=*digit).filter(|d| digit % d == 0).map(|d| span * d));
        span *= digit;
    }
    sizes.sort_unstable();
    sizes.dedup();
    if n == 0 {
        return None;
    }
    // extents[i]: the extent of level i, the product of the factors from i inwards.
    let mut extents = vec![extent; n + 1];
    extents[n] = 1;
    for level in (1..n).rev() {
        let inner = extents[level + 1];
        let limit = if level == n - 1 {
            max_innermost
        } else {
            extent
        };
        let choices: Vec<i64> = sizes
            .iter()
            .copied()
            .filter(|s| s % inner == 0 && *s <= limit)
            .collect();
        extents[level] = *choices.choose(rng)?;
    }
    Some((0..n).map(|i| extents[i] / extents[i + 1]).collect())
}

/// The spatial loops of `block` (those bound directly to one of its spatial iteration
/// variables), grouped by the set of read buffers whose indices use them, groups in order
/// of their first loop, loops in nest order.
fn input_groups(
    sch: &Schedule,
    block: BlockRv,
    loops: &[LoopRv],
) -> Result<Vec<Vec<LoopRv>>, SketchError> {
    let p = sch.program();
    let b = sch.block_id(block).map_err(at("implicit GEMM"))?;
    let blk = p.block(b);
    let reads: Vec<(crate::ir::BufferId, Vec<Expr>)> = p
        .block_reads(b)
        .into_iter()
        .filter(|(buf, _)| *buf != blk.body.buffer)
        .collect();
    let mut groups: Vec<(Vec<usize>, Vec<LoopRv>)> = Vec::new();
    for lp in loops {
        let var = p.lp(sch.loop_id(*lp).map_err(at("implicit GEMM"))?).var;
        let Some(iv) = blk
            .iter_vars
            .iter()
            .zip(&blk.bindings)
            .find(|(iv, e)| iv.kind == IterKind::Spatial && **e == Expr::Var(var))
            .map(|(iv, _)| iv.var)
        else {
            continue;
        };
        let key: Vec<usize> = reads
            .iter()
            .enumerate()
            .filter(|(_, (_, idx))| idx.iter().any(|e| e.uses_var(iv)))
            .map(|(i, _)| i)
            .collect();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(*lp),
            None => groups.push((key, vec![*lp])),
        }
    }
    Ok(groups.into_iter().map(|(_, g)| g).collect())
}

/// The main kernel of a split-K sample, as its sum may use it: the blockIdx loop and the
/// thread counts of the block, each with its tag, outermost first.
type MainKernel = (LoopRv, Vec<(IntArg, String)>);

/// The split-K sum `wb`: on spaces with `split_k.serial_sum`, by a decision, in the main
/// kernel (`serial_sum_at` under its blockIdx loop, the tile's elements spread over its
/// threads, the splits unrolled) where that is legal; else spread over the device in a
/// kernel of its own. Returns the loop under which a thread's sums are complete (where
/// its write-back and epilogues go), if the sum has loops.
fn split_k_sum(
    space: &SearchSpace,
    sch: &mut Schedule,
    wb: BlockRv,
    main: Option<MainKernel>,
) -> Result<Option<LoopRv>, SketchError> {
    let serial = space.split_k.as_ref().map_or(0.0, |k| k.serial_sum);
    if let (Some((grid, threads)), true) = (main, serial > 0.0 && space.is_gpu()) {
        let choice = sch
            .sample_categorical(&[0, 1], &[1.0 - serial, serial], None)
            .map_err(at("split-K sum"))?;
        if sch.value(choice).map_err(at("split-K sum"))? == 1
            && attempt(sch, |s| s.serial_sum_at(wb, grid)).is_ok()
        {
            return spread_over_block(sch, wb, threads);
        }
    }
    let loops = sch.get_loops(wb).map_err(at("split-K sum"))?;
    let Some((last, spatial)) = loops.split_last() else {
        return Ok(None);
    };
    if spatial.is_empty() {
        return Ok(None);
    }
    spread(space, sch, spatial, "split-K sum")?;
    sch.unroll(*last).map_err(at("split-K sum"))?;
    // The loop over a thread's elements, above the sum over the partial results.
    let loops = sch.get_loops(wb).map_err(at("split-K sum"))?;
    Ok(loops.len().checked_sub(2).map(|i| loops[i]))
}

/// Elements of a serial split-K sum's tile one thread sums before it stores any (the
/// largest of these dividing its count): their partial results are loaded together. One
/// at a time, each store (guarded where the tile is padded) waited for its loads, and the
/// c256 f16 conv's sum took 10 us more than its own kernel did (2026-12-01, H200).
const SERIAL_SUM_CHUNKS: [i64; 4] = [8, 4, 2, 1];

/// A serial split-K sum's tile spread over the threads of its block: its loops below the
/// grid's but the last (the splits, unrolled) fused and split by `threads` (outermost
/// first), each part bound to its tag; the part above them, a thread's elements, split
/// into chunks of [`SERIAL_SUM_CHUNKS`] that go innermost and unrolled. Returns the
/// innermost thread loop, where a thread's chunk of sums is complete.
fn spread_over_block(
    sch: &mut Schedule,
    sum: BlockRv,
    threads: Vec<(IntArg, String)>,
) -> Result<Option<LoopRv>, SketchError> {
    let loops = sch.get_loops(sum).map_err(at("split-K sum"))?;
    let [_, tile @ .., splits] = &loops[..] else {
        return Ok(None);
    };
    let splits = *splits;
    let mut complete = None;
    if !tile.is_empty() {
        let fused = fuse(sch, tile)?;
        let factors: Vec<Option<IntArg>> = std::iter::once(None)
            .chain(threads.iter().map(|(n, _)| Some(n.clone())))
            .collect();
        let parts = sch.split(fused, &factors).map_err(at("split-K sum"))?;
        for (part, (_, tag)) in parts[1..].iter().zip(&threads) {
            sch.bind(*part, tag).map_err(at("split-K sum"))?;
        }
        complete = parts.last().copied();
        let each = {
            let id = sch.loop_id(parts[0]).map_err(at("split-K sum"))?;
            sch.program().lp(id).extent
        };
        if let Some(&chunk) = SERIAL_SUM_CHUNKS.iter().find(|&&c| c > 1 && each % c == 0) {
            let halves = sch
                .split(parts[0], &[None, Some(IntArg::Lit(chunk))])
                .map_err(at("split-K sum"))?;
            let order: Vec<LoopRv> = std::iter::once(halves[0])
                .chain(parts[1..].iter().copied())
                .chain(std::iter::once(halves[1]))
                .collect();
            sch.reorder(&order).map_err(at("split-K sum"))?;
            sch.unroll(halves[1]).map_err(at("split-K sum"))?;
        }
    }
    sch.unroll(splits).map_err(at("split-K sum"))?;
    Ok(complete)
}

/// Fuses `loops` and spreads them over the device: on CUDA split over blocks of
/// [`STANDALONE_THREADS`] threads taking a sampled count of elements each
/// ([`STANDALONE_ELEMENTS`], the loop over them innermost and unrolled), on the CPU run in
/// parallel.
fn spread(
    space: &SearchSpace,
    sch: &mut Schedule,
    loops: &[LoopRv],
    rule: &'static str,
) -> Result<(), SketchError> {
    let fused = fuse(sch, loops)?;
    if space.is_gpu() {
        let elements = {
            let id = sch.loop_id(fused).map_err(at(rule))?;
            sch.program().lp(id).extent
        };
        // One count offered is no decision: the trace holds it as a literal.
        let each = match standalone_elements(elements, space.standalone_min_blocks)[..] {
            [one] => IntArg::Lit(one),
            ref counts => {
                let probs = vec![1.0 / counts.len() as f64; counts.len()];
                let rv = sch
                    .sample_categorical(counts, &probs, None)
                    .map_err(at(rule))?;
                IntArg::Rv(rv)
            }
        };
        let parts = sch
            .split(
                fused,
                &[None, Some(each), Some(IntArg::Lit(STANDALONE_THREADS))],
            )
            .map_err(at(rule))?;
        sch.reorder(&[parts[0], parts[2], parts[1]])
            .map_err(at(rule))?;
        sch.bind(parts[0], "blockIdx.x").map_err(at(rule))?;
        sch.bind(parts[2], &thread_tag(space)).map_err(at(rule))?;
        sch.unroll(parts[1]).map_err(at(rule))?;
    } else {
        sch.parallel(fused).map_err(at(rule))?;
    }
    Ok(())
}

/// The counts of [`STANDALONE_ELEMENTS`] a thread of a stage of `elements` spread over
/// the device may take: those that leave it at least `min_blocks` blocks of
/// [`STANDALONE_THREADS`], and one a thread always. A split-K sum of 25K outputs at eight
/// a thread ran in 32 blocks, 6.0 us where 256 blocks took 3.0 (an H200, 2026-12-01).
fn standalone_elements(elements: i64, min_blocks: i64) -> Vec<i64> {
    STANDALONE_ELEMENTS
        .iter()
        .copied()
        .filter(|&e| {
            let blocks = (elements.max(0) as u64).div_ceil((STANDALONE_THREADS * e) as u64);
            e == 1 || blocks >= min_blocks.max(1) as u64
        })
        .collect()
}

/// Tries for [`joint_spatial_tiles`] before it gives up and lets the postprocessors judge.
const JOINT_TRIES: usize = 512;

/// Spatial tile sizes per axis whose threadIdx level (product over the axes) lies within
/// the space's thread range, whose vthread level stays within its limit and whose
/// outputs a thread within a bound drawn from `threads.max_outputs_per_thread`; `None`s
/// (free sampling) on a CPU space or when no such draw was found. Uniform tiles of large
/// extents give a thread thousands of outputs, so the draws that fit pile up at the
/// bound, and a small bound is rarely met: where rejection finds no draw, the draws are
/// repaired by moving factors of a thread's levels out to the block level
/// ([`shrink_thread_tiles`]).
fn joint_spatial_tiles(
    space: &SearchSpace,
    axes: &[(i64, Option<Vec<i64>>)],
    n_s: usize,
    seed: u64,
) -> Vec<Option<Vec<i64>>> {
    use rand::SeedableRng;
    let level_of = |prefix: &str| {
        space
            .bindings
            .iter()
            .position(|b| matches!(b, Binding::Thread(t) if t.starts_with(prefix)))
    };
    let (Some(t_level), v_level) = (level_of("threadIdx"), level_of("vthread")) else {
        return vec![None; axes.len()];
    };
    let levels = ThreadLevels { t_level, v_level };
    let min_threads = space.min_threads(axes.iter().map(|(e, _)| *e).product());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let bounds = &space.max_outputs_per_thread;
    let max_per_thread = match bounds.as_slice() {
        [one] => *one,
        _ => bounds[rand::Rng::gen_range(&mut rng, 0..bounds.len())],
    };
    if space.warp_tile_share > 0.0 && rand::Rng::gen::<f64>(&mut rng) < space.warp_tile_share {
        let limits = WarpTileLimits {
            levels,
            n_s,
            threads: min_threads..=space.max_threads_per_block,
            max_vthreads: space.max_vthreads,
            max_outputs: max_per_thread,
        };
        if let Some(draw) = warp_tiles(&mut rng, space, axes, &limits) {
            return draw.into_iter().map(Some).collect();
        }
    }
    // Axes aligned to the digits of an implicit-GEMM fusion keep their tiles as drawn.
    let movable: Vec<bool> = axes.iter().map(|(_, d)| d.is_none()).collect();
    let repairable = t_level > 0 && v_level != Some(0);
    for repair in [false, true] {
        if repair && !repairable {
            break;
        }
        for _ in 0..JOINT_TRIES {
            let draw: Option<Vec<Vec<i64>>> = axes
                .iter()
                .enumerate()
                .map(|(i, (e, digits))| {
                    let max = space.max_innermost(i + 1 == axes.len());
                    if let Some(d) = digits {
                        return aligned_tile(&mut rng, d, n_s, max);
                    }
                    if pads(space, *e) {
                        sampling::sample_imperfect_tile(&mut rng, *e, n_s, max, space.max_waste)
                    } else {
                        sampling::sample_tile(&mut rng, *e, n_s, max)
                    }
                    .ok()
                })
                .collect();
            let Some(mut draw) = draw else {
                return vec![None; axes.len()];
            };
            if repair {
                shrink_thread_tiles(&mut rng, &mut draw, &movable, levels, max_per_thread);
            }
            let threads: i64 = draw.iter().map(|t| t[t_level]).product();
            if (min_threads..=space.max_threads_per_block).contains(&threads)
                && levels.vthreads(&draw) <= space.max_vthreads
                && levels.outputs(&draw) <= max_per_thread
            {
                return draw.into_iter().map(Some).collect();
            }
        }
    }
    vec![None; axes.len()]
}

/// Outputs a thread computes per piece along each of a warp tile's two axes: one 16-byte
/// vector of each operand's fragment a reduction step.
const WARP_PIECE: i64 = 4;

/// The fewest outputs a thread of a warp tile computes: two pieces, as cuBLAS's smallest
/// SIMT tiles (64 x 64 blocks of 128 threads) do.
const WARP_MIN_OUTPUTS: i64 = 2 * WARP_PIECE * WARP_PIECE;

/// What a warp-tile draw must respect: the joint draw's own limits.
struct WarpTileLimits {
    levels: ThreadLevels,
    n_s: usize,
    threads: std::ops::RangeInclusive<i64>,
    max_vthreads: i64,
    max_outputs: i64,
}

/// Spatial tiles of the structure CUTLASS's and cuBLAS's SIMT kernels share
/// (`tiling.warp_tile_share`): where exactly two spatial axes are longer than 1 (a GEMM,
/// a conv's GEMM view, a dense layer), a block of 64-256 threads of which at least 8
/// run along the columns, each thread computing `WARP_PIECE` x `WARP_PIECE` pieces, one
/// per virtual thread (at least two), so its outputs lie in pieces a thread row (column)
/// of the block apart, and blocks of 64-256 rows and columns that divide the axes. One
/// such shape at random among those that fit; `None` where none does (the joint draw
/// then goes on).
fn warp_tiles(
    rng: &mut rand_chacha::ChaCha8Rng,
    space: &SearchSpace,
    axes: &[(i64, Option<Vec<i64>>)],
    limits: &WarpTileLimits,
) -> Option<Vec<Vec<i64>>> {
    let ThreadLevels { t_level, v_level } = limits.levels;
    if t_level == 0 || v_level == Some(0) {
        return None;
    }
    let inner = limits.n_s.checked_sub(1).filter(|l| *l > t_level)?;
    let long: Vec<usize> = (0..axes.len()).filter(|a| axes[*a].0 > 1).collect();
    let &[rows, cols] = long.as_slice() else {
        return None;
    };
    if axes[rows].1.is_some() || axes[cols].1.is_some() {
        return None;
    }
    let fits_inner = |a: usize| space.max_innermost(a + 1 == axes.len()) >= WARP_PIECE;
    if !fits_inner(rows) || !fits_inner(cols) {
        return None;
    }
    let shapes = warp_shapes(axes[rows].0, axes[cols].0, v_level.is_some(), limits);
    if shapes.is_empty() {
        return None;
    }
    let shape = shapes[rand::Rng::gen_range(rng, 0..shapes.len())];
    let mut draw: Vec<Vec<i64>> = axes
        .iter()
        .map(|(e, _)| {
            let mut t = vec![1; limits.n_s];
            t[0] = *e;
            t
        })
        .collect();
    for (axis, (t, v)) in [rows, cols].into_iter().zip(shape) {
        let tiles = &mut draw[axis];
        tiles[t_level] = t;
        tiles[inner] = WARP_PIECE;
        if let Some(vl) = v_level {
            tiles[vl] = v;
        }
        tiles[0] /= t * v * WARP_PIECE;
    }
    Some(draw)
}

/// The warp-tile shapes that fit a `rows` x `cols` block's axes within `limits`: per axis
/// its threads and virtual threads (1 where the space has no vthread level).
fn warp_shapes(
    rows: i64,
    cols: i64,
    vthread_level: bool,
    limits: &WarpTileLimits,
) -> Vec<[(i64, i64); 2]> {
    let vthreads: &[i64] = if vthread_level { &[1, 2, 4] } else { &[1] };
    let block_fits = |extent: i64, tile: i64| (64..=256).contains(&tile) && extent % tile == 0;
    let mut shapes = Vec::new();
    for t_cols in [8, 16, 32] {
        for t_rows in [2, 4, 8, 16, 32] {
            let threads = t_rows * t_cols;
            if !(64..=256).contains(&threads) || !limits.threads.contains(&threads) {
                continue;
            }
            for &v_rows in vthreads {
                for &v_cols in vthreads {
                    let outputs = v_rows * v_cols * WARP_PIECE * WARP_PIECE;
                    if v_rows * v_cols <= limits.max_vthreads
                        && (WARP_MIN_OUTPUTS..=limits.max_outputs).contains(&outputs)
                        && block_fits(rows, v_rows * t_rows * WARP_PIECE)
                        && block_fits(cols, v_cols * t_cols * WARP_PIECE)
                    {
                        shapes.push([(t_rows, v_rows), (t_cols, v_cols)]);
                    }
                }
            }
        }
    }
    shapes
}

/// The tile levels bound to threadIdx and to vthread in a draw of spatial tiles.
#[derive(Clone, Copy)]
struct ThreadLevels {
    t_level: usize,
    v_level: Option<usize>,
}

impl ThreadLevels {
    /// Whether `level` is one a thread iterates itself: its vthread copies and the serial
    /// levels inside threadIdx.
    fn per_thread(self, level: usize) -> bool {
        level > self.t_level || Some(level) == self.v_level
    }

    fn vthreads(self, draw: &[Vec<i64>]) -> i64 {
        self.v_level
            .map_or(1, |v| draw.iter().map(|t| t[v]).product())
    }

    /// Outputs one thread accumulates: its vthread copies times the serial levels.
    fn outputs(self, draw: &[Vec<i64>]) -> i64 {
        draw.iter()
            .flat_map(|t| {
                t.iter()
                    .enumerate()
                    .filter(move |(l, _)| self.per_thread(*l))
                    .map(|(_, f)| *f)
            })
            .product()
    }
}

/// Moves prime factors of the levels a thread iterates, one at a time and at random
/// among the `movable` axes, out to each axis's outermost (block) level until the
/// thread's outputs are within `bound`: the axis's product (its extent, or its padded
/// extent) and the threads are unchanged, the block's tile shrinks.
fn shrink_thread_tiles(
    rng: &mut rand_chacha::ChaCha8Rng,
    draw: &mut [Vec<i64>],
    movable: &[bool],
    levels: ThreadLevels,
    bound: i64,
) {
    while levels.outputs(draw) > bound {
        let sites: Vec<(usize, usize)> = draw
            .iter()
            .enumerate()
            .filter(|(a, _)| movable[*a])
            .flat_map(|(a, t)| {
                (0..t.len())
                    .filter(move |l| levels.per_thread(*l) && t[*l] > 1)
                    .map(move |l| (a, l))
            })
            .collect();
        if sites.is_empty() {
            return;
        }
        let (a, l) = sites[rand::Rng::gen_range(rng, 0..sites.len())];
        let p = (2..=draw[a][l])
            .find(|d| draw[a][l] % d == 0)
            .unwrap_or(draw[a][l]);
        draw[a][l] /= p;
        draw[a][0] *= p;
    }
}

/// The loop the write-back `wb` goes to: the last loop of the last non-empty S level
/// before the first R level, or, where the space offers several (`cache_write.levels`),
/// the last loop of one of them by `sample_compute_location`, a decision of the trace.
/// `None` when no level has a loop.
fn write_back_location(
    space: &SearchSpace,
    sch: &mut Schedule,
    wb: BlockRv,
    levels: &[Vec<LoopRv>],
    first_r: usize,
) -> Result<Option<LoopRv>, SketchError> {
    let last_of = |l: usize| levels.get(l).and_then(|lv| lv.last().copied());
    let offered: Vec<LoopRv> = space
        .write_back_levels
        .iter()
        .filter_map(|l| last_of(*l))
        .collect();
    match location(sch, wb, &offered, "write-back location")? {
        Some(lp) => Ok(Some(lp)),
        None => Ok((0..first_r).rev().find_map(last_of)),
    }
}

/// The loop `block` goes to among `offered`: the only one, or one drawn by
/// `sample_compute_location` (a decision of the trace) where there are several; `None`
/// when none is offered.
fn location(
    sch: &mut Schedule,
    block: BlockRv,
    offered: &[LoopRv],
    rule: &'static str,
) -> Result<Option<LoopRv>, SketchError> {
    match offered {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => sch
            .sample_compute_location(block, many, None)
            .map(Some)
            .map_err(at(rule)),
    }
}

/// Samples `n` tile sizes of `lp`, the innermost at most `max` (with `hint`, checks and
/// uses those): `sample_tile` when the extent is padded ([`pads`]), `sample_perfect_tile`
/// otherwise.
fn sample_tiles(
    space: &SearchSpace,
    sch: &mut Schedule,
    lp: LoopRv,
    n: usize,
    max: i64,
    hint: Option<Vec<i64>>,
) -> Result<Vec<ExprRv>, SketchError> {
    let n = n as i64;
    let extent = {
        let id = sch.loop_id(lp).map_err(at("tiling"))?;
        sch.program().lp(id).extent
    };
    if pads(space, extent) {
        sch.sample_tile(lp, n, max, space.max_waste, hint)
            .map_err(at("sample_tile"))
    } else {
        sch.sample_perfect_tile(lp, n, max, hint)
            .map_err(at("sample_perfect_tile"))
    }
}

/// Whether an extent is tiled with padding (`sample_tile`): only where the space allows it
/// (`max_waste > 0`) and exact tiles would be thin, i.e. the extent's part made of small
/// primes (<= 13, the factors tile levels are built from) is below [`GOOD_DIVISOR`].
/// Padded tiles cost a guard in the innermost loops, so an extent with enough small
/// factors (1000 = 2^3 5^3, 768) keeps to exact tiles; a prime or 2 x 617 is padded.
fn pads(space: &SearchSpace, extent: i64) -> bool {
    space.max_waste > 0.0 && few_divisors(extent)
}

/// Whether exact tiles of an extent would be thin: over [`GOOD_DIVISOR`], its part made
/// of primes up to 13 under it (59, 2 x 661).
fn few_divisors(extent: i64) -> bool {
    extent > GOOD_DIVISOR && smooth_part(extent) < GOOD_DIVISOR
}

/// The product of the prime factors of `n` up to 13, with multiplicity.
fn smooth_part(mut n: i64) -> i64 {
    let mut part = 1;
    for p in [2, 3, 5, 7, 11, 13] {
        while n % p == 0 {
            n /= p;
            part *= p;
        }
    }
    part
}

/// The smallest exact factor worth tiling by (see [`pads`]).
const GOOD_DIVISOR: i64 = 16;

/// The thread tag of the threadIdx level.
fn thread_tag(space: &SearchSpace) -> String {
    space
        .bindings
        .iter()
        .find_map(|b| match b {
            Binding::Thread(t) if t.starts_with("threadIdx") => Some(t.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "threadIdx.x".to_string())
}

fn fuse(sch: &mut Schedule, loops: &[LoopRv]) -> Result<LoopRv, SketchError> {
    match loops {
        [one] => Ok(*one),
        many => sch.fuse(many).map_err(at("fuse")),
    }
}

/// The iteration kind each of `loops` carries for `block` (loops bound to no iteration
/// variable count as spatial).
fn loop_kinds(
    sch: &Schedule,
    block: crate::schedule::BlockRv,
    loops: &[LoopRv],
) -> Result<Vec<IterKind>, SketchError> {
    let p = sch.program();
    let b = sch.block_id(block).map_err(at("tiling"))?;
    let blk = p.block(b);
    loops
        .iter()
        .map(|lp| {
            let var = p.lp(sch.loop_id(*lp).map_err(at("tiling"))?).var;
            Ok(bound_iter_var(blk, var).map_or(IterKind::Spatial, |iv| iv.kind))
        })
        .collect()
}

/// The iteration variable of `blk` bound to the loop variable `var` alone (its binding is
/// `var`), if any.
fn bound_iter_var(blk: &crate::ir::Block, var: crate::ir::VarId) -> Option<&crate::ir::IterVar> {
    blk.iter_vars
        .iter()
        .zip(&blk.bindings)
        .find(|(_, e)| **e == Expr::Var(var))
        .map(|(iv, _)| iv)
}

/// Schedules a stage left at the root on its own: all loops fused; on CUDA split over
/// blocks of [`STANDALONE_THREADS`] threads, on the CPU run in parallel.
/// The stages before a tensor-core GEMM that compute values rather than only move them
/// (`math=3xtf32`'s remainders `x - tf32(x)` and the operands they join), run once as
/// kernels of their own instead of in every block's shared fetch, which then stays a
/// plain `cp.async` copy: a computing stage read only by other stages before the GEMM is
/// inlined into them, and each computing stage the GEMM reads is spread over threads as an
/// epilogue is. Zero-filled padding and concatenations of inputs only move data and are
/// left to the fetches. Returns the names of the kernels made.
fn prologue_kernels(
    space: &SearchSpace,
    sch: &mut Schedule,
    st: &Stages,
) -> Result<Vec<String>, SketchError> {
    let computes = |sch: &Schedule, name: &str| -> Option<(bool, bool)> {
        let p = sch.program();
        let [b] = p.find_block(name)[..] else {
            return None;
        };
        let blk = p.block(b);
        let before_main = p
            .readers(blk.body.buffer)
            .iter()
            .all(|r| st.padding.contains(&p.block(*r).name));
        Some((computes_values(&blk.body.value), before_main))
    };
    for name in &st.padding {
        if let Some((true, true)) = computes(sch, name) {
            let b = sch.get_block(name).map_err(at("prologue"))?;
            let _ = attempt(sch, |s| s.compute_inline(b));
        }
    }
    let mut kernels = Vec::new();
    for name in &st.padding {
        if let Some((true, false)) = computes(sch, name) {
            standalone(space, sch, name)?;
            kernels.push(name.clone());
        }
    }
    Ok(kernels)
}

/// The zero-filled copies `pad_einsum` made (the padding stages the program has now that
/// `before`, its stages before the padding, did not) of operands whose rows are no whole
/// 16-byte vectors (a 16-bit
/// extent not a multiple of 8, a 32-bit one not of 4) while the padded rows are.
/// Inlined into a GEMM's shared fetch, such a copy moves its operand element by element
/// (2-byte loads for an odd f16 reduction, guarded 4-byte `cp.async` for f32); as
/// kernels of their own they write the padded operands once, whose rows (whole
/// multiples of the padding) the fetch then reads in 16-byte `cp.async` copies, for the
/// price of a launch and a pass over the operand. Which of the two is a decision of the
/// trace, sampled only where such a copy exists (by the tensor-core sketches and the
/// plain and split-K ones on CUDA). Returns the kernels made.
fn unaligned_pad_kernels(
    space: &SearchSpace,
    sch: &mut Schedule,
    before: &Stages,
) -> Result<Vec<String>, SketchError> {
    let kernels = unaligned_pad_copies(sch, before)?;
    for name in &kernels {
        standalone(space, sch, name)?;
    }
    Ok(kernels)
}

/// The decision of [`unaligned_pad_kernels`] alone: the padding stages that run as
/// kernels of their own, left unscheduled (the plain and split-K sketches schedule them
/// once they know whether they store their operand transposed, [`transpose_kernels`]).
fn unaligned_pad_copies(sch: &mut Schedule, before: &Stages) -> Result<Vec<String>, SketchError> {
    let made = stages(sch.program())?.padding;
    let unaligned: Vec<String> = {
        let p = sch.program();
        made.into_iter()
            .filter(|name| !before.padding.contains(name))
            .filter(|name| {
                let [b] = p.find_block(name)[..] else {
                    return false;
                };
                let whole_vectors = |buf: crate::ir::BufferId| {
                    let buffer = p.buffer(buf);
                    let row = buffer.shape.last().copied().unwrap_or(1);
                    row * buffer.dtype.bytes() as i64 % 16 == 0
                };
                // Worth a kernel only where the padded rows are whole vectors.
                whole_vectors(p.block(b).body.buffer)
                    && p.block_reads(b).iter().any(|(buf, _)| !whole_vectors(*buf))
            })
            .collect()
    };
    if unaligned.is_empty() {
        return Ok(Vec::new());
    }
    if !coin(sch, "unaligned padding")? {
        return Ok(Vec::new());
    }
    Ok(unaligned)
}

/// Whether a stage's value does arithmetic on data (indices and conditions aside).
fn computes_values(e: &Expr) -> bool {
    match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) | Expr::Load(..) => false,
        Expr::Bin(..) | Expr::Un(..) => true,
        Expr::Select(_, t, f) => computes_values(t) || computes_values(f),
        Expr::Cast(_, x) => computes_values(x),
    }
}

/// A sketch of one reduction rule (cross-thread, lane reduction): the padding stages
/// inlined where they can be, the main block scheduled by `main_rule` (which returns the
/// epilogues it could not inline), then every other reduction and those epilogues on
/// their own.
fn reduction_sketch(
    space: &SearchSpace,
    sch: &mut Schedule,
    main_rule: impl FnOnce(
        &SearchSpace,
        &mut Schedule,
        &str,
        &[String],
    ) -> Result<Vec<String>, SketchError>,
) -> Result<(), SketchError> {
    let st = stages(sch.program())?;
    inline_padding(sch, &st, None)?;
    let leftovers = main_rule(space, sch, &st.main, &st.epilogues)?;
    for name in st.reductions.iter().chain(&leftovers) {
        standalone(space, sch, name)?;
    }
    Ok(())
}

/// Inlines each spatial stage before the main block (padding, a softmax's exponentials)
/// into its readers where it can be, but `keep`; one that cannot stays as it is.
fn inline_padding(sch: &mut Schedule, st: &Stages, keep: Option<&str>) -> Result<(), SketchError> {
    for name in st.padding.iter().filter(|n| Some(n.as_str()) != keep) {
        let b = sch.get_block(name).map_err(at("inline padding"))?;
        let _ = attempt(sch, |s| s.compute_inline(b));
    }
    Ok(())
}

/// The innermost of `block`'s loops that carries a reduction variable, if any.
fn last_reduction_loop(
    sch: &mut Schedule,
    block: crate::schedule::BlockRv,
) -> Result<Option<LoopRv>, SketchError> {
    let loops = sch.get_loops(block).map_err(at("tiling"))?;
    let kinds = loop_kinds(sch, block, &loops)?;
    Ok(kinds
        .iter()
        .rposition(|k| *k == IterKind::Reduce)
        .map(|i| loops[i]))
}

/// The loop `block`'s lanes split: its last reduction loop, or its last reduction loops
/// that read its largest input contiguously ([`cross_thread::contiguous_reduction_run`]),
/// fused into one (which `rfactor` then factors as one reduction variable). `None` where
/// it reduces nothing.
fn lane_reduction_loop(sch: &mut Schedule, block: BlockRv) -> Result<Option<LoopRv>, SketchError> {
    let run = {
        let p = sch.program();
        let id = sch.block_id(block).map_err(at("tiling"))?;
        cross_thread::contiguous_reduction_run(p, id)
    };
    let loops = sch.get_loops(block).map_err(at("tiling"))?;
    let kinds = loop_kinds(sch, block, &loops)?;
    let trailing = kinds
        .iter()
        .rev()
        .take_while(|k| **k == IterKind::Reduce)
        .count();
    if run < 2 || trailing < run {
        return last_reduction_loop(sch, block);
    }
    let fused = sch
        .fuse(&loops[loops.len() - run..])
        .map_err(at("tiling"))?;
    Ok(Some(fused))
}

/// Splits `block`'s last reduction axis (or its contiguous run: [`lane_reduction_loop`])
/// into parts of `inner` steps and factors the inner
/// part into partial results (axis `factor_axis` of the rf block's output), written to a
/// buffer of `scope` that replaces the rf block's global one: returns the rf block, which
/// `block` (now the sum of the partial results) reads. What the reduction rules share
/// (cross-thread: a lane count into shared memory; lane reduction: the vector width into
/// a local buffer); `missing` is the error where `block` reduces nothing.
fn factor_last_reduction(
    sch: &mut Schedule,
    block: BlockRv,
    inner: IntArg,
    factor_axis: i64,
    scope: &str,
    rule: &'static str,
    missing: SketchError,
) -> Result<BlockRv, SketchError> {
    let last_r = lane_reduction_loop(sch, block)?.ok_or(missing)?;
    let k = sch.split(last_r, &[None, Some(inner)]).map_err(at(rule))?;
    let rf = sch.rfactor(k[1], factor_axis).map_err(at(rule))?;
    let cache = sch.cache_write(rf, 0, scope).map_err(at(rule))?;
    sch.compute_inline(cache).map_err(at(rule))?;
    Ok(rf)
}

fn standalone(space: &SearchSpace, sch: &mut Schedule, name: &str) -> Result<(), SketchError> {
    let b = sch.get_block(name).map_err(at("epilogue"))?;
    // A reduction a rule of its own applies to (a softmax's row maximum over a long row)
    // is, at a coin's choice recorded in the trace, read by GPU threads side by side, or on
    // the CPU a vector at a time into vector accumulators (it was a serial `fmaxf` an
    // element).
    type Offered = fn(&SearchSpace, &Program, crate::ir::BlockId) -> bool;
    type Rule =
        fn(&SearchSpace, &mut Schedule, &str, &[String]) -> Result<Vec<String>, SketchError>;
    let rules: [(Offered, &'static str, Rule); 2] = [
        (
            cross_thread::applies,
            "cross-thread reduction",
            cross_thread::across_threads,
        ),
        (
            lane_reduction::applies,
            "lane reduction",
            lane_reduction::across_lanes,
        ),
    ];
    for (offered, rule, build) in rules {
        let applies = {
            let p = sch.program();
            let id = sch.block_id(b).map_err(at("epilogue"))?;
            p.block(id).is_reduction() && offered(space, p, id)
        };
        if applies && coin(sch, rule)? {
            build(space, sch, name, &[])?;
            return Ok(());
        }
    }
    let loops = sch.get_loops(b).map_err(at("epilogue"))?;
    // A reduction (one before the main nest) keeps its reduction loops serial in each
    // thread: only the spatial loops outside them are spread.
    let kinds = loop_kinds(sch, b, &loops)?;
    let spatial = kinds
        .iter()
        .take_while(|k| **k == IterKind::Spatial)
        .count();
    if spatial == 0 {
        return Ok(());
    }
    // On the CPU a stage of spatial loops alone keeps its innermost loop (a row of a
    // padded copy) out of the parallel fusion, vectorized: fused, every element paid the
    // division and remainder of its indices (a conv's padded copy of c64 56x56 took about
    // a third of the call).
    if let ([outer @ .., row], false) = (&loops[..], space.is_gpu()) {
        if spatial == loops.len() && !outer.is_empty() {
            spread(space, sch, outer, "epilogue")?;
            return sch.vectorize(*row).map_err(at("epilogue"));
        }
    }
    spread(space, sch, &loops[..spatial], "epilogue")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample of `kind` for `seed`, checked against the unscheduled program in the
    /// interpreter, and its printed trace.
    fn checked_sample(
        space: &SearchSpace,
        p: &Program,
        seed: u64,
        kind: SketchKind,
    ) -> (Schedule, String) {
        let mut sch = Schedule::new(p.clone(), seed);
        apply_sketch(space, &mut sch, seed, kind).unwrap();
        crate::interp::check(p, sch.program(), seed)
            .unwrap_or_else(|e| panic!("{kind:?} seed {seed}: {e}"));
        let trace = crate::schedule::text::print(sch.trace());
        (sch, trace)
    }

    /// `tiling.max_innermost_fastest` bounds the innermost tile of the last spatial axis
    /// (the one whose threads are adjacent in `threadIdx.x`) and of no other; by default it
    /// is `max_innermost_factor` and sampling is as before.
    #[test]
    fn the_fastest_axis_innermost_tile_keeps_within_its_own_bound() {
        let p = crate::workload::preset("matmul:1024x1024x1024")
            .unwrap()
            .to_program();
        let innermost = |space: &SearchSpace| -> Vec<(i64, i64)> {
            (0..32)
                .map(|seed| {
                    let mut sch = Schedule::new(p.clone(), seed);
                    apply_sketch(space, &mut sch, seed, SketchKind::Plain).unwrap();
                    let tiles: Vec<Vec<i64>> = sch
                        .trace()
                        .insts
                        .iter()
                        .filter_map(|i| match &i.decision {
                            Some(crate::schedule::Decision::Tile(t)) if t.len() == 5 => {
                                Some(t.clone())
                            }
                            _ => None,
                        })
                        .collect();
                    assert_eq!(tiles.len(), 2, "seed {seed}");
                    (tiles[0][4], tiles[1][4])
                })
                .collect()
        };
        let default = SearchSpace::cuda_default();
        assert_eq!(default.max_innermost_fastest, default.max_innermost_factor);
        let before = innermost(&default);
        assert!(before.iter().any(|(_, n)| *n > 4), "{before:?}");
        let text = super::super::space::CUDA_DEFAULT
            .replace("max_innermost_fastest = 16", "max_innermost_fastest = 4");
        let capped = SearchSpace::parse(&text, "t.toml").unwrap();
        assert_eq!(capped.max_innermost_fastest, 4);
        let after = innermost(&capped);
        assert!(after.iter().all(|(_, n)| *n <= 4), "{after:?}");
        assert!(after.iter().any(|(m, _)| *m > 4), "{after:?}");
        let bad = super::super::space::CUDA_DEFAULT
            .replace("max_innermost_fastest = 16", "max_innermost_fastest = 0");
        let e = SearchSpace::parse(&bad, "t.toml").unwrap_err().to_string();
        assert!(e.contains("tiling.max_innermost_fastest"), "{e}");
    }

    /// `cache_read.aligned_rows` (off by default): a GEMM operand stored reduction first
    /// has its rows padded to 16 bytes past the banks in some samples and to one element
    /// in others, each computing the reference; without it always to one element (a
    /// GEMM's fetch never walks its operand's rows, so `walk_aligned` pads none).
    #[test]
    fn reduction_major_rows_are_padded_one_element_or_16_bytes() {
        let p = crate::workload::preset("matmul:m=48,n=40,k=24,layout=nt")
            .unwrap()
            .to_program();
        let offsets = |space: &SearchSpace| {
            let mut seen = [0; 2];
            for seed in 0..24 {
                let (_, trace) = checked_sample(space, &p, seed, SketchKind::Plain);
                seen[0] += trace.matches("factor=32, offset=1)").count();
                seen[1] += trace.matches("factor=32, offset=4)").count();
            }
            seen
        };
        let mut space = SearchSpace::cuda_default();
        assert!(!space.aligned_rows && space.walk_aligned);
        let [odd, aligned] = offsets(&space);
        assert!(odd >= 1 && aligned == 0, "{odd} {aligned}");
        space.aligned_rows = true;
        let [odd, aligned] = offsets(&space);
        assert!(odd >= 1 && aligned >= 1, "{odd} {aligned}");
    }

    /// With `cache_read.aligned_rows`, a copy whose rows are padded to 16 bytes is fetched
    /// 8 rows by 4 columns a warp where its tile has a multiple of 8 rows ([`chunk_rows`]):
    /// its stores fall on 32 distinct banks (walked down one column, rows a multiple of 4
    /// words past the banks apart would put them 4 to a bank), and the samples compute the
    /// reference.
    #[test]
    fn a_copy_with_16_byte_rows_is_fetched_eight_rows_at_a_time() {
        let p = crate::workload::preset("matmul:m=64,n=48,k=64")
            .unwrap()
            .to_program();
        let mut space = SearchSpace::cuda_default();
        space.aligned_rows = true;
        let mut chunked = 0;
        for seed in 0..64 {
            let (sch, trace) = checked_sample(&space, &p, seed, SketchKind::Plain);
            if !(trace.contains("offset=4)") && trace.contains("factors=[None, 8])")) {
                continue;
            }
            let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda).unwrap();
            let ways = crate::cost_model::features::shared_store_bank_ways(&lowered, "A_shared");
            assert!(
                !ways.is_empty() && ways.iter().all(|w| *w == 1.0),
                "{ways:?}\n{trace}"
            );
            chunked += 1;
        }
        assert!(chunked >= 2, "{chunked} samples with 16-byte rows");
    }

    /// `unroll.tile_steps` (on by default): the loop over a staged tile's reduction steps
    /// (`k_1`) carries the sample's auto-unroll annotation and is lowered unrolled exactly
    /// where its extent is at most the value drawn; without it, it carries none.
    #[test]
    fn a_staged_tiles_steps_are_unrolled_with_tile_steps() {
        let p = crate::workload::preset("matmul:32x24x128")
            .unwrap()
            .to_program();
        // Per sample whose `k_1` is longer than 1: None (no annotation), or whether it was
        // lowered unrolled.
        let steps = |space: &SearchSpace| -> Vec<Option<bool>> {
            (0..16)
                .filter_map(|seed| {
                    let (sch, _) = checked_sample(space, &p, seed, SketchKind::Plain);
                    let prog = sch.program();
                    let lp = prog.loops.iter().find(|l| prog.var_name(l.var) == "k_1")?;
                    if lp.extent <= 1 {
                        return None;
                    }
                    let lowered = crate::lower::lower(prog, crate::lower::Backend::Cuda).unwrap();
                    Some(crate::lower::auto_unrolled(prog, &lowered, "k_1"))
                })
                .collect()
        };
        let mut space = SearchSpace::cuda_default();
        assert!(space.unroll_tile_steps);
        let annotated = steps(&space);
        assert!(
            annotated.contains(&Some(true)) && annotated.iter().all(|s| s.is_some()),
            "{annotated:?}"
        );
        space.unroll_tile_steps = false;
        let rolled = steps(&space);
        assert!(
            !rolled.is_empty() && rolled.iter().all(|s| s.is_none()),
            "{rolled:?}"
        );
    }

    #[test]
    fn only_extents_without_a_good_divisor_are_padded() {
        let space = SearchSpace::cuda_default();
        assert!(space.max_waste > 0.0);
        // Exact tiles exist: 1000 = 8 x 125 (20, 25, 40, ... divide it), 768, 64.
        for e in [1000, 768, 3072, 64, 48, 16, 7] {
            assert!(!pads(&space, e), "{e}");
        }
        // Primes and near-primes above 16.
        for e in [17, 311, 523, 1009, 1234, 4093, 2 * 3 * 617] {
            assert!(pads(&space, e), "{e}");
        }
        // A space without padding pads nothing.
        let mut exact = space.clone();
        exact.max_waste = 0.0;
        assert!(!pads(&exact, 1009));
    }

    /// Samples of `text` on both targets' spaces compute the reference (interpreter), and
    /// on CUDA every one lowers to kernels whose root nests are bound to the device.
    /// A softmax over `rows` rows of `row` elements as workload text: a row maximum (a
    /// reduction before the main one), exp, the row sum (the main block), the division.
    pub(super) fn softmax(rows: i64, row: i64) -> String {
        format!(
            "workload softmax\ninput X: f32[{rows}, {row}]\n\
             M[i] = max_reduce(X[i, k], k: {row})\n\
             E[i, j] = exp(X[i, j] - M[i])\n\
             S[i] = sum(E[i, k], k: {row})\n\
             Y[i, j] = E[i, j] / S[i]\n"
        )
    }

    fn samples_compute_the_reference(text: &str) {
        let p = crate::workload::parse(text).unwrap().to_program();
        for space in [SearchSpace::cuda_default(), SearchSpace::cpu_default()] {
            let kinds = sketches(&space, &p).unwrap();
            for seed in 0..6 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, kinds[0])
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                crate::interp::check(&p, sch.program(), seed)
                    .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                if space.is_gpu() {
                    crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                }
            }
        }
    }

    /// A program without a reduction (an elementwise chain, a transpose) is a space of its
    /// own: its stages inlined where they can be and spread over the device. The tuner
    /// refused it ("the workload has no reduction block to tile").
    #[test]
    fn a_program_without_a_reduction_is_spread_over_the_device() {
        samples_compute_the_reference(
            "workload bias_relu\ninput A: f32[37, 53]\ninput B: f32[53]\n\
             T[i, j] = A[i, j] + B[j]\nY[i, j] = relu(T[i, j])\n",
        );
        samples_compute_the_reference(
            "workload transpose\ninput A: f32[29, 31]\nY[j, i] = A[i, j]\n",
        );
    }

    /// A reduction before the main one (a softmax's row maximum before its row sum) is
    /// computed by a nest of its own spread over the device; on CUDA it was left unbound
    /// and every sample failed to lower.
    #[test]
    fn a_reduction_before_the_main_one_gets_a_nest_of_its_own() {
        // The row sum has one spatial axis, so its fetch splits by a product of one
        // thread factor: the trace must read back from its JSON (the database's form).
        let p = crate::workload::parse(&softmax(12, 40))
            .unwrap()
            .to_program();
        for seed in 0..4 {
            let mut sch = Schedule::new(p.clone(), seed);
            apply_sketch(
                &SearchSpace::cuda_default(),
                &mut sch,
                seed,
                SketchKind::Plain,
            )
            .unwrap();
            let json = crate::schedule::json::to_json(sch.trace());
            let read = crate::schedule::json::from_json(&json)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{json}"));
            assert_eq!(&read, sch.trace());
        }
        samples_compute_the_reference(&softmax(12, 40));
    }

    #[test]
    fn unaligned_f32_operands_are_padded_in_the_fetch_or_by_kernels_of_their_own() {
        // k = 37 and n = 53 (primes) leave A's rows 148 bytes and B's 212: no 16-byte
        // vectors, while their padded rows (48, 64) are. The plain and split-K sketches
        // either zero-fill them in the shared fetch (guarded on 37) or (a decision) pad
        // them once by a kernel of their own, whose padded rows the fetch reads unguarded.
        // (A transposed by a kernel of its own reads the padding there: not this decision.)
        let mut space = SearchSpace::cuda_default();
        space.transpose_kernels = false;
        let spec = "matmul:m=64,n=53,k=37";
        let p = crate::workload::preset(spec).unwrap().to_program();
        let a = p.buffer(p.params[0]).name.clone();
        for kind in [SketchKind::Plain, SketchKind::SplitK] {
            let mut seen = [false; 2];
            for seed in 0..24 {
                let (sch, _) = checked_sample(&space, &p, seed, kind);
                // A sampled vector length the fetched tile does not align is refused
                // at lowering (the postprocessors drop such candidates).
                let Ok(lowered) = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                else {
                    continue;
                };
                let code = crate::codegen::cuda::generate(&lowered).unwrap().code;
                let own = code.contains(&format!("// block {a}_pad\n"));
                let shared = format!("{a}_pad_shared");
                let fetch: Vec<&str> = code
                    .lines()
                    .filter(|l| {
                        l.contains(&format!("{shared}[")) || l.contains(&format!("({shared} +"))
                    })
                    .collect();
                assert!(!fetch.is_empty(), "{kind:?} seed {seed}:\n{code}");
                let guarded = fetch.iter().any(|l| l.contains("< 37"));
                assert_eq!(guarded, !own, "{kind:?} seed {seed}:\n{code}");
                seen[usize::from(own)] = true;
            }
            assert_eq!(seen, [true, true], "{kind:?}");
        }
        // Aligned operands (k = 40, n = 56, both padded to 64 at most) get no decision.
        let aligned = crate::workload::preset("matmul:m=64,n=56,k=40")
            .unwrap()
            .to_program();
        for seed in 0..6 {
            let mut sch = Schedule::new(aligned.clone(), seed);
            apply_sketch(&space, &mut sch, seed, SketchKind::Plain).unwrap();
            let trace = crate::schedule::text::print(sch.trace());
            assert!(trace.contains("pad_einsum"), "{trace}");
            let blocks = sch.program().blocks_in_order();
            assert!(
                blocks
                    .iter()
                    .all(|b| !sch.program().block(*b).name.ends_with("_pad")),
                "{trace}"
            );
        }
    }

    #[test]
    fn operands_the_fetch_would_transpose_may_be_transposed_by_kernels_of_their_own() {
        // An NT GEMM reads both operands along the reduction (A[m, k], B[n, k]); k = 37
        // pads them. Either the fetch transposes them (4-byte copies into a padded,
        // reduction-major shared tile) or, a decision, kernels of their own store them
        // reduction first (copies with the padding inlined into them, or the padding
        // kernels themselves) and the fetch copies those as stored. All compute the
        // reference and lower; the trace records the choice.
        // (The split-K sketch's partial GEMMs read k through the split: not transposed.)
        let space = SearchSpace::cuda_default();
        assert!(space.transpose_kernels);
        let p = crate::workload::preset("matmul:m=72,n=53,k=37,layout=nt")
            .unwrap()
            .to_program();
        // Where the padding runs as kernels of their own (`unaligned_pad_kernels`), those
        // kernels store the operands reduction first instead of copies
        // (`cache_read.transpose_padding_kernels`; off: the fetch transposes them).
        let padding_too = SearchSpace {
            transpose_padding_kernels: true,
            ..space.clone()
        };
        let mut seen = [false; 3];
        for seed in 0..32 {
            let sampled_in = if seed < 16 { &space } else { &padding_too };
            let (sch, trace) = checked_sample(sampled_in, &p, seed, SketchKind::Plain);
            let copies = trace.matches("scope=\"global\")").count();
            let padding_stored = trace
                .lines()
                .filter(|l| l.contains("get_block(\"") && l.contains("_pad\")"))
                .filter_map(|l| l.split(" = ").next())
                .filter(|b| trace.contains(&format!("transform_layout({b},")))
                .count();
            let own = copies + padding_stored > 0;
            assert!(
                [0, 2].contains(&(copies + padding_stored)) && copies * padding_stored == 0,
                "seed {seed}:\n{trace}"
            );
            assert!(seed >= 16 || padding_stored == 0, "seed {seed}:\n{trace}");
            seen[usize::from(copies > 0) + 2 * usize::from(padding_stored > 0)] = true;
            let Ok(lowered) = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
            else {
                continue;
            };
            let code = crate::codegen::cuda::generate(&lowered).unwrap().code;
            // With the kernels, no shared tile is stored reduction-major by the
            // fetch: the copies' buffers already are.
            let kernels = code.matches("__global__").count();
            assert!(!own || kernels >= 2, "seed {seed}:\n{code}");
            let shared_copies: Vec<&str> = trace
                .lines()
                .filter(|l| l.contains("scope=\"shared\")"))
                .filter_map(|l| l.split(" = ").next())
                .collect();
            let transposed = shared_copies
                .iter()
                .filter(|b| trace.contains(&format!("transform_layout({b},")))
                .count();
            assert_eq!(transposed, if own { 0 } else { 2 }, "seed {seed}:\n{trace}");
            // The replayed trace builds the same program.
            let again = crate::schedule::replay(sch.trace(), p.clone(), seed).unwrap();
            assert_eq!(again.program(), sch.program(), "seed {seed}");
        }
        assert_eq!(seen, [true, true, true], "plain sketch");
        // A TN GEMM reads both operands stored reduction first, and a GEMV of a weight
        // stored [n, k] reads each of its elements once: no decision, no copies (the
        // GEMV's fetch still stores its weight reduction-major).
        for spec in [
            "matmul:m=64,n=56,k=40,layout=tn",
            "matmul:m=1,n=96,k=72,layout=nt",
        ] {
            let p = crate::workload::preset(spec).unwrap().to_program();
            for seed in 0..8 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(&space, &mut sch, seed, SketchKind::Plain).unwrap();
                let trace = crate::schedule::text::print(sch.trace());
                assert!(
                    !trace.contains("scope=\"global\""),
                    "{spec}, seed {seed}:\n{trace}"
                );
                // The GEMV's weight is one the fetch transposes: only its reuse kept the
                // kernels from it.
                let gemv = spec.contains("m=1,");
                assert_eq!(
                    trace.contains("transform_layout("),
                    gemv,
                    "{spec}, seed {seed}:\n{trace}"
                );
            }
        }
    }

    #[test]
    fn an_nchw_conv_may_read_its_data_stored_channels_last() {
        // An NCHW conv of stride 2 through a 3x3 window: its fetch would read a row's
        // pixels two apart. A decision stores the padded data `[n, h, w, c]` by a kernel
        // of its own (the padding zero-filled there, not in the fetch); both choices
        // compute the reference, lower and replay.
        let space = SearchSpace::cuda_default();
        assert!(space.channels_last_kernels);
        let spec = "conv2d_nchw:n=2,c=6,h=9,w=9,k=8,r=3,s=3,stride=2,pad=1";
        let p = crate::workload::preset(spec).unwrap().to_program();
        let stored = "permutation=[0, 2, 3, 1]";
        let mut seen = [false; 2];
        for seed in 0..16 {
            let (sch, trace) = checked_sample(&space, &p, seed, SketchKind::Plain);
            let own = trace.contains(stored);
            seen[usize::from(own)] = true;
            // The padding block is the stage: its buffer holds the padded image, channel
            // last, and no fetch zero-fills it again.
            let q = sch.program();
            let staged = q
                .blocks_in_order()
                .into_iter()
                .any(|b| q.buffer(q.block(b).body.buffer).shape == [2, 11, 11, 6]);
            assert_eq!(staged, own, "seed {seed}:\n{trace}");
            let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{trace}"));
            let code = crate::codegen::cuda::generate(&lowered).unwrap().code;
            assert!(
                !own || code.matches("__global__").count() >= 2,
                "seed {seed}:\n{code}"
            );
            let again = crate::schedule::replay(sch.trace(), p.clone(), seed).unwrap();
            assert_eq!(again.program(), sch.program(), "seed {seed}");
        }
        assert_eq!(seen, [true, true]);
        // Data already channels last (NHWC), a 1x1 conv of stride 1 reading its pixels as
        // the output stores them, or a space without the option: no decision.
        let off = SearchSpace {
            channels_last_kernels: false,
            ..space.clone()
        };
        for (spec, space) in [
            (
                "conv2d_nhwc:n=2,c=6,h=9,w=9,k=8,r=3,s=3,stride=2,pad=1",
                &space,
            ),
            (
                "conv2d_nchw:n=2,c=6,h=9,w=9,k=8,r=1,s=1,stride=1,pad=0",
                &space,
            ),
            (spec, &off),
        ] {
            let p = crate::workload::preset(spec).unwrap().to_program();
            for seed in 0..8 {
                let mut sch = Schedule::new(p.clone(), seed);
                apply_sketch(space, &mut sch, seed, SketchKind::Plain).unwrap();
                let trace = crate::schedule::text::print(sch.trace());
                assert!(!trace.contains(stored), "{spec}, seed {seed}:\n{trace}");
            }
        }
    }
}
