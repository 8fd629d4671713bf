//! The GPU-semantics interpreter: runs the kernels of a [`Lowered`] program on the CPU
//! the way a GPU would, so that every generated kernel can be checked without a GPU.
//!
//! Semantics:
//! * global buffers are the program's parameters (given, in order) and the lowered
//!   program's workspaces (allocated per run, NaN-filled); kernels run in order;
//! * thread blocks run one after another (x fastest, then y, then z); each gets fresh
//!   NaN-filled shared allocs; each thread gets its own NaN-filled local allocs and its
//!   own variables; the kernel's thread variables hold the block and thread indices
//!   (a virtual-thread variable, which lowering should have removed, holds 0);
//! * the threads of a block run in lockstep, statement by statement: a `For` is run by
//!   all active threads (extents are constants); an `If` narrows the active threads to
//!   those whose condition holds; a `Store` evaluates its value and index for every
//!   active thread first, then writes (as SIMT hardware does); a `Sync` must be reached
//!   by every thread of the block, otherwise [`GpuInterpError::DivergentBarrier`];
//! * a local alloc declared at the start of a loop body (`Alloc::at`) is poisoned with
//!   NaN again at the start of every iteration (it is a fresh array there in C); shared
//!   allocs keep their contents across iterations;
//! * races: between two barriers, two different threads of a block touching one
//!   shared element, at least one of them writing, is a [`GpuInterpError::SharedRace`]
//!   (found from the access sets, not the values; a thread re-reading or re-writing its
//!   own element is fine). Two writes of different values to one global element by
//!   different blocks, or by different threads of a block between the same barriers,
//!   are a [`GpuInterpError::GlobalConflict`] (equal values are benign duplicates);
//! * `cp.async` copies are asynchronous, per thread: the global value is read when the
//!   copy is issued, but the shared element is written only when a
//!   `cp.async.wait_group n` of that thread retires the copy's group. Since a copy may
//!   land at any time in between, it is race-tracked as a write of the issuing thread
//!   both when issued and when it lands (groups are formed by `cp.async.commit_group`, oldest retired first,
//!   until at most `n` are in flight). A missing or wrong wait therefore shows as stale
//!   or NaN data, or as a race with the threads that read the element first; copies
//!   still in flight when a block ends are dropped;
//! * every access has one flat index, checked against the buffer's extent (global) or
//!   the alloc's compacted size (shared, local);
//! * expressions as in the serial interpreter: exact `i64` index arithmetic with floor
//!   division and modulo, `f32` values, lazy `Select`, NaN-propagating float `Min`/`Max`,
//!   stores converted to the buffer's dtype. Reading a never-written float element
//!   yields NaN, which [`check_lowered`] reports.
//!
//! A malformed kernel is an error, never a panic.

mod expr;
mod track;

#[cfg(test)]
mod tests;

pub use track::RaceKind;

use super::check::{compare_outputs, match_params};
use super::expr::{self as cexpr, Access, BExpr, FBin, FExpr};
use super::{random_inputs, CheckError, Interpreter};
use crate::ir::{Dim3, Expr, Program, Scope, ThreadTag};
use crate::lower::{KStmt, Kernel, Lowered};
use expr::{Fault, KBuf, KernelScope, Mem, Thread};
use ndarray::ArrayD;
use thiserror::Error;
use track::{GlobalTrack, SharedTrack};

/// The most threads a block may have (CUDA's limit).
const MAX_THREADS: i64 = 1024;

/// The most elements one buffer, alloc, or per-block local storage may have.
const MAX_ELEMENTS: i64 = 1 << 30;

