//! Lowering: a scheduled program becomes kernels.
//!
//! 1. Each root loop nest becomes one kernel. On CUDA its outer loops must be bound to
//!    `blockIdx`; thread-bound loops disappear and their variables stand for the thread
//!    indices (a loop shorter than the launch dimension gets a guard).
//! 2. Virtual threads are sunk to the statements that use them and unrolled there, so a
//!    cooperative fetch that does not depend on the virtual thread runs once (as TVM's
//!    virtual-thread injection does). Only idempotent statements are hoisted that way.
//! 3. Blocks become guarded stores: bindings substituted, predicate and init as `if`s.
//! 4. Shared and local buffers are compacted to the region one thread block (shared) or
//!    one thread (local) touches, relaxing the loops below their allocation point and the
//!    thread indices that share them; `storage_align` pads strides; indices are flattened.
//!    The guard of an imperfect tile is lifted off the updates of a thread's accumulators
//!    where every read is proven inside its allocation (`unguard.rs`).
//! 5. CUDA: a reduction across a block's `threadIdx.x` lanes through shared memory
//!    becomes warp shuffles where the lanes are a warp's (`warp_reduce.rs`); then
//!    `__syncthreads()` is inserted where shared memory written by some threads is
//!    read by others, and before it is overwritten in the next iteration; vectorized loops
//!    are checked to be contiguous and aligned, or rejected.
//! 6. CUDA: loops annotated with `software_pipeline_stage` are software-pipelined: their
//!    shared fetches multi-buffered and issued stages ahead with `cp.async`
//!    (`pipeline.rs`).
//! 7. CUDA: tensorized loop nests become tensor-core instructions (`tensorize.rs`).
//! 8. CUDA: neighbouring kernels that are independent of each other and plain loads and
//!    stores (a conv's staging kernels, padded copies of two inputs) are launched as one
//!    (`merge.rs`).

mod barrier;
mod compact;
pub mod kernel;
mod merge;
mod partition;
mod pipeline;
pub mod swizzle;
pub mod tensorize;
mod unguard;
mod vector_copy;
mod vthread;
mod warp_reduce;

pub(crate) use compact::contiguous as kernel_contiguous;
pub(crate) use compact::{vector_body as kernel_vector_body, VectorStore};
pub use kernel::{
    cp_async_lanes, mma_k, Alloc, ForKind, KStmt, Kernel, Lowered, Mma, MmaOp, MmaOperand, Tile,
    ACC_SHAPE, LAUNCH_MIN_BLOCKS_KEY,
};
pub(crate) use vector_copy::{
    at_lane as kernel_at_lane, vector_copy as kernel_vector_copy, zero_filled,
};

use crate::ir::interval::Interval;
use crate::ir::simplify::simplify;
use crate::ir::{
    BinOp, BlockId, Dim3, Expr, IterKind, LoopId, LoopKind, Node, Program, Scope, ThreadTag, VarId,
};
use std::collections::BTreeMap;
use thiserror::Error;

/// What the kernels are for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    Cuda,
    Cpu,
}

