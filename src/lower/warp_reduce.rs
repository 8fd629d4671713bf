//! Warp shuffles for a reduction across a block's `threadIdx.x` lanes (CUDA).
//!
//! A cross-thread reduction as the schedule writes it (`rfactor` over the lanes, the
//! partial results `cache_write`n to shared memory) lowers to
//!
//! ```text
//! if (g) S[w(tx)] = partial[0];          // every lane stores its partial result
//! __syncthreads();
//! for (a = 0; a < L; ++a)                // every lane reads all L of them
//!   if (g') { if (a == 0) acc[0] = init; acc[0] = op(acc[0], S[w(a)]); }
//! ```
//!
//! When the lanes are a whole `blockDim.x` of `L` threads, `L` a power of two up to 32,
//! they are `L` consecutive lanes of one warp, and the store, the barrier and the `L`
//! shared loads become `log2(L)` `__shfl_xor_sync` steps in registers
//! ([`KStmt::WarpReduce`]): every lane ends with the combination of all, as before. When
//! `L` is a multiple of 32, each warp combines its 32 lanes' partial results so, its first
//! lane stores the warp's, and every lane reads the `L / 32` of them (one shared store
//! and `L / 32` loads for `L` loads). The rewrite applies only where it keeps the meaning:
//!
//! * the loop reads exactly the elements the store wrote (`w(a)` at `a = tx` is the
//!   store's index), the shared buffer is written and read nowhere else, and nothing but
//!   comments lies between the store and the loop;
//! * no condition over either of them, up to the kernel's top, depends on `threadIdx.x`
//!   (a group's lanes run the shuffles together or not at all), and the loop's own
//!   conditions do not depend on its variable;
//! * the partial result reads only registers (of up to 32 lanes, it is evaluated where
//!   the loop was, by the threads that read; it does not read the accumulator the loop
//!   updates);
//! * `op` is a sum, maximum or minimum of f32 values.
//!
//! The butterfly sums in another order than the loop did (floating-point sums may differ
//! in their last bits); every lane of a group computes the same value. The shared buffer's
//! allocation goes with its last access.

use super::kernel::{Alloc, KStmt, Kernel};
use crate::ir::simplify::{simplify, simplify_in};
use crate::ir::{BinOp, BufferId, DType, Dim3, Expr, Program, Scope, ThreadTag, VarId};
use std::collections::{BTreeMap, BTreeSet};

/// Rewrites the kernel's lane reductions into warp shuffles where they qualify.
pub(super) fn apply(p: &mut Program, k: &mut Kernel, ranges: &BTreeMap<VarId, i64>) {
    let block_x = k.block[0];
    let within_a_warp = (2..=32).contains(&block_x) && block_x & (block_x - 1) == 0;
    if !(within_a_warp || block_x % 32 == 0) {
        return;
    }
    let Some(tx) = k.lane() else { return };
    let counts = access_counts(p, &k.body);
    let mut ctx = Ctx {
        p,
        tx,
        block_x,
        first_lane: first_lane(k, block_x.min(32)),
        ranges,
        counts,
        removed: BTreeSet::new(),
        added: Vec::new(),
    };
    ctx.rewrite(&mut k.body);
    let (removed, added) = (ctx.removed, ctx.added);
    k.allocs.retain(|a: &Alloc| !removed.contains(&a.buffer));
    k.allocs.extend(added.into_iter().map(|buffer| Alloc {
        buffer,
        scope: Scope::Local,
        size: 1,
        at: None,
        swizzle_row: None,
    }));
}

/// The first lane, within its warp, of the group of `lanes` threads a thread belongs to:
/// `(blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32`, where `blockDim.x` is
/// `lanes`.
fn first_lane(k: &Kernel, lanes: i64) -> Expr {
    let var = |d: Dim3| {
        k.thread_vars
            .iter()
            .find(|(_, t)| *t == ThreadTag::ThreadIdx(d))
            .map_or(Expr::Int(0), |(v, _)| Expr::Var(*v))
    };
    if lanes == 32 {
        return Expr::Int(0);
    }
    let row = Expr::add(var(Dim3::Y), Expr::mul(Expr::Int(k.block[1]), var(Dim3::Z)));
    Expr::bin(
        BinOp::FloorMod,
        Expr::mul(Expr::Int(lanes), row),
        Expr::Int(32),
    )
}

