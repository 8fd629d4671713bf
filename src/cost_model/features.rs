//! Program features: what the cost model sees of one candidate, computed from its lowered
//! kernels (no compile, no device). Every feature is named in [`FEATURE_NAMES`], in
//! vector order; `tessel model features WORKLOAD --schedule FILE` prints them.
//!
//! # What is measured
//!
//! In the spirit of Ansor's and MetaSchedule's per-store features, every buffer store of
//! the lowered kernels is measured ([`stores`]):
//!
//! * its arithmetic by kind (float add/sub, mul, fused multiply-add, div, special
//!   functions and float min/max; integer index math; comparisons and selects, guards
//!   included), counted over the whole launch: per-thread trip count x active threads of
//!   a block x blocks;
//! * the loops around it: extent products by kind (serial, unrolled, vectorized, parallel,
//!   virtual thread), the innermost vector length, the depth, whether it is guarded;
//! * each access it makes (the write, and the loads of its value), with [`access`]'s
//!   interval analysis of the flat index: scope; distinct bytes and cache lines (128 B on
//!   the GPU, 64 B on the CPU, every scope) one thread block and one thread touch; the
//!   distinct bytes a block touches per iteration of the outermost serial loop around
//!   the store (a GEMM's reduction step); the lines one warp touches in one execution
//!   and the coalescing efficiency that follows (useful bytes / bytes of the lines); the
//!   bank-conflict degree of a shared access (distinct words per bank in one phase of
//!   warp 0, by evaluating its index); the stride along `threadIdx.x` (0 / contiguous /
//!   other) and along the innermost loop; reuse (the extent of the innermost loop the
//!   index does not depend on, the iterations between two uses, accesses per distinct
//!   element of a thread).
//!
//! Whole-program features come from the kernel that holds the main store: blocks, threads
//! per block, virtual threads, parallel extent (CPU), shared memory per block, local
//! elements per thread, an estimate of registers per thread, resident blocks per
//! processor and occupancy from [`DeviceSpec`], waves and their tail efficiency,
//! barriers per block, the software-pipeline depth of the shared fetch (v3); and program
//! totals: flops, global and shared traffic (distinct
//! bytes per block x blocks), arithmetic intensity; then the main kernel's register
//! pressure (words loaded per unrolled body, the estimate with them per thread and per
//! block, the copies of stores in unrolled bodies, the main store's loads per copy).
//! Since v4 a store under `blockIdx < c` or `blockIdx >= c` guards (stages fused into one
//! launch, each on a range of its blocks) counts over those blocks, not the whole grid.
//!
//! # Aggregation to a fixed length
//!
//! Three parts, in this order:
//!
//! 1. program and main-kernel features (above);
//! 2. sums over all stores: arithmetic by kind; per scope the distinct bytes and lines
//!    per block, the distinct bytes per step and the accesses; global-memory transactions
//!    (warp-wide executions x lines per warp) and shared-memory wavefronts (warp-wide
//!    executions x vector phases x bank-conflict degree). Sums keep every stage's cost (the cooperative fetches,
//!    the write-back, a split-K reduction kernel) visible at a fixed length;
//! 3. the full per-store features of the *main store*, the one with the most flops (ties:
//!    the most accesses), which is the computation the schedule is about (a GEMM's
//!    `C_update`): its write and its two reads with the most bytes per block, each in a
//!    slot of the same fields (a missing read is all zeros).
//!
//! Summing the full per-store vectors (Ansor) would blur slot features (strides, scopes)
//! across stages of different roles; keeping one store whole and summing only additive
//! counts loses neither. The choice is to be revisited against the ranking measurements.
//!
//! Every count goes through `log2(1 + x)` (names `log_*`); ratios (occupancy,
//! coalescing, wave efficiency) and indicators stay linear in `[0, 1]`.
//!
//! # What is approximate
//!
//! * Footprints are the strided-box estimate of [`access`] (exact for disjoint tiles,
//!   close for sliding windows); the same element read by two loads counts twice.
//! * Registers per thread: local elements (in 32-bit words) + [`REGISTER_BASE`], capped
//!   at 255; NVRTC's figure is only known after compiling. Since feature set v2 the
//!   register-pressure features add the words one unrolled body loads (the loops inside
//!   the innermost serial loop around a store ranging, per thread), uncapped, per thread
//!   and per block: NVRTC keeps those loads in registers when it schedules the unrolled
//!   body, and spills past 255.
//! * Strides are taken at the origin (every other variable 0), so `threadIdx.x // 2`
//!   reads as stride 0 there; the warp's lines are the better coalescing measure.
//! * Guards narrow the active threads only where they read `threadIdx < c`; other guards
//!   (imperfect tiles) count as always true.
//!
//! Changing the list, the order or the meaning of a feature bumps
//! [`FEATURE_SET_VERSION`]: a stored model of another version is never used.

