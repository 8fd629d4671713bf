//! The search-space files (`search_spaces/cuda.toml`, `search_spaces/cpu.toml`): the sketch
//! rules' parameters as data, parsed into typed structs.
//!
//! The defaults are embedded in the binary; a user may pass another file. A malformed file
//! is a [`SpaceError`] naming the key (TOML syntax errors and unknown or missing keys come
//! from the `toml` crate with their line; the semantic checks below name the dotted key).

use serde::Deserialize;
use thiserror::Error;

/// The embedded CUDA space.
pub const CUDA_DEFAULT: &str = include_str!("../../search_spaces/cuda.toml");
/// The embedded CPU space.
pub const CPU_DEFAULT: &str = include_str!("../../search_spaces/cpu.toml");

/// Why a search-space file was refused.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SpaceError {
    /// Not TOML, or a key missing, unknown or of the wrong type.
    #[error("{origin}: {message}")]
    Toml { origin: String, message: String },
    /// A key whose value makes no sense.
    #[error("{origin}: key `{key}`: {reason}")]
    Invalid {
        origin: String,
        key: &'static str,
        reason: String,
    },
}

/// One tile level of the main block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Level {
    /// Tiles every spatial axis.
    Spatial,
    /// Tiles every reduction axis.
    Reduce,
}

/// What the fused loops of one leading S level become.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// A CUDA thread tag (`blockIdx.x`, `vthread.x`, `threadIdx.x`, ...).
    Thread(String),
    /// CPU threads (OpenMP).
    Parallel,
}

/// A whole search space.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchSpace {
    /// Tile levels, outermost first (parsed from `tiling.structure`).
    pub levels: Vec<Level>,
    /// What the first `bindings.len()` S levels are bound to.
    pub bindings: Vec<Binding>,
    pub max_innermost_factor: i64,
    /// The largest innermost factor of the last spatial axis, the one whose threads are
    /// adjacent in `threadIdx.x` (`tiling.max_innermost_fastest`; at most
    /// `max_innermost_factor`, which it defaults to).
    pub max_innermost_fastest: i64,
    /// The share of a tiled loop's padded iterations that may fall outside its extent
    /// (`tiling.max_waste`; 0: only tile sizes that divide the extent).
    pub max_waste: f64,
    /// Einsums (GEMMs) get their iteration variables padded to one of these multiples
    /// (`tiling.pad_multiples`, a decision per axis, waste bounded by `max_waste`) so
    /// that tiles divide the padded extents; empty: never.
    pub pad_multiples: Vec<i64>,
    /// Whether a convolution's batch and channel axes are padded too
    /// (`tiling.pad_convolutions`; its window axes never are).
    pub pad_convolutions: bool,
    /// Whether a sample's padding multiples are lowered to the smallest its tiles need
    /// (`tiling.tight_padding`, `crate::search::padding`).
    pub tight_padding: bool,
    /// The probability that a sample fuses the spatial axes that the same inputs read (a
    /// conv's n, p, q) into one before tiling (`tiling.implicit_gemm`; 0: never).
    pub implicit_gemm: f64,
    /// The share of implicit-GEMM samples that fuse only the window axes (a conv's p, q),
    /// tiled freely, with the accumulator indexed by the fused axis
    /// (`tiling.implicit_gemm_rows`; the rest fuse n, p, q with aligned tiles).
    pub implicit_gemm_rows: f64,
    /// The probability that a GPU sample of a pointwise (1x1) convolution tiles it as its
    /// GEMM (`im2col` first; `tiling.gemm_view`), and of a convolution with a window
    /// (`tiling.gemm_view_windowed`); 0: never.
    pub gemm_view: f64,
    pub gemm_view_windowed: f64,
    /// CUDA: the probability that a sample whose main block has two spatial axes longer
    /// than 1 draws their tiles in the warp-tile structure of cuBLAS's SIMT kernels
    /// (`tiling.warp_tile_share`, `crate::search::sketch`); 0: never.
    pub warp_tile_share: f64,
    pub min_threads_per_block: i64,
    pub max_threads_per_block: i64,
    pub max_vthreads: i64,
    /// CUDA: the blocks a multiprocessor should hold at once, one of which a sample of
    /// the plain and split-K sketches asks of its main kernel (a decision; the register
    /// cap it implies is `__launch_bounds__`'s); `threads.min_blocks_per_sm`, empty: no
    /// decision, no cap.
    pub min_blocks_per_sm: Vec<i64>,
    /// CUDA: the most outputs one thread accumulates in registers, a bound on the joint
    /// draw of the spatial tiles; each sample draws one of these
    /// (`threads.max_outputs_per_thread`, default `[128]`).
    pub max_outputs_per_thread: Vec<i64>,
    /// CUDA: the fewest blocks a stage spread over the device on its own (a split-K sum,
    /// an epilogue left outside the main nest) is given: a count of elements a thread that
    /// leaves fewer is not offered, one element a thread always is
    /// (`threads.standalone_min_blocks`, default 1: every count offered).
    pub standalone_min_blocks: i64,
    /// `Some(scope)` when inputs are staged (and cooperatively fetched on CUDA).
    pub cache_read: Option<String>,
    pub fetch_vector_lengths: Vec<i64>,
    /// GEMM operands whose last axis is a reduction are stored reduction axes first in
    /// the cache (`cache_read.reduction_major`).
    pub reduction_major: bool,
    /// The fetch of a reduction-major operand is offered `fetch_vector_lengths` too (one
    /// vector load, a store per lane; `cache_read.vector_transposed`), else only 1.
    pub vector_transposed: bool,
    /// A coin per reduction-major copy pads its rows to 16 bytes past the shared-memory
    /// banks instead of one element, so that a thread reads neighbouring elements of a row
    /// as one vector (`cache_read.aligned_rows`, CUDA).
    pub aligned_rows: bool,
    /// The fetch of a reduction-major operand whose source stores another axis
    /// contiguously (an NCHW conv's gathered data) walks that axis fastest
    /// (`cache_read.walk_contiguous`, CUDA only).
    pub walk_contiguous: bool,
    /// The rows of such a walked copy are padded to 16 bytes past the shared-memory banks
    /// instead of one element (`cache_read.walk_aligned`, CUDA).
    pub walk_aligned: bool,
    /// The `pragma_auto_unroll_max_step` candidates (a decision) of such a walked fetch's
    /// loop over its steps, unrolled where its extent is at most the value drawn; empty:
    /// no decision, the loop as the compiler leaves it (`cache_read.walk_unroll`).
    pub walk_unroll: Vec<i64>,
    /// A reduction-major operand read more than once (and, in the wgmma sketch, a TF32
    /// operand whose k is not its last axis) may instead be transposed once by a kernel of
    /// its own (a decision of the trace), after which the fetch copies it as stored
    /// (`cache_read.transpose_kernels`, CUDA only).
    pub transpose_kernels: bool,
    /// Where a padding kernel of its own writes such an operand (`unaligned_pad_kernels`
    /// in `sketch.rs`), that kernel may store it transposed instead, under the same
    /// decision (`cache_read.transpose_padding_kernels`, CUDA only); without it the
    /// operand is left to the fetch to transpose.
    pub transpose_padding_kernels: bool,
    /// A convolution whose data are read with the channel before the pixels (NCHW) and
    /// through a window or a stride may have them stored channels last once, by a kernel
    /// of its own (a decision of the trace), so that the fetch reads runs of channels
    /// (`cache_read.channels_last_kernels`, CUDA only).
    pub channels_last_kernels: bool,
    /// `Some(scope)` when the output is accumulated in a cache.
    pub cache_write: Option<String>,
    /// The levels (indices into `levels`, S levels before the first R level) at whose
    /// last loop the cache's write-back may be placed (`cache_write.levels`); more than
    /// one makes the placement a decision (`sample_compute_location`). Empty: the last S
    /// level before the first R level.
    pub write_back_levels: Vec<usize>,
    pub unroll_max_steps: Vec<i64>,
    /// The auto-unroll annotation also on the loops of the level after the first
    /// reduction level: on CUDA the loop over the reduction steps of a staged tile, between
    /// two fetches (`unroll.tile_steps`).
    pub unroll_tile_steps: bool,
    pub inline_padding: bool,
    pub inline_epilogue: bool,
    /// The innermost spatial loop is vectorized when at most this long (0: never).
    pub max_vector_extent: i64,
    pub max_spill_bytes: u32,
    /// After NVRTC: the largest stack frame a kernel may have (`None`: unchecked).
    pub max_stack_bytes: Option<u32>,
    /// CPU: the most bytes of local arrays (accumulators, packed panels) a kernel may
    /// declare, which live on a thread's stack (`postprocess.max_local_bytes`; `None`:
    /// unchecked).
    pub max_local_bytes: Option<i64>,
    /// Before compiling: the most statements a CUDA kernel's unrolled loops may expand to
    /// (`postprocess.max_unrolled_statements`; `None`: unchecked).
    pub max_unrolled_statements: Option<i64>,
    /// Before compiling: the most bytes of global buffers a program may allocate besides
    /// its parameters (`postprocess.max_workspace_bytes`; `None`: unchecked).
    pub max_workspace_bytes: Option<i64>,
    /// Split-K: when and how a long reduction is spread over partial results.
    pub split_k: Option<SplitK>,
    /// The cross-thread reduction sketch (`[cross_thread]`), when the space has one.
    pub cross_thread: Option<CrossThread>,
    /// The CPU lane-reduction sketch (`[lane_reduction]`), when the space has one.
    pub lane_reduction: Option<LaneReduction>,
    /// Software pipelining of the shared fetch (`[pipeline]`); `None`: never.
    pub pipeline: Option<PipelineRule>,
    /// The evolutionary search's parameters (`[search]`).
    pub search: SearchParams,
    /// The CPU register-tile sketch (`[register_tile]`), when the space has one.
    pub register_tile: Option<RegisterTile>,
    /// The tensor-core sketch (`[tensor_core]`), when the space has one.
    pub tensor_core: Option<TensorCore>,
    /// The vector unit the register tiles are sized for: float lanes per register and
    /// registers. The files hold no machine: AVX2 (8, 16) until
    /// [`with_vector_unit`](SearchSpace::with_vector_unit) sets the target's.
    pub vector_lanes: i64,
    pub vector_registers: i64,
}

