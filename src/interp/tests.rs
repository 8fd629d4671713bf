//! Tests of the reference interpreter on hand-built programs.

use super::exec::{floor_div, floor_mod};
use super::*;
use crate::ir::interval::{floordiv, floormod};
use crate::ir::{
    BinOp, Block, Buffer, BufferId, BufferKind, DType, Dim3, Expr, IterKind, IterVar, LoopId,
    LoopKind, Node, Program, Scope, Store, ThreadTag, UnOp, VarId,
};
use ndarray::{arr1, arr2, ArrayD, IxDyn};
use std::collections::BTreeMap;

// ----- builders ---------------------------------------------------------------------

fn buffer(p: &mut Program, name: &str, shape: &[i64], dtype: DType, kind: BufferKind) -> BufferId {
    let id = p.new_buffer(Buffer {
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype,
        scope: Scope::Global,
        kind,
        align: Vec::new(),
        swizzle: false,
    });
    match kind {
        BufferKind::Intermediate => p.allocs.push(id),
        _ => p.params.push(id),
    }
    id
}

fn v(x: VarId) -> Expr {
    Expr::Var(x)
}

fn ld(b: BufferId, idx: Vec<Expr>) -> Expr {
    Expr::Load(b, idx)
}

fn st(buffer: BufferId, indices: Vec<Expr>, value: Expr) -> Store {
    Store {
        buffer,
        indices,
        value,
    }
}

/// A block named `name` with the given iteration variables `(name, extent, kind)`,
/// bound to `bindings`; `body` gets the iteration variables.
fn block(
    p: &mut Program,
    name: &str,
    ivs: &[(&str, i64, IterKind)],
    bindings: Vec<Expr>,
    body: impl FnOnce(&[VarId]) -> (Option<Store>, Store),
) -> Block {
    let vars: Vec<VarId> = ivs.iter().map(|(n, _, _)| p.new_var(*n)).collect();
    let (init, body) = body(&vars);
    Block {
        name: name.to_string(),
        iter_vars: ivs
            .iter()
            .zip(&vars)
            .map(|((_, extent, kind), &var)| IterVar {
                var,
                extent: *extent,
                kind: *kind,
            })
            .collect(),
        bindings,
        predicate: None,
        init,
        body,
        annotations: BTreeMap::new(),
    }
}

/// Wraps `inner` in a loop over `extent` whose variable is `var` (already created).
fn wrap(p: &mut Program, var: VarId, extent: i64, inner: Vec<Node>) -> LoopId {
    let l = p.new_loop("unused", extent, inner);
    p.lp_mut(l).var = var;
    l
}

/// A 1-D elementwise program `B[i] = f(A[i])` over `n`, with `B` of dtype `dtype`.
fn elementwise(n: i64, dtype: DType, f: impl Fn(Expr) -> Expr) -> Program {
    let mut p = Program::new("ew");
    let a = buffer(&mut p, "A", &[n], dtype, BufferKind::Input);
    let b = buffer(&mut p, "B", &[n], dtype, BufferKind::Output);
    let i = p.new_var("i");
    let blk = block(
        &mut p,
        "B",
        &[("vi", n, IterKind::Spatial)],
        vec![v(i)],
        |x| (None, st(b, vec![v(x[0])], f(ld(a, vec![v(x[0])])))),
    );
    let bid = p.new_block(blk);
    let l = wrap(&mut p, i, n, vec![Node::Block(bid)]);
    p.root.push(Node::Loop(l));
    p
}