mod access;
mod stores;

use crate::ir::Scope;
use crate::lower::{Kernel, Lowered};
use stores::{Access, KernelCounts, Ops, Store, Walker};

/// The version of the feature set; models store the version they were trained on.
pub const FEATURE_SET_VERSION: u32 = 4;

/// Registers per thread that a kernel needs besides its local arrays (indices, pointers,
/// loop counters): a rough constant of the estimate.
pub const REGISTER_BASE: i64 = 16;

/// Resident blocks per SM at most (sm_80 and sm_90).
const MAX_BLOCKS_PER_PROCESSOR: f64 = 32.0;

/// What the features need to know of the device: derived from the target's arch alone,
/// so that records of any device of one arch featurize the same way in training and in
/// tuning.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Streaming multiprocessors (CUDA) or cores (CPU).
    pub processors: i64,
    /// Resident threads per SM (CUDA); 1 on the CPU.
    pub max_threads_per_processor: i64,
    /// Shared memory per SM in bytes (CUDA); 0 on the CPU.
    pub shared_bytes_per_processor: i64,
    /// 32-bit registers per SM (CUDA); 0 on the CPU.
    pub registers_per_processor: i64,
}

impl DeviceSpec {
    /// The spec of a CUDA arch (`sm_90a`, `sm_80`, ...): Hopper and Ampere figures, and
    /// a conservative default for others.
    pub fn cuda(arch: &str) -> DeviceSpec {
        let sm: u32 = arch
            .trim_start_matches("sm_")
            .trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse()
            .unwrap_or(0);
        let (processors, shared) = match sm {
            90.. => (132, 228 * 1024),
            80 => (108, 164 * 1024),
            86 | 89 => (84, 100 * 1024),
            _ => (80, 96 * 1024),
        };
        DeviceSpec {
            processors,
            max_threads_per_processor: 2048,
            shared_bytes_per_processor: shared,
            registers_per_processor: 65536,
        }
    }

    /// The spec of a CPU with `cores` cores.
    pub fn cpu(cores: i64) -> DeviceSpec {
        DeviceSpec {
            processors: cores.max(1),
            max_threads_per_processor: 1,
            shared_bytes_per_processor: 0,
            registers_per_processor: 0,
        }
    }

    /// Whether this is a GPU (threads per processor beyond one).
    fn is_gpu(&self) -> bool {
        self.max_threads_per_processor > 1
    }

    /// The cache line (GPU: a 128-byte L1 line / global transaction; CPU: 64 bytes).
    fn line_bytes(&self) -> f64 {
        if self.is_gpu() {
            128.0
        } else {
            64.0
        }
    }
}