/// How often each shared buffer is loaded and stored in a statement list.
#[derive(Default)]
struct Counts {
    reads: BTreeMap<BufferId, usize>,
    writes: BTreeMap<BufferId, usize>,
}

fn access_counts(p: &Program, body: &[KStmt]) -> Counts {
    fn loads(p: &Program, e: &Expr, c: &mut Counts) {
        for (b, _) in e.loads() {
            if p.buffer(b).scope == Scope::Shared {
                *c.reads.entry(b).or_default() += 1;
            }
        }
    }
    fn walk(p: &Program, body: &[KStmt], c: &mut Counts) {
        for s in body {
            match s {
                KStmt::For { body, .. } => walk(p, body, c),
                KStmt::If { cond, then } => {
                    loads(p, cond, c);
                    walk(p, then, c);
                }
                KStmt::Store {
                    buffer,
                    indices,
                    value,
                } => {
                    indices.iter().chain([value]).for_each(|e| loads(p, e, c));
                    *c.writes.entry(*buffer).or_default() += 1;
                }
                other => {
                    // Anything else that touches a shared buffer keeps it out of reach.
                    let mut acc = Default::default();
                    other.accesses(&mut acc);
                    let super::kernel::Accesses { reads, writes } = acc;
                    for b in reads {
                        *c.reads.entry(b).or_default() += 2;
                    }
                    for b in writes {
                        *c.writes.entry(b).or_default() += 2;
                    }
                }
            }
        }
    }
    let mut c = Counts::default();
    walk(p, body, &mut c);
    c
}

/// A store under conditions: `if (conds...) buffer[index] = value`.
struct Guarded<'a> {
    conds: Vec<&'a Expr>,
    buffer: BufferId,
    index: &'a Expr,
    value: &'a Expr,
}

/// The statements of a list other than comments.
fn code(body: &[KStmt]) -> Vec<&KStmt> {
    body.iter()
        .filter(|s| !matches!(s, KStmt::Comment(_)))
        .collect()
}

/// The conditions a list's single `if` chain puts around its innermost statements, and
/// those statements.
fn peel(body: &[KStmt]) -> (Vec<&Expr>, Vec<&KStmt>) {
    let mut conds = Vec::new();
    let mut items = code(body);
    while let [KStmt::If { cond, then }] = items[..] {
        conds.push(cond);
        items = code(then);
    }
    (conds, items)
}

fn guarded_store(s: &KStmt) -> Option<Guarded<'_>> {
    let (conds, items) = peel(std::slice::from_ref(s));
    match items[..] {
        [KStmt::Store {
            buffer,
            indices,
            value,
        }] if indices.len() == 1 => Some(Guarded {
            conds,
            buffer: *buffer,
            index: &indices[0],
            value,
        }),
        _ => None,
    }
}

/// A lane reduction found: what replaces its store and its loop.
struct Found {
    store: Vec<KStmt>,
    reads: Vec<KStmt>,
}

struct Ctx<'a> {
    p: &'a mut Program,
    tx: VarId,
    /// `blockDim.x`: the lanes of a reduction.
    block_x: i64,
    /// The first lane, in its warp, of a thread's group of `min(block_x, 32)`.
    first_lane: Expr,
    ranges: &'a BTreeMap<VarId, i64>,
    counts: Counts,
    /// Shared buffers no longer used, and the registers added for warps' results.
    removed: BTreeSet<BufferId>,
    added: Vec<BufferId>,
}