/// Why a program cannot be lowered for a backend.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum LowerError {
    #[error("loop {name} is bound to {tag}, which the {backend} backend cannot run")]
    ThreadOnCpu {
        name: String,
        tag: String,
        backend: &'static str,
    },
    #[error("loop nest {name} is not bound to blockIdx/threadIdx: every root loop nest of a CUDA program must be")]
    Unbound { name: String },
    #[error("loop {name} is above a blockIdx loop: bind it or move it inside")]
    SerialAboveBlockIdx { name: String },
    #[error("{tag} is bound with extent {a} and {b} in one kernel")]
    GridMismatch { tag: String, a: i64, b: i64 },
    #[error("loop {name} is parallel: the cuda backend has no CPU threads (bind it to a thread instead)")]
    ParallelOnCuda { name: String },
    #[error("cannot vectorize loop {name}: {reason}")]
    Vectorize { name: String, reason: String },
    #[error("a barrier would be needed inside loop {name}, which only part of the threads run")]
    DivergentBarrier { name: String },
    #[error("invalid program: {0}")]
    Invalid(String),
    #[error("{0}")]
    PipelinePlan(#[from] crate::ir::pipeline::PipelineError),
    #[error("cannot pipeline loop {name}: {reason}")]
    Pipeline { name: String, reason: String },
    #[error("{0}")]
    TensorizePlan(#[from] crate::ir::tensorize::TensorizeError),
    #[error("cannot tensorize: {0}")]
    Tensorize(String),
    #[error("cannot swizzle {0}")]
    Swizzle(String),
}

/// The result of lowering.
pub type Result<T> = std::result::Result<T, LowerError>;

/// A loop of the program during lowering, with its body in program order.
#[derive(Clone, Debug)]
pub(crate) enum Tree {
    Loop {
        id: LoopId,
        body: Vec<Tree>,
    },
    /// A loop the lowering made (a sunk virtual thread), unrolled.
    Unrolled {
        var: VarId,
        extent: i64,
        body: Vec<Tree>,
    },
    Block(BlockId),
}

fn to_tree(p: &Program, n: Node) -> Tree {
    match n {
        Node::Block(b) => Tree::Block(b),
        Node::Loop(l) => Tree::Loop {
            id: l,
            body: p.lp(l).body.iter().map(|c| to_tree(p, *c)).collect(),
        },
    }
}

/// Lowers a verified program for a backend.
pub fn lower(p: &Program, backend: Backend) -> Result<Lowered> {
    crate::ir::verify::verify(p).map_err(|e| LowerError::Invalid(e.to_string()))?;
    let mut prog = p.clone();
    let mut workspaces: Vec<_> = prog
        .allocs
        .iter()
        .copied()
        .filter(|b| prog.buffer(*b).scope == Scope::Global)
        .collect();
    let arrivals = counters(&mut prog, backend, &mut workspaces)?;
    let mut kernels = Vec::new();
    let roots = prog.root.clone();
    match backend {
        Backend::Cpu => {
            // Fragments are a warp's registers: CUDA only.
            if let Some(b) = prog
                .allocs
                .iter()
                .find(|b| prog.buffer(**b).scope == Scope::Fragment)
            {
                return Err(LowerError::Tensorize(format!(
                    "{} is a fragment (a warp's tensor-core registers), which the cpu backend has not",
                    prog.buffer(*b).name
                )));
            }
            // One C function for the whole program; thread bindings are errors.
            for (n, _) in prog.walk() {
                if let Node::Loop(l) = n {
                    if let LoopKind::Thread(t) = prog.lp(l).kind {
                        return Err(LowerError::ThreadOnCpu {
                            name: prog.loop_name(l).into(),
                            tag: t.to_string(),
                            backend: "cpu",
                        });
                    }
                }
            }
            let trees: Vec<Tree> = roots.iter().map(|n| to_tree(&prog, *n)).collect();
            let k = build_kernel(
                &mut prog,
                &format!("{}_kernel", p.name),
                trees,
                backend,
                &workspaces,
                &arrivals,
            )?;
            kernels.push(k);
        }
        Backend::Cuda => {
            for n in &roots {
                let tree = to_tree(&prog, *n);
                check_grid_nest(&prog, *n)?;
                let trees = vthread::sink_all(&prog, tree);
                kernels.push(build_kernel(
                    &mut prog,
                    "",
                    trees,
                    backend,
                    &workspaces,
                    &arrivals,
                )?);
            }
            kernels = merge::merge_independent(&prog, kernels);
            let single = kernels.len() == 1;
            for (i, k) in kernels.iter_mut().enumerate() {
                k.name = match single {
                    true => format!("{}_kernel", p.name),
                    false => format!("{}_kernel{i}", p.name),
                };
            }
        }
    }
    Ok(Lowered {
        program: prog,
        kernels,
        workspaces,
    })
}

/// A serial split-K sum's arrival with its counter (`ir::arrival`).
pub(crate) struct Counted {
    arrival: crate::ir::arrival::Arrival,
    counter: crate::ir::BufferId,
}

/// The serial split-K sums of the program, each with a counter of its own: an `int`
/// workspace of one element per tile, zeroed by the runner. The CPU backend has none.
fn counters(
    prog: &mut Program,
    backend: Backend,
    workspaces: &mut Vec<crate::ir::BufferId>,
) -> Result<Vec<Counted>> {
    let arrivals = crate::ir::arrival::arrivals(prog).map_err(LowerError::Invalid)?;
    if let (Backend::Cpu, Some(a)) = (backend, arrivals.first()) {
        return Err(LowerError::Invalid(format!(
            "block {} is a serial split-K sum, which the cpu backend cannot run",
            prog.block(a.block).name
        )));
    }
    let mut out = Vec::new();
    for arrival in arrivals {
        let base = format!("{}_arrivals", prog.block(arrival.block).name);
        let name = crate::ir::fresh_name(&base, |n| prog.buffers.iter().any(|b| b.name == n));
        let counter = prog.new_buffer(crate::ir::Buffer {
            name,
            shape: vec![arrival.keys],
            dtype: crate::ir::DType::I32,
            scope: Scope::Global,
            kind: crate::ir::BufferKind::Intermediate,
            align: Vec::new(),
            swizzle: false,
        });
        workspaces.push(counter);
        out.push(Counted { arrival, counter });
    }
    Ok(out)
}

/// A CUDA root nest: blockIdx loops outermost (no serial loop above them), some thread
/// binding somewhere.
fn check_grid_nest(p: &Program, n: Node) -> Result<()> {
    let Node::Loop(top) = n else {
        return Err(LowerError::Invalid(
            "a block at the root is not inside any loop".into(),
        ));
    };
    let mut any_thread = false;
    let mut serial_above: Option<LoopId> = None;
    let mut stack = vec![(top, false)];
    while let Some((l, under_serial)) = stack.pop() {
        let kind = p.lp(l).kind;
        if let LoopKind::Thread(t) = kind {
            any_thread = true;
            if t.is_block_idx() {
                if let Some(s) = serial_above {
                    return Err(LowerError::SerialAboveBlockIdx {
                        name: p.loop_name(s).into(),
                    });
                }
            }
        }
        let serial_here = !matches!(kind, LoopKind::Thread(_));
        if serial_here && serial_above.is_none() && !under_serial {
            serial_above = Some(l);
        }
        for c in &p.lp(l).body {
            if let Node::Loop(c) = c {
                stack.push((*c, under_serial || serial_here));
            }
        }
    }
    if !any_thread {
        return Err(LowerError::Unbound {
            name: p.loop_name(top).into(),
        });
    }
    Ok(())
}

struct Builder<'a> {
    prog: &'a mut Program,
    /// The program's serial split-K sums and their counters.
    arrivals: &'a [Counted],
    backend: Backend,
    /// Thread-bound loop variable -> the kernel's variable for that tag.
    thread_var: BTreeMap<ThreadTag, VarId>,
    grid: [i64; 3],
    block: [i64; 3],
    /// [`Kernel::min_blocks`], from the blockIdx loops' annotations.
    min_blocks: i64,
    /// Extents of kernel loop variables (and thread variables), for simplification.
    ranges: BTreeMap<VarId, i64>,
    /// Loop variable -> replacement (thread variable).
    subst: BTreeMap<VarId, Expr>,
    /// Memo of [`nest_total`] for the loops of this kernel.
    nest_totals: BTreeMap<LoopId, i64>,
    /// The software-pipelined loops of this kernel (CUDA).
    pipelines: Vec<pipeline::Pipelined>,
    /// The tensorized nests of this kernel (CUDA): the outermost loop's variable and the
    /// intrinsic that replaces the nest.
    tensorized: Vec<(VarId, crate::ir::tensorize::Intrin)>,
    /// Guards around stores into a thread's registers that mask iterations past a
    /// spatial extent, each with what is left of it without those conjuncts (`None`:
    /// nothing); `unguard.rs` may narrow them to that.
    output_masks: Vec<unguard::OutputMask>,
}