/// The tensor-core sketch's bounds (`[tensor_core]`; see `search_spaces/cuda.toml` and
/// `sketch/tensor_core.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorCore {
    /// How often `sketch::apply` (random search) takes this sketch where it applies.
    pub probability: f64,
    /// Most warps of a block.
    pub max_warps: i64,
    /// Most mma tiles a warp holds along the rows (16 each) and the columns (8 each).
    pub max_tiles_m: i64,
    pub max_tiles_n: i64,
    /// Most f32 accumulators of a lane (4 per 16 x 8 tile).
    pub max_accumulators: i64,
    /// Most reduction steps of 16 per shared stage.
    pub max_reduction_steps: i64,
    /// The multiples a GEMM's axes may be padded to (each a multiple of 32).
    pub pad_multiples: Vec<i64>,
    /// The share of tensor-core samples that take the wgmma sketch (Hopper, sm_90a);
    /// 0 on other targets ([`SearchSpace::with_wgmma`]).
    pub wgmma_probability: f64,
}

/// The CPU register-tile sketch's bounds (`[register_tile]`; see `search_spaces/cpu.toml`
/// and `sketch/cpu.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct RegisterTile {
    /// How often `sketch::apply` (random search) takes this sketch where it applies.
    pub probability: f64,
    /// Vector registers kept free besides the accumulators and the NR / lanes operand
    /// vectors of a k step (the broadcast scalar, spares).
    pub reserved_registers: i64,
    /// Most vectors across one accumulator row (NR / lanes).
    pub max_row_vectors: i64,
    /// Most accumulator rows (MR).
    pub max_rows: i64,
    /// Most accumulator elements of one parallel iteration (its block of the output).
    pub max_block_elements: i64,
    /// Most elements of one packed operand panel.
    pub max_panel_elements: i64,
    /// Accumulator registers a tile should use where the extents allow (soft).
    pub min_accumulators: i64,
    /// Reduction steps a panel should hold where the reduction allows (soft).
    pub min_panel_depth: i64,
    /// Where the packed panel may be copied (`panel_at`); more than one makes it a
    /// decision of the trace (`sample_compute_location`).
    pub panel_at: Vec<PanelAt>,
    /// Multiples a GEMM's row and reduction axes may be padded to where their extents
    /// have no good divisor (a decision of the trace), each wasting at most `max_waste`
    /// of the padded extent; the vector axis is padded to whole vectors (1, 2 or 4) by
    /// the same bound. Empty: only the vector axis, to one vector, where it must be.
    pub pad_multiples: Vec<i64>,
    pub max_waste: f64,
    /// Most elements of the row operand's block (a GEMM's A: M1 * MR rows x Kc) packed
    /// `[row tile][k][row in tile]` at each K0 iteration, a coin of the trace where it
    /// fits; 0: never packed (the micro-kernel reads the operand as stored).
    pub max_row_panel_elements: i64,
    /// The same bound for a 16-bit row operand, whose packing (into f32,
    /// `storage_widen`) also converts each element once instead of at every use.
    pub max_half_row_panel_elements: i64,
    /// Whether that operand may instead be packed so once per call, whole, by a stage of
    /// its own before the main nest (a coin of the trace).
    pub row_panel_per_call: bool,
}

/// A loop of the register-tile sketch the packed panel may be copied at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PanelAt {
    /// Each N1 iteration: a Kc x NR panel, read by the M1 row tiles from L1.
    ColumnTile,
    /// Each K0 iteration (the last reduction block loop): a Kc x N1*NR panel, the
    /// GotoBLAS packing of the B block, read from L2.
    ReductionBlock,
    /// Once per call: the whole operand copied into a buffer of its own, with the
    /// dimension the vector axis indexes last, by a stage run before the main nest (as
    /// oneDNN reorders a conv's weights), instead of once per parallel block. Offered
    /// only where that changes the operand's layout (an NCHW conv's weights `[k, c, r,
    /// s]` packed `[c, r, s, k]`, an NT GEMM's `B[n, k]` as `[k, n]`).
    Call,
}

/// The evolutionary search's parameters (`[search]`), MetaSchedule's defaults in the
/// embedded files.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchParams {
    /// Candidates per generation at most: a round proposing `n` candidates breeds
    /// [`SearchParams::population_for`]`(n)`.
    pub population: usize,
    /// Candidates per generation for each candidate a round proposes, so that a small
    /// batch (a network's round of 16) costs in proportion and is picked from as many
    /// scored candidates per proposed one as a full batch.
    pub population_per_candidate: usize,
    /// The fewest candidates per generation (when `population` allows as many).
    pub min_population: usize,
    /// The share of the initial population taken from the best measured candidates.
    pub init_measured_ratio: f64,
    /// Rounds of scoring, selection and mutation before a batch is picked.
    pub generations: usize,
    /// The probability that a survivor is mutated (else it is copied).
    pub mutation_probability: f64,
    /// The share of each batch given to fresh random samples instead of the best scored.
    pub eps_greedy: f64,
    /// The most of a batch's best-scored picks that may share one tiling (a sketch and
    /// its tile decisions, its unroll, stage and vector decisions aside), as a share of
    /// the batch: the rest goes to the next tilings by score, so that a small budget is
    /// not spent on the variants of one tiling that the model scores alike.
    pub tiling_share: f64,
    /// The most of a batch's best-scored picks that may take one branch of the sketches
    /// (a conv as its GEMM or not, split-K or not, and as many kernels: operands copied
    /// by kernels of their own or not), as a share of the batch: the rest goes to the
    /// best-scored candidates of the other branches, so that a model trained on one
    /// branch's records does not spend the whole budget there.
    pub branch_share: f64,
    /// The least of a batch's best-scored picks given to each class of outputs per thread
    /// (`thread_tile_classes`: [`super::evolutionary::TileClass`]) the round
    /// has candidates of, as a share of the batch: the register tile sets a kernel's
    /// occupancy and reuse, where a model trained on other workloads' records extrapolates
    /// worst, so each class gets measured and teaches the retrained model (0: off).
    pub thread_tile_share: f64,
    /// The upper bounds of the classes of outputs per thread but the last, ascending:
    /// [16, 64] makes three classes, at most 16, 17 to 64 and more than 64.
    pub thread_tile_classes: Vec<usize>,
    /// Samples (or mutants) that may be tried per wanted one before the search stops
    /// looking: what keeps a small space from spinning on duplicates.
    pub max_attempts_per_candidate: usize,
}