/// `C[m, n] = sum_k A[m, k] * B[k, n]` with an init, loops in the order `order` (a
/// permutation of "ijk"), each of kind `kinds[pos]`.
fn matmul(m: i64, n: i64, k: i64, order: &str, kinds: &[LoopKind]) -> Program {
    let mut p = Program::new("matmul");
    let a = buffer(&mut p, "A", &[m, k], DType::F32, BufferKind::Input);
    let b = buffer(&mut p, "B", &[k, n], DType::F32, BufferKind::Input);
    let c = buffer(&mut p, "C", &[m, n], DType::F32, BufferKind::Output);
    let (i, j, r) = (p.new_var("i"), p.new_var("j"), p.new_var("k"));
    let ivs = [
        ("vi", m, IterKind::Spatial),
        ("vj", n, IterKind::Spatial),
        ("vk", k, IterKind::Reduce),
    ];
    let blk = block(&mut p, "C", &ivs, vec![v(i), v(j), v(r)], |x| {
        let out = vec![v(x[0]), v(x[1])];
        let prod = Expr::mul(ld(a, vec![v(x[0]), v(x[2])]), ld(b, vec![v(x[2]), v(x[1])]));
        (
            Some(st(c, out.clone(), Expr::Float(0.0))),
            st(c, out.clone(), Expr::add(ld(c, out), prod)),
        )
    });
    let mut body = vec![Node::Block(p.new_block(blk))];
    for (pos, ch) in order.chars().rev().enumerate() {
        let (var, ext) = match ch {
            'i' => (i, m),
            'j' => (j, n),
            _ => (r, k),
        };
        let l = wrap(&mut p, var, ext, body);
        p.lp_mut(l).kind = kinds
            .get(order.len() - 1 - pos)
            .copied()
            .unwrap_or(LoopKind::Serial);
        body = vec![Node::Loop(l)];
    }
    p.root = body;
    p
}

fn arr(v: &[f32]) -> ArrayD<f32> {
    arr1(v).into_dyn()
}

fn nan(shape: &[usize]) -> ArrayD<f32> {
    ArrayD::from_elem(IxDyn(shape), f32::NAN)
}

// ----- semantics ----------------------------------------------------------------------

#[test]
fn matmul_2x3x4_with_init_matches_hand_computation() {
    let p = matmul(2, 3, 4, "ijk", &[]);
    let a = arr2(&[[1., 2., 3., 4.], [5., 6., 7., 8.]]).into_dyn();
    let b = arr2(&[[1., 0., 2.], [0., 1., 0.], [1., 1., 1.], [2., 0., -1.]]).into_dyn();
    let mut params = vec![a, b, nan(&[2, 3])];
    run(&p, &mut params).unwrap();
    assert_eq!(params[2], arr2(&[[12., 5., 1.], [28., 13., 9.]]).into_dyn());
}

#[test]
fn loop_kinds_run_serially_and_reduction_outer_init_still_runs_once() {
    let reference = matmul(5, 6, 7, "ijk", &[]);
    let tx = LoopKind::Thread(ThreadTag::ThreadIdx(Dim3::X));
    let candidate = matmul(5, 6, 7, "kij", &[LoopKind::Unrolled, tx, tx]);
    assert_eq!(check(&reference, &candidate, 1), Ok(0.0));
    let candidate = matmul(
        5,
        6,
        7,
        "jik",
        &[LoopKind::Parallel, tx, LoopKind::Vectorized],
    );
    assert_eq!(check(&reference, &candidate, 2), Ok(0.0));
}

#[test]
fn predicate_false_skips_the_block() {
    let mut p = elementwise(4, DType::F32, |a| a);
    let i = p.lp(LoopId(0)).var;
    p.blocks[0].predicate = Some(Expr::lt(v(i), Expr::Int(2)));
    let mut params = vec![arr(&[1., 2., 3., 4.]), arr(&[-7.; 4])];
    run(&p, &mut params).unwrap();
    assert_eq!(params[1], arr(&[1., 2., -7., -7.]));
}

/// `B[i] = A[i - 1]` if `1 <= i < 5` else 0, for `i < 6`: padding by one on each side.
fn padded(guarded: bool) -> Program {
    let mut p = Program::new("pad");
    let a = buffer(&mut p, "A", &[4], DType::F32, BufferKind::Input);
    let b = buffer(&mut p, "B", &[6], DType::F32, BufferKind::Output);
    let i = p.new_var("i");
    let blk = block(
        &mut p,
        "P",
        &[("vi", 6, IterKind::Spatial)],
        vec![v(i)],
        |x| {
            let vi = v(x[0]);
            let load = ld(a, vec![Expr::sub(vi.clone(), Expr::Int(1))]);
            let value = if guarded {
                let inside = Expr::and(
                    Expr::ge(vi.clone(), Expr::Int(1)),
                    Expr::lt(vi.clone(), Expr::Int(5)),
                );
                Expr::select(inside, load, Expr::Float(0.0))
            } else {
                load
            };
            (None, st(b, vec![vi], value))
        },
    );
    let bid = p.new_block(blk);
    let l = wrap(&mut p, i, 6, vec![Node::Block(bid)]);
    p.root.push(Node::Loop(l));
    p
}