fn dim_index(d: Dim3) -> usize {
    match d {
        Dim3::X => 0,
        Dim3::Y => 1,
        Dim3::Z => 2,
    }
}

impl Builder<'_> {
    fn range_fn(&self) -> impl Fn(VarId) -> Option<Interval> + '_ {
        |v| self.ranges.get(&v).map(|&x| Interval::new(0, x - 1))
    }

    fn simp(&self, e: &Expr) -> Expr {
        simplify(e, &self.range_fn())
    }

    /// Collects launch dimensions from the thread-bound loops of a tree, and the
    /// blocks a multiprocessor should hold from their annotations.
    fn collect_dims(&mut self, t: &Tree) -> Result<()> {
        match t {
            Tree::Loop { id, body } => {
                self.collect_min_blocks(*id)?;
                if let LoopKind::Thread(tag) = self.prog.lp(*id).kind {
                    let e = self.prog.lp(*id).extent;
                    match tag {
                        ThreadTag::BlockIdx(d) => {
                            let slot = &mut self.grid[dim_index(d)];
                            if *slot != 1 && *slot != e {
                                return Err(LowerError::GridMismatch {
                                    tag: tag.to_string(),
                                    a: *slot,
                                    b: e,
                                });
                            }
                            *slot = e;
                        }
                        ThreadTag::ThreadIdx(d) => {
                            let slot = &mut self.block[dim_index(d)];
                            *slot = (*slot).max(e);
                        }
                        ThreadTag::VThread(_) => {}
                    }
                }
                body.iter().try_for_each(|c| self.collect_dims(c))
            }
            Tree::Unrolled { body, .. } => body.iter().try_for_each(|c| self.collect_dims(c)),
            Tree::Block(_) => Ok(()),
        }
    }

    /// [`LAUNCH_MIN_BLOCKS_KEY`] on loop `id`: an integer of at least 1, on a
    /// blockIdx-bound loop only (anywhere else it would be silently lost).
    fn collect_min_blocks(&mut self, id: LoopId) -> Result<()> {
        let lp = self.prog.lp(id);
        let Some(value) = lp.annotations.get(LAUNCH_MIN_BLOCKS_KEY) else {
            return Ok(());
        };
        let bad = |why: &str| {
            Err(LowerError::Invalid(format!(
                "loop {}: {LAUNCH_MIN_BLOCKS_KEY} = {value}: {why}",
                self.prog.loop_name(id)
            )))
        };
        if !matches!(lp.kind, LoopKind::Thread(t) if t.is_block_idx()) {
            return bad("the loop is not bound to blockIdx");
        }
        match value {
            crate::ir::AnnValue::Int(m) if *m >= 1 => {
                self.min_blocks = self.min_blocks.max(*m);
                Ok(())
            }
            _ => bad("not an integer of at least 1"),
        }
    }

    fn thread_var(&mut self, tag: ThreadTag) -> VarId {
        if let Some(v) = self.thread_var.get(&tag) {
            return *v;
        }
        let v = self.prog.new_var(tag.to_string());
        let extent = match tag {
            ThreadTag::BlockIdx(d) => self.grid[dim_index(d)],
            ThreadTag::ThreadIdx(d) => self.block[dim_index(d)],
            ThreadTag::VThread(_) => 1,
        };
        self.ranges.insert(v, extent);
        self.thread_var.insert(tag, v);
        v
    }

    fn stmts(&mut self, trees: &[Tree]) -> Result<Vec<KStmt>> {
        let mut out = Vec::new();
        for t in trees {
            let lowered = self.stmt(t)?;
            match self.arrival_at(t) {
                Some(arrive) => {
                    let KStmt::Arrive { last, .. } = arrive else {
                        unreachable!("arrival_at makes an Arrive");
                    };
                    let cond = Expr::bin(BinOp::Ne, Expr::Var(last), Expr::Int(0));
                    out.push(arrive);
                    out.push(KStmt::If {
                        cond,
                        then: lowered,
                    });
                }
                None => out.extend(lowered),
            }
        }
        Ok(out)
    }

    /// The arrival of a serial split-K sum whose node `t` is, with a fresh variable for
    /// its outcome; `None` for any other tree.
    fn arrival_at(&mut self, t: &Tree) -> Option<KStmt> {
        let node = match t {
            Tree::Loop { id, .. } => Node::Loop(*id),
            Tree::Block(b) => Node::Block(*b),
            Tree::Unrolled { .. } => return None,
        };
        let c = self.arrivals.iter().find(|c| c.arrival.node == node)?;
        let (counter, arrivals) = (c.counter, c.arrival.arrivals);
        let index = c.arrival.key.substitute(&|v| self.subst.get(&v).cloned());
        let index = self.simp(&index);
        let last = self.prog.new_var("tessel_last");
        self.ranges.insert(last, 2);
        Some(KStmt::Arrive {
            counter,
            index,
            arrivals,
            last,
        })
    }

    fn stmt(&mut self, t: &Tree) -> Result<Vec<KStmt>> {
        match t {
            Tree::Block(b) => self.block(*b),
            Tree::Unrolled { var, extent, body } => {
                self.ranges.insert(*var, *extent);
                let body = self.stmts(body)?;
                Ok(vec![KStmt::For {
                    var: *var,
                    extent: *extent,
                    kind: ForKind::Unrolled,
                    body,
                }])
            }
            Tree::Loop { id, body } => {
                let lp = self.prog.lp(*id).clone();
                match lp.kind {
                    LoopKind::Thread(tag @ (ThreadTag::BlockIdx(_) | ThreadTag::ThreadIdx(_))) => {
                        let tv = self.thread_var(tag);
                        self.subst.insert(lp.var, Expr::Var(tv));
                        self.ranges.insert(lp.var, lp.extent);
                        let inner = self.stmts(body)?;
                        let full = self.ranges[&tv];
                        if lp.extent < full {
                            Ok(vec![KStmt::If {
                                cond: Expr::lt(Expr::Var(tv), Expr::Int(lp.extent)),
                                then: inner,
                            }])
                        } else {
                            Ok(inner)
                        }
                    }
                    kind => {
                        self.ranges.insert(lp.var, lp.extent);
                        if self.backend == Backend::Cuda {
                            if let Some(plan) = crate::ir::pipeline::plan(self.prog, *id)? {
                                self.pipelines
                                    .push(pipeline::Pipelined { var: lp.var, plan });
                            }
                        }
                        if let Some(intrin) = crate::ir::tensorize::annotated(self.prog, *id)? {
                            if self.backend != Backend::Cuda {
                                return Err(LowerError::Tensorize(format!(
                                    "loop {} is tensorized with {}, a tensor-core intrinsic the {} backend has not",
                                    self.prog.loop_name(*id),
                                    intrin.name(),
                                    "cpu"
                                )));
                            }
                            crate::ir::tensorize::check(self.prog, *id, intrin)?;
                            self.tensorized.push((lp.var, intrin));
                        }
                        let fk = match kind {
                            LoopKind::Serial | LoopKind::Thread(ThreadTag::VThread(_)) => {
                                if matches!(kind, LoopKind::Thread(_)) {
                                    ForKind::Unrolled
                                } else {
                                    ForKind::Serial
                                }
                            }
                            LoopKind::Unrolled => ForKind::Unrolled,
                            // One lane is a scalar: a sampled vector length of 1.
                            LoopKind::Vectorized if lp.extent == 1 => ForKind::Serial,
                            LoopKind::Vectorized => ForKind::Vectorized,
                            LoopKind::Parallel => {
                                if self.backend == Backend::Cuda {
                                    return Err(LowerError::ParallelOnCuda {
                                        name: self.prog.loop_name(*id).into(),
                                    });
                                }
                                ForKind::Parallel
                            }
                            LoopKind::Thread(_) => ForKind::Serial,
                        };
                        let inner = self.stmts(body)?;
                        let fk = if fk == ForKind::Serial
                            && auto_unroll(self.backend, &lp.annotations, lp.extent, || {
                                nest_total(self.prog, t, &mut self.nest_totals)
                            }) {
                            ForKind::Unrolled
                        } else {
                            fk
                        };
                        Ok(vec![KStmt::For {
                            var: lp.var,
                            extent: lp.extent,
                            kind: fk,
                            body: inner,
                        }])
                    }
                }
            }
        }
    }

    /// A block as a guarded store (multi-dimensional indices; flattened later).
    fn block(&mut self, b: BlockId) -> Result<Vec<KStmt>> {
        let blk = self.prog.block(b).clone();
        let sub = |e: &Expr| -> Expr { e.substitute(&|v| self.subst.get(&v).cloned()) };
        let bind: BTreeMap<VarId, Expr> = blk
            .iter_vars
            .iter()
            .zip(&blk.bindings)
            .map(|(iv, e)| (iv.var, sub(e)))
            .collect();
        let inst = |e: &Expr| -> Expr { self.simp(&e.substitute(&|v| bind.get(&v).cloned())) };
        let mut stmts = Vec::new();
        if let Some(init) = &blk.init {
            let conds: Vec<Expr> = blk
                .iter_vars
                .iter()
                .filter(|iv| iv.kind == IterKind::Reduce)
                .map(|iv| Expr::bin(BinOp::Eq, bind[&iv.var].clone(), Expr::Int(0)))
                .collect();
            let cond = self.simp(&conds.into_iter().reduce(Expr::and).unwrap_or(Expr::Int(1)));
            let store = KStmt::Store {
                buffer: init.buffer,
                indices: init.indices.iter().map(&inst).collect(),
                value: inst(&init.value),
            };
            match cond.as_int() {
                Some(0) => {}
                Some(_) => stmts.push(store),
                None => stmts.push(KStmt::If {
                    cond,
                    then: vec![store],
                }),
            }
        }
        stmts.push(KStmt::Store {
            buffer: blk.body.buffer,
            indices: blk.body.indices.iter().map(&inst).collect(),
            value: inst(&blk.body.value),
        });
        let mut out = vec![KStmt::Comment(blk.name.clone())];
        match blk.predicate.as_ref().map(|e| self.simp(&sub(e))) {
            Some(c) if c.as_int() == Some(0) => {}
            Some(c) if c.as_int().is_none() => {
                if let Some(rest) = self.beyond_output_masks(b) {
                    let rest = rest.map(|r| self.simp(&sub(&r)));
                    self.output_masks.push(unguard::OutputMask {
                        block: blk.name.clone(),
                        guard: c.clone(),
                        rest,
                    });
                }
                out.push(KStmt::If {
                    cond: c,
                    then: stmts,
                })
            }
            _ => out.extend(stmts),
        }
        Ok(out)
    }

    /// For block `b` writing a thread's registers (a local buffer) under a predicate some
    /// of whose conjuncts are over the loops of its spatial iteration variables alone
    /// (they mask outputs past the extent: split and fuse map loops to coordinates one to
    /// one, so such a conjunct never masks a reduction step of a valid output): the
    /// conjunction of the other conjuncts (`None` where there are none). `None` where the
    /// block is not such a block.
    fn beyond_output_masks(&self, b: BlockId) -> Option<Option<Expr>> {
        let blk = self.prog.block(b);
        let pred = blk.predicate.as_ref()?;
        if self.prog.buffer(blk.body.buffer).scope != Scope::Local {
            return None;
        }
        let mut spatial = std::collections::BTreeSet::new();
        let mut reduce = std::collections::BTreeSet::new();
        for (iv, e) in blk.iter_vars.iter().zip(&blk.bindings) {
            let set = if iv.kind == IterKind::Reduce {
                &mut reduce
            } else {
                &mut spatial
            };
            set.extend(e.vars());
        }
        let masks_outputs = |c: &Expr| {
            c.vars()
                .iter()
                .all(|v| spatial.contains(v) && !reduce.contains(v))
        };
        let (masks, rest): (Vec<Expr>, Vec<Expr>) =
            pred.conjuncts().into_iter().partition(|c| masks_outputs(c));
        if masks.is_empty() {
            return None;
        }
        Some(rest.into_iter().reduce(Expr::and))
    }
}