/// Why the GPU-semantics interpreter refused a kernel or stopped running it. Places are
/// block and thread indices as `[x, y, z]`.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum GpuInterpError {
    /// The caller passed the wrong number of parameter arrays.
    #[error("program {program} takes {expected} parameters, got {got}")]
    ParamCount {
        program: String,
        expected: usize,
        got: usize,
    },
    /// A parameter array does not have its buffer's shape.
    #[error("parameter {position} ({buffer}) has shape {got:?}, expected {expected:?}")]
    ParamShape {
        position: usize,
        buffer: String,
        expected: Vec<i64>,
        got: Vec<usize>,
    },
    /// An id points outside its arena.
    #[error("kernel {kernel}: {id} does not exist")]
    DanglingId { kernel: String, id: String },
    /// A buffer, alloc or launch has an unusable size.
    #[error("kernel {kernel}: {what} has unusable size {size}")]
    BadSize {
        kernel: String,
        what: String,
        size: i64,
    },
    /// A buffer is declared twice, or an alloc is not shared or local.
    #[error("kernel {kernel}: buffer {buffer} {reason}")]
    BadDeclaration {
        kernel: String,
        buffer: String,
        reason: String,
    },
    /// A kernel accesses a buffer that is neither one of its parameters nor an alloc.
    #[error("kernel {kernel}: buffer {buffer} is neither a kernel parameter nor allocated")]
    UnknownBuffer { kernel: String, buffer: String },
    /// An access does not have exactly one (flat) index.
    #[error("kernel {kernel}: access to {buffer} has {got} indices, expected one flat index")]
    NotFlat {
        kernel: String,
        buffer: String,
        got: usize,
    },
    /// An expression is ill-typed.
    #[error("kernel {kernel}: type error: {reason}")]
    Type { kernel: String, reason: String },
    /// An expression nests deeper than the interpreter accepts.
    #[error("kernel {kernel}: expression nests deeper than {limit}")]
    TooDeep { kernel: String, limit: usize },
    /// A load or store outside the buffer (or compacted alloc).
    #[error("kernel {kernel}: {buffer}[{index}] is out of bounds (size {size}) in block {block:?} thread {thread:?}")]
    OutOfBounds {
        kernel: String,
        buffer: String,
        index: i64,
        size: i64,
        block: [u32; 3],
        thread: [u32; 3],
    },
    /// Two threads of a block touched one shared element without a barrier between,
    /// at least one writing.
    #[error("kernel {kernel}: {kind} race on shared {buffer}[{index}] between threads {:?} and {:?} of block {block:?}", threads.0, threads.1)]
    SharedRace {
        kernel: String,
        buffer: String,
        index: i64,
        block: [u32; 3],
        threads: ([u32; 3], [u32; 3]),
        kind: RaceKind,
    },
    /// Two unordered writes of different values to one global element:
    /// `(block, thread)` of the earlier and of the later writer.
    #[error("kernel {kernel}: unordered writes of different values to {buffer}[{index}] by block {:?} thread {:?} and block {:?} thread {:?}", first.0, first.1, second.0, second.1)]
    GlobalConflict {
        kernel: String,
        buffer: String,
        index: i64,
        first: ([u32; 3], [u32; 3]),
        second: ([u32; 3], [u32; 3]),
    },
    /// A barrier reached by only some threads of the block.
    #[error("kernel {kernel}: barrier reached by {reached} of {threads} threads in block {block:?} (first missing thread {missing:?})")]
    DivergentBarrier {
        kernel: String,
        block: [u32; 3],
        reached: usize,
        threads: i64,
        missing: [u32; 3],
    },
    /// A warp reduction run by only some lanes of a group.
    #[error("kernel {kernel}: warp reduction over {lanes} lanes run by {reached} of them in block {block:?} (first missing thread {missing:?})")]
    PartialWarpReduce {
        kernel: String,
        block: [u32; 3],
        lanes: u32,
        reached: usize,
        missing: [u32; 3],
    },
    /// An integer or boolean element read before it was written.
    #[error("kernel {kernel}: read of never-written {buffer}[{index}] in block {block:?} thread {thread:?}")]
    UnwrittenRead {
        kernel: String,
        buffer: String,
        index: i64,
        block: [u32; 3],
        thread: [u32; 3],
    },
    /// Integer division or modulo by zero, or integer overflow.
    #[error("kernel {kernel}: integer {what} in block {block:?} thread {thread:?}")]
    Arithmetic {
        kernel: String,
        what: &'static str,
        block: [u32; 3],
        thread: [u32; 3],
    },
}

/// The result type of the GPU-semantics interpreter.
pub type GpuResult<T> = std::result::Result<T, GpuInterpError>;

/// Why [`check_lowered`] failed: the kernels did not run, or do not compute the
/// reference's result.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum GpuCheckError {
    #[error("{0}")]
    Check(#[from] CheckError),
    #[error("kernel run failed: {0}")]
    Kernel(#[from] GpuInterpError),
}

/// Runs the kernels of `lowered` on `params` (the program's parameters, in order);
/// outputs are written in place.
pub fn run_kernels(lowered: &Lowered, params: &mut [ArrayD<f32>]) -> GpuResult<()> {
    let prog = &lowered.program;
    if params.len() != prog.params.len() {
        return Err(GpuInterpError::ParamCount {
            program: prog.name.clone(),
            expected: prog.params.len(),
            got: params.len(),
        });
    }
    let globals: Vec<_> = prog
        .params
        .iter()
        .chain(&lowered.workspaces)
        .copied()
        .collect();
    let mut sizes = Vec::with_capacity(globals.len());
    for &b in &globals {
        let buf = prog
            .buffers
            .get(b.index())
            .ok_or_else(|| GpuInterpError::DanglingId {
                kernel: prog.name.clone(),
                id: b.to_string(),
            })?;
        let n = buf
            .shape
            .iter()
            .try_fold(1i64, |a, &d| if d < 0 { None } else { a.checked_mul(d) })
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| GpuInterpError::BadSize {
                kernel: prog.name.clone(),
                what: format!("buffer {} {:?}", buf.name, buf.shape),
                size: -1,
            })?;
        sizes.push(n);
    }
    for (position, arr) in params.iter_mut().enumerate() {
        let buf = prog.buffer(prog.params[position]);
        let shape_ok = arr.ndim() == buf.shape.len()
            && arr
                .shape()
                .iter()
                .zip(&buf.shape)
                .all(|(&a, &b)| a as i64 == b);
        if !shape_ok {
            return Err(GpuInterpError::ParamShape {
                position,
                buffer: buf.name.clone(),
                expected: buf.shape.clone(),
                got: arr.shape().to_vec(),
            });
        }
        if arr.as_slice().is_none() {
            *arr = arr.as_standard_layout().into_owned();
        }
    }
    let compiled = lowered
        .kernels
        .iter()
        .map(|k| compile_kernel(prog, k, &globals, &sizes))
        .collect::<GpuResult<Vec<_>>>()?;
    // Workspaces of floats start NaN (a read of what no kernel wrote shows); the `int`
    // ones, counters, start at 0 as the runner's zeroed workspaces do.
    let mut owned: Vec<Vec<f32>> = sizes[params.len()..]
        .iter()
        .zip(&lowered.workspaces)
        .map(|(&n, b)| match prog.buffer(*b).dtype.is_float() {
            true => vec![f32::NAN; n as usize],
            false => vec![0.0; n as usize],
        })
        .collect();
    let mut global: Vec<&mut [f32]> = Vec::with_capacity(globals.len());
    for arr in params.iter_mut() {
        match arr.as_slice_mut() {
            Some(s) => global.push(s),
            None => global.push(&mut []),
        }
    }
    global.extend(owned.iter_mut().map(|v| v.as_mut_slice()));
    for k in &compiled {
        k.run(&mut global)?;
    }
    Ok(())
}

