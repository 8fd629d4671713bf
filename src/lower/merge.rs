//! CUDA: independent elementwise kernels launched as one.
//!
//! A program's root nests become kernels launched one after another, and each launch of a
//! short kernel costs a few microseconds however little it does: the staging kernels of a
//! convolution (its data and its weights stored in the GEMM's layout) took about half of
//! a batch-1 conv's time on an H100, mostly in launches. Two neighbouring kernels in
//! launch order where neither touches what the other writes, both plain loads, stores and
//! barriers (no asynchronous copies, tensor-core instructions or vector loops) in blocks
//! of the same shape on a one-dimensional grid, with static shared memory that fits one
//! block together, run as one kernel: its grid is the two grids one after the other, the
//! first kernel's blocks run its body, the rest the second's with their block index
//! shifted back by the first grid (a barrier stays inside a condition every thread of a
//! block takes alike). The same work, one launch fewer; the result is the same whatever
//! order the blocks run in.

use super::kernel::{Accesses, KStmt, Kernel};
use crate::ir::{BinOp, Dim3, Expr, Scope, ThreadTag, VarId};

/// The kernels in launch order, each run of mergeable neighbours launched as one.
pub(super) fn merge_independent(p: &crate::ir::Program, kernels: Vec<Kernel>) -> Vec<Kernel> {
    let mut out: Vec<Kernel> = Vec::with_capacity(kernels.len());
    for k in kernels {
        match out.pop() {
            Some(prev) if mergeable(p, &prev, &k) => out.push(merge(prev, k)),
            Some(prev) => out.extend([prev, k]),
            None => out.push(k),
        }
    }
    out
}

/// Whether `b` may run in the same launch as `a` (which runs first today).
fn mergeable(p: &crate::ir::Program, a: &Kernel, b: &Kernel) -> bool {
    let plain = |k: &Kernel| {
        k.grid[1] == 1
            && k.grid[2] == 1
            && block_var(k).is_some()
            && k.allocs
                .iter()
                .all(|al| matches!(p.buffer(al.buffer).scope, Scope::Local | Scope::Shared))
            && k.body.iter().all(|s| !s.contains(&|s| !elementwise(s)))
    };
    let shared = a.shared_bytes(p) + b.shared_bytes(p);
    if a.block != b.block
        || a.params != b.params
        || !plain(a)
        || !plain(b)
        || shared > crate::codegen::cuda::STATIC_SHARED_LIMIT
    {
        return false;
    }
    let (mut x, mut y) = (Accesses::default(), Accesses::default());
    a.body.iter().for_each(|s| s.accesses(&mut x));
    b.body.iter().for_each(|s| s.accesses(&mut y));
    x.writes.is_disjoint(&y.reads)
        && x.writes.is_disjoint(&y.writes)
        && y.writes.is_disjoint(&x.reads)
}

/// A statement a merged kernel may hold: loops that are not vectorized, conditions,
/// stores, barriers, comments.
fn elementwise(s: &KStmt) -> bool {
    match s {
        KStmt::For { kind, .. } => *kind != super::ForKind::Vectorized,
        KStmt::If { .. } | KStmt::Store { .. } | KStmt::Sync | KStmt::Comment(_) => true,
        _ => false,
    }
}

/// The variable standing for `blockIdx.x`.
fn block_var(k: &Kernel) -> Option<VarId> {
    k.thread_vars
        .iter()
        .find(|(_, t)| *t == ThreadTag::BlockIdx(Dim3::X))
        .map(|(v, _)| *v)
}

/// `a` and `b` as one kernel: `a`'s blocks first, then `b`'s.
fn merge(a: Kernel, b: Kernel) -> Kernel {
    let (va, vb) = (
        block_var(&a).expect("mergeable"),
        block_var(&b).expect("mergeable"),
    );
    let first = a.grid[0];
    let shifted = Expr::sub(Expr::Var(va), Expr::Int(first));
    let mut b_body = b.body;
    substitute(&mut b_body, vb, &shifted);
    let body = vec![
        KStmt::If {
            cond: Expr::bin(BinOp::Lt, Expr::Var(va), Expr::Int(first)),
            then: a.body,
        },
        KStmt::If {
            cond: Expr::bin(BinOp::Ge, Expr::Var(va), Expr::Int(first)),
            then: b_body,
        },
    ];
    let mut thread_vars = a.thread_vars;
    for (v, t) in b.thread_vars {
        if v != vb && !thread_vars.contains(&(v, t)) {
            thread_vars.push((v, t));
        }
    }
    let mut allocs = a.allocs;
    allocs.extend(b.allocs);
    Kernel {
        name: a.name,
        params: a.params,
        allocs,
        grid: [first + b.grid[0], 1, 1],
        block: a.block,
        // The cap binds both bodies: the looser of the two.
        min_blocks: a.min_blocks.min(b.min_blocks),
        thread_vars,
        body,
    }
}