/// Whether a serial loop annotated with `pragma_auto_unroll_max_step = N` is unrolled.
///
/// - **CPU**: TVM's rule. The loop is unrolled when the total number of iterations of the
///   nest rooted at it, [`nest_total`] (its extent times the extents of the loops under
///   it, taking the largest product where it has several child nests), is at most `N`.
/// - **CUDA**: the loop is unrolled when its own extent is at most `N`, whatever lies
///   under it. This older rule is kept on purpose: the GPU records measured and shipped in
///   `database/` were tuned with it, and changing the kernels their traces lower to needs
///   a re-tune. It is to be unified with TVM's rule at the next GPU re-tune.
///
/// `nest_total` is only called when the CPU rule needs it.
fn auto_unroll(
    backend: Backend,
    ann: &BTreeMap<String, crate::ir::AnnValue>,
    extent: i64,
    nest_total: impl FnOnce() -> i64,
) -> bool {
    match ann.get("pragma_auto_unroll_max_step") {
        Some(crate::ir::AnnValue::Int(max)) => match backend {
            Backend::Cpu => nest_total() <= *max,
            Backend::Cuda => extent <= *max,
        },
        _ => false,
    }
}

/// The number of iterations of the loop nest rooted at `t`: a loop's extent times the
/// largest total among its children (1 where it has no loop children), i.e. the largest
/// product of extents along a path from `t` down. Every loop counts, whatever its kind
/// (thread-bound, vectorized, unrolled by the lowering); a block counts 1. Saturates
/// rather than overflows.
///
/// Totals of program loops are memoized in `memo` by loop id (each program loop appears
/// once in a CPU kernel's tree; vthread sinking, which may copy loops, is CUDA-only): the
/// lowering asks inner loops first, so an outer annotated loop reuses them and a whole
/// nest costs one walk.
fn nest_total(p: &Program, t: &Tree, memo: &mut BTreeMap<LoopId, i64>) -> i64 {
    let (extent, body) = match t {
        Tree::Block(_) => return 1,
        Tree::Loop { id, body } => {
            if let Some(&n) = memo.get(id) {
                return n;
            }
            (p.lp(*id).extent, body)
        }
        Tree::Unrolled { extent, body, .. } => (*extent, body),
    };
    let inner = body
        .iter()
        .map(|c| nest_total(p, c, memo))
        .max()
        .unwrap_or(1);
    let total = extent.max(1).saturating_mul(inner);
    if let Tree::Loop { id, .. } = t {
        memo.insert(*id, total);
    }
    total
}

