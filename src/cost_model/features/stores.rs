//! The walk over a lowered kernel that measures every buffer store: its arithmetic, the
//! loops around it, and each buffer access it makes (the write and every load of its
//! value), plus the kernel-wide counts (barriers, virtual threads) met on the way.
//!
//! Counts are totals over the whole launch: per-thread trip counts (the product of the
//! enclosing loop extents) times the active threads of a block (the block size, narrowed
//! by `threadIdx < c` guards) times the active blocks (the grid, narrowed by `blockIdx < c`
//! and `blockIdx >= c` guards: stages fused into one launch). On the CPU a kernel is one
//! block of one thread and parallel loops are ordinary trip counts; their iterations play
//! the part of threads for the per-thread footprints.

use super::access::{bank_ways, footprint, linear_terms, stride, Footprint};
use crate::ir::interval::Interval;
use crate::ir::{BinOp, BufferId, Dim3, Expr, LoopKind, Program, Scope, ThreadTag, UnOp, VarId};
use crate::lower::{ForKind, KStmt, Kernel};

/// Arithmetic operations, counted over the launch.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(super) struct Ops {
    /// Float additions and subtractions not fused with a multiplication.
    pub add: f64,
    /// Float multiplications not fused into an addition.
    pub mul: f64,
    /// Float `a * b + c` pairs (one multiply-add each).
    pub fma: f64,
    pub div: f64,
    /// exp, sqrt, tanh, abs, float min/max.
    pub special: f64,
    /// Integer arithmetic, mostly index math of loads, stores and guards.
    pub int: f64,
    /// Comparisons, logical operators and selects (values and guards).
    pub cmp: f64,
}

impl Ops {
    /// Floating-point operations, a multiply-add counting two.
    pub fn flops(&self) -> f64 {
        self.add + self.mul + 2.0 * self.fma + self.div + self.special
    }
    fn scaled(self, k: f64) -> Ops {
        Ops {
            add: self.add * k,
            mul: self.mul * k,
            fma: self.fma * k,
            div: self.div * k,
            special: self.special * k,
            int: self.int * k,
            cmp: self.cmp * k,
        }
    }
    pub fn plus(self, o: Ops) -> Ops {
        Ops {
            add: self.add + o.add,
            mul: self.mul + o.mul,
            fma: self.fma + o.fma,
            div: self.div + o.div,
            special: self.special + o.special,
            int: self.int + o.int,
            cmp: self.cmp + o.cmp,
        }
    }
}

/// Products of the extents of the loops around a store, by kind.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) struct LoopNest {
    pub serial: f64,
    pub unrolled: f64,
    pub vectorized: f64,
    pub parallel: f64,
    /// Unrolled loops that were virtual threads (a subset of `unrolled`).
    pub vthread: f64,
    /// The extent of the innermost vectorized loop around the store (1: none).
    pub vector_len: f64,
    /// Loops around the store.
    pub depth: f64,
    /// Trip count of one thread: the product of all enclosing loop extents.
    pub trips: f64,
    /// Whether the store is under an `if`.
    pub guarded: bool,
    /// The product of the extents of the loops inside the innermost serial loop around
    /// the store (all unrolled or vectorized): the copies of the store in the unrolled
    /// body the compiler schedules at once.
    pub unrolled_body: f64,
}

/// One access (the store's write or one load of its value).
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) struct Access {
    pub scope: Scope,
    pub bytes_per_elem: f64,
    /// The cache line the lines are counted in, in bytes.
    pub line_bytes: f64,
    /// Distinct elements and lines one thread block touches over its whole run.
    pub block: Footprint,
    /// ... one thread block touches in one iteration of the outermost serial or unrolled
    /// loop around the store (a GEMM's reduction step); the block's figure without one.
    pub step: Footprint,
    /// ... one thread touches.
    pub thread: Footprint,
    /// ... one warp touches in one execution of the access (tx, and ty where a warp spans
    /// rows, with the vector lanes); on the CPU one execution of the innermost loop.
    pub warp: Footprint,
    /// ... one thread touches in one unrolled body: the loops inside the innermost serial
    /// loop around the store range, every other variable is fixed. For a load from
    /// global or shared memory these are the values the compiler can keep live in
    /// registers at once.
    pub unrolled: Footprint,
    /// Executions over the launch.
    pub count: f64,
    /// Warp-wide executions over the launch (32 threads, or the block when smaller, with
    /// all lanes of the innermost vectorized loop); on the CPU executions of the innermost
    /// loop.
    pub warps: f64,
    /// Vector lanes of one warp-wide execution (the vectorized loop's extent, 1 without).
    pub lanes: f64,
    /// Stride along threadIdx.x (CUDA) or the innermost parallel loop (CPU); `None` when
    /// there is no such variable.
    pub thread_stride: Option<i64>,
    /// Stride along the innermost enclosing loop (0 without loops).
    pub inner_stride: i64,
    /// Shared memory on the GPU: the bank-conflict degree of one warp's access (1 to 32);
    /// 0 elsewhere.
    pub bank_ways: f64,
    /// Extent of the innermost enclosing loop the index does not depend on (0: none).
    pub reuse_count: f64,
    /// Iterations between two uses of the same element there: the product of the extents
    /// of the loops inside that loop.
    pub reuse_distance: f64,
}