#[test]
fn select_guards_an_out_of_bounds_load() {
    let mut params = vec![arr(&[1., 2., 3., 4.]), nan(&[6])];
    run(&padded(true), &mut params).unwrap();
    assert_eq!(params[1], arr(&[0., 1., 2., 3., 4., 0.]));
    let mut params = vec![arr(&[1., 2., 3., 4.]), nan(&[6])];
    let err = run(&padded(false), &mut params).unwrap_err();
    assert_eq!(
        err,
        InterpError::OutOfBounds {
            block: "P".into(),
            buffer: "A".into(),
            indices: vec![-1],
            shape: vec![4],
        }
    );
}

#[test]
fn out_of_bounds_store_names_the_buffer() {
    let mut p = elementwise(4, DType::F32, |a| a);
    // Widen the loop and the iteration domain past the buffer B.
    p.lp_mut(LoopId(0)).extent = 5;
    p.blocks[0].iter_vars[0].extent = 5;
    let mut params = vec![arr(&[1., 2., 3., 4.]), nan(&[4])];
    let err = run(&p, &mut params).unwrap_err();
    // The load of A comes first: A is out of bounds too. Make A wide enough.
    assert!(matches!(err, InterpError::OutOfBounds { ref buffer, .. } if buffer == "A"));
    p.buffers[0].shape = vec![5];
    let mut params = vec![arr(&[1., 2., 3., 4., 5.]), nan(&[4])];
    let err = run(&p, &mut params).unwrap_err();
    assert_eq!(
        err,
        InterpError::OutOfBounds {
            block: "B".into(),
            buffer: "B".into(),
            indices: vec![4],
            shape: vec![4],
        }
    );
    assert_eq!(
        err.to_string(),
        "block B: access B[4] is outside its shape [4]"
    );
}

#[test]
fn binding_out_of_range_is_an_error() {
    let mut p = elementwise(4, DType::F32, |a| a);
    p.lp_mut(LoopId(0)).extent = 5;
    let mut params = vec![arr(&[1., 2., 3., 4.]), nan(&[4])];
    let err = run(&p, &mut params).unwrap_err();
    assert_eq!(
        err,
        InterpError::BindingOutOfRange {
            block: "B".into(),
            iter_var: "vi".into(),
            value: 4,
            extent: 4,
        }
    );
}

/// `T[i] = A[i] + 1` for `i < written`, then `B[i] = T[i] * 2` for `i < 4`.
fn through_intermediate(written: i64) -> Program {
    let mut p = Program::new("two_stage");
    let a = buffer(&mut p, "A", &[4], DType::F32, BufferKind::Input);
    let b = buffer(&mut p, "B", &[4], DType::F32, BufferKind::Output);
    let t = buffer(&mut p, "T", &[4], DType::F32, BufferKind::Intermediate);
    let (i, j) = (p.new_var("i"), p.new_var("j"));
    let producer = block(
        &mut p,
        "T",
        &[("vi", 4, IterKind::Spatial)],
        vec![v(i)],
        |x| {
            let value = Expr::add(ld(a, vec![v(x[0])]), Expr::Float(1.0));
            (None, st(t, vec![v(x[0])], value))
        },
    );
    let consumer = block(
        &mut p,
        "B",
        &[("vj", 4, IterKind::Spatial)],
        vec![v(j)],
        |x| {
            let value = Expr::mul(ld(t, vec![v(x[0])]), Expr::Int(2));
            (None, st(b, vec![v(x[0])], value))
        },
    );
    let (pb, cb) = (p.new_block(producer), p.new_block(consumer));
    let l1 = wrap(&mut p, i, written, vec![Node::Block(pb)]);
    let l2 = wrap(&mut p, j, 4, vec![Node::Block(cb)]);
    p.root = vec![Node::Loop(l1), Node::Loop(l2)];
    p
}

