//! The kernel IR: what lowering produces and code generators print.
//!
//! Thread-bound loops are gone (their variables stand for `blockIdx`/`threadIdx`),
//! blocks have become guarded stores with flat indices into compacted buffers, and
//! barriers are explicit.

use crate::ir::{BinOp, BufferId, Expr, Program, Scope, ThreadTag, VarId};

/// How a kernel loop runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ForKind {
    Serial,
    /// Unrolled by the compiler (`#pragma unroll`).
    Unrolled,
    /// Vectorized: on CUDA a proven-contiguous, aligned vector access of `extent` lanes;
    /// on the CPU a loop the C compiler vectorizes (`#pragma omp simd`).
    Vectorized,
    /// CPU threads (`#pragma omp parallel for`).
    Parallel,
}

/// A statement of a kernel.
#[derive(Clone, Debug, PartialEq)]
pub enum KStmt {
    For {
        var: VarId,
        extent: i64,
        kind: ForKind,
        body: Vec<KStmt>,
    },
    If {
        cond: Expr,
        then: Vec<KStmt>,
    },
    /// `buffer[indices] = value`. After lowering, `indices` (and the indices of every
    /// load in `value`) hold one flat index into the (compacted) buffer.
    Store {
        buffer: BufferId,
        indices: Vec<Expr>,
        value: Expr,
    },
    /// `__syncthreads()`.
    Sync,
    /// `cp.async`: an asynchronous copy of `lanes` consecutive elements from the global
    /// `src[src_index..]` to the shared `dst[dst_index..]` (flat indices, both aligned to
    /// the copy's bytes). It lands when a [`KStmt::WaitGroup`] of the issuing thread lets
    /// it, never earlier; with `valid` false no byte is read and zeros land (the src-size
    /// operand 0).
    CpAsync {
        dst: BufferId,
        dst_index: Expr,
        src: BufferId,
        src_index: Expr,
        lanes: i64,
        valid: Option<Expr>,
    },
    /// `cp.async.commit_group`: the thread's copies issued since its last commit form a
    /// group.
    CommitGroup,
    /// `cp.async.wait_group n`: the thread waits until at most `n` of its committed
    /// groups are still in flight (the older ones have landed).
    WaitGroup(i64),
    /// A warp-collective tensor-core instruction that replaced a tensorized loop nest
    /// (`lower/tensorize.rs`, the last pass: the passes before it never see one); all 32
    /// lanes of the warp execute it together.
    Mma(Mma),
    /// A reduction across the lanes of a warp (`lower/warp_reduce.rs`): each of the
    /// `lanes` consecutive threads that share every thread index but `threadIdx.x` (a
    /// power of two up to 32 that divides `blockDim.x`) contributes `value`, and each
    /// sets `buffer[indices] = op(buffer[indices], the combination of all their values)`,
    /// combined in log2(lanes) `__shfl_xor_sync` steps (lane `l` with lane `l ^ d`, `d`
    /// halving from `lanes / 2`). `first_lane` is the group's first lane in its warp.
    /// Every lane of a group runs it, or none.
    WarpReduce {
        buffer: BufferId,
        indices: Vec<Expr>,
        op: BinOp,
        value: Expr,
        lanes: i64,
        first_lane: Expr,
    },
    /// A comment naming the block a store came from (for readers of the generated code).
    Comment(String),
    /// A thread block's arrival at a serial split-K sum's tile (`ir::arrival`), a barrier
    /// every thread of the block reaches: the block's global writes are published
    /// (`__threadfence`), one thread adds 1 to the counter `counter[index]` (a zeroed
    /// `int` workspace) and, where that was the `arrivals`-th arrival, sets it back to 0;
    /// then `last` holds 1 in every thread of the block that arrived last, 0 in the
    /// others. The sum follows as `if (last != 0) { ... }`.
    Arrive {
        counter: BufferId,
        index: Expr,
        arrivals: i64,
        last: VarId,
    },
}

/// A tile of a 2-D matrix in a buffer: the flat index of its first element and the
/// distance between its rows (elements); its columns are consecutive.
#[derive(Clone, Debug, PartialEq)]
pub struct Tile {
    pub buffer: BufferId,
    pub base: Expr,
    pub row_stride: i64,
}

impl Tile {
    /// The flat index of element `(row, col)`.
    pub fn at(&self, row: Expr, col: Expr) -> Expr {
        Expr::add(
            self.base.clone(),
            Expr::add(Expr::mul(row, Expr::Int(self.row_stride)), col),
        )
    }
}