/// Everything measured of one store.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Store {
    /// Index of the kernel it is in.
    pub kernel: usize,
    /// The buffer it writes.
    pub buffer: BufferId,
    pub ops: Ops,
    pub loops: LoopNest,
    /// Active threads of a block at the store (1 on the CPU).
    pub threads: f64,
    /// Blocks of the launch that execute the store: the grid, narrowed by `blockIdx < c`
    /// and `blockIdx >= c` guards (stages fused into one launch run on ranges of blocks).
    pub blocks: f64,
    pub write: Access,
    pub reads: Vec<Access>,
}

/// What the walk learns of a kernel besides its stores.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(super) struct KernelCounts {
    /// `__syncthreads()` executed per block.
    pub barriers: f64,
    /// The largest product of virtual-thread extents around a store.
    pub vthreads: f64,
    /// The largest product of parallel-loop extents around a store (CPU).
    pub parallel: f64,
    /// Buffers of the deepest software pipeline (`cp.async` into S copies of the shared
    /// stage: its waits leave S - 2 groups in flight); 1 without one.
    pub pipeline_stages: f64,
}

#[derive(Copy, Clone, PartialEq)]
enum Role {
    /// Not bound here: a point.
    Free,
    Loop,
    Parallel,
    Thread(Dim3),
    Block,
}

struct Frame {
    var: VarId,
    extent: i64,
    kind: ForKind,
    vthread: bool,
}

/// The walk over one kernel.
pub(super) struct Walker<'a> {
    p: &'a Program,
    k: &'a Kernel,
    kernel: usize,
    gpu: bool,
    line_bytes: f64,
    /// Per variable index: its role and current extent.
    role: Vec<Role>,
    ext: Vec<i64>,
    is_vthread: &'a [bool],
    stack: Vec<Frame>,
    /// Operations of the enclosing guards, per thread per execution.
    guard_ops: Ops,
    guards: usize,
    pub stores: Vec<Store>,
    pub counts: KernelCounts,
}

/// Marks the variables of the program's virtual-thread loops (the lowering unrolls them
/// under their own variable).
pub(super) fn vthread_vars(p: &Program) -> Vec<bool> {
    let mut out = vec![false; p.vars.len()];
    for lp in &p.loops {
        if let LoopKind::Thread(ThreadTag::VThread(_)) = lp.kind {
            if let Some(slot) = out.get_mut(lp.var.index()) {
                *slot = true;
            }
        }
    }
    out
}

#[derive(Copy, Clone, PartialEq)]
enum Level {
    Block,
    /// The block, with one loop fixed.
    Step(VarId),
    Thread,
    Warp,
    /// One thread, the loops of `Walker::unrolled_from` and inner ones ranging.
    Unrolled,
}

impl<'a> Walker<'a> {
    pub fn new(
        p: &'a Program,
        k: &'a Kernel,
        kernel: usize,
        gpu: bool,
        line_bytes: f64,
        is_vthread: &'a [bool],
    ) -> Self {
        let n = p.vars.len();
        let mut w = Walker {
            p,
            k,
            kernel,
            gpu,
            line_bytes,
            role: vec![Role::Free; n],
            ext: vec![1; n],
            is_vthread,
            stack: Vec::new(),
            guard_ops: Ops::default(),
            guards: 0,
            stores: Vec::new(),
            counts: KernelCounts {
                barriers: 0.0,
                vthreads: 1.0,
                parallel: 1.0,
                pipeline_stages: 1.0,
            },
        };
        for (v, tag) in &k.thread_vars {
            let (role, extent) = match tag {
                ThreadTag::BlockIdx(d) => (Role::Block, k.grid[dim(*d)]),
                ThreadTag::ThreadIdx(d) => (Role::Thread(*d), k.block[dim(*d)]),
                ThreadTag::VThread(_) => (Role::Free, 1),
            };
            w.set(*v, role, extent);
        }
        w
    }