fn build_kernel(
    prog: &mut Program,
    name: &str,
    trees: Vec<Tree>,
    backend: Backend,
    workspaces: &[crate::ir::BufferId],
    arrivals: &[Counted],
) -> Result<Kernel> {
    let mut b = Builder {
        arrivals,
        prog,
        backend,
        thread_var: BTreeMap::new(),
        grid: [1; 3],
        block: [1; 3],
        min_blocks: 1,
        ranges: BTreeMap::new(),
        subst: BTreeMap::new(),
        nest_totals: BTreeMap::new(),
        pipelines: Vec::new(),
        tensorized: Vec::new(),
        output_masks: Vec::new(),
    };
    for t in &trees {
        b.collect_dims(t)?;
    }
    let body = b.stmts(&trees)?;
    let thread_vars: Vec<(VarId, ThreadTag)> = b.thread_var.iter().map(|(t, v)| (*v, *t)).collect();
    let (grid, block, min_blocks, ranges) = (b.grid, b.block, b.min_blocks, b.ranges.clone());
    let pipelines = std::mem::take(&mut b.pipelines);
    let tensorized = std::mem::take(&mut b.tensorized);
    let output_masks = std::mem::take(&mut b.output_masks);
    let params: Vec<_> = prog
        .params
        .iter()
        .copied()
        .chain(workspaces.iter().copied())
        .collect();
    let mut kernel = Kernel {
        name: name.into(),
        params,
        allocs: Vec::new(),
        grid,
        block,
        min_blocks,
        thread_vars,
        body,
    };
    let proven = compact::compact(prog, &mut kernel, backend, &ranges)?;
    unguard::unguard(&mut kernel.body, &kernel.allocs, &proven, &output_masks);
    if backend == Backend::Cpu {
        partition::peel_tails(&mut kernel.body);
        partition::partition(&mut kernel.body);
    }
    if backend == Backend::Cuda {
        warp_reduce::apply(prog, &mut kernel, &ranges);
        barrier::insert_barriers(prog, &mut kernel)?;
        compact::check_vectors(prog, &kernel, &ranges)?;
        // wgmma nests run asynchronously to the threads that issue them.
        let asynchronous: Vec<VarId> = tensorized
            .iter()
            .filter(|(_, i)| *i == crate::ir::tensorize::Intrin::WgmmaSync)
            .map(|(v, _)| *v)
            .collect();
        pipeline::apply(prog, &mut kernel, &pipelines, &ranges, &asynchronous)?;
        tensorize::apply(prog, &mut kernel, &tensorized, &ranges)?;
    }
    Ok(kernel)
}