/// A tensor-core instruction (`mma.sync.m16n8k16`, or `m16n8k8` on TF32, with its loads
/// and stores) and the loop
/// variables of the nest it replaced (rows, columns, and for `Sync` the reduction): the
/// variables of a store's guard and of [`Mma::logical`].
#[derive(Clone, Debug, PartialEq)]
pub struct Mma {
    pub op: MmaOp,
    pub vars: Vec<VarId>,
}

/// Fragment tiles (`Scope::Fragment`) are `rows x cols` tiles of a warp's fragment buffer,
/// whose lanes hold them in the layout of the PTX ISA's mma fragments; `codegen/cuda.rs`
/// knows which lane holds which element, the interpreter runs [`Mma::logical`].
#[derive(Clone, Debug, PartialEq)]
pub enum MmaOp {
    /// The 16 x 8 f32 accumulator tile `acc` set to zero.
    Fill {
        acc: Tile,
    },
    /// `ldmatrix`: a 16 x 16 (operand A, rows m, columns k) or 16 x 8 (operand B, rows k,
    /// columns n) fragment tile loaded from a shared 16-bit matrix; with `tf32`, a 16 x 8
    /// or 8 x 8 tile of f32 elements (`MmaOperand::shape`). `transposed`: the source's
    /// rows are the tile's columns (`src` row `c` holds tile column `c`).
    Load {
        operand: MmaOperand,
        frag: Tile,
        src: Tile,
        transposed: bool,
        tf32: bool,
    },
    /// `acc (16 x 8, f32) += a (16 x 16) * b (16 x 8)` on 16-bit operands; with `tf32`,
    /// `acc += tf32(a (16 x 8)) * tf32(b (8 x 8))` on f32 operands (`m16n8k8`).
    Sync {
        acc: Tile,
        a: Tile,
        b: Tile,
        tf32: bool,
    },
    /// `wgmma.mma_async.m64nNk16`: this warp's `acc (16 x n, f32) += a (16 x 16) * b (16 x
    /// n)`, `a` and `b` 16-bit tiles of swizzled shared buffers, issued with the three
    /// other warps of its warpgroup, whose A tiles follow this one's 16 rows apart:
    /// `group_a` is the base of the warpgroup's first warp's A tile, where the descriptor
    /// points. `a_trans`: A is stored M-major (its rows run along k); `b_trans`: B is
    /// stored K-major (its rows run along n), as `Load`'s `transposed`.
    Wgmma {
        acc: Tile,
        a: Tile,
        b: Tile,
        n: i64,
        a_trans: bool,
        b_trans: bool,
        group_a: Expr,
    },
    /// `wgmma.fence` before a run of `wgmma`s (their registers were last touched by other
    /// instructions), `wgmma.commit_group` after it, and the wait until at most `n` groups
    /// are in flight (0 before their accumulators or operands are touched again); no data
    /// of their own.
    WgmmaFence,
    WgmmaCommit,
    WgmmaWait(i64),
    /// The 16 x 8 accumulator tile stored to a global or shared matrix: element `(r, c)`
    /// of `dst` gets `value` with the row and column variables (`vars[0]`, `vars[1]`) at
    /// `r` and `c`, an elementwise function of the accumulator's element (its loads of
    /// `acc` are that element; a conversion to the destination's dtype, a bias, a relu),
    /// only where `valid` holds (an imperfect tile's guard).
    Store {
        dst: Tile,
        acc: Tile,
        value: Expr,
        valid: Option<Expr>,
    },
}

impl MmaOp {
    /// Every tile the instruction reads or writes.
    pub fn tiles(&self) -> Vec<&Tile> {
        match self {
            MmaOp::Fill { acc } => vec![acc],
            MmaOp::Load { frag, src, .. } => vec![frag, src],
            MmaOp::Sync { acc, a, b, .. } | MmaOp::Wgmma { acc, a, b, .. } => vec![acc, a, b],
            MmaOp::Store { dst, acc, .. } => vec![dst, acc],
            MmaOp::WgmmaFence | MmaOp::WgmmaCommit | MmaOp::WgmmaWait(_) => vec![],
        }
    }
}

/// Which operand of `mma.sync` a fragment is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MmaOperand {
    A,
    B,
}

impl MmaOperand {
    /// Rows and columns of one fragment tile of this operand: m16n8k16 on 16-bit
    /// elements, m16n8k8 on TF32 (`tf32`). Either way a tile row of A and a tile column
    /// of B are 32 bytes, and a lane holds 4 registers of A's tile and 2 of B's.
    pub fn shape(self, tf32: bool) -> (i64, i64) {
        let k = mma_k(tf32);
        match self {
            MmaOperand::A => (16, k),
            MmaOperand::B => (k, 8),
        }
    }
}

