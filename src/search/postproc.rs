//! Postprocessors: reject a candidate that cannot run on the target before anything is
//! compiled (threads per block, shared memory with the opt-in limit, virtual threads, a
//! CPU kernel's local arrays on the stack,
//! vector width and alignment as the lowering checks them, and a kernel whose unrolled
//! loops expand to more statements than the space allows, which NVRTC would take too long
//! to compile), and after NVRTC a kernel that spills registers beyond the space's
//! threshold. Each rejection is a typed reason whose
//! [`RejectKind`] the tuner counts.

use super::space::SearchSpace;
use crate::codegen::{self, Source};
use crate::ir::{BufferKind, LoopKind, Program, ThreadTag};
use crate::lower::{lower, Backend, LowerError, Lowered};
use crate::target::build_limits::{BuildLimits, BuildRejection};
use crate::target::cuda::CudaLimits;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What kind of limit a rejected candidate broke: the counter it goes into.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectKind {
    ThreadsPerBlock,
    SharedMemory,
    VirtualThreads,
    /// A vectorized loop that is not contiguous or aligned, a barrier under divergent
    /// control flow, or another program the lowering refuses.
    Lowering,
    RegisterSpills,
    StackFrame,
    Registers,
    /// Unrolled loops expanding to more statements than `max_unrolled_statements`.
    Unrolled,
    /// Global buffers of its own (copies made by kernels of their own) beyond
    /// `max_workspace_bytes`.
    Workspace,
}

impl RejectKind {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            RejectKind::ThreadsPerBlock => "threads",
            RejectKind::SharedMemory => "shared_memory",
            RejectKind::VirtualThreads => "vthreads",
            RejectKind::Lowering => "lowering",
            RejectKind::RegisterSpills => "spills",
            RejectKind::StackFrame => "stack",
            RejectKind::Registers => "registers",
            RejectKind::Unrolled => "unrolled",
            RejectKind::Workspace => "workspace",
        }
    }
}

/// Why a candidate was rejected.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Rejection {
    #[error("kernel {kernel} has {threads} threads per block, outside {min}..={max}")]
    ThreadsPerBlock {
        kernel: String,
        threads: i64,
        min: i64,
        max: i64,
    },
    #[error("kernel {kernel} needs {bytes} bytes of shared memory, more than the {limit} the target allows")]
    SharedMemory {
        kernel: String,
        bytes: i64,
        limit: i64,
    },
    #[error("{count} virtual threads, more than {limit}")]
    VirtualThreads { count: i64, limit: i64 },
    #[error("kernel {kernel} unrolls to {statements} statements, more than {limit}")]
    Unrolled {
        kernel: String,
        statements: i64,
        limit: i64,
    },
    #[error("kernel {kernel} declares {bytes} bytes of local arrays, more than the {limit} a thread's stack is given (`postprocess.max_local_bytes`)")]
    LocalArrays {
        kernel: String,
        bytes: i64,
        limit: i64,
    },
    #[error("the program allocates {bytes} bytes of global buffers of its own ({largest} the largest), more than the {limit} allowed (`postprocess.max_workspace_bytes`)")]
    Workspace {
        bytes: i64,
        largest: String,
        limit: i64,
    },
    #[error("kernel {kernel} holds {registers} registers of tensor-core fragments a thread, which with {threads} threads and the {margin} an instruction needs besides exceed the {limit} a thread may have")]
    FragmentRegisters {
        kernel: String,
        registers: i64,
        threads: i64,
        margin: i64,
        limit: i64,
    },
    #[error("cannot be lowered: {0}")]
    Lowering(LowerError),
    /// After NVRTC, found by the worker (spills, registers per block).
    #[error(transparent)]
    Build(#[from] BuildRejection),
}