/// The feature names, in vector order.
pub const FEATURE_NAMES: &[&str] = &[
    // 1. Program and main kernel.
    "log_kernels",
    "log_stores",
    "log_blocks",
    "log_threads_per_block",
    "log_vthreads",
    "log_parallel_extent",
    "log_registers_per_thread",
    "log_local_elements_per_thread",
    "log_shared_bytes_per_block",
    "log_resident_blocks_per_processor",
    "occupancy",
    "log_waves",
    "wave_efficiency",
    "log_barriers_per_block",
    // Software pipelining of the shared fetch (feature set v3).
    "pipeline_stages",
    "log_flops",
    "log_global_bytes",
    "log_shared_bytes",
    "log_arithmetic_intensity",
    // Register pressure of the main kernel (feature set v2).
    "log_live_load_words",
    "log_register_pressure",
    "log_block_register_pressure",
    "log_unrolled_copies",
    "main_unrolled_loads_per_store",
    // 2. Sums over all stores.
    "log_sum_float_addsub",
    "log_sum_float_mul",
    "log_sum_float_fma",
    "log_sum_float_div",
    "log_sum_float_special",
    "log_sum_int_ops",
    "log_sum_compare_select",
    "log_sum_global_bytes_per_block",
    "log_sum_global_lines_per_block",
    "log_sum_global_bytes_per_step",
    "log_sum_global_accesses",
    "log_sum_shared_bytes_per_block",
    "log_sum_shared_lines_per_block",
    "log_sum_shared_bytes_per_step",
    "log_sum_shared_accesses",
    "log_sum_local_bytes_per_block",
    "log_sum_local_lines_per_block",
    "log_sum_local_bytes_per_step",
    "log_sum_local_accesses",
    "log_sum_global_transactions",
    "log_sum_shared_wavefronts",
    // 3. The main store.
    "main_log_float_addsub",
    "main_log_float_mul",
    "main_log_float_fma",
    "main_log_float_div",
    "main_log_float_special",
    "main_log_int_ops",
    "main_log_compare_select",
    "main_log_serial",
    "main_log_unrolled",
    "main_log_vectorized",
    "main_log_parallel",
    "main_log_vthread",
    "main_log_threads",
    "main_log_vector_len",
    "main_log_depth",
    "main_guarded",
    "main_log_trips_per_thread",
    "main_log_global_bytes_per_block",
    "main_log_global_lines_per_block",
    "main_log_shared_bytes_per_block",
    "main_log_shared_lines_per_block",
    "main_log_local_bytes_per_block",
    "main_log_local_lines_per_block",
    // The main store's write.
    "main_write_is_global",
    "main_write_is_shared",
    "main_write_is_local",
    "main_write_log_bytes_per_block",
    "main_write_log_lines_per_block",
    "main_write_log_bytes_per_step",
    "main_write_log_bytes_per_thread",
    "main_write_log_lines_per_thread",
    "main_write_log_accesses",
    "main_write_log_lines_per_warp",
    "main_write_coalescing",
    "main_write_thread_stride_0",
    "main_write_thread_stride_1",
    "main_write_thread_stride_other",
    "main_write_log_bank_ways",
    "main_write_log_inner_stride",
    "main_write_log_reuse_count",
    "main_write_log_reuse_distance",
    "main_write_log_reuse_ratio",
    // Its read with the most bytes per block.
    "main_read0_is_global",
    "main_read0_is_shared",
    "main_read0_is_local",
    "main_read0_log_bytes_per_block",
    "main_read0_log_lines_per_block",
    "main_read0_log_bytes_per_step",
    "main_read0_log_bytes_per_thread",
    "main_read0_log_lines_per_thread",
    "main_read0_log_accesses",
    "main_read0_log_lines_per_warp",
    "main_read0_coalescing",
    "main_read0_thread_stride_0",
    "main_read0_thread_stride_1",
    "main_read0_thread_stride_other",
    "main_read0_log_bank_ways",
    "main_read0_log_inner_stride",
    "main_read0_log_reuse_count",
    "main_read0_log_reuse_distance",
    "main_read0_log_reuse_ratio",
    // The next one.
    "main_read1_is_global",
    "main_read1_is_shared",
    "main_read1_is_local",
    "main_read1_log_bytes_per_block",
    "main_read1_log_lines_per_block",
    "main_read1_log_bytes_per_step",
    "main_read1_log_bytes_per_thread",
    "main_read1_log_lines_per_thread",
    "main_read1_log_accesses",
    "main_read1_log_lines_per_warp",
    "main_read1_coalescing",
    "main_read1_thread_stride_0",
    "main_read1_thread_stride_1",
    "main_read1_thread_stride_other",
    "main_read1_log_bank_ways",
    "main_read1_log_inner_stride",
    "main_read1_log_reuse_count",
    "main_read1_log_reuse_distance",
    "main_read1_log_reuse_ratio",
];

