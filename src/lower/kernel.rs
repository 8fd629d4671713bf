//! The kernel IR: what lowering produces and code generators print.
//!
//! Thread-bound loops are gone (their variables stand for `blockIdx`/`threadIdx`),
//! blocks have become guarded stores with flat indices into compacted buffers, and
//! barriers are explicit.

use crate::ir::{BufferId, Expr, Program, Scope, ThreadTag, VarId};

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
    /// A comment naming the block a store came from (for readers of the generated code).
    Comment(String),
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
    /// The variables standing for thread indices.
    pub thread_vars: Vec<(VarId, ThreadTag)>,
    pub body: Vec<KStmt>,
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
            thread_vars: Vec::new(),
            body,
        };
        assert_eq!(k.unrolled_statements(), 71);
        k.body.push(KStmt::Sync);
        assert_eq!(k.unrolled_statements(), 72);
    }
}