/// `v` replaced by `by` in every expression of `body` (of the statements
/// [`elementwise`] admits).
fn substitute(body: &mut [KStmt], v: VarId, by: &Expr) {
    let map = |x: VarId| (x == v).then(|| by.clone());
    for s in body {
        match s {
            KStmt::For { body, .. } => substitute(body, v, by),
            KStmt::If { cond, then } => {
                *cond = cond.substitute(&map);
                substitute(then, v, by);
            }
            KStmt::Store { indices, value, .. } => {
                for i in indices.iter_mut() {
                    *i = i.substitute(&map);
                }
                *value = value.substitute(&map);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lower::{lower, Backend};
    use crate::schedule::{IntArg, Schedule};
    use crate::workload::preset;

    /// A padded NCHW conv with its weights copied by a kernel of their own: the padding
    /// and the copy bound to `pad_threads` and `copy_threads` threads a block, the conv to
    /// 32.
    fn staged_conv(pad_threads: i64, copy_threads: i64) -> (crate::ir::Program, Schedule) {
        let w = preset("conv2d_nchw:n=1,c=8,h=6,w=6,k=4,r=3,s=3,stride=1,pad=1").unwrap();
        let reference = w.to_program();
        let mut sch = Schedule::new(reference.clone(), 0);
        let conv = sch.get_block("conv2d_nchw").unwrap();
        let copy = sch.cache_read(conv, 1, "global").unwrap();
        let spread = |sch: &mut Schedule, name: &str, spatial: usize, threads: i64| {
            let b = sch.get_block(name).unwrap();
            let loops = sch.get_loops(b).unwrap();
            let f = sch.fuse(&loops[..spatial]).unwrap();
            let t = sch.split(f, &[None, Some(IntArg::Lit(threads))]).unwrap();
            sch.bind(t[0], "blockIdx.x").unwrap();
            sch.bind(t[1], "threadIdx.x").unwrap();
        };
        let copy_name = {
            let id = sch.block_id(copy).unwrap();
            sch.program().block(id).name.clone()
        };
        spread(&mut sch, "pad_temp", 4, pad_threads);
        spread(&mut sch, &copy_name, 4, copy_threads);
        spread(&mut sch, "conv2d_nchw", 4, 32);
        (reference, sch)
    }

    #[test]
    fn independent_staging_kernels_run_in_one_launch() {
        let (reference, sch) = staged_conv(32, 32);
        let l = lower(sch.program(), Backend::Cuda).unwrap();
        // The padding (1 x 8 x 8 x 8 = 512 elements, 16 blocks) and the weights' copy
        // (4 x 8 x 3 x 3 = 288, 9 blocks) in one launch; the conv, which reads both, after.
        assert_eq!(l.kernels.len(), 2);
        assert_eq!(l.kernels[0].grid, [16 + 9, 1, 1]);
        assert_eq!(l.kernels[0].block, [32, 1, 1]);
        assert_eq!(l.kernels[0].body.len(), 2);
        let err = crate::interp::check_lowered(&reference, &l, 3).unwrap();
        assert!(err < 1e-5, "relative error {err}");
        let src = crate::codegen::cuda::generate(&l).unwrap();
        assert_eq!(src.kernels.len(), 2);
        assert_eq!(src.kernels[0].grid, [25, 1, 1]);
        // The conv may be scheduled while the staging ends: it waits for it in the kernel.
        assert_eq!(
            src.kernels
                .iter()
                .map(|k| k.waits_for_previous)
                .collect::<Vec<_>>(),
            [false, true]
        );
        assert_eq!(src.code.matches("griddepcontrol.wait;").count(), 1);
        // Nothing triggers the conv early: it is scheduled as the staging's blocks exit.
        assert!(!src.code.contains("griddepcontrol.launch_dependents"));
    }

    #[test]
    fn kernels_of_different_block_shapes_stay_apart() {
        let (reference, sch) = staged_conv(32, 64);
        let l = lower(sch.program(), Backend::Cuda).unwrap();
        assert_eq!(l.kernels.len(), 3);
        let err = crate::interp::check_lowered(&reference, &l, 3).unwrap();
        assert!(err < 1e-5, "relative error {err}");
    }
}