#[test]
fn never_written_intermediate_reads_nan_and_check_reports_it() {
    let mut params = vec![arr(&[1., 2., 3., 4.]), nan(&[4])];
    run(&through_intermediate(3), &mut params).unwrap();
    assert_eq!(params[1].slice(ndarray::s![..3]).to_vec(), vec![4., 6., 8.]);
    assert!(params[1][[3]].is_nan());
    let reference = through_intermediate(4);
    assert_eq!(check(&reference, &reference, 7), Ok(0.0));
    assert_eq!(
        check(&reference, &through_intermediate(3), 7),
        Err(CheckError::Unwritten {
            output: "B".into(),
            index: vec![3]
        })
    );
}

#[test]
fn bf16_stores_and_casts_round_to_bf16() {
    // Half a bf16 ulp at 1.0 (8 significant bits): every sum below is a tie, to even.
    let eps = 2f32.powi(-8);
    let p = elementwise(3, DType::BF16, move |a| {
        Expr::add(a, Expr::Float(eps as f64))
    });
    let mut params = vec![arr(&[1.0, 1.0 + 2f32.powi(-7), 3.0e38]), nan(&[3])];
    run(&p, &mut params).unwrap();
    // 1 + 2^-8 rounds to 1; (1 + 2^-7) + 2^-8 up to 1 + 2^-6; a large value keeps
    // float32's range (an f16 would overflow).
    assert_eq!(params[1][0], 1.0);
    assert_eq!(params[1][1], 1.0 + 2f32.powi(-6));
    assert!((params[1][2] / 3.0e38 - 1.0).abs() < 2f32.powi(-8));
    // An explicit cast rounds inside an f32 computation.
    let p = elementwise(1, DType::F32, move |a| {
        Expr::Cast(DType::BF16, Box::new(Expr::add(a, Expr::Float(eps as f64))))
    });
    let mut params = vec![arr(&[1.0]), nan(&[1])];
    run(&p, &mut params).unwrap();
    assert_eq!(params[1], arr(&[1.0]));
}

#[test]
fn f16_stores_and_casts_round_to_f16() {
    // Half an f16 ulp at 1.0: every sum below is a tie, rounded to even.
    let eps = 2f32.powi(-11);
    let p = elementwise(3, DType::F16, move |a| {
        Expr::add(a, Expr::Float(eps as f64))
    });
    let mut params = vec![arr(&[1.0, 1.0 + 2f32.powi(-10), 2.0]), nan(&[3])];
    run(&p, &mut params).unwrap();
    // 1 + 2^-11 rounds to 1; (1 + 2^-10) + 2^-11 rounds up to 1 + 2^-9; 2 + 2^-11 to 2.
    assert_eq!(params[1], arr(&[1.0, 1.0 + 2f32.powi(-9), 2.0]));
    // In f32 the same program keeps the low bits.
    let p = elementwise(1, DType::F32, move |a| {
        Expr::add(a, Expr::Float(eps as f64))
    });
    let mut params = vec![arr(&[1.0]), nan(&[1])];
    run(&p, &mut params).unwrap();
    assert_eq!(params[1], arr(&[1.0 + eps]));
    // An explicit cast rounds inside an f32 computation.
    let p = elementwise(1, DType::F32, move |a| {
        Expr::Cast(DType::F16, Box::new(Expr::add(a, Expr::Float(eps as f64))))
    });
    let mut params = vec![arr(&[1.0]), nan(&[1])];
    run(&p, &mut params).unwrap();
    assert_eq!(params[1], arr(&[1.0]));
}

/// `B[i] = 2 A[i] + 1` over 10, with `i` split into `(i0, i1)` by `factor` (imperfect)
/// with a predicate, or without one when `predicated` is false.
fn split_elementwise(factor: i64, predicated: bool) -> Program {
    let mut p = elementwise(10, DType::F32, |a| {
        Expr::add(Expr::mul(a, Expr::Float(2.0)), Expr::Int(1))
    });
    let outer = (10 + factor - 1) / factor;
    let (i0, i1) = (p.new_var("i0"), p.new_var("i1"));
    let fused = Expr::add(Expr::mul(v(i0), Expr::Int(factor)), v(i1));
    p.blocks[0].bindings = vec![fused.clone()];
    if predicated {
        p.blocks[0].predicate = Some(Expr::lt(fused, Expr::Int(10)));
    }
    let inner = wrap(&mut p, i1, factor, vec![Node::Block(crate::ir::BlockId(0))]);
    let outer = wrap(&mut p, i0, outer, vec![Node::Loop(inner)]);
    p.root = vec![Node::Loop(outer)];
    p
}