/// The reduction one `mma.sync` covers: 16 of a 16-bit type, 8 of TF32 (32 bytes,
/// `ir::tensorize::MMA_K_BYTES`).
pub fn mma_k(tf32: bool) -> i64 {
    let bytes = if tf32 { 4 } else { 2 };
    crate::ir::tensorize::MMA_K_BYTES / bytes
}

/// The rows and columns of a 16 x 8 accumulator tile.
pub const ACC_SHAPE: (i64, i64) = (16, 8);

/// The annotation of a blockIdx-bound loop that sets [`Kernel::min_blocks`]: an integer
/// of at least 1, the blocks a multiprocessor should hold at once.
pub const LAUNCH_MIN_BLOCKS_KEY: &str = "launch_min_blocks_per_sm";

impl Mma {
    /// What the instruction computes, as scalar loops over its tile (the nest it replaced,
    /// its indices rebuilt from the tiles): the interpreter runs this on each lane's copy
    /// of the warp's fragments. A warp's store is one store, so it is made by the lane
    /// `lane == 0` alone where a lane variable is given.
    pub fn logical(&self, lane: Option<VarId>) -> Vec<KStmt> {
        let v = |i: usize| Expr::Var(self.vars[i]);
        let nest = |extents: &[i64], body: KStmt| -> KStmt {
            extents
                .iter()
                .enumerate()
                .rev()
                .fold(body, |inner, (i, e)| KStmt::For {
                    var: self.vars[i],
                    extent: *e,
                    kind: ForKind::Serial,
                    body: vec![inner],
                })
        };
        let load = |t: &Tile, r: Expr, c: Expr| Expr::Load(t.buffer, vec![t.at(r, c)]);
        let store = |t: &Tile, value: Expr| KStmt::Store {
            buffer: t.buffer,
            indices: vec![t.at(v(0), v(1))],
            value,
        };
        let stmt = match &self.op {
            MmaOp::Fill { acc } => nest(&[16, 8], store(acc, Expr::Float(0.0))),
            MmaOp::Load {
                operand,
                frag,
                src,
                transposed,
                tf32,
            } => {
                let (r, c) = operand.shape(*tf32);
                let value = if *transposed {
                    load(src, v(1), v(0))
                } else {
                    load(src, v(0), v(1))
                };
                nest(&[r, c], store(frag, value))
            }
            MmaOp::Sync { acc, a, b, tf32 } => {
                // 16-bit operands widened to f32, or f32 ones read at TF32's precision.
                let read = |e: Expr| match tf32 {
                    true => Expr::Un(crate::ir::UnOp::Tf32, Box::new(e)),
                    false => Expr::Cast(crate::ir::DType::F32, Box::new(e)),
                };
                let value = Expr::add(
                    load(acc, v(0), v(1)),
                    Expr::mul(read(load(a, v(0), v(2))), read(load(b, v(2), v(1)))),
                );
                nest(&[16, 8, mma_k(*tf32)], store(acc, value))
            }
            MmaOp::Wgmma {
                acc,
                a,
                b,
                n,
                a_trans,
                b_trans,
                ..
            } => {
                let widen = |e: Expr| Expr::Cast(crate::ir::DType::F32, Box::new(e));
                let x = match a_trans {
                    true => load(a, v(2), v(0)),
                    false => load(a, v(0), v(2)),
                };
                let y = match b_trans {
                    true => load(b, v(1), v(2)),
                    false => load(b, v(2), v(1)),
                };
                let value = Expr::add(load(acc, v(0), v(1)), Expr::mul(widen(x), widen(y)));
                nest(&[16, *n, 16], store(acc, value))
            }
            MmaOp::WgmmaFence | MmaOp::WgmmaCommit | MmaOp::WgmmaWait(_) => return vec![],
            MmaOp::Store {
                dst, value, valid, ..
            } => {
                let body = match valid {
                    Some(c) => KStmt::If {
                        cond: c.clone(),
                        then: vec![store(dst, value.clone())],
                    },
                    None => store(dst, value.clone()),
                };
                let all = nest(&[16, 8], body);
                match lane {
                    Some(l) => KStmt::If {
                        cond: Expr::bin(crate::ir::BinOp::Eq, Expr::Var(l), Expr::Int(0)),
                        then: vec![all],
                    },
                    None => all,
                }
            }
        };
        vec![stmt]
    }
}