/// Runs the serial interpreter on the unscheduled `reference` and the kernels of
/// `lowered` on the same random inputs; returns the largest relative error over the
/// outputs, or why the kernels fail (as [`super::check`] does, plus kernel errors).
pub fn check_lowered(
    reference: &Program,
    lowered: &Lowered,
    seed: u64,
) -> Result<f64, GpuCheckError> {
    let params = match_params(reference, &lowered.program)?;
    let interp = Interpreter::new(reference).map_err(CheckError::Reference)?;
    let inputs = random_inputs(reference, seed).map_err(CheckError::Reference)?;
    let mut expected = inputs.clone();
    interp.run(&mut expected).map_err(CheckError::Reference)?;
    let mut got = inputs;
    run_kernels(lowered, &mut got)?;
    Ok(compare_outputs(params, &got, &expected)?)
}

/// A compiled kernel statement.
#[derive(Debug)]
enum CStmt {
    For {
        slot: u32,
        extent: i64,
        /// Local allocs declared at this loop's body, poisoned every iteration.
        poison: Vec<usize>,
        body: Vec<CStmt>,
    },
    If {
        cond: BExpr,
        then: Vec<CStmt>,
    },
    /// `access = value`: the access has one (flat) index.
    Store {
        access: Access,
        value: FExpr,
    },
    Sync,
    /// `cp.async`: per lane the shared destination and the global value; zeros when
    /// `valid` is false.
    CpAsync {
        lanes: Vec<(Access, FExpr)>,
        valid: Option<BExpr>,
    },
    CommitGroup,
    WaitGroup(usize),
    /// `access = op(current, the butterfly combination of value over the lanes' group)`:
    /// the groups are `lanes` consecutive threads (`lanes` divides the block's x extent).
    WarpReduce {
        access: Access,
        current: FExpr,
        value: FExpr,
        op: FBin,
        lanes: u32,
    },
    /// [`KStmt::Arrive`]: the counter's access (global), the arrivals it counts to and the
    /// slot of the variable that tells the block whether it arrived last.
    Arrive {
        counter: Access,
        arrivals: i64,
        last: u32,
    },
}

/// A kernel compiled for running.
struct CKernel {
    name: String,
    bufs: Vec<KBuf>,
    grid: [i64; 3],
    block: [i64; 3],
    /// Variable slot and tag of each thread variable.
    thread_vars: Vec<(u32, ThreadTag)>,
    n_slots: usize,
    shared_sizes: Vec<usize>,
    local_sizes: Vec<usize>,
    /// Size of each global buffer if the kernel writes it (tracked for conflicts), else 0.
    written: Vec<usize>,
    body: Vec<CStmt>,
}