impl SearchParams {
    /// Candidates per generation for a round that proposes `n`:
    /// `n x population_per_candidate`, within `min_population` and `population`.
    pub fn population_for(&self, n: usize) -> usize {
        n.saturating_mul(self.population_per_candidate)
            .max(self.min_population)
            .min(self.population)
    }
}

/// The software-pipelining rule (`[pipeline]`): the stage counts the sketch offers (a
/// decision of the trace; 1 is the single-buffered fetch), those whose copies of one
/// iteration's fetched tiles would exceed `max_shared_bytes` left out; with
/// `register_fetch`, a coin of the trace stages a pipeline's transposing vector fetches in
/// registers (`software_pipeline_register_fetch`) where the sketch has one.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineRule {
    pub stages: Vec<i64>,
    pub max_shared_bytes: i64,
    pub register_fetch: bool,
}

/// The split-K rule (`[split_k]`): a workload whose output has at most
/// `max_output_elements` elements and whose reduction is at least `min_reduction` long has
/// a split-K sketch, which splits its first reduction axis by one of `splits` (those that
/// divide it) and `rfactor`s the outer part into a spatial axis; a count whose partial
/// results (count x outputs) exceed `max_partial_elements` is not offered. `probability`
/// is how often `sketch::apply` (random search) takes that sketch.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitK {
    pub probability: f64,
    pub max_output_elements: i64,
    pub min_reduction: i64,
    pub splits: Vec<i64>,
    pub max_partial_elements: i64,
    /// How often a split-K sample sums its partials in the main kernel, by the thread
    /// block that arrives last at each tile (`serial_sum_at`), rather than in a kernel of
    /// its own: the probability of a decision of the trace (none drawn at 0).
    pub serial_sum: f64,
}

impl SplitK {
    /// The counts of `splits` that split a reduction of `extent` evenly into parts of
    /// more than one step, their partial results within the bound ([`Self::partials_fit`]).
    pub fn counts(&self, extent: i64, outputs: i64) -> Vec<i64> {
        self.splits
            .iter()
            .copied()
            .filter(|s| extent % s == 0 && *s < extent && self.partials_fit(*s, outputs))
            .collect()
    }

    /// Whether `count` partial results of `outputs` output elements stay within
    /// `max_partial_elements`.
    pub fn partials_fit(&self, count: i64, outputs: i64) -> bool {
        count.saturating_mul(outputs) <= self.max_partial_elements
    }
}

/// The cross-thread reduction rule (`[cross_thread]`; see `search_spaces/cuda.toml` and
/// `sketch/cross_thread.rs`): a workload that reads each element of its largest input at
/// most `max_reuse` times and whose last reduction axis is at least `min_reduction` long has a sketch
/// that reads that axis with `lanes` threads side by side (those that divide it) and
/// gives a block `rows` output elements. `probability` is how often `sketch::apply`
/// (random search) takes that sketch. With `fuse_consumer`, a workload whose one stage
/// after the reduction reads it by rows (a softmax's output, a row's normalisation) may
/// have the reduction, the row reductions before it and that stage in one kernel, a
/// block's rows at a time (a coin of the trace). With `fold_lanes`, a coin of the trace
/// may sum the lanes' partial results in two steps (8 threads of a row, then every
/// thread) where every thread of the row summed all of them. With `stage_rows_bytes`
/// above 0, a coin of the trace may stage a fused block's rows of the largest input in
/// shared memory, read once from global memory by all the passes over them, where they
/// take at most that many bytes; with `keep_stage` too, the coin may instead keep a
/// stage that several passes read (a softmax's exponentials) and compute it once into
/// shared memory. With `stage_registers` above 0, a second coin may stage the rows in
/// each thread's registers instead, where a thread holds at most that many elements of
/// them (the ones it reads: each pass reads a row's elements with the same lanes).
#[derive(Clone, Debug, PartialEq)]
pub struct CrossThread {
    pub probability: f64,
    pub max_reuse: i64,
    pub min_reduction: i64,
    pub lanes: Vec<i64>,
    pub rows: Vec<i64>,
    pub fuse_consumer: bool,
    pub fold_lanes: bool,
    pub stage_rows_bytes: i64,
    pub keep_stage: bool,
    pub stage_registers: i64,
}

