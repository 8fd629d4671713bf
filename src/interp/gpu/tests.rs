//! Tests of the GPU-semantics interpreter on hand-built kernels: a 4x4 block of
//! threads moving a 4x4 matrix through shared memory.

use super::*;
use crate::ir::{Buffer, BufferId, BufferKind, DType, Expr, VarId};
use crate::lower::{Alloc, ForKind};
use ndarray::{ArrayD, IxDyn};

/// The pieces of a hand-built kernel: input `A`, output `B` (4x4 each), a shared
/// `S` and a local `L` of 16 elements, thread variables `tx`, `ty`.
struct Parts {
    prog: Program,
    a: BufferId,
    b: BufferId,
    s: BufferId,
    l: BufferId,
    tx: VarId,
    ty: VarId,
}

fn parts() -> Parts {
    let mut prog = Program::new("t");
    let mut buf = |name: &str, scope: Scope, kind: BufferKind| {
        prog.new_buffer(Buffer {
            name: name.into(),
            shape: vec![4, 4],
            dtype: DType::F32,
            scope,
            kind,
            align: Vec::new(),
            swizzle: false,
        })
    };
    let a = buf("A", Scope::Global, BufferKind::Input);
    let b = buf("B", Scope::Global, BufferKind::Output);
    let s = buf("S", Scope::Shared, BufferKind::Intermediate);
    let l = buf("L", Scope::Local, BufferKind::Intermediate);
    prog.params = vec![a, b];
    let tx = prog.new_var("threadIdx.x");
    let ty = prog.new_var("threadIdx.y");
    Parts {
        prog,
        a,
        b,
        s,
        l,
        tx,
        ty,
    }
}

/// `4 * y + x`
fn flat(y: VarId, x: VarId) -> Expr {
    Expr::add(Expr::mul(Expr::Var(y), Expr::Int(4)), Expr::Var(x))
}

fn store(buffer: BufferId, index: Expr, value: Expr) -> KStmt {
    KStmt::Store {
        buffer,
        indices: vec![index],
        value,
    }
}

fn load(b: BufferId, index: Expr) -> Expr {
    Expr::Load(b, vec![index])
}

/// One kernel of 4x4 threads with `S` and `L` allocated, running `body`.
fn lowered(p: &Parts, body: Vec<KStmt>) -> Lowered {
    let kernel = Kernel {
        name: "t_kernel".into(),
        params: vec![p.a, p.b],
        allocs: vec![
            Alloc {
                buffer: p.s,
                scope: Scope::Shared,
                size: 16,
                at: None,
                swizzle_row: None,
            },
            Alloc {
                buffer: p.l,
                scope: Scope::Local,
                size: 1,
                at: None,
                swizzle_row: None,
            },
        ],
        grid: [1, 1, 1],
        block: [4, 4, 1],
        min_blocks: 1,
        thread_vars: vec![
            (p.tx, ThreadTag::ThreadIdx(Dim3::X)),
            (p.ty, ThreadTag::ThreadIdx(Dim3::Y)),
        ],
        body,
    };
    Lowered {
        program: p.prog.clone(),
        kernels: vec![kernel],
        workspaces: Vec::new(),
    }
}

fn inputs() -> Vec<ArrayD<f32>> {
    let a = ArrayD::from_shape_fn(IxDyn(&[4, 4]), |i| (i[0] * 4 + i[1]) as f32 + 1.0);
    vec![a, ArrayD::from_elem(IxDyn(&[4, 4]), f32::NAN)]
}

/// `S[ty, tx] = A[ty, tx]; (barrier;) B[ty, tx] = S[tx, ty]`
fn transpose(p: &Parts, barrier: bool) -> Lowered {
    let mut body = vec![store(p.s, flat(p.ty, p.tx), load(p.a, flat(p.ty, p.tx)))];
    if barrier {
        body.push(KStmt::Sync);
    }
    body.push(store(p.b, flat(p.ty, p.tx), load(p.s, flat(p.tx, p.ty))));
    lowered(p, body)
}

#[test]
fn a_shared_transpose_with_a_barrier_computes_the_transpose() {
    let p = parts();
    let mut params = inputs();
    run_kernels(&transpose(&p, true), &mut params).unwrap();
    let expected = params[0].t().to_owned();
    assert_eq!(params[1], expected);
}

#[test]
fn a_shared_transpose_without_a_barrier_is_a_race() {
    let p = parts();
    let err = run_kernels(&transpose(&p, false), &mut inputs()).unwrap_err();
    // Thread (x=1, y=0) reads S[4], which thread (x=0, y=1) wrote in the same epoch.
    assert_eq!(
        err,
        GpuInterpError::SharedRace {
            kernel: "t_kernel".into(),
            buffer: "S".into(),
            index: 4,
            block: [0, 0, 0],
            threads: ([0, 1, 0], [1, 0, 0]),
            kind: RaceKind::ReadWrite,
        }
    );
}