    fn set(&mut self, v: VarId, role: Role, extent: i64) {
        if let (Some(r), Some(e)) = (self.role.get_mut(v.index()), self.ext.get_mut(v.index())) {
            *r = role;
            *e = extent.max(1);
        }
    }

    /// Walks the kernel's body.
    pub fn run(mut self) -> Self {
        let body = &self.k.body;
        self.stmts(body);
        self
    }

    fn stmts(&mut self, body: &[KStmt]) {
        for s in body {
            match s {
                KStmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    let role = if *kind == ForKind::Parallel {
                        Role::Parallel
                    } else {
                        Role::Loop
                    };
                    let saved = self.saved(*var);
                    self.set(*var, role, *extent);
                    let vthread = self.is_vthread.get(var.index()).copied().unwrap_or(false);
                    self.stack.push(Frame {
                        var: *var,
                        extent: (*extent).max(1),
                        kind: *kind,
                        vthread,
                    });
                    self.stmts(body);
                    self.stack.pop();
                    self.restore(*var, saved);
                }
                KStmt::If { cond, then } => self.guarded(cond, then),
                KStmt::Store {
                    buffer,
                    indices,
                    value,
                } => self.store(*buffer, indices, value),
                // A warp's reduction counts as one lane's update of its accumulator (the
                // shuffles, log2 of the lanes, are not counted).
                KStmt::WarpReduce {
                    buffer,
                    indices,
                    op,
                    value,
                    ..
                } => {
                    let acc = Expr::Load(*buffer, indices.clone());
                    self.store(*buffer, indices, &Expr::bin(*op, acc, value.clone()))
                }
                // An arrival at a serial sum's counter is a barrier (and an atomic).
                KStmt::Sync | KStmt::Arrive { .. } => self.counts.barriers += self.trips(),
                // An asynchronous copy counts as the stores of its lanes.
                KStmt::CpAsync {
                    dst,
                    dst_index,
                    src,
                    src_index,
                    lanes,
                    valid,
                } => {
                    for (index, load) in
                        crate::lower::cp_async_lanes(dst_index, *src, src_index, *lanes)
                    {
                        let value = match valid {
                            Some(c) => Expr::Select(
                                Box::new(c.clone()),
                                Box::new(load),
                                Box::new(Expr::Float(0.0)),
                            ),
                            None => load,
                        };
                        self.store(*dst, &[index], &value);
                    }
                }
                KStmt::WaitGroup(in_flight) => {
                    let stages = (*in_flight + 2) as f64;
                    self.counts.pipeline_stages = self.counts.pipeline_stages.max(stages);
                }
                // A warp's tensor-core instruction counts as its logical loads, FMAs and
                // stores (`Mma::logical`), as if one thread ran the whole tile: 32 times a
                // lane's share, the same for every candidate of the tensor-core sketch.
                KStmt::Mma(m) => {
                    let logical = m.logical(None);
                    self.stmts(&logical);
                }
                KStmt::Comment(_) | KStmt::CommitGroup => {}
            }
        }
    }

    fn saved(&self, v: VarId) -> Option<(Role, i64)> {
        Some((*self.role.get(v.index())?, self.ext[v.index()]))
    }

    fn restore(&mut self, v: VarId, saved: Option<(Role, i64)>) {
        if let Some((r, e)) = saved {
            self.role[v.index()] = r;
            self.ext[v.index()] = e;
        }
    }

    /// An `if`: its operations count for every store under it, `threadIdx < c` narrows
    /// the active threads and `blockIdx < c` or `blockIdx >= c` the active blocks.
    fn guarded(&mut self, cond: &Expr, then: &[KStmt]) {
        let mut narrowed = Vec::new();
        self.narrow(cond, &mut narrowed);
        let mut ops = Ops::default();
        count_index(cond, &mut ops);
        let saved_ops = self.guard_ops;
        self.guard_ops = self.guard_ops.plus(ops);
        self.guards += 1;
        self.stmts(then);
        self.guards -= 1;
        self.guard_ops = saved_ops;
        for (v, e) in narrowed.into_iter().rev() {
            self.ext[v.index()] = e;
        }
    }

    fn narrow(&mut self, cond: &Expr, saved: &mut Vec<(VarId, i64)>) {
        match cond {
            Expr::Bin(BinOp::And, a, b) => {
                self.narrow(a, saved);
                self.narrow(b, saved);
            }
            Expr::Bin(op @ (BinOp::Lt | BinOp::Ge), a, b) => {
                let (Expr::Var(v), Some(c)) = (&**a, b.as_int()) else {
                    return;
                };
                let (Some(role), Some(&old)) = (self.role.get(v.index()), self.ext.get(v.index()))
                else {
                    return;
                };
                let narrowed = match (op, role) {
                    (BinOp::Lt, Role::Thread(_) | Role::Block) => c,
                    (BinOp::Ge, Role::Block) => old - c,
                    _ => return,
                };
                saved.push((*v, old));
                self.ext[v.index()] = narrowed.clamp(1, old);
            }
            _ => {}
        }
    }

    fn trips(&self) -> f64 {
        self.stack.iter().map(|f| f.extent as f64).product()
    }

    fn threads(&self) -> f64 {
        if !self.gpu {
            return 1.0;
        }
        self.k
            .thread_vars
            .iter()
            .filter(|(_, t)| t.is_thread_idx())
            .filter_map(|(v, _)| self.ext.get(v.index()))
            .map(|e| *e as f64)
            .product()
    }

    /// The blocks of the launch active at the current point: the grid, each dimension
    /// bound to a `blockIdx` variable narrowed as its guards narrow it.
    fn blocks(&self) -> f64 {
        let grid: f64 = self.k.grid.iter().map(|g| *g as f64).product();
        self.k
            .thread_vars
            .iter()
            .filter_map(|(v, t)| match t {
                ThreadTag::BlockIdx(d) => {
                    let e = *self.ext.get(v.index())? as f64;
                    Some(e / self.k.grid[dim(*d)].max(1) as f64)
                }
                _ => None,
            })
            .fold(grid, |acc, share| acc * share)
    }

    /// The index in the stack of the outermost loop of the unrolled body around the
    /// current point: the one after the innermost serial loop.
    fn unrolled_from(&self) -> usize {
        self.stack
            .iter()
            .rposition(|f| f.kind == ForKind::Serial)
            .map_or(0, |i| i + 1)
    }

    fn loop_nest(&self) -> LoopNest {
        let mut n = LoopNest {
            unrolled_body: self.stack[self.unrolled_from()..]
                .iter()
                .map(|f| f.extent as f64)
                .product(),
            serial: 1.0,
            unrolled: 1.0,
            vectorized: 1.0,
            parallel: 1.0,
            vthread: 1.0,
            vector_len: 1.0,
            depth: self.stack.len() as f64,
            trips: self.trips(),
            guarded: self.guards > 0,
        };
        for f in &self.stack {
            let e = f.extent as f64;
            match f.kind {
                ForKind::Serial => n.serial *= e,
                ForKind::Unrolled => n.unrolled *= e,
                ForKind::Vectorized => {
                    n.vectorized *= e;
                    n.vector_len = e;
                }
                ForKind::Parallel => n.parallel *= e,
            }
            if f.vthread {
                n.vthread *= e;
            }
        }
        n
    }

    fn store(&mut self, buffer: BufferId, indices: &[Expr], value: &Expr) {
        let float = self.p.buffer(buffer).dtype.is_float();
        let mut ops = Ops::default();
        count_value(value, float, &mut ops);
        for i in indices {
            count_index(i, &mut ops);
        }
        let loops = self.loop_nest();
        let threads = self.threads();
        let blocks = self.blocks();
        let launch = loops.trips * threads * blocks;
        let ops = ops.plus(self.guard_ops).scaled(launch);
        self.counts.vthreads = self.counts.vthreads.max(loops.vthread);
        self.counts.parallel = self.counts.parallel.max(loops.parallel);
        let write = self.access(buffer, indices, launch);
        let mut reads = Vec::new();
        value.visit(&mut |e| {
            if let Expr::Load(b, idx) = e {
                reads.push(self.access(*b, idx, launch));
            }
        });
        self.stores.push(Store {
            kernel: self.kernel,
            buffer,
            ops,
            loops,
            threads,
            blocks,
            write,
            reads,
        });
    }

    /// The range of a variable when measuring at `level`.
    fn range(&self, v: VarId, level: Level, lane: Option<VarId>) -> Interval {
        let i = v.index();
        let (Some(role), Some(&e)) = (self.role.get(i), self.ext.get(i)) else {
            return Interval::point(0);
        };
        let full = Interval::new(0, e.max(1) - 1);
        match (level, role) {
            (_, Role::Free | Role::Block) => Interval::point(0),
            (Level::Step(fixed), _) if fixed == v => Interval::point(0),
            (Level::Block | Level::Step(_), _) => full,
            (Level::Thread, Role::Loop) => full,
            (Level::Thread, _) => Interval::point(0),
            (Level::Warp, Role::Thread(d)) => {
                let bx = self.k.block[0].max(1);
                let limit = match d {
                    Dim3::X => 32,
                    Dim3::Y => (32 / bx).max(1),
                    Dim3::Z => 1,
                };
                Interval::new(0, e.clamp(1, limit) - 1)
            }
            (Level::Warp, _) if Some(v) == lane => full,
            (Level::Warp, _) => Interval::point(0),
            (Level::Unrolled, Role::Loop) => {
                if self.stack[self.unrolled_from()..]
                    .iter()
                    .any(|f| f.var == v)
                {
                    full
                } else {
                    Interval::point(0)
                }
            }
            (Level::Unrolled, _) => Interval::point(0),
        }
    }

    fn access(&self, buffer: BufferId, indices: &[Expr], launch: f64) -> Access {
        let buf = self.p.buffer(buffer);
        let bytes = buf.dtype.bytes() as f64;
        let size = self
            .k
            .allocs
            .iter()
            .find(|a| a.buffer == buffer)
            .map_or(buf.numel(), |a| a.size) as f64;
        let line_elems = (self.line_bytes / bytes).max(1.0);
        let zero = Expr::Int(0);
        let index = indices.first().unwrap_or(&zero);
        let mut terms = Vec::new();
        linear_terms(index, 1, &mut terms);
        // The warp's lanes: the innermost vectorized loop on CUDA, the innermost loop on
        // the CPU.
        let lane = if self.gpu {
            self.stack
                .iter()
                .rev()
                .find(|f| f.kind == ForKind::Vectorized)
                .map(|f| f.var)
        } else {
            self.stack.last().map(|f| f.var)
        };
        let lanes = lane
            .and_then(|v| self.ext.get(v.index()))
            .map_or(1.0, |e| *e as f64);
        let warp_threads = if self.gpu {
            self.threads().min(32.0)
        } else {
            1.0
        };
        let at = |level| {
            footprint(
                &terms,
                &|v| Some(self.range(v, level, lane)),
                line_elems,
                size,
            )
        };
        let step = self
            .stack
            .iter()
            .find(|f| matches!(f.kind, ForKind::Serial | ForKind::Unrolled) && !f.vthread)
            .map_or(Level::Block, |f| Level::Step(f.var));
        let thread_var = if self.gpu {
            self.k
                .thread_vars
                .iter()
                .find(|(_, t)| *t == ThreadTag::ThreadIdx(Dim3::X))
                .map(|(v, _)| *v)
        } else {
            self.stack
                .iter()
                .rev()
                .find(|f| f.kind == ForKind::Parallel)
                .map(|f| f.var)
        };
        let used = index.vars();
        let (reuse_count, reuse_distance) = self
            .stack
            .iter()
            .rposition(|f| !used.contains(&f.var))
            .map_or((0.0, 0.0), |i| {
                let inside: f64 = self.stack[i + 1..]
                    .iter()
                    .map(|f| f.extent as f64)
                    .product();
                (self.stack[i].extent as f64, inside)
            });
        Access {
            scope: buf.scope,
            bytes_per_elem: bytes,
            line_bytes: self.line_bytes,
            block: at(Level::Block),
            step: at(step),
            thread: at(Level::Thread),
            warp: at(Level::Warp),
            unrolled: at(Level::Unrolled),
            count: launch,
            warps: launch / (warp_threads * lanes).max(1.0),
            lanes,
            thread_stride: thread_var.map(|v| stride(index, v)),
            bank_ways: if self.gpu && buf.scope == Scope::Shared {
                self.bank_ways(index, buf.dtype.bytes() as i64, lane)
            } else {
                0.0
            },
            inner_stride: self.stack.last().map_or(0, |f| stride(index, f.var)),
            reuse_count,
            reuse_distance,
        }
    }
}