fn compile_kernel(
    prog: &Program,
    k: &Kernel,
    globals: &[crate::ir::BufferId],
    sizes: &[i64],
) -> GpuResult<CKernel> {
    let kernel = k.name.clone();
    let bad_size = |what: String, size: i64| GpuInterpError::BadSize {
        kernel: kernel.clone(),
        what,
        size,
    };
    for (d, (&g, &b)) in k.grid.iter().zip(&k.block).enumerate() {
        if !(1..=MAX_ELEMENTS).contains(&g) {
            return Err(bad_size(format!("grid dimension {d}"), g));
        }
        if !(1..=MAX_THREADS).contains(&b) {
            return Err(bad_size(format!("block dimension {d}"), b));
        }
    }
    let blocks = k.grid.iter().try_fold(1i64, |a, &g| a.checked_mul(g));
    if !matches!(blocks, Some(n) if n <= MAX_ELEMENTS) {
        return Err(bad_size("the grid".into(), blocks.unwrap_or(i64::MAX)));
    }
    let threads = k.block.iter().product::<i64>();
    if threads > MAX_THREADS {
        return Err(bad_size("the thread block".into(), threads));
    }
    let mut buf_index: Vec<Option<u32>> = vec![None; prog.buffers.len()];
    let mut bufs: Vec<KBuf> = Vec::new();
    let mut declare = |b: crate::ir::BufferId, mem: Mem, slot: usize, size: i64| {
        let buf = prog
            .buffers
            .get(b.index())
            .ok_or_else(|| GpuInterpError::DanglingId {
                kernel: kernel.clone(),
                id: b.to_string(),
            })?;
        if buf_index[b.index()].is_some() {
            return Err(GpuInterpError::BadDeclaration {
                kernel: kernel.clone(),
                buffer: buf.name.clone(),
                reason: "is declared more than once".into(),
            });
        }
        buf_index[b.index()] = Some(bufs.len() as u32);
        bufs.push(KBuf {
            name: buf.name.clone(),
            mem,
            slot,
            size,
            dtype: buf.dtype,
        });
        Ok(())
    };
    for &b in &k.params {
        let pos =
            globals
                .iter()
                .position(|&g| g == b)
                .ok_or_else(|| GpuInterpError::UnknownBuffer {
                    kernel: kernel.clone(),
                    buffer: prog
                        .buffers
                        .get(b.index())
                        .map_or_else(|| b.to_string(), |x| x.name.clone()),
                })?;
        declare(b, Mem::Global, pos, sizes[pos])?;
    }
    let (mut shared_sizes, mut local_sizes) = (Vec::new(), Vec::new());
    let mut poison_at = Vec::new();
    for a in &k.allocs {
        // A warp's fragment is simulated as a thread's local array: each lane holds the
        // whole logical tile and runs the warp's intrinsic on it (`interp/gpu` intrinsics).
        let per_block = if matches!(a.scope, Scope::Local | Scope::Fragment) {
            a.size.checked_mul(threads)
        } else {
            Some(a.size)
        };
        if a.size < 0 || !matches!(per_block, Some(n) if n <= MAX_ELEMENTS) {
            return Err(bad_size(format!("alloc of {}", a.buffer), a.size));
        }
        match a.scope {
            Scope::Shared => {
                declare(a.buffer, Mem::Shared, shared_sizes.len(), a.size)?;
                shared_sizes.push(a.size as usize);
            }
            Scope::Local | Scope::Fragment => {
                if let Some(v) = a.at {
                    poison_at.push((v, local_sizes.len()));
                }
                declare(a.buffer, Mem::Local, local_sizes.len(), a.size)?;
                local_sizes.push(a.size as usize);
            }
            Scope::Global => {
                return Err(GpuInterpError::BadDeclaration {
                    kernel: kernel.clone(),
                    buffer: prog.buffer(a.buffer).name.clone(),
                    reason: "is a global alloc inside a kernel (workspaces are parameters)".into(),
                })
            }
        }
    }
    let mut thread_vars = Vec::new();
    for &(v, tag) in &k.thread_vars {
        if v.index() >= prog.vars.len() {
            return Err(GpuInterpError::DanglingId {
                kernel: kernel.clone(),
                id: v.to_string(),
            });
        }
        thread_vars.push((v.index() as u32, tag));
    }
    let c = KernelScope {
        prog,
        kernel: &kernel,
        buf_index: &buf_index,
        bufs: &bufs,
        lane: k.lane(),
        block_x: k.block[0],
    };
    let body = stmts(&c, &k.body, &poison_at)?;
    let mut written = vec![0usize; globals.len()];
    mark_written(&body, &bufs, &mut written);
    Ok(CKernel {
        name: kernel.clone(),
        grid: k.grid,
        block: k.block,
        thread_vars,
        n_slots: prog.vars.len(),
        shared_sizes,
        local_sizes,
        written,
        bufs,
        body,
    })
}