/// `log2(1 + x)`: the scale of every count feature.
fn log1p2(x: f64) -> f32 {
    if x.is_finite() {
        (1.0 + x.max(0.0)).log2() as f32
    } else {
        0.0
    }
}

/// A value in `[0, 1]` or similar, kept linear (NaN and infinities read 0).
fn linear(x: f64) -> f32 {
    if x.is_finite() {
        x as f32
    } else {
        0.0
    }
}

/// The features of one lowered candidate, `FEATURE_NAMES.len()` of them.
pub fn featurize(l: &Lowered, dev: &DeviceSpec) -> Vec<f32> {
    let stores = measure(l, dev);
    let mut out = Vec::with_capacity(FEATURE_NAMES.len());
    program_features(l, dev, &stores, &mut out);
    sum_features(&stores.stores, &mut out);
    main_store_features(stores.main(), &mut out);
    debug_assert_eq!(out.len(), FEATURE_NAMES.len());
    out.resize(FEATURE_NAMES.len(), 0.0);
    out
}

/// The features with their names, in vector order (what `tessel model features` prints).
pub fn feature_table(l: &Lowered, dev: &DeviceSpec) -> Vec<(&'static str, f32)> {
    FEATURE_NAMES
        .iter()
        .copied()
        .zip(featurize(l, dev))
        .collect()
}

/// The stores of every kernel, and what each kernel's walk counted.
struct Measured {
    stores: Vec<Store>,
    kernels: Vec<KernelCounts>,
}

impl Measured {
    /// The store with the most flops (ties: the most accesses); the main computation.
    fn main(&self) -> Option<&Store> {
        let weight = |s: &Store| (s.ops.flops(), s.write.count);
        self.stores
            .iter()
            .fold(None, |best: Option<&Store>, s| match best {
                Some(b) if weight(b) >= weight(s) => Some(b),
                _ => Some(s),
            })
    }
}

fn measure(l: &Lowered, dev: &DeviceSpec) -> Measured {
    let is_vthread = stores::vthread_vars(&l.program);
    let mut m = Measured {
        stores: Vec::new(),
        kernels: Vec::new(),
    };
    for (i, k) in l.kernels.iter().enumerate() {
        let w = Walker::new(
            &l.program,
            k,
            i,
            dev.is_gpu(),
            dev.line_bytes(),
            &is_vthread,
        )
        .run();
        m.stores.extend(w.stores);
        m.kernels.push(w.counts);
    }
    m
}

/// The bank-conflict degree of each store into the shared buffer named `name` in `l`
/// (warp 0's first phase, as the features count it): 1 where its threads store on
/// distinct banks. For tests elsewhere in the crate.
#[cfg(test)]
pub(crate) fn shared_store_bank_ways(l: &Lowered, name: &str) -> Vec<f64> {
    measure(l, &DeviceSpec::cuda("sm_90a"))
        .stores
        .iter()
        .filter(|s| l.program.buffer(s.buffer).name == name && s.write.scope == Scope::Shared)
        .map(|s| s.write.bank_ways)
        .collect()
}

/// Blocks, threads and the resources of a kernel, and how it fills the device.
struct KernelShape {
    blocks: f64,
    threads: f64,
    shared_bytes: f64,
    local_elements: f64,
    registers: f64,
    resident: f64,
    occupancy: f64,
    waves: f64,
    wave_efficiency: f64,
}