/// A buffer allocated inside the kernel, compacted to the region it is used in.
#[derive(Clone, Debug, PartialEq)]
pub struct Alloc {
    pub buffer: BufferId,
    pub scope: Scope,
    /// Elements, after padding for `storage_align`.
    pub size: i64,
    /// Where it is declared: at the kernel's top (`None`) or at the start of a loop body.
    pub at: Option<VarId>,
    /// A swizzled shared buffer's row length in elements (`lower::swizzle`).
    pub swizzle_row: Option<i64>,
}

/// One kernel: a `__global__` function on CUDA, a C function on the CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// Global buffers, in call order: the program's parameters, then workspaces.
    pub params: Vec<BufferId>,
    pub allocs: Vec<Alloc>,
    /// Grid and block dimensions (x, y, z); all 1 on the CPU.
    pub grid: [i64; 3],
    pub block: [i64; 3],
    /// The blocks a CUDA multiprocessor should hold at once, which caps the registers a
    /// thread may use (`__launch_bounds__`'s second argument; [`LAUNCH_MIN_BLOCKS_KEY`]
    /// on the blockIdx loop); 1: no cap beyond the block's own size.
    pub min_blocks: i64,
    /// The variables standing for thread indices.
    pub thread_vars: Vec<(VarId, ThreadTag)>,
    pub body: Vec<KStmt>,
}

/// The buffers a statement tree reads and writes.
#[derive(Default, Debug)]
pub struct Accesses {
    pub reads: std::collections::BTreeSet<BufferId>,
    pub writes: std::collections::BTreeSet<BufferId>,
}

impl KStmt {
    /// The buffers this statement and those nested in it load from (in any expression,
    /// conditions and indices included, and a `cp.async`'s source) and store into (a
    /// store's buffer, a `cp.async`'s destination), added to `acc`. Tensor-core
    /// instructions, made by the last pass, are not looked into.
    pub fn accesses(&self, acc: &mut Accesses) {
        let mut read = |e: &Expr| {
            e.visit(&mut |x| {
                if let Expr::Load(b, _) = x {
                    acc.reads.insert(*b);
                }
            })
        };
        match self {
            KStmt::For { body, .. } => body.iter().for_each(|c| c.accesses(acc)),
            KStmt::If { cond, then } => {
                read(cond);
                then.iter().for_each(|c| c.accesses(acc));
            }
            KStmt::Store {
                buffer,
                indices,
                value,
            } => {
                indices.iter().for_each(&mut read);
                read(value);
                acc.writes.insert(*buffer);
            }
            KStmt::WarpReduce {
                buffer,
                indices,
                value,
                first_lane,
                ..
            } => {
                indices.iter().for_each(&mut read);
                read(value);
                read(first_lane);
                acc.reads.insert(*buffer);
                acc.writes.insert(*buffer);
            }
            KStmt::CpAsync {
                dst,
                dst_index,
                src,
                src_index,
                valid,
                ..
            } => {
                read(dst_index);
                read(src_index);
                valid.iter().for_each(&mut read);
                acc.reads.insert(*src);
                acc.writes.insert(*dst);
            }
            KStmt::Arrive { counter, index, .. } => {
                read(index);
                acc.reads.insert(*counter);
                acc.writes.insert(*counter);
            }
            KStmt::Sync
            | KStmt::Comment(_)
            | KStmt::CommitGroup
            | KStmt::WaitGroup(_)
            | KStmt::Mma(_) => {}
        }
    }

    /// Whether this statement, or one nested in its loops and conditions, satisfies `f`.
    pub fn contains(&self, f: &impl Fn(&KStmt) -> bool) -> bool {
        f(self)
            || match self {
                KStmt::For { body, .. } | KStmt::If { then: body, .. } => {
                    body.iter().any(|s| s.contains(f))
                }
                _ => false,
            }
    }
}

/// The element copies of a [`KStmt::CpAsync`] of `lanes` lanes: for each lane, the flat
/// index it writes in the destination and the load of the source element it copies
/// (without the copy's `valid` condition, which its users apply their own way).
pub fn cp_async_lanes(
    dst_index: &Expr,
    src: BufferId,
    src_index: &Expr,
    lanes: i64,
) -> Vec<(Expr, Expr)> {
    (0..lanes)
        .map(|i| {
            let at = |e: &Expr| Expr::add(e.clone(), Expr::Int(i));
            (at(dst_index), Expr::Load(src, vec![at(src_index)]))
        })
        .collect()
}