fn stmts(
    c: &KernelScope,
    body: &[KStmt],
    poison_at: &[(crate::ir::VarId, usize)],
) -> GpuResult<Vec<CStmt>> {
    let mut out = Vec::with_capacity(body.len());
    for s in body {
        match s {
            KStmt::For {
                var, extent, body, ..
            } => {
                if var.index() >= c.prog.vars.len() {
                    return Err(GpuInterpError::DanglingId {
                        kernel: c.kernel.to_string(),
                        id: var.to_string(),
                    });
                }
                out.push(CStmt::For {
                    slot: var.index() as u32,
                    extent: *extent,
                    poison: poison_at
                        .iter()
                        .filter(|(v, _)| v == var)
                        .map(|(_, l)| *l)
                        .collect(),
                    body: stmts(c, body, poison_at)?,
                });
            }
            KStmt::If { cond, then } => out.push(CStmt::If {
                cond: cexpr::boolean(c, cond, 0)?,
                then: stmts(c, then, poison_at)?,
            }),
            KStmt::Store {
                buffer,
                indices,
                value,
            } => {
                let (access, dtype) = cexpr::access(c, *buffer, indices, 0)?;
                let value = cexpr::store_value(c, dtype, value)?;
                out.push(CStmt::Store { access, value });
            }
            KStmt::Sync => out.push(CStmt::Sync),
            KStmt::Arrive {
                counter,
                index,
                arrivals,
                last,
            } => {
                if last.index() >= c.prog.vars.len() {
                    return Err(GpuInterpError::DanglingId {
                        kernel: c.kernel.to_string(),
                        id: last.to_string(),
                    });
                }
                let (counter, _) = cexpr::access(c, *counter, std::slice::from_ref(index), 0)?;
                out.push(CStmt::Arrive {
                    counter,
                    arrivals: *arrivals,
                    last: last.index() as u32,
                });
            }
            KStmt::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
                lanes,
                valid,
            } => {
                let mut copies = Vec::new();
                for (index, load) in
                    crate::lower::cp_async_lanes(dst_index, *src, src_index, *lanes)
                {
                    let (access, dtype) = cexpr::access(c, *dst, &[index], 0)?;
                    copies.push((access, cexpr::store_value(c, dtype, &load)?));
                }
                // The simplifier may have folded the condition to an integer constant.
                let valid = match valid {
                    Some(v) => Some(match cexpr::expr(c, v, 0)? {
                        cexpr::Typed::I(i) => BExpr::IntNonZero(Box::new(i)),
                        _ => cexpr::boolean(c, v, 0)?,
                    }),
                    None => None,
                };
                out.push(CStmt::CpAsync {
                    lanes: copies,
                    valid,
                });
            }
            KStmt::CommitGroup => out.push(CStmt::CommitGroup),
            KStmt::WaitGroup(n) => out.push(CStmt::WaitGroup((*n).max(0) as usize)),
            // A warp's instruction: its logical meaning on this lane's copies of the warp's
            // fragments (the store made by lane 0 alone).
            KStmt::Mma(m) => out.extend(stmts(c, &m.logical(c.lane), poison_at)?),
            KStmt::WarpReduce {
                buffer,
                indices,
                op,
                value,
                lanes,
                ..
            } => {
                let op = match FBin::of(*op) {
                    Some(f @ (FBin::Add | FBin::Max | FBin::Min)) => f,
                    _ => {
                        return Err(GpuInterpError::Type {
                            kernel: c.kernel.to_string(),
                            reason: format!("a warp reduction by {op:?}"),
                        })
                    }
                };
                if c.block_x % *lanes != 0 || lanes.count_ones() != 1 || *lanes > 32 {
                    return Err(GpuInterpError::BadSize {
                        kernel: c.kernel.to_string(),
                        what: "a warp reduction's lane group (a power of two up to 32 that divides the block's x extent)".into(),
                        size: *lanes,
                    });
                }
                let (access, dtype) = cexpr::access(c, *buffer, indices, 0)?;
                let current = Expr::Load(*buffer, indices.clone());
                out.push(CStmt::WarpReduce {
                    access,
                    current: cexpr::store_value(c, dtype, &current)?,
                    value: cexpr::store_value(c, dtype, value)?,
                    op,
                    lanes: *lanes as u32,
                });
            }
            KStmt::Comment(_) => {}
        }
    }
    Ok(out)
}

fn mark_written(body: &[CStmt], bufs: &[KBuf], written: &mut [usize]) {
    for s in body {
        match s {
            CStmt::For { body, .. } | CStmt::If { then: body, .. } => {
                mark_written(body, bufs, written)
            }
            CStmt::Store { access, .. } | CStmt::WarpReduce { access, .. } => {
                let b = &bufs[access.buf as usize];
                if b.mem == Mem::Global {
                    written[b.slot] = b.size as usize;
                }
            }
            CStmt::Sync
            | CStmt::CpAsync { .. }
            | CStmt::CommitGroup
            | CStmt::WaitGroup(_)
            | CStmt::Arrive { .. } => {}
        }
    }
}

fn dim(d: Dim3) -> usize {
    match d {
        Dim3::X => 0,
        Dim3::Y => 1,
        Dim3::Z => 2,
    }
}

/// `[x, y, z]` of a linear index within `dims` (x fastest).
fn coords(lin: u32, dims: [i64; 3]) -> [u32; 3] {
    let l = i64::from(lin);
    [
        l % dims[0],
        (l / dims[0]) % dims[1],
        l / (dims[0] * dims[1]),
    ]
    .map(|c| c as u32)
}

/// One pending write of a `Store` (or `cp.async`): thread, buffer, flat index, storage
/// place, value.
#[derive(Clone)]
struct Write {
    thread: u32,
    buf: u32,
    index: i64,
    mem: Mem,
    slot: usize,
    off: usize,
    value: f32,
}