#[test]
fn split_with_predicate_matches_the_plain_loop() {
    let plain = elementwise(10, DType::F32, |a| {
        Expr::add(Expr::mul(a, Expr::Float(2.0)), Expr::Int(1))
    });
    assert_eq!(check(&plain, &split_elementwise(4, true), 3), Ok(0.0));
    assert_eq!(check(&plain, &split_elementwise(5, false), 3), Ok(0.0));
    let err = check(&plain, &split_elementwise(4, false), 3).unwrap_err();
    assert_eq!(
        err,
        CheckError::Candidate(InterpError::BindingOutOfRange {
            block: "B".into(),
            iter_var: "vi".into(),
            value: 10,
            extent: 10,
        })
    );
}

#[test]
fn tiled_matmul_matches_naive_f32() {
    // 24x20x16 with i split by 5 (imperfect: 5 tiles), k split by 4; no timing here.
    let (m, n, k) = (24, 20, 16);
    let mut p = matmul(m, n, k, "ijk", &[]);
    let (i0, i1, k0, k1) = (
        p.new_var("i0"),
        p.new_var("i1"),
        p.new_var("k0"),
        p.new_var("k1"),
    );
    let j = p.lp(LoopId(1)).var;
    let bi = Expr::add(Expr::mul(v(i0), Expr::Int(5)), v(i1));
    let bk = Expr::add(Expr::mul(v(k0), Expr::Int(4)), v(k1));
    p.blocks[0].bindings = vec![bi.clone(), v(j), bk];
    p.blocks[0].predicate = Some(Expr::lt(bi, Expr::Int(m)));
    let body = vec![Node::Block(crate::ir::BlockId(0))];
    let l = wrap(&mut p, k1, 4, body);
    let l = wrap(&mut p, i1, 5, vec![Node::Loop(l)]);
    let l = wrap(&mut p, k0, 4, vec![Node::Loop(l)]);
    let l = wrap(&mut p, j, n, vec![Node::Loop(l)]);
    let l = wrap(&mut p, i0, 5, vec![Node::Loop(l)]);
    p.root = vec![Node::Loop(l)];
    let mut params = random_inputs(&p, 11).unwrap();
    let (a, b) = (params[0].clone(), params[1].clone());
    run(&p, &mut params).unwrap();
    for x in 0..m as usize {
        for y in 0..n as usize {
            let mut acc = 0f32;
            for z in 0..k as usize {
                acc += a[[x, z]] * b[[z, y]];
            }
            assert_eq!(params[2][[x, y]], acc, "C[{x}, {y}]");
        }
    }
}

#[test]
fn integer_ops_follow_python_and_never_panic() {
    for a in -9..=9 {
        for b in [-4, -3, -1, 1, 2, 5] {
            assert!(matches!(floor_div(a, b), Ok(q) if q == floordiv(a, b)));
            assert!(matches!(floor_mod(a, b), Ok(r) if r == floormod(a, b)));
        }
    }
    assert!(floor_div(3, 0).is_err());
    assert!(floor_mod(3, 0).is_err());
    assert!(floor_div(i64::MIN, -1).is_err());
    assert!(matches!(floor_mod(i64::MIN, -1), Ok(0)));
    assert!(matches!(floor_mod(i64::MIN, 3), Ok(1)));
    assert!(matches!(floor_div(i64::MIN, 3), Ok(q) if q == -3074457345618258603));

    let mut p = elementwise(4, DType::F32, |a| a);
    let i = p.lp(LoopId(0)).var;
    p.blocks[0].bindings = vec![Expr::bin(BinOp::FloorDiv, v(i), Expr::Int(0))];
    let err = run(&p, &mut [arr(&[1.; 4]), nan(&[4])]).unwrap_err();
    assert_eq!(err, InterpError::DivisionByZero { block: "B".into() });
    let big = Expr::add(Expr::Int(i64::MAX), v(i));
    p.blocks[0].bindings = vec![Expr::add(big, Expr::Int(1))];
    let err = run(&p, &mut [arr(&[1.; 4]), nan(&[4])]).unwrap_err();
    assert_eq!(err, InterpError::Overflow { block: "B".into() });
}