impl Walker<'_> {
    /// The bank-conflict degree of a shared-memory access by the first phase of warp 0:
    /// 32 threads (`threadIdx.x` first, then `threadIdx.y` where a row of the block is
    /// shorter than a warp), or `32 / V` threads with all `V` lanes of a vectorized loop
    /// (a wide access is split into phases of 128 bytes). Other variables are 0.
    fn bank_ways(&self, index: &Expr, bytes: i64, lane: Option<VarId>) -> f64 {
        let var_of = |d| {
            self.k
                .thread_vars
                .iter()
                .find(|(_, t)| *t == ThreadTag::ThreadIdx(d))
                .map(|(v, _)| *v)
        };
        let (tx, ty) = (var_of(Dim3::X), var_of(Dim3::Y));
        let extent = |v: Option<VarId>| {
            v.and_then(|v| self.ext.get(v.index()))
                .copied()
                .unwrap_or(1)
        };
        let (bx, by) = (extent(tx).max(1), extent(ty).max(1));
        let lanes = lane.map_or(1, |v| extent(Some(v))).clamp(1, 32);
        let threads = (32 / lanes).min(bx * by).max(1);
        let mut words = Vec::with_capacity((threads * lanes) as usize);
        for t in 0..threads {
            let (x, y) = (t % bx, t / bx);
            for l in 0..lanes {
                let env = |v: VarId| {
                    if Some(v) == tx {
                        x
                    } else if Some(v) == ty {
                        y
                    } else if Some(v) == lane {
                        l
                    } else {
                        0
                    }
                };
                words.push(index.eval_int(&env).wrapping_mul(bytes) / 4);
            }
        }
        bank_ways(&mut words)
    }
}