impl Ctx<'_> {
    /// Rewrites the lane reductions of `body` and of the lists nested in it that every
    /// lane of a group runs together.
    fn rewrite(&mut self, body: &mut Vec<KStmt>) {
        let mut i = 0;
        while i < body.len() {
            if let Some((loop_at, found)) = self.lane_reduction(body, i) {
                let after_store = found.store.len();
                body.splice(loop_at..=loop_at, found.reads);
                body.splice(i..=i, found.store);
                // A store gone in registers takes the comment naming its block along.
                if after_store == 0 && i > 0 && matches!(body[i - 1], KStmt::Comment(_)) {
                    body.remove(i - 1);
                    i -= 1;
                }
                i += after_store;
                continue;
            }
            i += 1;
        }
        for s in body.iter_mut() {
            match s {
                KStmt::For { body, .. } => self.rewrite(body),
                KStmt::If { cond, then } if !cond.uses_var(self.tx) => self.rewrite(then),
                _ => {}
            }
        }
    }

    /// The lane reduction whose store is `body[i]`: the position of its loop and what
    /// replaces the store and the loop.
    fn lane_reduction(&mut self, body: &[KStmt], i: usize) -> Option<(usize, Found)> {
        let store = guarded_store(&body[i])?;
        let shared = store.buffer;
        let f32_in = |b: BufferId, scope: Scope| {
            let buf = self.p.buffer(b);
            buf.scope == scope && buf.dtype == DType::F32
        };
        if !f32_in(shared, Scope::Shared)
            || self.counts.reads.get(&shared) != Some(&1)
            || self.counts.writes.get(&shared) != Some(&1)
            || store.conds.iter().any(|c| c.uses_var(self.tx))
            || !self.reads_registers_only(store.value)
        {
            return None;
        }
        let loop_at = i
            + 1
            + body[i + 1..]
                .iter()
                .position(|s| !matches!(s, KStmt::Comment(_)))?;
        let KStmt::For {
            var,
            extent,
            kind,
            body: loop_body,
        } = &body[loop_at]
        else {
            return None;
        };
        if *extent != self.block_x
            || !matches!(kind, super::ForKind::Serial | super::ForKind::Unrolled)
        {
            return None;
        }
        let a = *var;
        let (conds, items) = peel(loop_body);
        if conds.iter().any(|c| c.uses_var(self.tx) || c.uses_var(a)) {
            return None;
        }
        let (init, update) = match items[..] {
            [update] => (None, update),
            [KStmt::If { cond, then }, update] if is_first(cond, a) => match code(then)[..] {
                [init @ KStmt::Store { value, .. }] if !value.uses_var(a) => {
                    (Some(init.clone()), update)
                }
                _ => return None,
            },
            _ => return None,
        };
        let KStmt::Store {
            buffer: acc,
            indices,
            value,
        } = update
        else {
            return None;
        };
        if !f32_in(*acc, Scope::Local)
            || indices.len() != 1
            || indices[0].uses_var(a)
            || store.value.loads().iter().any(|(b, _)| b == acc)
        {
            return None;
        }
        if let Some(KStmt::Store {
            buffer,
            indices: i0,
            ..
        }) = &init
        {
            if buffer != acc || i0 != indices {
                return None;
            }
        }
        let acc_load = Expr::Load(*acc, indices.clone());
        let (op, read) = match value {
            Expr::Bin(op @ (BinOp::Add | BinOp::Max | BinOp::Min), x, y) if **x == acc_load => {
                (*op, &**y)
            }
            Expr::Bin(op @ (BinOp::Add | BinOp::Max | BinOp::Min), x, y) if **y == acc_load => {
                (*op, &**x)
            }
            _ => return None,
        };
        let Expr::Load(b, read_index) = read else {
            return None;
        };
        if *b != shared || read_index.len() != 1 || !read_index[0].uses_var(a) {
            return None;
        }
        let at_lane = read_index[0].substitute(&|v| (v == a).then_some(Expr::Var(self.tx)));
        if self.canonical(&at_lane) != self.canonical(store.index) {
            return None;
        }
        let reduction = Reduction {
            acc: *acc,
            acc_index: indices.clone(),
            op,
            init,
            a,
            kind: *kind,
            conds: conds.into_iter().cloned().collect(),
            comments: loop_body
                .iter()
                .filter(|s| matches!(s, KStmt::Comment(_)))
                .cloned()
                .collect(),
        };
        let found = match self.block_x <= 32 {
            true => {
                self.removed.insert(shared);
                Found {
                    store: Vec::new(),
                    reads: reduction.in_registers(store.value, self.block_x, &self.first_lane),
                }
            }
            false => self.by_warps(&store, &reduction, &read_index[0]),
        };
        Some((loop_at, found))
    }

    /// Lanes of several warps: each warp's result (`shfl` into a register of its own),
    /// stored by its first lane where the lane's partial result was, then the loop over
    /// the warps' results.
    fn by_warps(&mut self, store: &Guarded, r: &Reduction, read_index: &Expr) -> Found {
        let name = format!("{}_warp", self.p.buffer(store.buffer).name);
        let warp = self.p.new_buffer(crate::ir::Buffer {
            name,
            shape: vec![1],
            dtype: DType::F32,
            scope: Scope::Local,
            kind: crate::ir::BufferKind::Intermediate,
            align: Vec::new(),
            swizzle: false,
        });
        self.added.push(warp);
        let at0 = vec![Expr::Int(0)];
        let first_of_warp = Expr::bin(
            BinOp::Eq,
            Expr::bin(BinOp::FloorMod, Expr::Var(self.tx), Expr::Int(32)),
            Expr::Int(0),
        );
        let inner = vec![
            KStmt::Store {
                buffer: warp,
                indices: at0.clone(),
                value: identity(r.op),
            },
            KStmt::WarpReduce {
                buffer: warp,
                indices: at0.clone(),
                op: r.op,
                value: store.value.clone(),
                lanes: 32,
                first_lane: Expr::Int(0),
            },
            KStmt::If {
                cond: first_of_warp,
                then: vec![KStmt::Store {
                    buffer: store.buffer,
                    indices: vec![store.index.clone()],
                    value: Expr::Load(warp, at0),
                }],
            },
        ];
        let warps = Expr::mul(Expr::Var(r.a), Expr::Int(32));
        let read = Expr::Load(
            store.buffer,
            vec![simplify(
                &read_index.substitute(&|v| (v == r.a).then(|| warps.clone())),
                &|_| None,
            )],
        );
        let update = KStmt::Store {
            buffer: r.acc,
            indices: r.acc_index.clone(),
            value: Expr::bin(r.op, Expr::Load(r.acc, r.acc_index.clone()), read),
        };
        let first = |then| KStmt::If {
            cond: Expr::bin(BinOp::Eq, Expr::Var(r.a), Expr::Int(0)),
            then,
        };
        let body: Vec<KStmt> = r
            .init
            .iter()
            .map(|i| first(vec![i.clone()]))
            .chain([update])
            .collect();
        let body = r
            .comments
            .iter()
            .cloned()
            .chain(guard(&r.conds, body))
            .collect();
        Found {
            store: guard(
                &store.conds.iter().map(|c| (*c).clone()).collect::<Vec<_>>(),
                inner,
            ),
            reads: vec![KStmt::For {
                var: r.a,
                extent: self.block_x / 32,
                kind: r.kind,
                body,
            }],
        }
    }

    /// `e` simplified, a variable of extent 1 (`threadIdx.y` of a block of one row) read
    /// as 0.
    fn canonical(&self, e: &Expr) -> Expr {
        let e = e.substitute(&|v| (self.ranges.get(&v) == Some(&1)).then_some(Expr::Int(0)));
        simplify_in(&e, self.ranges)
    }

    /// Whether `e` loads only local buffers (a thread's registers), so that any thread may
    /// evaluate it.
    fn reads_registers_only(&self, e: &Expr) -> bool {
        e.loads()
            .iter()
            .all(|(b, _)| self.p.buffer(*b).scope == Scope::Local)
    }
}