/// The state of one thread block while it runs.
struct BlockRun<'k, 'g, 'b> {
    k: &'k CKernel,
    block_lin: u32,
    threads: usize,
    global: &'g mut [&'b mut [f32]],
    shared: Vec<Vec<f32>>,
    local: Vec<Vec<f32>>,
    env: Vec<i64>,
    track: SharedTrack,
    gtrack: &'g mut GlobalTrack,
    /// Unique per block and barrier interval (for global conflicts).
    epoch: &'g mut u64,
    writes: Vec<Write>,
    /// Per thread: the `cp.async` copies issued since its last commit, and its committed
    /// groups still in flight, oldest first. A copy lands (is written, race-tracked as a
    /// write of its thread) only when a `cp.async.wait_group` of its thread retires its
    /// group.
    open: Vec<Vec<Write>>,
    in_flight: Vec<std::collections::VecDeque<Vec<Write>>>,
}

impl CKernel {
    fn run(&self, global: &mut [&mut [f32]]) -> GpuResult<()> {
        let threads = self.block.iter().product::<i64>() as usize;
        let blocks = self.grid.iter().product::<i64>();
        let mut gtrack = GlobalTrack::new(&self.written);
        let mut epoch = 0u64;
        let mut shared: Vec<Vec<f32>> = self.shared_sizes.iter().map(|&n| vec![0.0; n]).collect();
        let mut local: Vec<Vec<f32>> = self
            .local_sizes
            .iter()
            .map(|&n| vec![0.0; n * threads])
            .collect();
        let mut track = SharedTrack::new(&self.shared_sizes);
        let mut env = vec![0i64; self.n_slots * threads];
        let mut writes = Vec::new();
        for b in 0..blocks {
            let block_lin = b as u32;
            let bidx = coords(block_lin, self.grid);
            shared.iter_mut().for_each(|s| s.fill(f32::NAN));
            local.iter_mut().for_each(|s| s.fill(f32::NAN));
            track.barrier();
            epoch += 1;
            for t in 0..threads {
                let tidx = coords(t as u32, self.block);
                for &(slot, tag) in &self.thread_vars {
                    env[t * self.n_slots + slot as usize] = match tag {
                        ThreadTag::BlockIdx(d) => i64::from(bidx[dim(d)]),
                        ThreadTag::ThreadIdx(d) => i64::from(tidx[dim(d)]),
                        ThreadTag::VThread(_) => 0,
                    };
                }
            }
            let mut run = BlockRun {
                k: self,
                block_lin,
                threads,
                global,
                shared: std::mem::take(&mut shared),
                local: std::mem::take(&mut local),
                env: std::mem::take(&mut env),
                track,
                gtrack: &mut gtrack,
                epoch: &mut epoch,
                writes: std::mem::take(&mut writes),
                open: vec![Vec::new(); threads],
                in_flight: vec![std::collections::VecDeque::new(); threads],
            };
            let all: Vec<u32> = (0..threads as u32).collect();
            let r = run.stmts(&self.body, &all);
            (shared, local, env, track, writes) =
                (run.shared, run.local, run.env, run.track, run.writes);
            r?;
        }
        Ok(())
    }
}