fn kernel_shape(l: &Lowered, k: &Kernel, counts: &KernelCounts, dev: &DeviceSpec) -> KernelShape {
    let p = &l.program;
    let blocks = k.grid.iter().map(|g| *g as f64).product::<f64>();
    let threads = k.threads() as f64;
    let shared_bytes = k.shared_bytes(p) as f64;
    let local_elements: i64 = k
        .allocs
        .iter()
        .filter(|a| a.scope == Scope::Local)
        .map(|a| a.size)
        .sum();
    let local_words = k.register_words(p);
    let mut registers = (local_words + REGISTER_BASE).min(255) as f64;
    let (units, resident, per_unit) = if dev.is_gpu() {
        let warps_threads = (threads / 32.0).ceil().max(1.0) * 32.0;
        registers = registers.min(register_cap(k, warps_threads, dev));
        let by_threads = (dev.max_threads_per_processor as f64 / warps_threads).floor();
        let by_shared = if shared_bytes > 0.0 {
            (dev.shared_bytes_per_processor as f64 / shared_bytes).floor()
        } else {
            f64::INFINITY
        };
        let by_registers =
            (dev.registers_per_processor as f64 / (registers * warps_threads)).floor();
        let resident = by_threads
            .min(by_shared)
            .min(by_registers)
            .clamp(0.0, MAX_BLOCKS_PER_PROCESSOR);
        (blocks, resident, warps_threads)
    } else {
        (counts.parallel, 1.0, 1.0)
    };
    let occupancy = resident * per_unit / dev.max_threads_per_processor.max(1) as f64;
    let slots = resident.max(1.0) * dev.processors.max(1) as f64;
    let waves = units / slots;
    KernelShape {
        blocks,
        threads,
        shared_bytes,
        local_elements: local_elements as f64,
        registers,
        resident,
        occupancy: occupancy.min(1.0),
        waves,
        wave_efficiency: waves / waves.ceil().max(1.0),
    }
}

/// The registers a thread may use when the kernel asks a multiprocessor to hold
/// [`Kernel::min_blocks`] of its blocks (as many as fit by threads): the processor's
/// registers shared among them, in the allocation's steps of 8 a thread; 255 at most.
fn register_cap(k: &Kernel, warps_threads: f64, dev: &DeviceSpec) -> f64 {
    let fit = (dev.max_threads_per_processor as f64 / warps_threads).floor();
    let blocks = (k.min_blocks as f64).min(fit).max(1.0);
    let cap = (dev.registers_per_processor as f64 / (blocks * warps_threads) / 8.0).floor() * 8.0;
    cap.clamp(8.0, 255.0)
}

/// Distinct bytes a thread block touches in one scope, over the launch (x the blocks
/// that execute the store).
fn traffic(stores: &[Store], scope: Scope) -> f64 {
    stores
        .iter()
        .map(|s| {
            accesses(s)
                .filter(|a| a.scope == scope)
                .map(|a| a.block.elements * a.bytes_per_elem)
                .sum::<f64>()
                * s.blocks
        })
        .sum()
}

fn accesses(s: &Store) -> impl Iterator<Item = &Access> {
    std::iter::once(&s.write).chain(&s.reads)
}