/// The loop over the lanes' partial results, taken apart.
struct Reduction {
    acc: BufferId,
    acc_index: Vec<Expr>,
    op: BinOp,
    /// The accumulator's initial store, made in the loop's first iteration.
    init: Option<KStmt>,
    /// The loop's variable and kind.
    a: VarId,
    kind: super::ForKind,
    /// The conditions over the update, outermost first.
    conds: Vec<Expr>,
    comments: Vec<KStmt>,
}

impl Reduction {
    /// Lanes of one warp: the loop becomes the initial store and the shuffles, under the
    /// loop's conditions.
    fn in_registers(&self, value: &Expr, lanes: i64, first_lane: &Expr) -> Vec<KStmt> {
        let reduce = KStmt::WarpReduce {
            buffer: self.acc,
            indices: self.acc_index.clone(),
            op: self.op,
            value: value.clone(),
            lanes,
            first_lane: first_lane.clone(),
        };
        let inner: Vec<KStmt> = self.init.iter().cloned().chain([reduce]).collect();
        self.comments
            .iter()
            .cloned()
            .chain(guard(&self.conds, inner))
            .collect()
    }
}

/// `then` under the conditions, outermost first.
fn guard(conds: &[Expr], then: Vec<KStmt>) -> Vec<KStmt> {
    conds.iter().rev().fold(then, |then, c| {
        vec![KStmt::If {
            cond: c.clone(),
            then,
        }]
    })
}

/// The value `op` leaves a value alone with.
fn identity(op: BinOp) -> Expr {
    Expr::Float(match op {
        BinOp::Max => f64::NEG_INFINITY,
        BinOp::Min => f64::INFINITY,
        _ => 0.0,
    })
}