/// Test helper: whether the loop of `p` named `name` is lowered unrolled, checked against
/// its `pragma_auto_unroll_max_step` annotation in every copy of it in `lowered` (the
/// pipeline copies a fetch's loops): unrolled exactly where its extent is at most the
/// annotated value. `None` where it carries no annotation; panics where `p` has no such
/// loop or `lowered` none of its copies.
#[cfg(test)]
pub(crate) fn auto_unrolled(p: &Program, lowered: &Lowered, name: &str) -> Option<bool> {
    fn kinds(body: &[KStmt], var: VarId, out: &mut Vec<ForKind>) {
        for st in body {
            match st {
                KStmt::For {
                    var: v, kind, body, ..
                } => {
                    if *v == var {
                        out.push(*kind);
                    }
                    kinds(body, var, out);
                }
                KStmt::If { then, .. } => kinds(then, var, out),
                _ => {}
            }
        }
    }
    let lp = p
        .loops
        .iter()
        .find(|l| p.var_name(l.var) == name)
        .unwrap_or_else(|| panic!("no loop {name}"));
    let max = match lp.annotations.get("pragma_auto_unroll_max_step") {
        None => return None,
        Some(crate::ir::AnnValue::Int(max)) => *max,
        Some(other) => panic!("loop {name}'s unroll bound is {other:?}"),
    };
    let mut found = Vec::new();
    for k in &lowered.kernels {
        kinds(&k.body, lp.var, &mut found);
    }
    let want = match lp.extent <= max {
        true => ForKind::Unrolled,
        false => ForKind::Serial,
    };
    assert!(
        !found.is_empty() && found.iter().all(|k| *k == want),
        "loop {name}: {found:?}, extent {}, max {max}",
        lp.extent
    );
    Some(want == ForKind::Unrolled)
}