impl BlockRun<'_, '_, '_> {
    fn block_idx(&self) -> [u32; 3] {
        coords(self.block_lin, self.k.grid)
    }

    fn thread_idx(&self, t: u32) -> [u32; 3] {
        coords(t, self.k.block)
    }

    fn thread(&mut self, t: u32) -> Thread<'_> {
        let n = self.k.n_slots;
        let start = t as usize * n;
        Thread {
            id: t,
            env: &self.env[start..start + n],
            bufs: &self.k.bufs,
            global: &*self.global,
            shared: &self.shared,
            local: &self.local,
            track: &mut self.track,
        }
    }

    #[cold]
    fn fault(&self, t: u32, f: Fault) -> GpuInterpError {
        let kernel = self.k.name.clone();
        let (block, thread) = (self.block_idx(), self.thread_idx(t));
        let name = |b: u32| {
            self.k
                .bufs
                .get(b as usize)
                .map_or_else(String::new, |x| x.name.clone())
        };
        match f {
            Fault::OutOfBounds(b, index) => GpuInterpError::OutOfBounds {
                kernel,
                buffer: name(b),
                index,
                size: self.k.bufs.get(b as usize).map_or(0, |x| x.size),
                block,
                thread,
            },
            Fault::Unwritten(b, index) => GpuInterpError::UnwrittenRead {
                kernel,
                buffer: name(b),
                index,
                block,
                thread,
            },
            Fault::Race {
                buf,
                index,
                other,
                kind,
            } => GpuInterpError::SharedRace {
                kernel,
                buffer: name(buf),
                index,
                block,
                threads: (self.thread_idx(other), thread),
                kind,
            },
            Fault::DivisionByZero | Fault::Overflow | Fault::Type => GpuInterpError::Arithmetic {
                kernel,
                what: match f {
                    Fault::DivisionByZero => "division by zero",
                    Fault::Overflow => "overflow",
                    _ => "type mismatch (interpreter invariant)",
                },
                block,
                thread,
            },
        }
    }

    fn stmts(&mut self, body: &[CStmt], active: &[u32]) -> GpuResult<()> {
        for s in body {
            match s {
                CStmt::For {
                    slot,
                    extent,
                    poison,
                    body,
                } => {
                    let n = self.k.n_slots;
                    for v in 0..*extent {
                        for &t in active {
                            self.env[t as usize * n + *slot as usize] = v;
                            for &l in poison {
                                let size = self.k.local_sizes[l];
                                let start = t as usize * size;
                                self.local[l][start..start + size].fill(f32::NAN);
                            }
                        }
                        self.stmts(body, active)?;
                    }
                }
                CStmt::If { cond, then } => {
                    let mut taken = Vec::with_capacity(active.len());
                    for &t in active {
                        match self.thread(t).ev_b(cond) {
                            Ok(true) => taken.push(t),
                            Ok(false) => {}
                            Err(f) => return Err(self.fault(t, f)),
                        }
                    }
                    if !taken.is_empty() {
                        self.stmts(then, &taken)?;
                    }
                }
                CStmt::Store { access, value } => self.store(access, value, active)?,
                CStmt::WarpReduce {
                    access,
                    current,
                    value,
                    op,
                    lanes,
                } => self.warp_reduce(access, current, value, *op, *lanes, active)?,
                CStmt::CpAsync { lanes, valid } => self.cp_async(lanes, valid.as_ref(), active)?,
                CStmt::CommitGroup => {
                    for &t in active {
                        let group = std::mem::take(&mut self.open[t as usize]);
                        self.in_flight[t as usize].push_back(group);
                    }
                }
                CStmt::WaitGroup(n) => {
                    for &t in active {
                        while self.in_flight[t as usize].len() > *n {
                            let group = self.in_flight[t as usize].pop_front().unwrap_or_default();
                            self.commit(&group)?;
                        }
                    }
                }
                CStmt::Arrive {
                    counter,
                    arrivals,
                    last,
                } => {
                    self.barrier(active)?;
                    self.arrive(counter, *arrivals, *last)?;
                }
                CStmt::Sync => self.barrier(active)?,
            }
        }
        Ok(())
    }

    /// Every active thread evaluates, then every active thread writes.
    fn store(&mut self, access: &Access, value: &FExpr, active: &[u32]) -> GpuResult<()> {
        self.write_each(access, active, |th, _| th.ev_f(value))
    }

    /// Every active thread (the `i`-th of `active`) computes its value by `value`, then
    /// every active thread writes its own to `access`.
    fn write_each(
        &mut self,
        access: &Access,
        active: &[u32],
        mut value: impl FnMut(&mut Thread, usize) -> expr::Eval<f32>,
    ) -> GpuResult<()> {
        let buf = access.buf;
        let mut writes = std::mem::take(&mut self.writes);
        writes.clear();
        for (n, &t) in active.iter().enumerate() {
            let mut th = self.thread(t);
            let r = value(&mut th, n).and_then(|v| {
                let i = th.flat(access)?;
                let (mem, slot, off) = th.locate(buf, i)?;
                Ok(Write {
                    thread: t,
                    buf,
                    index: i,
                    mem,
                    slot,
                    off,
                    value: v,
                })
            });
            match r {
                Ok(w) => writes.push(w),
                Err(f) => {
                    self.writes = writes;
                    return Err(self.fault(t, f));
                }
            }
        }
        let r = self.commit(&writes);
        self.writes = writes;
        r
    }

    /// Every group of `lanes` threads (consecutive, all of them active) combines its
    /// lanes' values as `__shfl_xor_sync` does, lane `l` with lane `l ^ d` for `d` from
    /// `lanes / 2` down to 1; then each thread stores `op(current, combination)`.
    /// `__syncthreads()`: every thread of the block must reach it.
    fn barrier(&mut self, active: &[u32]) -> GpuResult<()> {
        if active.len() != self.threads {
            let missing = (0..self.threads as u32)
                .find(|t| !active.contains(t))
                .unwrap_or(0);
            return Err(GpuInterpError::DivergentBarrier {
                kernel: self.k.name.clone(),
                block: self.block_idx(),
                reached: active.len(),
                threads: self.threads as i64,
                missing: self.thread_idx(missing),
            });
        }
        self.track.barrier();
        *self.epoch += 1;
        Ok(())
    }

    /// The block's arrival at a serial sum's counter (after [`Self::barrier`], so every
    /// thread is active): thread 0 counts it, and every thread's `last` tells whether it
    /// was the `arrivals`-th, the counter then set back to 0. The counter (an `int`
    /// workspace, zeroed) is read and written directly: blocks run one after another, so
    /// the count is exact, and its writes are not global conflicts.
    fn arrive(&mut self, counter: &Access, arrivals: i64, last: u32) -> GpuResult<()> {
        let at = self
            .thread(0)
            .flat(counter)
            .and_then(|i| self.thread(0).locate(counter.buf, i));
        let (_, slot, off) = at.map_err(|f| self.fault(0, f))?;
        let count = self.global[slot][off] as i64 + 1;
        let is_last = count >= arrivals;
        self.global[slot][off] = if is_last { 0.0 } else { count as f32 };
        let n = self.k.n_slots;
        for t in 0..self.threads {
            self.env[t * n + last as usize] = i64::from(is_last);
        }
        Ok(())
    }

    fn warp_reduce(
        &mut self,
        access: &Access,
        current: &FExpr,
        value: &FExpr,
        op: FBin,
        lanes: u32,
        active: &[u32],
    ) -> GpuResult<()> {
        for group in active.chunks(lanes as usize) {
            let first = group[0] - group[0] % lanes;
            if group.len() != lanes as usize || group.iter().zip(first..).any(|(t, l)| *t != l) {
                let missing = (first..first + lanes).find(|t| !group.contains(t));
                return Err(GpuInterpError::PartialWarpReduce {
                    kernel: self.k.name.clone(),
                    block: self.block_idx(),
                    lanes,
                    reached: active
                        .iter()
                        .filter(|t| **t / lanes == first / lanes)
                        .count(),
                    missing: self.thread_idx(missing.unwrap_or(first)),
                });
            }
        }
        let mut values = Vec::with_capacity(active.len());
        for &t in active {
            let v = self.thread(t).ev_f(value).map_err(|f| self.fault(t, f))?;
            values.push(v);
        }
        for group in values.chunks_mut(lanes as usize) {
            let mut d = lanes as usize / 2;
            while d >= 1 {
                let before = group.to_vec();
                for (l, v) in group.iter_mut().enumerate() {
                    *v = op.apply(before[l], before[l ^ d]);
                }
                d /= 2;
            }
        }
        self.write_each(access, active, |th, n| {
            th.ev_f(current).map(|c| op.apply(c, values[n]))
        })
    }

    /// Every active thread issues its copies: the global values are read now, the shared
    /// elements are written when the copies land (and race-tracked now and then).
    fn cp_async(
        &mut self,
        lanes: &[(Access, FExpr)],
        valid: Option<&BExpr>,
        active: &[u32],
    ) -> GpuResult<()> {
        for &t in active {
            let mut th = self.thread(t);
            let r = (|| {
                let on = match valid {
                    Some(c) => th.ev_b(c)?,
                    None => true,
                };
                let mut copies = Vec::with_capacity(lanes.len());
                for (access, value) in lanes {
                    let v = if on { th.ev_f(value)? } else { 0.0 };
                    let i = th.flat(access)?;
                    let (mem, slot, off) = th.locate(access.buf, i)?;
                    if mem != Mem::Shared {
                        return Err(Fault::Type);
                    }
                    copies.push(Write {
                        thread: t,
                        buf: access.buf,
                        index: i,
                        mem,
                        slot,
                        off,
                        value: v,
                    });
                }
                Ok(copies)
            })();
            let copies = r.map_err(|f| self.fault(t, f))?;
            // The copy may land at once: it must not touch an element another thread
            // uses in this barrier interval.
            for c in &copies {
                if let Some((other, kind)) = self.track.write(c.slot, c.off, t) {
                    let f = Fault::Race {
                        buf: c.buf,
                        index: c.index,
                        other,
                        kind,
                    };
                    return Err(self.fault(t, f));
                }
            }
            self.open[t as usize].extend(copies);
        }
        Ok(())
    }

    fn commit(&mut self, writes: &[Write]) -> GpuResult<()> {
        for w in writes {
            let cell = match w.mem {
                Mem::Shared => {
                    if let Some((other, kind)) = self.track.write(w.slot, w.off, w.thread) {
                        let f = Fault::Race {
                            buf: w.buf,
                            index: w.index,
                            other,
                            kind,
                        };
                        return Err(self.fault(w.thread, f));
                    }
                    self.shared.get_mut(w.slot).and_then(|s| s.get_mut(w.off))
                }
                Mem::Global => {
                    let conflict = self.gtrack.write(
                        w.slot,
                        w.off,
                        self.block_lin,
                        w.thread,
                        *self.epoch,
                        w.value,
                    );
                    if let Some((b, t)) = conflict {
                        return Err(GpuInterpError::GlobalConflict {
                            kernel: self.k.name.clone(),
                            buffer: self.k.bufs[w.buf as usize].name.clone(),
                            index: w.index,
                            first: (coords(b, self.k.grid), self.thread_idx(t)),
                            second: (self.block_idx(), self.thread_idx(w.thread)),
                        });
                    }
                    self.global.get_mut(w.slot).and_then(|s| s.get_mut(w.off))
                }
                Mem::Local => self.local.get_mut(w.slot).and_then(|s| s.get_mut(w.off)),
            };
            match cell {
                Some(c) => *c = w.value,
                None => return Err(self.fault(w.thread, Fault::OutOfBounds(w.buf, w.index))),
            }
        }
        Ok(())
    }
}