impl Rejection {
    pub fn kind(&self) -> RejectKind {
        match self {
            Rejection::ThreadsPerBlock { .. } => RejectKind::ThreadsPerBlock,
            Rejection::SharedMemory { .. } => RejectKind::SharedMemory,
            Rejection::VirtualThreads { .. } => RejectKind::VirtualThreads,
            Rejection::Unrolled { .. } => RejectKind::Unrolled,
            Rejection::LocalArrays { .. } => RejectKind::StackFrame,
            Rejection::Workspace { .. } => RejectKind::Workspace,
            Rejection::FragmentRegisters { .. } => RejectKind::Registers,
            Rejection::Lowering(_) => RejectKind::Lowering,
            Rejection::Build(BuildRejection::RegisterSpills { .. }) => RejectKind::RegisterSpills,
            Rejection::Build(BuildRejection::StackFrame { .. }) => RejectKind::StackFrame,
            Rejection::Build(BuildRejection::Registers { .. }) => RejectKind::Registers,
        }
    }
}

/// Where candidates go and what limits they must fit.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetLimits {
    Cuda(CudaLimits),
    Cpu,
}

impl TargetLimits {
    pub fn backend(&self) -> Backend {
        match self {
            TargetLimits::Cuda(_) => Backend::Cuda,
            TargetLimits::Cpu => Backend::Cpu,
        }
    }
}

/// A candidate that passed the checks before compiling: its kernels and source.
#[derive(Clone, Debug)]
pub struct Verified {
    pub lowered: Lowered,
    pub source: Source,
}

/// The product of the extents of all vthread-bound loops of one nest, the largest over
/// the program's root nests.
fn vthreads(p: &Program) -> i64 {
    let mut worst = 1;
    for root in &p.root {
        let crate::ir::Node::Loop(l) = root else {
            continue;
        };
        let mut count = 1i64;
        for id in std::iter::once(*l).chain(p.loops_under(*l)) {
            let lp = p.lp(id);
            if let LoopKind::Thread(t) = lp.kind {
                if matches!(t, ThreadTag::VThread(_)) {
                    count = count.saturating_mul(lp.extent);
                }
            }
        }
        worst = worst.max(count);
    }
    worst
}

/// The elements of `p`'s largest output.
fn output_elements(p: &Program) -> i64 {
    p.params
        .iter()
        .map(|b| p.buffer(*b))
        .filter(|b| b.kind == BufferKind::Output)
        .map(|b| b.numel())
        .max()
        .unwrap_or(1)
}

/// Lowers `p` for the target and checks it against the target's and the space's limits;
/// the kernels and their source, or why the candidate cannot run: [`check`], then
/// [`generate`].
pub fn verify(
    p: &Program,
    space: &SearchSpace,
    target: &TargetLimits,
) -> Result<Verified, Rejection> {
    let lowered = check(p, space, target)?;
    let source = generate(&lowered, target)?;
    Ok(Verified { lowered, source })
}

/// Lowers `p` for the target and checks it against the target's and the space's limits,
/// without generating source: what the search scores before it picks what to build.
pub fn check(
    p: &Program,
    space: &SearchSpace,
    target: &TargetLimits,
) -> Result<Lowered, Rejection> {
    check_program(p, space, target)?;
    let lowered = lower(p, target.backend()).map_err(Rejection::Lowering)?;
    check_lowered(&lowered, space, target)?;
    Ok(lowered)
}

/// The limits [`check`] tests before lowering: the virtual threads of a CUDA program.
pub fn check_program(
    p: &Program,
    space: &SearchSpace,
    target: &TargetLimits,
) -> Result<(), Rejection> {
    if let TargetLimits::Cuda(_) = target {
        let count = vthreads(p);
        if count > space.max_vthreads {
            return Err(Rejection::VirtualThreads {
                count,
                limit: space.max_vthreads,
            });
        }
    }
    Ok(())
}