fn program_features(l: &Lowered, dev: &DeviceSpec, m: &Measured, out: &mut Vec<f32>) {
    let main_kernel = m.main().map_or(0, |s| s.kernel);
    let counts = m.kernels.get(main_kernel).copied().unwrap_or_default();
    let shape = l
        .kernels
        .get(main_kernel)
        .map(|k| kernel_shape(l, k, &counts, dev));
    let flops: f64 = m.stores.iter().map(|s| s.ops.flops()).sum();
    let global = traffic(&m.stores, Scope::Global);
    let shared = traffic(&m.stores, Scope::Shared);
    let get = |f: fn(&KernelShape) -> f64| shape.as_ref().map_or(0.0, f);
    out.extend([
        log1p2(l.kernels.len() as f64),
        log1p2(m.stores.len() as f64),
        log1p2(get(|s| s.blocks)),
        log1p2(get(|s| s.threads)),
        log1p2(counts.vthreads),
        log1p2(counts.parallel),
        log1p2(get(|s| s.registers)),
        log1p2(get(|s| s.local_elements)),
        log1p2(get(|s| s.shared_bytes)),
        log1p2(get(|s| s.resident)),
        linear(get(|s| s.occupancy)),
        log1p2(get(|s| s.waves)),
        linear(get(|s| s.wave_efficiency)),
        log1p2(counts.barriers),
        linear(counts.pipeline_stages),
        log1p2(flops),
        log1p2(global),
        log1p2(shared),
        log1p2(if global > 0.0 { flops / global } else { 0.0 }),
    ]);
    register_features(l, m, main_kernel, shape.as_ref(), out);
}

/// 32-bit words of the values a store's loads from global or shared memory bring into one
/// thread's registers in one unrolled body.
fn live_load_words(s: &Store) -> f64 {
    s.reads
        .iter()
        .filter(|a| a.scope != Scope::Local)
        .map(|a| a.unrolled.elements * (a.bytes_per_elem / 4.0).max(1.0))
        .sum()
}

/// Register pressure beyond the local arrays, which alone make the estimate of
/// `log_registers_per_thread`: the largest number of loaded words one unrolled body of a
/// store of the main kernel holds (a GEMM's `k`-steps unrolled over its register tile
/// keep a row of A and a column of B per step); the local words plus those plus
/// [`REGISTER_BASE`], uncapped, per thread and per block (NVRTC spills beyond 255 per
/// thread, and the block must fit the processor's registers); the copies of stores in the
/// unrolled bodies (code size); and the main store's loads per copy of it in its unrolled
/// body (what register tiling saves).
fn register_features(
    l: &Lowered,
    m: &Measured,
    main_kernel: usize,
    shape: Option<&KernelShape>,
    out: &mut Vec<f32>,
) {
    let in_main = || m.stores.iter().filter(|s| s.kernel == main_kernel);
    let live = in_main().map(live_load_words).fold(0.0, f64::max);
    let local_words = l
        .kernels
        .get(main_kernel)
        .map_or(0.0, |k| local_words(l, k) as f64);
    let pressure = local_words + live + REGISTER_BASE as f64;
    let threads = shape.map_or(1.0, |s| s.threads);
    let copies: f64 = in_main().map(|s| s.loops.unrolled_body).sum();
    let per_store = m
        .main()
        .map_or(0.0, |s| live_load_words(s) / s.loops.unrolled_body.max(1.0));
    out.extend([
        log1p2(live),
        log1p2(pressure),
        log1p2(pressure * threads),
        log1p2(copies),
        linear(per_store),
    ]);
}

/// 32-bit words of the kernel's local (register) arrays per thread.
fn local_words(l: &Lowered, k: &Kernel) -> i64 {
    k.register_words(&l.program)
}

fn ops_features(ops: &Ops, out: &mut Vec<f32>) {
    out.extend([
        log1p2(ops.add),
        log1p2(ops.mul),
        log1p2(ops.fma),
        log1p2(ops.div),
        log1p2(ops.special),
        log1p2(ops.int),
        log1p2(ops.cmp),
    ]);
}

const SCOPES: [Scope; 3] = [Scope::Global, Scope::Shared, Scope::Local];