#[test]
fn two_threads_writing_one_shared_element_is_a_write_write_race() {
    let p = parts();
    let body = vec![store(p.s, Expr::Var(p.tx), load(p.a, flat(p.ty, p.tx)))];
    let err = run_kernels(&lowered(&p, body), &mut inputs()).unwrap_err();
    assert!(
        matches!(
            &err,
            GpuInterpError::SharedRace {
                kind: RaceKind::WriteWrite,
                index: 0,
                threads: ([0, 0, 0], [0, 1, 0]),
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_thread_reading_its_own_shared_write_is_not_a_race() {
    let p = parts();
    let body = vec![
        store(p.s, flat(p.ty, p.tx), load(p.a, flat(p.ty, p.tx))),
        store(p.b, flat(p.ty, p.tx), load(p.s, flat(p.ty, p.tx))),
        store(p.s, flat(p.ty, p.tx), Expr::Float(0.0)),
    ];
    let mut params = inputs();
    run_kernels(&lowered(&p, body), &mut params).unwrap();
    assert_eq!(params[1], params[0]);
}

#[test]
fn local_buffers_are_per_thread() {
    let p = parts();
    let body = vec![
        store(p.l, Expr::Int(0), load(p.a, flat(p.ty, p.tx))),
        store(p.b, flat(p.ty, p.tx), load(p.l, Expr::Int(0))),
    ];
    let mut params = inputs();
    run_kernels(&lowered(&p, body), &mut params).unwrap();
    assert_eq!(params[1], params[0]);
}

#[test]
fn a_barrier_under_a_divergent_if_is_an_error() {
    let p = parts();
    let body = vec![KStmt::If {
        cond: Expr::lt(Expr::Var(p.tx), Expr::Int(2)),
        then: vec![KStmt::Sync],
    }];
    let err = run_kernels(&lowered(&p, body), &mut inputs()).unwrap_err();
    assert_eq!(
        err,
        GpuInterpError::DivergentBarrier {
            kernel: "t_kernel".into(),
            block: [0, 0, 0],
            reached: 8,
            threads: 16,
            missing: [2, 0, 0],
        }
    );
}

#[test]
fn a_barrier_under_a_uniform_if_is_fine() {
    let p = parts();
    let body = vec![KStmt::If {
        cond: Expr::lt(Expr::Var(p.tx), Expr::Int(4)),
        then: vec![KStmt::Sync],
    }];
    run_kernels(&lowered(&p, body), &mut inputs()).unwrap();
}

#[test]
fn an_out_of_bounds_store_names_the_place() {
    let p = parts();
    let index = Expr::add(flat(p.ty, p.tx), Expr::Int(1));
    let body = vec![store(p.b, index, Expr::Float(1.0))];
    let err = run_kernels(&lowered(&p, body), &mut inputs()).unwrap_err();
    assert_eq!(
        err,
        GpuInterpError::OutOfBounds {
            kernel: "t_kernel".into(),
            buffer: "B".into(),
            index: 16,
            size: 16,
            block: [0, 0, 0],
            thread: [3, 3, 0],
        }
    );
    assert_eq!(
        err.to_string(),
        "kernel t_kernel: B[16] is out of bounds (size 16) in block [0, 0, 0] thread [3, 3, 0]"
    );
}

#[test]
fn an_out_of_bounds_shared_load_is_an_error() {
    let p = parts();
    let index = Expr::add(flat(p.ty, p.tx), Expr::Int(-1));
    let body = vec![store(p.b, flat(p.ty, p.tx), load(p.s, index))];
    let err = run_kernels(&lowered(&p, body), &mut inputs()).unwrap_err();
    assert!(
        matches!(&err, GpuInterpError::OutOfBounds { buffer, index: -1, thread: [0, 0, 0], .. } if buffer == "S"),
        "{err}"
    );
}

#[test]
fn unordered_global_writes_of_different_values_conflict() {
    let p = parts();
    let body = vec![store(p.b, Expr::Int(0), load(p.a, flat(p.ty, p.tx)))];
    let err = run_kernels(&lowered(&p, body), &mut inputs()).unwrap_err();
    assert!(
        matches!(&err, GpuInterpError::GlobalConflict { index: 0, .. }),
        "{err}"
    );
}

#[test]
fn duplicated_global_writes_of_one_value_are_benign() {
    let p = parts();
    let body = vec![store(p.b, Expr::Int(0), Expr::Float(2.0))];
    let mut params = inputs();
    run_kernels(&lowered(&p, body), &mut params).unwrap();
    assert_eq!(params[1][[0, 0]], 2.0);
}

#[test]
fn a_local_declared_in_a_loop_is_fresh_each_iteration() {
    let p = parts();
    let mut l = lowered(&p, Vec::new());
    let mut prog = p.prog.clone();
    let i = prog.new_var("i");
    l.program = prog;
    l.kernels[0].allocs[1].at = Some(i);
    // Iteration 1 reads the element iteration 0 wrote: stale in C, so NaN here.
    let read = Expr::add(load(p.l, Expr::Int(0)), Expr::Float(1.0));
    l.kernels[0].body = vec![KStmt::For {
        var: i,
        extent: 2,
        kind: ForKind::Serial,
        body: vec![
            KStmt::If {
                cond: Expr::bin(crate::ir::BinOp::Eq, Expr::Var(i), Expr::Int(0)),
                then: vec![store(p.l, Expr::Int(0), Expr::Float(1.0))],
            },
            store(p.b, flat(p.ty, p.tx), read),
        ],
    }];
    let mut params = inputs();
    run_kernels(&l, &mut params).unwrap();
    assert!(params[1].iter().all(|v| v.is_nan()));
}

#[test]
fn malformed_kernels_are_errors() {
    let p = parts();
    let mut two_indices = lowered(&p, Vec::new());
    two_indices.kernels[0].body = vec![KStmt::Store {
        buffer: p.b,
        indices: vec![Expr::Var(p.ty), Expr::Var(p.tx)],
        value: Expr::Float(1.0),
    }];
    assert!(matches!(
        run_kernels(&two_indices, &mut inputs()),
        Err(GpuInterpError::NotFlat { got: 2, .. })
    ));
    let mut unknown = lowered(&p, vec![store(p.l, Expr::Int(0), Expr::Float(1.0))]);
    unknown.kernels[0].allocs.pop();
    assert!(matches!(
        run_kernels(&unknown, &mut inputs()),
        Err(GpuInterpError::UnknownBuffer { .. })
    ));
    let mut huge = lowered(&p, Vec::new());
    huge.kernels[0].block = [2048, 1, 1];
    assert!(matches!(
        run_kernels(&huge, &mut inputs()),
        Err(GpuInterpError::BadSize { .. })
    ));
    let mut dangling = lowered(&p, vec![store(p.b, Expr::Int(0), Expr::Float(1.0))]);
    dangling.kernels[0]
        .body
        .push(store(BufferId(99), Expr::Int(0), Expr::Float(1.0)));
    assert!(matches!(
        run_kernels(&dangling, &mut inputs()),
        Err(GpuInterpError::UnknownBuffer { .. })
    ));
    let zero_div = Expr::bin(crate::ir::BinOp::FloorDiv, Expr::Var(p.tx), Expr::Int(0));
    let div = lowered(&p, vec![store(p.b, zero_div, Expr::Float(1.0))]);
    assert!(matches!(
        run_kernels(&div, &mut inputs()),
        Err(GpuInterpError::Arithmetic {
            what: "division by zero",
            ..
        })
    ));
    assert!(matches!(
        run_kernels(&transpose(&p, true), &mut inputs()[..1].to_vec()),
        Err(GpuInterpError::ParamCount { .. })
    ));
}

/// `L[0] = 0; (if cond) L[0] += the sum of A's row over the row's 4 lanes (shuffles);
/// B[ty, tx] = L[0]`.
fn row_sums(p: &Parts, cond: Option<Expr>) -> Lowered {
    let reduce = KStmt::WarpReduce {
        buffer: p.l,
        indices: vec![Expr::Int(0)],
        op: crate::ir::BinOp::Add,
        value: load(p.a, flat(p.ty, p.tx)),
        lanes: 4,
        first_lane: Expr::mul(Expr::Var(p.ty), Expr::Int(4)),
    };
    let reduce = match cond {
        Some(cond) => KStmt::If {
            cond,
            then: vec![reduce],
        },
        None => reduce,
    };
    let body = vec![
        store(p.l, Expr::Int(0), Expr::Float(0.0)),
        reduce,
        store(p.b, flat(p.ty, p.tx), load(p.l, Expr::Int(0))),
    ];
    lowered(p, body)
}

#[test]
fn a_warp_reduction_gives_every_lane_its_groups_sum() {
    let p = parts();
    let mut params = inputs();
    run_kernels(&row_sums(&p, None), &mut params).unwrap();
    // Row y holds 4y+1 .. 4y+4: the sum 16y + 10 in each of its four lanes.
    let expected = ArrayD::from_shape_fn(IxDyn(&[4, 4]), |i| (16 * i[0] + 10) as f32);
    assert_eq!(params[1], expected);
    // Whole groups may sit out together.
    let mut params = inputs();
    let rows = Expr::lt(Expr::Var(p.ty), Expr::Int(2));
    run_kernels(&row_sums(&p, Some(rows)), &mut params).unwrap();
    assert_eq!(params[1][[1, 3]], 26.0);
    assert_eq!(params[1][[2, 0]], 0.0);
}

#[test]
fn a_warp_reduction_that_part_of_a_group_runs_is_an_error() {
    let p = parts();
    let lanes = Expr::lt(Expr::Var(p.tx), Expr::Int(3));
    let err = run_kernels(&row_sums(&p, Some(lanes)), &mut inputs()).unwrap_err();
    assert_eq!(
        err,
        GpuInterpError::PartialWarpReduce {
            kernel: "t_kernel".into(),
            block: [0, 0, 0],
            lanes: 4,
            reached: 3,
            missing: [3, 0, 0],
        }
    );
}