#[cfg(test)]
mod unroll_tests {
    use super::{lower, Backend, ForKind, KStmt};
    use crate::ir::VarId;
    use crate::schedule::{AnnArg, IntArg, LoopRv, Schedule, Target};
    use crate::workload::preset;

    const KEY: &str = "pragma_auto_unroll_max_step";

    /// The kind of every `For` in the lowered kernels, by loop variable.
    fn kinds(s: &Schedule, backend: Backend) -> Vec<(VarId, ForKind)> {
        fn walk(body: &[KStmt], out: &mut Vec<(VarId, ForKind)>) {
            for st in body {
                match st {
                    KStmt::For {
                        var, kind, body, ..
                    } => {
                        out.push((*var, *kind));
                        walk(body, out);
                    }
                    KStmt::If { then, .. } => walk(then, out),
                    _ => {}
                }
            }
        }
        let low = lower(s.program(), backend).unwrap();
        let mut out = Vec::new();
        for k in &low.kernels {
            walk(&k.body, &mut out);
        }
        out
    }

    /// How loop `l` of `s` is lowered for `backend`.
    fn kind_of(s: &Schedule, backend: Backend, l: LoopRv) -> ForKind {
        let var = s.program().lp(s.loop_id(l).unwrap()).var;
        let ks = kinds(s, backend);
        let found: Vec<_> = ks.iter().filter(|(v, _)| *v == var).collect();
        assert_eq!(found.len(), 1, "loop {var:?} in {ks:?}");
        found[0].1
    }