/// The limits [`check`] tests after lowering: the global buffers the program allocates,
/// threads and shared memory per CUDA block, the local arrays of a CPU kernel.
pub fn check_lowered(
    lowered: &Lowered,
    space: &SearchSpace,
    target: &TargetLimits,
) -> Result<(), Rejection> {
    if let Some(limit) = space.max_workspace_bytes {
        check_workspace(lowered, limit)?;
    }
    if let (TargetLimits::Cpu, Some(limit)) = (target, space.max_local_bytes) {
        for k in &lowered.kernels {
            let bytes = k.local_bytes(&lowered.program);
            if bytes > limit {
                return Err(Rejection::LocalArrays {
                    kernel: k.name.clone(),
                    bytes,
                    limit,
                });
            }
        }
    }
    if let TargetLimits::Cuda(limits) = target {
        let max = space
            .max_threads_per_block
            .min(i64::from(limits.max_threads_per_block));
        for k in &lowered.kernels {
            let threads = k.threads();
            // Only the main nest is held to the space's minimum; a standalone stage may
            // be smaller than one warp.
            let min = if lowered.kernels.len() == 1 {
                space.min_threads(output_elements(&lowered.program))
            } else {
                1
            };
            if threads < min || threads > max {
                return Err(Rejection::ThreadsPerBlock {
                    kernel: k.name.clone(),
                    threads,
                    min,
                    max,
                });
            }
            let bytes = k.shared_bytes(&lowered.program);
            let limit = i64::from(limits.max_shared_bytes_optin);
            if bytes > limit {
                return Err(Rejection::SharedMemory {
                    kernel: k.name.clone(),
                    bytes,
                    limit,
                });
            }
            // Fragments live in registers and cannot spill: ptxas refuses a kernel whose
            // wgmma accumulators leave no room (`C7602 Insufficient registers`), after
            // the compile. Mutating a sample's warpgroups apart from its columns makes such
            // blocks (512 threads of 128 accumulators each).
            let registers = k.fragment_words(&lowered.program);
            if registers > 0 {
                let limit = i64::from(limits.max_registers_per_thread)
                    .min(i64::from(limits.max_registers_per_block) / threads.max(1));
                if registers + MMA_MARGIN_REGISTERS > limit {
                    return Err(Rejection::FragmentRegisters {
                        kernel: k.name.clone(),
                        registers,
                        threads,
                        margin: MMA_MARGIN_REGISTERS,
                        limit,
                    });
                }
            }
            if let Some(limit) = space.max_unrolled_statements {
                let statements = k.unrolled_statements();
                if statements > limit {
                    return Err(Rejection::Unrolled {
                        kernel: k.name.clone(),
                        statements,
                        limit,
                    });
                }
            }
        }
    }
    Ok(())
}

/// The global buffers a program allocates besides its parameters (operands copied,
/// transposed, padded or gathered by kernels of their own, partial sums), at most
/// `limit` bytes in all: a GEMM view's gathered data hold each input element once per
/// window position that reads it, which for a large convolution is gigabytes.
fn check_workspace(lowered: &Lowered, limit: i64) -> Result<(), Rejection> {
    let p = &lowered.program;
    let size = |b: &crate::ir::BufferId| p.buffer(*b).numel() * p.buffer(*b).dtype.bytes() as i64;
    let bytes: i64 = lowered.workspaces.iter().map(size).sum();
    if bytes <= limit {
        return Ok(());
    }
    let largest = lowered
        .workspaces
        .iter()
        .max_by_key(|b| size(b))
        .map(|b| p.buffer(*b).name.clone())
        .unwrap_or_default();
    Err(Rejection::Workspace {
        bytes,
        largest,
        limit,
    })
}

/// Registers a tensor-core kernel needs besides its fragments, at least: the
/// instruction's shared-memory descriptors or addresses and the loop state.
const MMA_MARGIN_REGISTERS: i64 = 8;

/// The source of a checked candidate for the target.
pub fn generate(lowered: &Lowered, target: &TargetLimits) -> Result<Source, Rejection> {
    match target {
        TargetLimits::Cuda(_) => codegen::cuda::generate(lowered),
        TargetLimits::Cpu => codegen::cpu::generate(lowered),
    }
    .map_err(|e| Rejection::Lowering(LowerError::Invalid(e.to_string())))
}

/// The limits a CUDA build must fit, checked by the worker right after NVRTC and before
/// the candidate runs: the space's spill threshold and the device's registers per block.
pub fn build_limits(space: &SearchSpace, limits: &CudaLimits) -> BuildLimits {
    BuildLimits {
        max_spill_bytes: space.max_spill_bytes,
        max_stack_bytes: space.max_stack_bytes,
        max_registers_per_block: limits.max_registers_per_block,
    }
}