/// The CPU lane-reduction rule (`[lane_reduction]`; see `search_spaces/cpu.toml` and
/// `sketch/lane_reduction.rs`): a workload that reads each element of its largest input at
/// most `max_reuse` times, along a last reduction axis of at least `min_reduction` that is
/// that input's contiguous axis, has a sketch that reads the axis a vector at a time into
/// vector accumulators, a register tile of `rows` rows of the largest input by
/// `reused_rows` of the others, and sums each accumulator's lanes at the end.
/// `probability` is how often `sketch::apply` (random search) takes that sketch. With
/// `fuse_consumer`, a workload whose one stage after the reduction reads it by rows (a
/// softmax's output, a row's normalisation) may have the reduction, the row reductions
/// before it and that stage in one parallel loop over rows (a coin of the trace); with
/// `keep_stage` too, a second coin may keep a stage that several of them read (a
/// softmax's exponentials), computed once a row into a local buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct LaneReduction {
    pub probability: f64,
    pub max_reuse: i64,
    pub min_reduction: i64,
    pub rows: Vec<i64>,
    pub reused_rows: Vec<i64>,
    pub fuse_consumer: bool,
    pub keep_stage: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LaneReductionFile {
    probability: f64,
    max_reuse: i64,
    min_reduction: i64,
    rows: Vec<i64>,
    reused_rows: Vec<i64>,
    #[serde(default)]
    fuse_consumer: bool,
    #[serde(default)]
    keep_stage: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CrossThreadFile {
    probability: f64,
    max_reuse: i64,
    min_reduction: i64,
    lanes: Vec<i64>,
    rows: Vec<i64>,
    #[serde(default)]
    fuse_consumer: bool,
    #[serde(default)]
    fold_lanes: bool,
    #[serde(default)]
    stage_rows_bytes: i64,
    #[serde(default)]
    keep_stage: bool,
    #[serde(default)]
    stage_registers: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tiling: Tiling,
    threads: Threads,
    cache_read: CacheRead,
    cache_write: CacheWrite,
    unroll: Unroll,
    inline: Inline,
    vectorize: Option<Vectorize>,
    split_k: Option<SplitKFile>,
    cross_thread: Option<CrossThreadFile>,
    lane_reduction: Option<LaneReductionFile>,
    pipeline: Option<PipelineFile>,
    register_tile: Option<RegisterTileFile>,
    tensor_core: Option<TensorCoreFile>,
    postprocess: Postprocess,
    search: SearchFile,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchFile {
    population: usize,
    population_per_candidate: usize,
    min_population: usize,
    init_measured_ratio: f64,
    generations: usize,
    mutation_probability: f64,
    eps_greedy: f64,
    tiling_share: f64,
    branch_share: f64,
    thread_tile_share: f64,
    thread_tile_classes: Vec<usize>,
    max_attempts_per_candidate: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterTileFile {
    probability: f64,
    reserved_registers: i64,
    max_row_vectors: i64,
    max_rows: i64,
    max_block_elements: i64,
    max_panel_elements: i64,
    min_accumulators: i64,
    min_panel_depth: i64,
    #[serde(default)]
    panel_at: Vec<String>,
    #[serde(default)]
    pad_multiples: Vec<i64>,
    #[serde(default)]
    max_waste: f64,
    #[serde(default)]
    max_row_panel_elements: i64,
    #[serde(default)]
    max_half_row_panel_elements: i64,
    #[serde(default)]
    row_panel_per_call: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorCoreFile {
    probability: f64,
    max_warps: i64,
    max_tiles_m: i64,
    max_tiles_n: i64,
    max_accumulators: i64,
    max_reduction_steps: i64,
    pad_multiples: Vec<i64>,
    #[serde(default)]
    wgmma_probability: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SplitKFile {
    enabled: bool,
    probability: f64,
    max_output_elements: i64,
    min_reduction: i64,
    splits: Vec<i64>,
    /// Absent in space files written before the key: no bound.
    #[serde(default = "unbounded")]
    max_partial_elements: i64,
    /// Absent: never (the sum in a kernel of its own).
    #[serde(default)]
    serial_sum: f64,
}

fn unbounded() -> i64 {
    i64::MAX
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tiling {
    structure: String,
    spatial_bind: Vec<String>,
    max_innermost_factor: i64,
    #[serde(default)]
    max_innermost_fastest: Option<i64>,
    #[serde(default)]
    max_waste: f64,
    #[serde(default)]
    pad_multiples: Vec<i64>,
    #[serde(default)]
    pad_convolutions: bool,
    #[serde(default)]
    tight_padding: bool,
    #[serde(default)]
    implicit_gemm: f64,
    #[serde(default)]
    implicit_gemm_rows: f64,
    #[serde(default)]
    gemm_view: f64,
    #[serde(default)]
    gemm_view_windowed: f64,
    #[serde(default)]
    warp_tile_share: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Threads {
    min_threads_per_block: i64,
    max_threads_per_block: i64,
    max_vthreads: i64,
    #[serde(default)]
    min_blocks_per_sm: Vec<i64>,
    #[serde(default = "default_outputs_per_thread")]
    max_outputs_per_thread: Vec<i64>,
    #[serde(default = "no_block_bound")]
    standalone_min_blocks: i64,
}

/// `threads.standalone_min_blocks` where a space names none: every count a thread offered.
fn no_block_bound() -> i64 {
    1
}

/// The bound on a thread's register tile where a space names none: larger tiles spill,
/// and with unrolling they took NVRTC minutes to compile in the first H200 tuning run
/// (2026-11-21), stalling whole rounds.
fn default_outputs_per_thread() -> Vec<i64> {
    vec![128]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheRead {
    enabled: bool,
    scope: String,
    vector_lengths: Vec<i64>,
    #[serde(default)]
    reduction_major: bool,
    #[serde(default)]
    vector_transposed: bool,
    #[serde(default)]
    aligned_rows: bool,
    #[serde(default)]
    walk_contiguous: bool,
    #[serde(default)]
    walk_aligned: bool,
    #[serde(default)]
    walk_unroll: Vec<i64>,
    #[serde(default)]
    transpose_kernels: bool,
    #[serde(default)]
    transpose_padding_kernels: bool,
    #[serde(default)]
    channels_last_kernels: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheWrite {
    enabled: bool,
    scope: String,
    #[serde(default)]
    levels: Vec<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Unroll {
    max_steps: Vec<i64>,
    #[serde(default)]
    tile_steps: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PipelineFile {
    stages: Vec<i64>,
    max_shared_bytes: i64,
    #[serde(default)]
    register_fetch: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Inline {
    padding: bool,
    epilogue: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Vectorize {
    max_vector_extent: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Postprocess {
    max_spill_bytes: u32,
    #[serde(default)]
    max_stack_bytes: Option<u32>,
    #[serde(default)]
    max_local_bytes: Option<i64>,
    #[serde(default)]
    max_unrolled_statements: Option<i64>,
    #[serde(default)]
    max_workspace_bytes: Option<i64>,
}

/// Checks `cache_write.levels`: S levels before the first R level, and on a GPU space not
/// above the level bound to `threadIdx` (an accumulator in registers belongs to one
/// thread). Sorted, without repeats.
fn write_back_levels(
    levels: &[Level],
    bindings: &[Binding],
    given: &[usize],
) -> Result<Vec<usize>, String> {
    let first_r = levels
        .iter()
        .position(|l| *l == Level::Reduce)
        .unwrap_or(levels.len());
    let thread_level = bindings
        .iter()
        .position(|b| matches!(b, Binding::Thread(t) if t.starts_with("threadIdx")));
    let mut out = given.to_vec();
    out.sort_unstable();
    out.dedup();
    for l in &out {
        if *l >= first_r {
            return Err(format!(
                "level {l} is not an S level before the first R level (level {first_r})"
            ));
        }
        if thread_level.is_some_and(|t| *l < t) {
            return Err(format!(
                "level {l} is above the level bound to threadIdx: each thread's accumulator \
                 must be written back inside it"
            ));
        }
    }
    Ok(out)
}

const THREAD_TAGS: &[&str] = &[
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread.x",
    "vthread.y",
    "vthread.z",
];

impl SearchSpace {
    /// The embedded CUDA space.
    pub fn cuda_default() -> SearchSpace {
        SearchSpace::parse(CUDA_DEFAULT, "search_spaces/cuda.toml")
            .expect("the embedded cuda.toml is valid (tested)")
    }

    /// The embedded CPU space.
    pub fn cpu_default() -> SearchSpace {
        SearchSpace::parse(CPU_DEFAULT, "search_spaces/cpu.toml")
            .expect("the embedded cpu.toml is valid (tested)")
    }

    /// The fewest threads a CUDA block may have for a program of `outputs` output
    /// elements: `threads.min_threads_per_block`, or the outputs where there are fewer
    /// (a 4 x 4 GEMM gets blocks of 16 threads rather than no candidate at all).
    pub fn min_threads(&self, outputs: i64) -> i64 {
        self.min_threads_per_block.min(outputs.max(1))
    }

    /// Parses a space file; `origin` (a path) prefixes errors.
    pub fn parse(text: &str, origin: &str) -> Result<SearchSpace, SpaceError> {
        let f: File = toml::from_str(text).map_err(|e| SpaceError::Toml {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |key: &'static str, reason: String| SpaceError::Invalid {
            origin: origin.to_string(),
            key,
            reason,
        };
        // A padding rule's multiples (each at least 2) and its waste bound (in [0, 1)).
        let check_padding = |multiples_key: &'static str,
                             multiples: &[i64],
                             waste_key: &'static str,
                             waste: f64|
         -> Result<(), SpaceError> {
            if !(0.0..1.0).contains(&waste) {
                return Err(invalid(waste_key, format!("{waste} is not in [0, 1)")));
            }
            if let Some(m) = multiples.iter().find(|m| **m < 2) {
                return Err(invalid(
                    multiples_key,
                    format!("{m} is not a multiple to pad to (at least 2)"),
                ));
            }
            Ok(())
        };
        // A reduction rule's coin, input reuse bound, shortest reduction and count lists
        // (keys: the section's probability, max_reuse and min_reduction, then each list's).
        let check_reduction_rule = |keys: [&'static str; 3],
                                    probability: f64,
                                    max_reuse: i64,
                                    min_reduction: i64,
                                    lists: &[(&'static str, &Vec<i64>)]|
         -> Result<(), SpaceError> {
            if !(0.0..=1.0).contains(&probability) {
                return Err(invalid(keys[0], format!("{probability} is not in [0, 1]")));
            }
            if max_reuse < 1 {
                return Err(invalid(keys[1], format!("{max_reuse} is less than 1")));
            }
            if min_reduction < 2 {
                return Err(invalid(keys[2], format!("{min_reduction} is less than 2")));
            }
            for (key, list) in lists {
                if list.is_empty() || list.iter().any(|x| *x < 1) {
                    return Err(invalid(
                        key,
                        format!("{list:?}: each must be at least 1, and at least one given"),
                    ));
                }
            }
            Ok(())
        };
        let levels = f
            .tiling
            .structure
            .chars()
            .map(|c| match c {
                'S' => Ok(Level::Spatial),
                'R' => Ok(Level::Reduce),
                other => Err(invalid(
                    "tiling.structure",
                    format!("`{other}` is not S or R"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let spatial = levels.iter().filter(|l| **l == Level::Spatial).count();
        if spatial == 0 || levels.iter().all(|l| *l != Level::Reduce) {
            return Err(invalid(
                "tiling.structure",
                "needs at least one S and one R level".into(),
            ));
        }
        if levels.len() > 16 {
            return Err(invalid("tiling.structure", "more than 16 levels".into()));
        }
        let bindings = f
            .tiling
            .spatial_bind
            .iter()
            .map(|b| match b.as_str() {
                "parallel" => Ok(Binding::Parallel),
                t if THREAD_TAGS.contains(&t) => Ok(Binding::Thread(t.to_string())),
                t => Err(invalid(
                    "tiling.spatial_bind",
                    format!("`{t}` is neither `parallel` nor a thread tag"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if bindings.len() >= spatial {
            return Err(invalid(
                "tiling.spatial_bind",
                format!(
                    "binds {} levels but the structure has {spatial} S levels (the last stays serial)",
                    bindings.len()
                ),
            ));
        }
        if levels[..bindings.len()]
            .iter()
            .any(|l| *l != Level::Spatial)
        {
            return Err(invalid(
                "tiling.spatial_bind",
                "bound levels must be the leading S levels of the structure".into(),
            ));
        }
        if f.tiling.max_innermost_factor < 1 {
            return Err(invalid(
                "tiling.max_innermost_factor",
                "must be at least 1".into(),
            ));
        }
        if let Some(m) = f.tiling.max_innermost_fastest.filter(|m| *m < 1) {
            return Err(invalid(
                "tiling.max_innermost_fastest",
                format!("{m} is not at least 1"),
            ));
        }
        check_padding(
            "tiling.pad_multiples",
            &f.tiling.pad_multiples,
            "tiling.max_waste",
            f.tiling.max_waste,
        )?;
        for (key, x) in [
            ("tiling.implicit_gemm", f.tiling.implicit_gemm),
            ("tiling.implicit_gemm_rows", f.tiling.implicit_gemm_rows),
            ("tiling.gemm_view", f.tiling.gemm_view),
            ("tiling.gemm_view_windowed", f.tiling.gemm_view_windowed),
            ("tiling.warp_tile_share", f.tiling.warp_tile_share),
        ] {
            if !(0.0..=1.0).contains(&x) {
                return Err(invalid(key, format!("{x} is not in [0, 1]")));
            }
        }
        let t = &f.threads;
        if t.min_threads_per_block < 1 || t.max_threads_per_block < t.min_threads_per_block {
            return Err(invalid(
                "threads.max_threads_per_block",
                format!(
                    "the range {}..={} is empty",
                    t.min_threads_per_block, t.max_threads_per_block
                ),
            ));
        }
        if t.max_vthreads < 1 {
            return Err(invalid("threads.max_vthreads", "must be at least 1".into()));
        }
        if let Some(m) = t.min_blocks_per_sm.iter().find(|m| **m < 1) {
            return Err(invalid(
                "threads.min_blocks_per_sm",
                format!("{m} is not a count of blocks (at least 1)"),
            ));
        }
        if t.standalone_min_blocks < 1 {
            return Err(invalid(
                "threads.standalone_min_blocks",
                format!(
                    "{} is not a count of blocks (at least 1)",
                    t.standalone_min_blocks
                ),
            ));
        }
        if t.max_outputs_per_thread.is_empty() || t.max_outputs_per_thread.iter().any(|m| *m < 1) {
            return Err(invalid(
                "threads.max_outputs_per_thread",
                "a list of counts of outputs, each at least 1".into(),
            ));
        }
        let scope_ok = |s: &str| matches!(s, "global" | "shared" | "local");
        if !scope_ok(&f.cache_read.scope) {
            return Err(invalid(
                "cache_read.scope",
                format!("`{}` is not global, shared or local", f.cache_read.scope),
            ));
        }
        if !scope_ok(&f.cache_write.scope) {
            return Err(invalid(
                "cache_write.scope",
                format!("`{}` is not global, shared or local", f.cache_write.scope),
            ));
        }
        let lens = &f.cache_read.vector_lengths;
        if lens.is_empty() || lens.iter().any(|v| ![1, 2, 4].contains(v)) {
            return Err(invalid(
                "cache_read.vector_lengths",
                format!("{lens:?}: each must be 1, 2 or 4, and at least one given"),
            ));
        }
        let walk = &f.cache_read.walk_unroll;
        if walk.iter().any(|s| *s < 0) {
            return Err(invalid(
                "cache_read.walk_unroll",
                format!("{walk:?}: must be non-negative"),
            ));
        }
        let steps = &f.unroll.max_steps;
        if steps.is_empty() || steps.iter().any(|s| *s < 0) {
            return Err(invalid(
                "unroll.max_steps",
                format!("{steps:?}: must be non-negative, at least one given"),
            ));
        }
        let max_vector_extent = f.vectorize.map_or(0, |v| v.max_vector_extent);
        if max_vector_extent < 0 {
            return Err(invalid(
                "vectorize.max_vector_extent",
                "must be non-negative".into(),
            ));
        }
        let split_k = match f.split_k {
            Some(k) if k.enabled => {
                if !(0.0..=1.0).contains(&k.probability) {
                    return Err(invalid(
                        "split_k.probability",
                        format!("{} is not in [0, 1]", k.probability),
                    ));
                }
                if k.splits.is_empty() || k.splits.iter().any(|s| *s < 2) {
                    return Err(invalid(
                        "split_k.splits",
                        format!(
                            "{:?}: each must be at least 2, and at least one given",
                            k.splits
                        ),
                    ));
                }
                if k.max_output_elements < 1 || k.min_reduction < 1 {
                    return Err(invalid(
                        "split_k.min_reduction",
                        "it and max_output_elements must be at least 1".into(),
                    ));
                }
                if !(0.0..=1.0).contains(&k.serial_sum) {
                    return Err(invalid(
                        "split_k.serial_sum",
                        format!("{} is not in [0, 1]", k.serial_sum),
                    ));
                }
                if k.max_partial_elements < 2 {
                    return Err(invalid(
                        "split_k.max_partial_elements",
                        format!("{} is less than 2", k.max_partial_elements),
                    ));
                }
                Some(SplitK {
                    probability: k.probability,
                    max_output_elements: k.max_output_elements,
                    min_reduction: k.min_reduction,
                    splits: k.splits,
                    max_partial_elements: k.max_partial_elements,
                    serial_sum: k.serial_sum,
                })
            }
            _ => None,
        };
        let cross_thread = match f.cross_thread {
            Some(c) => {
                check_reduction_rule(
                    [
                        "cross_thread.probability",
                        "cross_thread.max_reuse",
                        "cross_thread.min_reduction",
                    ],
                    c.probability,
                    c.max_reuse,
                    c.min_reduction,
                    &[
                        ("cross_thread.lanes", &c.lanes),
                        ("cross_thread.rows", &c.rows),
                    ],
                )?;
                for (key, value) in [
                    ("cross_thread.stage_rows_bytes", c.stage_rows_bytes),
                    ("cross_thread.stage_registers", c.stage_registers),
                ] {
                    if value < 0 {
                        return Err(invalid(
                            key,
                            format!("{value}: must be 0 (off) or positive"),
                        ));
                    }
                }
                Some(CrossThread {
                    probability: c.probability,
                    max_reuse: c.max_reuse,
                    min_reduction: c.min_reduction,
                    lanes: c.lanes,
                    rows: c.rows,
                    fuse_consumer: c.fuse_consumer,
                    fold_lanes: c.fold_lanes,
                    stage_rows_bytes: c.stage_rows_bytes,
                    keep_stage: c.keep_stage,
                    stage_registers: c.stage_registers,
                })
            }
            None => None,
        };
        let lane_reduction = match f.lane_reduction {
            Some(l) => {
                check_reduction_rule(
                    [
                        "lane_reduction.probability",
                        "lane_reduction.max_reuse",
                        "lane_reduction.min_reduction",
                    ],
                    l.probability,
                    l.max_reuse,
                    l.min_reduction,
                    &[
                        ("lane_reduction.rows", &l.rows),
                        ("lane_reduction.reused_rows", &l.reused_rows),
                    ],
                )?;
                Some(LaneReduction {
                    probability: l.probability,
                    max_reuse: l.max_reuse,
                    min_reduction: l.min_reduction,
                    rows: l.rows,
                    reused_rows: l.reused_rows,
                    fuse_consumer: l.fuse_consumer,
                    keep_stage: l.keep_stage,
                })
            }
            None => None,
        };
        let pipeline = match f.pipeline {
            Some(p) => {
                let max = crate::ir::pipeline::MAX_STAGES;
                if p.stages.is_empty() || p.stages.iter().any(|s| !(1..=max).contains(s)) {
                    return Err(invalid(
                        "pipeline.stages",
                        format!(
                            "{:?}: each must be in 1..={max}, at least one given",
                            p.stages
                        ),
                    ));
                }
                if p.max_shared_bytes < 1 {
                    return Err(invalid(
                        "pipeline.max_shared_bytes",
                        "must be positive".into(),
                    ));
                }
                Some(PipelineRule {
                    stages: p.stages,
                    max_shared_bytes: p.max_shared_bytes,
                    register_fetch: p.register_fetch,
                })
            }
            None => None,
        };
        let tensor_core = match f.tensor_core {
            Some(t) => {
                if !(0.0..=1.0).contains(&t.probability) {
                    return Err(invalid(
                        "tensor_core.probability",
                        format!("{} is not in [0, 1]", t.probability),
                    ));
                }
                if !(0.0..=1.0).contains(&t.wgmma_probability) {
                    return Err(invalid(
                        "tensor_core.wgmma_probability",
                        format!("{} is not in [0, 1]", t.wgmma_probability),
                    ));
                }
                let bounds = [
                    t.max_warps,
                    t.max_tiles_m,
                    t.max_tiles_n,
                    t.max_accumulators,
                    t.max_reduction_steps,
                ];
                if bounds.iter().any(|x| *x < 1) {
                    return Err(invalid(
                        "tensor_core.max_warps",
                        "the max_* bounds must be at least 1".into(),
                    ));
                }
                if t.pad_multiples.is_empty()
                    || t.pad_multiples.iter().any(|m| *m < 32 || m % 32 != 0)
                {
                    return Err(invalid(
                        "tensor_core.pad_multiples",
                        format!("{:?}: a non-empty list of multiples of 32", t.pad_multiples),
                    ));
                }
                Some(TensorCore {
                    probability: t.probability,
                    max_warps: t.max_warps,
                    max_tiles_m: t.max_tiles_m,
                    max_tiles_n: t.max_tiles_n,
                    max_accumulators: t.max_accumulators,
                    max_reduction_steps: t.max_reduction_steps,
                    pad_multiples: t.pad_multiples,
                    wgmma_probability: t.wgmma_probability,
                })
            }
            None => None,
        };
        let register_tile = match f.register_tile {
            Some(r) => {
                if !(0.0..=1.0).contains(&r.probability) {
                    return Err(invalid(
                        "register_tile.probability",
                        format!("{} is not in [0, 1]", r.probability),
                    ));
                }
                let sizes = [
                    r.max_row_vectors,
                    r.max_rows,
                    r.max_block_elements,
                    r.max_panel_elements,
                ];
                if sizes.iter().any(|x| *x < 1) || r.reserved_registers < 0 {
                    return Err(invalid(
                        "register_tile.max_rows",
                        "the max_* bounds must be at least 1, reserved_registers at least 0".into(),
                    ));
                }
                check_padding(
                    "register_tile.pad_multiples",
                    &r.pad_multiples,
                    "register_tile.max_waste",
                    r.max_waste,
                )?;
                let panel_at = r
                    .panel_at
                    .iter()
                    .map(|p| match p.as_str() {
                        "column_tile" => Ok(PanelAt::ColumnTile),
                        "reduction_block" => Ok(PanelAt::ReductionBlock),
                        "call" => Ok(PanelAt::Call),
                        other => Err(invalid(
                            "register_tile.panel_at",
                            format!(
                                "`{other}` is none of `column_tile`, `reduction_block`, `call`"
                            ),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Some(RegisterTile {
                    probability: r.probability,
                    reserved_registers: r.reserved_registers,
                    max_row_vectors: r.max_row_vectors,
                    max_rows: r.max_rows,
                    max_block_elements: r.max_block_elements,
                    max_panel_elements: r.max_panel_elements,
                    min_accumulators: r.min_accumulators.max(1),
                    min_panel_depth: r.min_panel_depth.max(1),
                    pad_multiples: r.pad_multiples,
                    max_waste: r.max_waste,
                    max_row_panel_elements: r.max_row_panel_elements.max(0),
                    max_half_row_panel_elements: r.max_half_row_panel_elements.max(0),
                    row_panel_per_call: r.row_panel_per_call,
                    panel_at: if panel_at.is_empty() {
                        vec![PanelAt::ColumnTile]
                    } else {
                        panel_at
                    },
                })
            }
            None => None,
        };
        let search = search_params(f.search, &invalid)?;
        let write_back_levels = write_back_levels(&levels, &bindings, &f.cache_write.levels)
            .map_err(|reason| invalid("cache_write.levels", reason))?;
        for (key, value) in [
            ("postprocess.max_local_bytes", f.postprocess.max_local_bytes),
            (
                "postprocess.max_workspace_bytes",
                f.postprocess.max_workspace_bytes,
            ),
        ] {
            if let Some(b) = value.filter(|b| *b < 1) {
                return Err(invalid(
                    key,
                    format!("{b} is not a positive number of bytes"),
                ));
            }
        }
        Ok(SearchSpace {
            levels,
            bindings,
            max_innermost_factor: f.tiling.max_innermost_factor,
            max_innermost_fastest: f
                .tiling
                .max_innermost_fastest
                .unwrap_or(f.tiling.max_innermost_factor)
                .min(f.tiling.max_innermost_factor),
            max_waste: f.tiling.max_waste,
            pad_multiples: f.tiling.pad_multiples,
            pad_convolutions: f.tiling.pad_convolutions,
            tight_padding: f.tiling.tight_padding,
            implicit_gemm: f.tiling.implicit_gemm,
            implicit_gemm_rows: f.tiling.implicit_gemm_rows,
            gemm_view: f.tiling.gemm_view,
            gemm_view_windowed: f.tiling.gemm_view_windowed,
            warp_tile_share: f.tiling.warp_tile_share,
            min_threads_per_block: t.min_threads_per_block,
            max_threads_per_block: t.max_threads_per_block,
            max_vthreads: t.max_vthreads,
            min_blocks_per_sm: t.min_blocks_per_sm.clone(),
            max_outputs_per_thread: t.max_outputs_per_thread.clone(),
            standalone_min_blocks: t.standalone_min_blocks,
            cache_read: f.cache_read.enabled.then_some(f.cache_read.scope),
            fetch_vector_lengths: f.cache_read.vector_lengths,
            reduction_major: f.cache_read.reduction_major,
            vector_transposed: f.cache_read.vector_transposed,
            aligned_rows: f.cache_read.aligned_rows,
            walk_contiguous: f.cache_read.walk_contiguous,
            walk_aligned: f.cache_read.walk_aligned,
            walk_unroll: f.cache_read.walk_unroll,
            transpose_kernels: f.cache_read.transpose_kernels,
            transpose_padding_kernels: f.cache_read.transpose_padding_kernels,
            channels_last_kernels: f.cache_read.channels_last_kernels,
            cache_write: f.cache_write.enabled.then_some(f.cache_write.scope),
            write_back_levels,
            unroll_max_steps: f.unroll.max_steps,
            unroll_tile_steps: f.unroll.tile_steps,
            inline_padding: f.inline.padding,
            inline_epilogue: f.inline.epilogue,
            max_vector_extent,
            max_spill_bytes: f.postprocess.max_spill_bytes,
            max_stack_bytes: f.postprocess.max_stack_bytes,
            max_local_bytes: f.postprocess.max_local_bytes,
            max_workspace_bytes: f.postprocess.max_workspace_bytes,
            max_unrolled_statements: f.postprocess.max_unrolled_statements,
            split_k,
            cross_thread,
            lane_reduction,
            pipeline,
            search,
            register_tile,
            tensor_core,
            vector_lanes: 8,
            vector_registers: 16,
        })
    }

    /// This space for a CPU whose vector unit has `lanes` float lanes per register and
    /// `registers` registers (from the target's ISA, `target::cpu::VectorIsa`).
    /// The space for a CUDA target with (`sm_90a`) or without Hopper's `wgmma`: without
    /// it, the wgmma sketch never applies.
    pub fn with_wgmma(mut self, available: bool) -> SearchSpace {
        if let Some(t) = self.tensor_core.as_mut().filter(|_| !available) {
            t.wgmma_probability = 0.0;
        }
        self
    }

    pub fn with_vector_unit(mut self, lanes: i64, registers: i64) -> SearchSpace {
        self.vector_lanes = lanes.max(1);
        self.vector_registers = registers.max(1);
        self
    }

    /// The largest innermost tile factor of a tiled axis: `max_innermost_fastest` for the
    /// last spatial one (its threads adjacent in `threadIdx.x`), `max_innermost_factor`
    /// for the others.
    pub fn max_innermost(&self, last_spatial_axis: bool) -> i64 {
        match last_spatial_axis {
            true => self.max_innermost_fastest,
            false => self.max_innermost_factor,
        }
    }

    /// Whether this space binds GPU threads.
    pub fn is_gpu(&self) -> bool {
        self.bindings
            .iter()
            .any(|b| matches!(b, Binding::Thread(_)))
    }
}

/// Checks the `[search]` section.
fn search_params(
    f: SearchFile,
    invalid: &dyn Fn(&'static str, String) -> SpaceError,
) -> Result<SearchParams, SpaceError> {
    if f.population < 1 {
        return Err(invalid("search.population", "must be at least 1".into()));
    }
    if f.population_per_candidate < 1 {
        return Err(invalid(
            "search.population_per_candidate",
            "must be at least 1".into(),
        ));
    }
    let share = |key: &'static str, v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(invalid(key, format!("{v} is not in [0, 1]")))
        }
    };
    let init_measured_ratio = share("search.init_measured_ratio", f.init_measured_ratio)?;
    let mutation_probability = share("search.mutation_probability", f.mutation_probability)?;
    let eps_greedy = share("search.eps_greedy", f.eps_greedy)?;
    let tiling_share = share("search.tiling_share", f.tiling_share)?;
    let branch_share = share("search.branch_share", f.branch_share)?;
    let thread_tile_share = share("search.thread_tile_share", f.thread_tile_share)?;
    if !f.thread_tile_classes.windows(2).all(|w| w[0] < w[1]) {
        return Err(invalid(
            "search.thread_tile_classes",
            format!("{:?} is not ascending", f.thread_tile_classes),
        ));
    }
    if f.max_attempts_per_candidate < 1 {
        return Err(invalid(
            "search.max_attempts_per_candidate",
            "must be at least 1".into(),
        ));
    }
    Ok(SearchParams {
        population: f.population,
        population_per_candidate: f.population_per_candidate,
        min_population: f.min_population,
        init_measured_ratio,
        generations: f.generations,
        mutation_probability,
        eps_greedy,
        tiling_share,
        branch_share,
        thread_tile_share,
        thread_tile_classes: f.thread_tile_classes,
        max_attempts_per_candidate: f.max_attempts_per_candidate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_spaces_parse() {
        let c = SearchSpace::cuda_default();
        assert_eq!(c.levels.len(), 8);
        assert!(c.is_gpu());
        let p = SearchSpace::cpu_default();
        assert_eq!(p.levels.len(), 6);
        assert!(!p.is_gpu());
    }

    #[test]
    fn malformed_files_name_the_key() {
        let bad_structure = CUDA_DEFAULT.replace("\"SSSRRSRS\"", "\"SSXR\"");
        let e = SearchSpace::parse(&bad_structure, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `tiling.structure`: `X` is not S or R"
        );
        let bad_vec = CUDA_DEFAULT.replace("[1, 2, 4]", "[3]");
        let e = SearchSpace::parse(&bad_vec, "f.toml").unwrap_err();
        assert!(e.to_string().contains("cache_read.vector_lengths"), "{e}");
        let missing = CUDA_DEFAULT.replace("max_innermost_factor = 16", "");
        let e = SearchSpace::parse(&missing, "f.toml").unwrap_err();
        assert!(e.to_string().contains("max_innermost_factor"), "{e}");
        let wrong_type = CUDA_DEFAULT.replace("max_vthreads = 8", "max_vthreads = \"8\"");
        let e = SearchSpace::parse(&wrong_type, "f.toml").unwrap_err();
        assert!(e.to_string().contains("max_vthreads"), "{e}");
        let bad_waste = CUDA_DEFAULT.replace("max_waste = 0.25", "max_waste = 1.5");
        let e = SearchSpace::parse(&bad_waste, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `tiling.max_waste`: 1.5 is not in [0, 1)"
        );
        let bad_bind = CUDA_DEFAULT.replace("\"vthread.x\"", "\"warp\"");
        let e = SearchSpace::parse(&bad_bind, "f.toml").unwrap_err();
        assert!(e.to_string().contains("tiling.spatial_bind"), "{e}");
        let bad_walk = CUDA_DEFAULT.replace("walk_unroll = []", "walk_unroll = [0, -1]");
        let e = SearchSpace::parse(&bad_walk, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `cache_read.walk_unroll`: [0, -1]: must be non-negative"
        );
    }

    #[test]
    fn split_counts_keep_their_partial_results_within_the_bound() {
        let c = SearchSpace::cuda_default();
        let rule = c.split_k.as_ref().expect("the CUDA space splits K");
        // A 2 x 3 output over 100,000 steps takes counts up to 32 (those that divide).
        assert_eq!(rule.counts(100_000, 6), [2, 4, 8, 16, 32]);
        // Every output `max_output_elements` allows keeps every count up to 16.
        assert_eq!(rule.counts(4096, rule.max_output_elements), [2, 4, 8, 16]);
        // A part of one step is no split.
        assert_eq!(rule.counts(4, 1), [2]);
        let bad = CUDA_DEFAULT.replace(
            "max_partial_elements = 16777216",
            "max_partial_elements = 1",
        );
        let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `split_k.max_partial_elements`: 1 is less than 2"
        );
        // A space file from before the key: no bound.
        let old = CUDA_DEFAULT.replace("max_partial_elements = 16777216", "");
        let old = SearchSpace::parse(&old, "f.toml").unwrap();
        assert_eq!(
            old.split_k.unwrap().counts(256, 1 << 30),
            [2, 4, 8, 16, 32, 64, 128]
        );
    }

    /// `[lane_reduction]`: read from the CPU file, absent from the CUDA one; its bad
    /// values refused naming the key.
    #[test]
    fn the_lane_reduction_rule_is_parsed_and_checked() {
        let rule = SearchSpace::cpu_default()
            .lane_reduction
            .expect("the CPU space has the rule");
        assert_eq!(rule.max_reuse, 16);
        assert_eq!(rule.rows, [1, 2, 4, 8]);
        assert!(SearchSpace::cuda_default().lane_reduction.is_none());
        for (from, to, message) in [
            (
                "reused_rows = [1, 2, 4, 8]",
                "reused_rows = [0]",
                "f.toml: key `lane_reduction.reused_rows`: [0]: each must be at least 1, and at least one given",
            ),
            (
                "min_reduction = 64",
                "min_reduction = 1",
                "f.toml: key `lane_reduction.min_reduction`: 1 is less than 2",
            ),
        ] {
            let bad = CPU_DEFAULT.replace(from, to);
            assert_ne!(bad, CPU_DEFAULT, "{from}");
            let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
            assert_eq!(e.to_string(), message);
        }
    }

    /// `[cross_thread]`: read from the CUDA file, absent from the CPU's and from older
    /// files (no such sketch), its bad values refused naming the key.
    #[test]
    fn the_cross_thread_rule_is_parsed_and_checked() {
        let c = SearchSpace::cuda_default();
        let rule = c
            .cross_thread
            .as_ref()
            .expect("the CUDA space has the rule");
        assert_eq!(rule.max_reuse, 2);
        assert_eq!(rule.lanes, [32, 64, 128, 256]);
        assert_eq!(rule.stage_rows_bytes, 49152);
        assert!(!rule.keep_stage);
        assert!(SearchSpace::cpu_default().cross_thread.is_none());
        let start = CUDA_DEFAULT.find("[cross_thread]").unwrap();
        let end = start + CUDA_DEFAULT[start..].find("\n[").unwrap() + 1;
        let old = format!("{}{}", &CUDA_DEFAULT[..start], &CUDA_DEFAULT[end..]);
        assert!(SearchSpace::parse(&old, "f.toml")
            .unwrap()
            .cross_thread
            .is_none());
        for (from, to, message) in [
            (
                "lanes = [32, 64, 128, 256]",
                "lanes = []",
                "f.toml: key `cross_thread.lanes`: []: each must be at least 1, and at least one given",
            ),
            (
                "max_reuse = 2",
                "max_reuse = 0",
                "f.toml: key `cross_thread.max_reuse`: 0 is less than 1",
            ),
            (
                "stage_rows_bytes = 49152",
                "stage_rows_bytes = -1",
                "f.toml: key `cross_thread.stage_rows_bytes`: -1: must be 0 (off) or positive",
            ),
        ] {
            let bad = CUDA_DEFAULT.replace(from, to);
            assert_ne!(bad, CUDA_DEFAULT, "{from}");
            let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
            assert_eq!(e.to_string(), message);
        }
    }

    #[test]
    fn search_section_is_parsed_and_checked() {
        let c = SearchSpace::cuda_default();
        assert_eq!(c.search.population, 512);
        assert_eq!(c.search.generations, 4);
        assert_eq!(SearchSpace::cpu_default().search.eps_greedy, 0.05);
        let bad_eps = CUDA_DEFAULT.replace("eps_greedy = 0.05", "eps_greedy = 1.5");
        let e = SearchSpace::parse(&bad_eps, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `search.eps_greedy`: 1.5 is not in [0, 1]"
        );
        assert_eq!(c.search.branch_share, 0.5);
        let bad_branch = CUDA_DEFAULT.replace("branch_share = 0.5", "branch_share = -0.5");
        let e = SearchSpace::parse(&bad_branch, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `search.branch_share`: -0.5 is not in [0, 1]"
        );
        assert_eq!(c.search.thread_tile_classes, [16, 64]);
        let unordered = CUDA_DEFAULT.replace(
            "thread_tile_classes = [16, 64]",
            "thread_tile_classes = [64, 16]",
        );
        let e = SearchSpace::parse(&unordered, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `search.thread_tile_classes`: [64, 16] is not ascending"
        );
        let no_pop = CPU_DEFAULT.replace("population = 512", "population = 0");
        let e = SearchSpace::parse(&no_pop, "f.toml").unwrap_err();
        assert!(e.to_string().contains("search.population"), "{e}");
        let missing = CUDA_DEFAULT.replace("generations = 4", "");
        let e = SearchSpace::parse(&missing, "f.toml").unwrap_err();
        assert!(e.to_string().contains("generations"), "{e}");
        let none_per = CUDA_DEFAULT.replace(
            "population_per_candidate = 8",
            "population_per_candidate = 0",
        );
        let e = SearchSpace::parse(&none_per, "f.toml").unwrap_err();
        assert!(
            e.to_string().contains("search.population_per_candidate"),
            "{e}"
        );
    }

    #[test]
    fn a_rounds_population_follows_its_batch_within_the_bounds() {
        let s = SearchSpace::cuda_default().search;
        assert_eq!((s.population_per_candidate, s.min_population), (8, 128));
        // The default batch gets the whole population, a network's round of 16 a quarter.
        assert_eq!(s.population_for(64), 512);
        assert_eq!(s.population_for(16), 128);
        assert_eq!(s.population_for(40), 320);
        assert_eq!(s.population_for(1), 128);
        assert_eq!(s.population_for(1000), 512);
        // A floor above the population gives way to it.
        let tiny = SearchParams {
            population: 24,
            ..s
        };
        assert_eq!(tiny.population_for(1), 24);
    }

    #[test]
    fn register_tile_section_is_parsed_and_checked() {
        let cpu = SearchSpace::cpu_default();
        let rule = cpu
            .register_tile
            .as_ref()
            .expect("cpu.toml has [register_tile]");
        assert_eq!((rule.reserved_registers, rule.min_accumulators), (2, 8));
        assert!(SearchSpace::cuda_default().register_tile.is_none());
        // The vector unit is the target's, AVX2 until set.
        assert_eq!((cpu.vector_lanes, cpu.vector_registers), (8, 16));
        let wide = cpu.with_vector_unit(16, 32);
        assert_eq!((wide.vector_lanes, wide.vector_registers), (16, 32));
        let bad = CPU_DEFAULT.replace("probability = 0.75", "probability = 2.0");
        let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `register_tile.probability`: 2 is not in [0, 1]"
        );
        let bad = CPU_DEFAULT.replace("max_rows = 16", "max_rows = 0");
        let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
        assert!(e.to_string().contains("register_tile.max_rows"), "{e}");
        let bad = CPU_DEFAULT.replace("pad_multiples = [8, 16, 32, 64]", "pad_multiples = [1, 8]");
        let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml: key `register_tile.pad_multiples`: 1 is not a multiple to pad to (at least 2)"
        );
        let bad = CPU_DEFAULT.replace("max_waste = 0.0625", "max_waste = 1.5");
        let e = SearchSpace::parse(&bad, "f.toml").unwrap_err();
        assert!(e.to_string().contains("register_tile.max_waste"), "{e}");
    }

    #[test]
    fn compute_locations_and_the_local_array_limit_are_parsed_and_checked() {
        let cpu = SearchSpace::cpu_default();
        assert_eq!(cpu.write_back_levels, vec![0, 1]);
        let rule = cpu.register_tile.as_ref().expect("[register_tile]");
        assert_eq!(
            rule.panel_at,
            vec![PanelAt::ColumnTile, PanelAt::ReductionBlock, PanelAt::Call]
        );
        assert_eq!(cpu.max_local_bytes, Some(1 << 20));
        // CUDA: the thread level alone, by default.
        let cuda = SearchSpace::cuda_default();
        assert!(cuda.write_back_levels.is_empty());
        assert_eq!(cuda.max_local_bytes, None);
        let err = |text: String| SearchSpace::parse(&text, "f.toml").unwrap_err().to_string();
        assert_eq!(
            err(CPU_DEFAULT.replace("levels = [0, 1]", "levels = [0, 2]")),
            "f.toml: key `cache_write.levels`: level 2 is not an S level before the first R \
             level (level 2)"
        );
        let cuda_levels = CUDA_DEFAULT.replace(
            "scope = \"local\"\n",
            "scope = \"local\"\nlevels = [1, 2]\n",
        );
        assert!(
            err(cuda_levels).contains("level 1 is above the level bound to threadIdx"),
            "the vthread level is refused"
        );
        assert_eq!(
            err(CPU_DEFAULT.replace("\"call\"]", "\"k0\"]")),
            "f.toml: key `register_tile.panel_at`: `k0` is none of `column_tile`, \
             `reduction_block`, `call`"
        );
        assert_eq!(
            err(CPU_DEFAULT.replace("max_local_bytes = 1048576", "max_local_bytes = 0")),
            "f.toml: key `postprocess.max_local_bytes`: 0 is not a positive number of bytes"
        );
        assert_eq!(
            err(CUDA_DEFAULT.replace(
                "max_workspace_bytes = 2147483648",
                "max_workspace_bytes = -1"
            )),
            "f.toml: key `postprocess.max_workspace_bytes`: -1 is not a positive number of bytes"
        );
    }
}