    fn annotate(s: &mut Schedule, loops: &[LoopRv], step: i64) {
        for l in loops {
            s.annotate(Target::Loop(*l), KEY, AnnArg::Int(step))
                .unwrap();
        }
    }

    /// `C[i, j] = sum(A[i, k] * B[k, j], k)` as loops i(m) > j(n) > k(kk).
    fn matmul(m: i64, n: i64, kk: i64) -> (Schedule, Vec<LoopRv>) {
        let w = preset(&format!("matmul:{m}x{n}x{kk}")).unwrap();
        let mut s = Schedule::new(w.to_program(), 0);
        let c = s.get_block("C").unwrap();
        let loops = s.get_loops(c).unwrap();
        assert_eq!(loops.len(), 3);
        (s, loops)
    }

    #[test]
    fn cpu_unrolls_by_nest_total() {
        use ForKind::{Serial, Unrolled};
        // i(4) > j(8) > k(1): j's nest runs 8 iterations, i's 32.
        for (step, i_kind) in [(16, Serial), (31, Serial), (32, Unrolled), (64, Unrolled)] {
            let (mut s, l) = matmul(4, 8, 1);
            annotate(&mut s, &l[..2], step);
            assert_eq!(kind_of(&s, Backend::Cpu, l[1]), Unrolled, "j, step {step}");
            assert_eq!(kind_of(&s, Backend::Cpu, l[0]), i_kind, "i, step {step}");
        }
        // Below j's own total nothing is unrolled.
        let (mut s, l) = matmul(4, 8, 1);
        annotate(&mut s, &l[..2], 7);
        assert_eq!(kind_of(&s, Backend::Cpu, l[1]), Serial);
        assert_eq!(kind_of(&s, Backend::Cpu, l[0]), Serial);
    }

    #[test]
    fn cpu_nest_total_is_the_largest_path_not_the_sum() {
        // i(4) > [j_init(8), j(8) > k(4)] after decomposing the reduction at j: the paths
        // under i run 8 and 32 iterations, so i's total is 4 * 32 = 128 (a sum over the
        // children would give 160).
        for (step, i_kind) in [(127, ForKind::Serial), (128, ForKind::Unrolled)] {
            let (mut s, l) = matmul(4, 8, 4);
            let c = s.get_block("C").unwrap();
            s.decompose_reduction(c, l[1]).unwrap();
            annotate(&mut s, &l[..1], step);
            assert_eq!(kind_of(&s, Backend::Cpu, l[0]), i_kind, "step {step}");
        }
    }

    #[test]
    fn cuda_keeps_the_per_loop_rule() {
        // blockIdx.x(2) > i1(4) > j(8) > k(1): at step 16 both annotated loops are
        // unrolled on CUDA (each extent <= 16) although i1's nest runs 32 iterations.
        let (mut s, l) = matmul(8, 8, 1);
        let parts = s
            .split(l[0], &[Some(IntArg::Lit(2)), Some(IntArg::Lit(4))])
            .unwrap();
        s.bind(parts[0], "blockIdx.x").unwrap();
        annotate(&mut s, &[parts[1], l[1]], 16);
        assert_eq!(kind_of(&s, Backend::Cuda, parts[1]), ForKind::Unrolled);
        assert_eq!(kind_of(&s, Backend::Cuda, l[1]), ForKind::Unrolled);
        // The same 4 x 8 nest on the CPU keeps the outer loop rolled.
        let (mut s, l) = matmul(4, 8, 1);
        annotate(&mut s, &l[..2], 16);
        assert_eq!(kind_of(&s, Backend::Cpu, l[0]), ForKind::Serial);
        assert_eq!(kind_of(&s, Backend::Cpu, l[1]), ForKind::Unrolled);
    }
}