/// `a == 0`.
fn is_first(cond: &Expr, a: VarId) -> bool {
    match cond {
        Expr::Bin(BinOp::Eq, x, y) => {
            (**x == Expr::Var(a) && **y == Expr::Int(0))
                || (**y == Expr::Var(a) && **x == Expr::Int(0))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::kernel::{Alloc, ForKind, KStmt, Kernel, Lowered};
    use crate::ir::{
        BinOp, Buffer, BufferId, BufferKind, DType, Dim3, Expr, Program, Scope, ThreadTag, VarId,
    };
    use ndarray::{ArrayD, IxDyn};
    use std::collections::BTreeMap;

    /// `rows` rows of `width` summed across a block of `width` x `rows` threads, as the
    /// cross-thread sketch lowers it: `P = A[y, x]; S[write] = P;
    /// for a: { if (a == 0) ACC = 0; ACC += S[read(a)] }; B[y, x] = ACC`.
    struct Rows {
        prog: Program,
        buffers: [BufferId; 5],
        tx: VarId,
        ty: VarId,
        a: VarId,
        width: i64,
        rows: i64,
    }

    impl Rows {
        fn new(width: i64, rows: i64) -> Rows {
            let mut prog = Program::new("rows");
            let mut buf = |name: &str, shape: Vec<i64>, scope: Scope, kind: BufferKind| {
                prog.new_buffer(Buffer {
                    name: name.into(),
                    shape,
                    dtype: DType::F32,
                    scope,
                    kind,
                    align: Vec::new(),
                    swizzle: false,
                })
            };
            let a_in = buf("A", vec![rows, width], Scope::Global, BufferKind::Input);
            let b_out = buf("B", vec![rows, width], Scope::Global, BufferKind::Output);
            let s = buf(
                "S",
                vec![rows * width],
                Scope::Shared,
                BufferKind::Intermediate,
            );
            let p = buf("P", vec![1], Scope::Local, BufferKind::Intermediate);
            let acc = buf("ACC", vec![1], Scope::Local, BufferKind::Intermediate);
            prog.params = vec![a_in, b_out];
            let tx = prog.new_var("threadIdx.x");
            let ty = prog.new_var("threadIdx.y");
            let a = prog.new_var("a");
            Rows {
                prog,
                buffers: [a_in, b_out, s, p, acc],
                tx,
                ty,
                a,
                width,
                rows,
            }
        }

        /// `y * width + x`
        fn at(&self, x: Expr) -> Expr {
            Expr::add(Expr::mul(Expr::Var(self.ty), Expr::Int(self.width)), x)
        }

        /// The kernel, with the store of the partial results `S[write]` under `guard` and
        /// the loop reading `S[read]`, then `B = ACC + tail`.
        fn kernel(&self, guard: Option<Expr>, write: Expr, read: Expr, tail: Expr) -> Kernel {
            let [a_in, b_out, s, p, acc] = self.buffers;
            let store = |buffer, index, value| KStmt::Store {
                buffer,
                indices: vec![index],
                value,
            };
            let x = Expr::Var(self.tx);
            let zero = Expr::Int(0);
            let partial = store(s, write, Expr::Load(p, vec![zero.clone()]));
            let partial = match guard {
                Some(cond) => KStmt::If {
                    cond,
                    then: vec![partial],
                },
                None => partial,
            };
            let acc0 = Expr::Load(acc, vec![zero.clone()]);
            let body = vec![
                store(p, zero.clone(), Expr::Load(a_in, vec![self.at(x.clone())])),
                partial,
                KStmt::For {
                    var: self.a,
                    extent: self.width,
                    kind: ForKind::Unrolled,
                    body: vec![
                        KStmt::Comment("ACC".into()),
                        KStmt::If {
                            cond: Expr::bin(BinOp::Eq, Expr::Var(self.a), zero.clone()),
                            then: vec![store(acc, zero.clone(), Expr::Float(0.0))],
                        },
                        store(
                            acc,
                            zero.clone(),
                            Expr::add(acc0.clone(), Expr::Load(s, vec![read])),
                        ),
                    ],
                },
                store(b_out, self.at(x), Expr::add(acc0, tail)),
            ];
            let alloc = |buffer, scope, size| Alloc {
                buffer,
                scope,
                size,
                at: None,
                swizzle_row: None,
            };
            Kernel {
                name: "rows_kernel".into(),
                params: vec![a_in, b_out],
                allocs: vec![
                    alloc(s, Scope::Shared, self.rows * self.width),
                    alloc(p, Scope::Local, 1),
                    alloc(acc, Scope::Local, 1),
                ],
                grid: [1, 1, 1],
                block: [self.width, self.rows, 1],
                min_blocks: 1,
                thread_vars: vec![
                    (self.tx, ThreadTag::ThreadIdx(Dim3::X)),
                    (self.ty, ThreadTag::ThreadIdx(Dim3::Y)),
                ],
                body,
            }
        }

        /// The pass on `k`, then barriers; whether it shuffled.
        fn lower(&mut self, k: &mut Kernel) -> bool {
            let ranges = BTreeMap::from([
                (self.tx, self.width),
                (self.ty, self.rows),
                (self.a, self.width),
            ]);
            super::apply(&mut self.prog, k, &ranges);
            super::super::barrier::insert_barriers(&self.prog, k).unwrap();
            k.body
                .iter()
                .any(|s| s.contains(&|x| matches!(x, KStmt::WarpReduce { .. })))
        }

        /// B of the kernel run with a GPU's semantics on `A[y, x] = 1 + x + 100 y`.
        fn run(&self, k: Kernel) -> ArrayD<f32> {
            let shape = [self.rows as usize, self.width as usize];
            let a = ArrayD::from_shape_fn(IxDyn(&shape), |i| (1 + i[1] + 100 * i[0]) as f32);
            let mut params = vec![a, ArrayD::from_elem(IxDyn(&shape), f32::NAN)];
            let lowered = Lowered {
                program: self.prog.clone(),
                kernels: vec![k],
                workspaces: Vec::new(),
            };
            crate::interp::run_kernels(&lowered, &mut params).unwrap();
            params.remove(1)
        }
    }

    /// Lanes of one warp (4) and of two (64): the row sums come out of shuffles in every
    /// lane; at 4 the shared buffer is gone, at 64 it holds one result a warp. In a block
    /// of one row, where the store's index lost the row (`x`) and the loop's kept it
    /// (`a + y`, y of extent 1), too.
    #[test]
    fn a_sum_across_the_lanes_of_a_block_row_is_shuffled() {
        for (width, rows) in [(4, 2), (64, 2), (64, 1)] {
            let mut r = Rows::new(width, rows);
            let (x, a) = (Expr::Var(r.tx), Expr::Var(r.a));
            let (write, read) = match rows {
                1 => (x, Expr::add(a, Expr::Var(r.ty))),
                _ => (r.at(x), r.at(a)),
            };
            let mut k = r.kernel(None, write, read, Expr::Float(0.0));
            assert!(r.lower(&mut k), "width {width}");
            let shared = k.allocs.iter().filter(|a| a.scope == Scope::Shared).count();
            assert_eq!(
                shared,
                usize::from(width > 32),
                "width {width}: {:?}",
                k.allocs
            );
            let sum = |y: i64| (width * (width + 1) / 2 + 100 * y * width) as f32;
            let b = r.run(k);
            let shape = [rows as usize, width as usize];
            let expected = ArrayD::from_shape_fn(IxDyn(&shape), |i| sum(i[0] as i64));
            assert_eq!(b, expected, "width {width}");
        }
    }

    /// Where the meaning would change, the loop stays: the partial results stored by some
    /// lanes only, read transposed, or read again after the loop.
    #[test]
    fn a_lane_reduction_that_does_not_qualify_is_left_alone() {
        let mut r = Rows::new(4, 2);
        let x = Expr::Var(r.tx);
        let s = r.buffers[2];
        let some_lanes = Expr::lt(x.clone(), Expr::Int(3));
        let transposed = Expr::add(Expr::mul(Expr::Var(r.a), Expr::Int(2)), Expr::Var(r.ty));
        let cases = [
            (Some(some_lanes), r.at(Expr::Var(r.a)), Expr::Float(0.0)),
            (None, transposed, Expr::Float(0.0)),
            (
                None,
                r.at(Expr::Var(r.a)),
                Expr::Load(s, vec![r.at(x.clone())]),
            ),
        ];
        for (i, (guard, read, tail)) in cases.into_iter().enumerate() {
            let mut k = r.kernel(guard, r.at(x.clone()), read, tail);
            assert!(!r.lower(&mut k), "case {i}");
            assert!(k.body.contains(&KStmt::Sync), "case {i}");
        }
    }
}