#[test]
fn float_min_max_propagate_nan_and_unary_ops_are_f32() {
    let relu = |a: Expr| Expr::bin(BinOp::Max, a, Expr::Float(0.0));
    let mut params = vec![arr(&[-1.0, f32::NAN, 2.0]), nan(&[3])];
    run(&elementwise(3, DType::F32, relu), &mut params).unwrap();
    assert_eq!(params[1][[0]], 0.0);
    assert!(params[1][[1]].is_nan());
    assert_eq!(params[1][[2]], 2.0);
    let f = |a: Expr| Expr::Un(UnOp::Tanh, Box::new(Expr::Un(UnOp::Exp, Box::new(a))));
    let mut params = vec![arr(&[0.3]), nan(&[1])];
    run(&elementwise(1, DType::F32, f), &mut params).unwrap();
    assert_eq!(params[1][[0]], 0.3f32.exp().tanh());
}

#[test]
fn tf32_keeps_the_sign_exponent_and_ten_mantissa_bits() {
    let f = |a: Expr| Expr::Un(UnOp::Tf32, Box::new(a));
    let ulp = 2f32.powi(-10);
    let inputs = [
        1.0 + ulp,                // kept: the tenth mantissa bit
        1.0 + ulp / 2.0,          // the eleventh: cut
        -(1.0 + ulp + ulp / 4.0), // cut toward zero, sign kept
        f32::INFINITY,
        f32::NAN,
    ];
    let mut params = vec![arr(&inputs), nan(&[5])];
    run(&elementwise(5, DType::F32, f), &mut params).unwrap();
    assert_eq!(params[1][[0]], 1.0 + ulp);
    assert_eq!(params[1][[1]], 1.0);
    assert_eq!(params[1][[2]], -(1.0 + ulp));
    assert_eq!(params[1][[3]], f32::INFINITY);
    assert!(params[1][[4]].is_nan());
}

#[test]
fn unwritten_int_element_read_is_an_error() {
    let mut p = through_intermediate(3);
    p.buffers[2].dtype = DType::I32;
    let err = run(&p, &mut [arr(&[1., 2., 3., 4.]), nan(&[4])]).unwrap_err();
    assert_eq!(
        err,
        InterpError::UnwrittenRead {
            block: "B".into(),
            buffer: "T".into(),
            indices: vec![3],
        }
    );
}

// ----- malformed programs are errors, not panics ---------------------------------------

#[test]
fn malformed_programs_are_refused() {
    let base = elementwise(4, DType::F32, |a| a);
    let compile = |p: &Program| Interpreter::new(p).map(|_| ());

    let mut p = base.clone();
    p.blocks[0].bindings.push(Expr::Int(0));
    assert!(matches!(compile(&p), Err(InterpError::BindingCount { .. })));

    let mut p = base.clone();
    let i = p.lp(LoopId(0)).var;
    p.blocks[0].body.value = v(i);
    assert!(matches!(
        compile(&p),
        Err(InterpError::UnboundVar { site: "body", .. })
    ));

    let mut p = base.clone();
    let vi = p.blocks[0].iter_vars[0].var;
    p.blocks[0].bindings = vec![v(vi)];
    assert!(matches!(
        compile(&p),
        Err(InterpError::UnboundVar {
            site: "binding",
            ..
        })
    ));

    let mut p = base.clone();
    p.blocks[0].body.indices.push(Expr::Int(0));
    assert!(matches!(
        compile(&p),
        Err(InterpError::Arity {
            rank: 1,
            got: 2,
            ..
        })
    ));

    let mut p = base.clone();
    p.blocks[0].body.indices = vec![Expr::Float(1.0)];
    assert!(matches!(compile(&p), Err(InterpError::Type { .. })));

    let mut p = base.clone();
    p.blocks[0].body.value = Expr::bin(BinOp::Div, Expr::Int(1), Expr::Int(2));
    assert!(matches!(compile(&p), Err(InterpError::Type { .. })));

    let mut p = base.clone();
    p.blocks[0].body.buffer = BufferId(99);
    assert!(matches!(compile(&p), Err(InterpError::DanglingId { .. })));

    let mut p = base.clone();
    p.root.push(Node::Loop(LoopId(0)));
    assert!(matches!(compile(&p), Err(InterpError::NodeRepeated { .. })));

    let mut p = base.clone();
    p.lp_mut(LoopId(0)).body.push(Node::Loop(LoopId(0)));
    assert!(matches!(compile(&p), Err(InterpError::NodeRepeated { .. })));

    let mut p = base.clone();
    let inner = p.new_loop("x", 2, vec![]);
    let var = p.lp(LoopId(0)).var;
    p.lp_mut(inner).var = var;
    p.lp_mut(LoopId(0)).body.push(Node::Loop(inner));
    assert!(matches!(compile(&p), Err(InterpError::DuplicateVar { .. })));

    let mut p = base.clone();
    p.buffers[1].shape = vec![-4];
    assert!(matches!(compile(&p), Err(InterpError::BadShape { .. })));
    p.buffers[1].shape = vec![1 << 40, 0, 1 << 40];
    assert!(matches!(compile(&p), Err(InterpError::BadShape { .. })));

    let mut p = base.clone();
    let mut deep = Expr::Int(0);
    for _ in 0..2000 {
        deep = Expr::add(deep, Expr::Int(1));
    }
    p.blocks[0].bindings = vec![deep];
    assert!(matches!(compile(&p), Err(InterpError::TooDeep { .. })));

    let err = run(&base, &mut [arr(&[1.; 4])]).unwrap_err();
    assert!(matches!(
        err,
        InterpError::ParamCount {
            expected: 2,
            got: 1,
            ..
        }
    ));
    let err = run(&base, &mut [arr(&[1.; 4]), nan(&[5])]).unwrap_err();
    assert!(matches!(err, InterpError::ParamShape { position: 1, .. }));
}