impl Kernel {
    /// Bytes of shared memory the kernel allocates statically.
    pub fn shared_bytes(&self, p: &Program) -> i64 {
        self.bytes_in(p, Scope::Shared)
    }
    /// Bytes of thread-local (`local` scope) arrays one thread allocates.
    pub fn local_bytes(&self, p: &Program) -> i64 {
        self.bytes_in(p, Scope::Local)
    }
    /// 32-bit registers one thread's local arrays and fragments take (a fragment's tiles
    /// are spread over the 32 lanes of a warp).
    pub fn register_words(&self, p: &Program) -> i64 {
        let local: i64 = self
            .allocs
            .iter()
            .filter(|a| a.scope == Scope::Local)
            .map(|a| (a.size * p.buffer(a.buffer).dtype.bytes() as i64 + 3) / 4)
            .sum();
        local + self.fragment_words(p)
    }
    /// 32-bit registers one thread's fragments take (tensor-core tiles spread over the 32
    /// lanes of a warp).
    pub fn fragment_words(&self, p: &Program) -> i64 {
        self.allocs
            .iter()
            .filter(|a| a.scope == Scope::Fragment)
            .map(|a| (a.size * p.buffer(a.buffer).dtype.bytes() as i64 / 32 + 3) / 4)
            .sum()
    }
    fn bytes_in(&self, p: &Program, scope: Scope) -> i64 {
        self.allocs
            .iter()
            .filter(|a| a.scope == scope)
            .map(|a| a.size * p.buffer(a.buffer).dtype.bytes() as i64)
            .sum()
    }
    /// The statements the body expands to once its unrolled loops are unrolled (an
    /// unrolled loop counts its extent times its body; a serial loop its body once): what
    /// NVRTC compiles, whose size its compile time follows.
    pub fn unrolled_statements(&self) -> i64 {
        fn expanded(body: &[KStmt]) -> i64 {
            body.iter()
                .map(|s| match s {
                    KStmt::For {
                        kind: ForKind::Unrolled,
                        extent,
                        body,
                        ..
                    } => extent.saturating_mul(expanded(body)),
                    KStmt::For { body, .. } | KStmt::If { then: body, .. } => expanded(body),
                    _ => 1,
                })
                .fold(0i64, |a, x| a.saturating_add(x))
        }
        expanded(&self.body)
    }
    /// Threads per block.
    pub fn threads(&self) -> i64 {
        self.block.iter().product()
    }
    /// The variable standing for `threadIdx.x`: in a kernel with tensor-core instructions,
    /// the lane of a warp.
    pub fn lane(&self) -> Option<VarId> {
        self.thread_vars
            .iter()
            .find(|(_, t)| *t == ThreadTag::ThreadIdx(crate::ir::Dim3::X))
            .map(|(v, _)| *v)
    }
    /// The thread tag a variable stands for, if any.
    pub fn thread_of(&self, v: VarId) -> Option<ThreadTag> {
        self.thread_vars
            .iter()
            .find(|(x, _)| *x == v)
            .map(|(_, t)| *t)
    }
}

/// A lowered program: its kernels, launched in order, and the global workspaces they
/// share (intermediate buffers in global memory, allocated by the caller).
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The program the kernels index into (for buffer and variable names).
    pub program: Program,
    pub kernels: Vec<Kernel>,
    pub workspaces: Vec<BufferId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> KStmt {
        KStmt::Store {
            buffer: BufferId(0),
            indices: vec![Expr::Int(0)],
            value: Expr::Int(0),
        }
    }

    fn for_loop(v: u32, extent: i64, kind: ForKind, body: Vec<KStmt>) -> KStmt {
        KStmt::For {
            var: VarId(v),
            extent,
            kind,
            body,
        }
    }

    /// An unrolled loop counts its extent times its body, a serial loop its body once:
    /// serial 100 { unrolled 4 { unrolled 8 { 2 stores } ; store } ; if { unrolled 3 { store } } }
    /// is 4 * (8 * 2 + 1) + 3 = 71 statements, and a sync or comment counts one.
    #[test]
    fn unrolled_statements_multiply_through_unrolled_loops_only() {
        let body = vec![for_loop(
            0,
            100,
            ForKind::Serial,
            vec![
                for_loop(
                    1,
                    4,
                    ForKind::Unrolled,
                    vec![
                        for_loop(2, 8, ForKind::Unrolled, vec![store(), store()]),
                        store(),
                    ],
                ),
                KStmt::If {
                    cond: Expr::Int(1),
                    then: vec![for_loop(3, 3, ForKind::Unrolled, vec![store()])],
                },
            ],
        )];
        let mut k = Kernel {
            name: "k".into(),
            params: Vec::new(),
            allocs: Vec::new(),
            grid: [1; 3],
            block: [1; 3],
            min_blocks: 1,
            thread_vars: Vec::new(),
            body,
        };
        assert_eq!(k.unrolled_statements(), 71);
        k.body.push(KStmt::Sync);
        assert_eq!(k.unrolled_statements(), 72);
    }
}