fn sum_features(stores: &[Store], out: &mut Vec<f32>) {
    let ops = stores.iter().fold(Ops::default(), |acc, s| acc.plus(s.ops));
    ops_features(&ops, out);
    for scope in SCOPES {
        let (mut bytes, mut lines, mut step, mut count) = (0.0, 0.0, 0.0, 0.0);
        for a in stores
            .iter()
            .flat_map(accesses)
            .filter(|a| a.scope == scope)
        {
            bytes += a.block.elements * a.bytes_per_elem;
            lines += a.block.lines;
            step += a.step.elements * a.bytes_per_elem;
            count += a.count;
        }
        out.extend([log1p2(bytes), log1p2(lines), log1p2(step), log1p2(count)]);
    }
    let (mut transactions, mut wavefronts) = (0.0, 0.0);
    for a in stores.iter().flat_map(accesses) {
        match a.scope {
            Scope::Global => transactions += a.warps * a.warp.lines,
            Scope::Shared => wavefronts += a.warps * a.lanes * a.bank_ways,
            Scope::Local | Scope::Fragment => {}
        }
    }
    out.extend([log1p2(transactions), log1p2(wavefronts)]);
}

fn main_store_features(main: Option<&Store>, out: &mut Vec<f32>) {
    let Some(s) = main else {
        out.resize(FEATURE_NAMES.len(), 0.0);
        return;
    };
    ops_features(&s.ops, out);
    let n = &s.loops;
    out.extend([
        log1p2(n.serial),
        log1p2(n.unrolled),
        log1p2(n.vectorized),
        log1p2(n.parallel),
        log1p2(n.vthread),
        log1p2(s.threads),
        log1p2(n.vector_len),
        log1p2(n.depth),
        linear(f64::from(u8::from(n.guarded))),
        log1p2(n.trips),
    ]);
    for scope in SCOPES {
        let (mut bytes, mut lines) = (0.0, 0.0);
        for a in accesses(s).filter(|a| a.scope == scope) {
            bytes += a.block.elements * a.bytes_per_elem;
            lines += a.block.lines;
        }
        out.extend([log1p2(bytes), log1p2(lines)]);
    }
    let mut reads: Vec<&Access> = s.reads.iter().collect();
    reads.sort_by(|a, b| {
        (b.block.elements * b.bytes_per_elem).total_cmp(&(a.block.elements * a.bytes_per_elem))
    });
    access_features(Some(&s.write), n.vector_len, n.trips, out);
    access_features(reads.first().copied(), n.vector_len, n.trips, out);
    access_features(reads.get(1).copied(), n.vector_len, n.trips, out);
}

/// Fields per access slot.
const ACCESS_FIELDS: usize = 19;

/// The fields of one access slot (all zeros for a missing access).
fn access_features(a: Option<&Access>, vector_len: f64, trips: f64, out: &mut Vec<f32>) {
    let Some(a) = a else {
        out.extend([0.0; ACCESS_FIELDS]);
        return;
    };
    let is = |b: bool| f32::from(u8::from(b));
    // Useful bytes of one warp's access over the bytes of the lines it touches.
    let coalescing = a.warp.elements * a.bytes_per_elem / (a.warp.lines.max(1.0) * a.line_bytes);
    let stride = a.thread_stride.map(i64::unsigned_abs);
    let contiguous = |s: u64| s == 1 || (vector_len > 1.0 && s as f64 == vector_len);
    let fields: [f32; ACCESS_FIELDS] = [
        is(a.scope == Scope::Global),
        is(a.scope == Scope::Shared),
        is(a.scope == Scope::Local),
        log1p2(a.block.elements * a.bytes_per_elem),
        log1p2(a.block.lines),
        log1p2(a.step.elements * a.bytes_per_elem),
        log1p2(a.thread.elements * a.bytes_per_elem),
        log1p2(a.thread.lines),
        log1p2(a.count),
        log1p2(a.warp.lines),
        linear(coalescing.min(1.0)),
        is(stride == Some(0)),
        is(stride.is_some_and(contiguous)),
        is(stride.is_some_and(|s| s != 0 && !contiguous(s))),
        log1p2(a.bank_ways),
        log1p2(a.inner_stride.unsigned_abs() as f64),
        log1p2(a.reuse_count),
        log1p2(a.reuse_distance),
        log1p2(trips / a.thread.elements.max(1.0)),
    ];
    out.extend(fields);
}

#[cfg(test)]
mod tests;