// ----- checking -----------------------------------------------------------------------

#[test]
fn check_reports_mismatches_and_param_differences() {
    let reference = elementwise(8, DType::F32, |a| Expr::mul(a, Expr::Int(2)));
    let wrong = elementwise(8, DType::F32, |a| Expr::mul(a, Expr::Int(3)));
    match check(&reference, &wrong, 5) {
        Err(CheckError::Mismatch {
            output, rel_error, ..
        }) => {
            assert_eq!(output, "B");
            assert!((rel_error - 0.5).abs() < 1e-6);
        }
        other => panic!("expected a mismatch, got {other:?}"),
    }
    let other_shape = elementwise(9, DType::F32, |a| a);
    assert!(matches!(
        check(&reference, &other_shape, 5),
        Err(CheckError::ParamMismatch { position: 0, .. })
    ));
    let mut writes_input = reference.clone();
    writes_input.blocks[0].body.buffer = BufferId(0);
    assert!(matches!(
        check(&reference, &writes_input, 5),
        Err(CheckError::InputModified { .. })
    ));
}

#[test]
fn random_inputs_are_deterministic_nonzero_and_outputs_poisoned() {
    let p = matmul(3, 4, 5, "ijk", &[]);
    let x = random_inputs(&p, 42).unwrap();
    assert_eq!(x[..2], random_inputs(&p, 42).unwrap()[..2]);
    assert_ne!(x[0], random_inputs(&p, 43).unwrap()[0]);
    assert_ne!(x[0].as_slice().unwrap()[..4], x[1].as_slice().unwrap()[..4]);
    for input in &x[..2] {
        assert!(input.iter().all(|&e| e != 0.0 && (-1.0..=1.0).contains(&e)));
    }
    assert!(x[2].iter().all(|e| e.is_nan()));
}

#[test]
fn rel_error_fails_on_nan_and_uses_absolute_error_for_zero_reference() {
    let r = arr(&[3.0, 4.0]);
    assert_eq!(rel_error(&arr(&[3.0, 4.0]), &r), 0.0);
    assert!((rel_error(&arr(&[3.0, 5.0]), &r) - 0.2).abs() < 1e-12);
    assert!(rel_error(&arr(&[f32::NAN, 4.0]), &r).is_nan());
    assert!(!is_close(&arr(&[f32::NAN, 4.0]), &r));
    assert!(is_close(&arr(&[3.0, 4.0001]), &r));
    assert_eq!(rel_error(&arr(&[0.5]), &arr(&[0.0])), 0.5);
    assert_eq!(rel_error(&arr(&[0.5]), &arr(&[0.5, 0.5])), f64::INFINITY);
}