fn dim(d: Dim3) -> usize {
    match d {
        Dim3::X => 0,
        Dim3::Y => 1,
        Dim3::Z => 2,
    }
}

/// Counts the operations of a stored value; `float` says whether its arithmetic is on
/// floats. Load indices count as integer arithmetic.
fn count_value(e: &Expr, float: bool, ops: &mut Ops) {
    match e {
        Expr::Int(_) | Expr::Float(_) | Expr::Var(_) => {}
        Expr::Load(_, idx) => idx.iter().for_each(|i| count_index(i, ops)),
        Expr::Bin(op, a, b) => {
            match op {
                BinOp::Add | BinOp::Sub if float => {
                    // A product feeding an addition is one multiply-add.
                    let (product, other) = if is_mul(a) {
                        (Some(a), b)
                    } else if is_mul(b) {
                        (Some(b), a)
                    } else {
                        (None, b)
                    };
                    if let Some(Expr::Bin(_, x, y)) = product.map(|m| &**m) {
                        ops.fma += 1.0;
                        count_value(x, float, ops);
                        count_value(y, float, ops);
                        count_value(other, float, ops);
                        return;
                    }
                    ops.add += 1.0;
                }
                BinOp::Mul if float => ops.mul += 1.0,
                BinOp::Div if float => ops.div += 1.0,
                BinOp::Min | BinOp::Max if float => ops.special += 1.0,
                op if op.is_predicate() => ops.cmp += 1.0,
                _ => ops.int += 1.0,
            }
            count_value(a, float, ops);
            count_value(b, float, ops);
        }
        Expr::Un(op, a) => {
            match op {
                UnOp::Neg if float => ops.add += 1.0,
                UnOp::Neg => ops.int += 1.0,
                UnOp::Not => ops.cmp += 1.0,
                UnOp::Exp | UnOp::Sqrt | UnOp::Tanh | UnOp::Abs => ops.special += 1.0,
                // A mask of the operand's bits.
                UnOp::Tf32 => ops.int += 1.0,
            }
            count_value(a, float, ops);
        }
        Expr::Select(c, t, f) => {
            ops.cmp += 1.0;
            count_index(c, ops);
            count_value(t, float, ops);
            count_value(f, float, ops);
        }
        Expr::Cast(t, a) => count_value(a, t.is_float(), ops),
    }
}

fn is_mul(e: &Expr) -> bool {
    matches!(e, Expr::Bin(BinOp::Mul, _, _))
}

/// Counts integer arithmetic and comparisons of an index or guard expression.
fn count_index(e: &Expr, ops: &mut Ops) {
    e.visit(&mut |x| match x {
        Expr::Bin(op, _, _) if op.is_predicate() => ops.cmp += 1.0,
        Expr::Bin(..) => ops.int += 1.0,
        Expr::Un(UnOp::Not, _) | Expr::Select(..) => ops.cmp += 1.0,
        Expr::Un(..) => ops.int += 1.0,
        _ => {}
    });
}
