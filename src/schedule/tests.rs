//! Unit tests of the primitives on a hand-built matmul.

use super::*;
use crate::ir::printer::print_program;
use crate::ir::*;
use std::collections::BTreeMap;

pub(crate) fn matmul(m: i64, n: i64, k: i64) -> Program {
    let mut p = Program::new("main");
    let mk = |p: &mut Program, name: &str, shape: Vec<i64>, kind| {
        p.new_buffer(Buffer {
            name: name.into(),
            shape,
            dtype: DType::F32,
            scope: Scope::Global,
            kind,
            align: vec![],
            swizzle: false,
        })
    };
    let a = mk(&mut p, "A", vec![m, k], BufferKind::Input);
    let b = mk(&mut p, "B", vec![k, n], BufferKind::Input);
    let c = mk(&mut p, "C", vec![m, n], BufferKind::Output);
    p.params = vec![a, b, c];
    let (vi, vj, vk) = (p.new_var("vi"), p.new_var("vj"), p.new_var("vk"));
    let ci = vec![Expr::Var(vi), Expr::Var(vj)];
    let li = p.new_loop("i", m, vec![]);
    let lj = p.new_loop("j", n, vec![]);
    let lk = p.new_loop("k", k, vec![]);
    let blk = Block {
        name: "C".into(),
        iter_vars: vec![
            IterVar {
                var: vi,
                extent: m,
                kind: IterKind::Spatial,
            },
            IterVar {
                var: vj,
                extent: n,
                kind: IterKind::Spatial,
            },
            IterVar {
                var: vk,
                extent: k,
                kind: IterKind::Reduce,
            },
        ],
        bindings: vec![
            Expr::Var(p.lp(li).var),
            Expr::Var(p.lp(lj).var),
            Expr::Var(p.lp(lk).var),
        ],
        predicate: None,
        init: Some(Store {
            buffer: c,
            indices: ci.clone(),
            value: Expr::Float(0.0),
        }),
        body: Store {
            buffer: c,
            indices: ci.clone(),
            value: Expr::add(
                Expr::Load(c, ci),
                Expr::mul(
                    Expr::Load(a, vec![Expr::Var(vi), Expr::Var(vk)]),
                    Expr::Load(b, vec![Expr::Var(vk), Expr::Var(vj)]),
                ),
            ),
        },
        annotations: BTreeMap::new(),
    };
    let bk = p.new_block(blk);
    p.lp_mut(lk).body = vec![Node::Block(bk)];
    p.lp_mut(lj).body = vec![Node::Loop(lk)];
    p.lp_mut(li).body = vec![Node::Loop(lj)];
    p.root = vec![Node::Loop(li)];
    p
}

/// MLC's `blocking_with_shared(8, 8, 8, 8, 8)`.
pub(crate) fn mlc_blocking_shared(sch: &mut Schedule) -> Result<()> {
    let c = sch.get_block("C")?;
    let c_local = sch.cache_write(c, 0, "local")?;
    let l = sch.get_loops(c)?;
    let i = sch.split(l[0], &[None, Some(8.into()), Some(8.into())])?;
    let j = sch.split(l[1], &[None, Some(8.into()), Some(8.into())])?;
    let k = sch.split(l[2], &[None, Some(8.into())])?;
    sch.reorder(&[i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]])?;
    sch.reverse_compute_at(c_local, j[1])?;
    sch.bind(i[0], "blockIdx.y")?;
    sch.bind(j[0], "blockIdx.x")?;
    let tx = sch.fuse(&[i[1], j[1]])?;
    sch.bind(tx, "threadIdx.x")?;
    for idx in 0..2 {
        let rc = sch.cache_read(c, idx, "shared")?;
        sch.compute_at(rc, k[0])?;
        let ls = sch.get_loops(rc)?;
        let n = ls.len();
        let f = sch.fuse(&ls[n - 2..])?;
        let parts = sch.split(f, &[None, Some(64.into()), Some(4.into())])?;
        sch.vectorize(parts[2])?;
        sch.bind(parts[1], "threadIdx.x")?;
    }
    sch.decompose_reduction(c, k[0])?;
    Ok(())
}

#[test]
fn mlc_schedule_prints_like_the_seed() {
    let mut sch = Schedule::new(matmul(1024, 1024, 1024), 0);
    mlc_blocking_shared(&mut sch).unwrap();
    let text = print_program(sch.program());
    println!("{text}");
    assert!(text.contains("for ax0_ax1_fused_2 in T.vectorized(4):"));
}

/// Applies `f` expecting an error; asserts the program is unchanged and returns the error.
fn rejected(sch: &mut Schedule, f: impl FnOnce(&mut Schedule) -> Result<()>) -> ScheduleError {
    let before = sch.program().clone();
    let trace_len = sch.trace().insts.len();
    let err = f(sch).expect_err("the primitive should be rejected");
    assert_eq!(
        sch.program(),
        &before,
        "a rejected primitive changed the IR: {err}"
    );
    assert_eq!(
        sch.trace().insts.len(),
        trace_len,
        "a rejected primitive was recorded"
    );
    err
}

#[test]
fn fusing_loops_that_are_not_nested_is_rejected() {
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    let e = rejected(&mut sch, |s| s.fuse(&[l[0], l[2]]).map(|_| ()));
    assert_eq!(e.to_string(), "loop k is not directly nested in loop i");
}

#[test]
fn fusing_a_loop_with_two_children_is_rejected() {
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let wb = sch.cache_write(c, 0, "local").unwrap();
    let l = sch.get_loops(c).unwrap();
    sch.reverse_compute_at(wb, l[1]).unwrap();
    let e = rejected(&mut sch, |s| s.fuse(&[l[1], l[2]]).map(|_| ()));
    assert_eq!(e.to_string(), "loop k is not the only child of loop j");
}

#[test]
fn reordering_loops_of_different_nests_is_rejected() {
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let wb = sch.cache_write(c, 0, "local").unwrap();
    let l = sch.get_loops(c).unwrap();
    let w = sch.get_loops(wb).unwrap();
    let e = rejected(&mut sch, |s| s.reorder(&[l[1], w[0]]));
    assert_eq!(
        e.to_string(),
        "loops j, ax0 are not in one chain of nested loops"
    );
}

#[test]
fn binding_a_reduction_loop_to_blockidx_is_rejected() {
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    let e = rejected(&mut sch, |s| s.bind(l[2], "blockIdx.x"));
    assert_eq!(
        e.to_string(),
        "cannot bind loop k to blockIdx.x: it carries the reduction of block C"
    );
    let e = rejected(&mut sch, |s| s.bind(l[0], "blockIdx.w"));
    assert!(matches!(e, ScheduleError::UnknownThread { .. }));
}

#[test]
fn vectorizing_an_outer_loop_is_rejected() {
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    let e = rejected(&mut sch, |s| s.vectorize(l[1]));
    assert_eq!(
        e.to_string(),
        "cannot vectorize loop j: it is not innermost (its body must be a single block)"
    );
    let e = rejected(&mut sch, |s| s.vectorize(l[2]));
    assert!(matches!(e, ScheduleError::LoopCarriesReduction { .. }));
}

#[test]
fn compute_at_of_an_output_block_is_rejected() {
    // The seed's first attempt: compute_at(C_local...) on the write-back block fails
    // because it is an output block; reverse_compute_at is the primitive for consumers.
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let wb = sch.cache_write(c, 0, "local").unwrap();
    let l = sch.get_loops(c).unwrap();
    let e = rejected(&mut sch, |s| s.compute_at(wb, l[1]));
    assert!(
        e.to_string().starts_with(
            "block C_local writes the output buffer C; compute_at cannot move an output block"
        ),
        "{e}"
    );
    sch.reverse_compute_at(wb, l[1]).unwrap();
}

#[test]
fn compute_at_with_a_consumer_outside_the_loop_is_rejected() {
    // The seed's second error: the shared cache's consumer is the local cache, which must
    // be moved under the loop first.
    let mut sch = Schedule::new(matmul(64, 64, 64), 0);
    let c = sch.get_block("C").unwrap();
    let a_shared = sch.cache_read(c, 0, "shared").unwrap();
    let a_local = sch.cache_read(c, 0, "local").unwrap();
    let l = sch.get_loops(c).unwrap();
    let k = sch.split(l[2], &[None, Some(8.into())]).unwrap();
    let e = rejected(&mut sch, |s| s.compute_at(a_shared, k[0]));
    assert_eq!(
        e.to_string(),
        "compute_at of A_shared under loop k_0: consumer A_shared_local is not under loop k_0"
    );
    sch.compute_at(a_local, k[1]).unwrap();
    sch.compute_at(a_shared, k[0]).unwrap();
}

#[test]
fn shared_cache_under_k0_covers_one_block_tile() {
    let mut sch = Schedule::new(matmul(1024, 1024, 1024), 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    let i = sch
        .split(l[0], &[None, Some(8.into()), Some(8.into())])
        .unwrap();
    let j = sch
        .split(l[1], &[None, Some(8.into()), Some(8.into())])
        .unwrap();
    let k = sch.split(l[2], &[None, Some(8.into())]).unwrap();
    sch.reorder(&[i[0], j[0], i[1], j[1], k[0], k[1], i[2], j[2]])
        .unwrap();
    sch.bind(i[0], "blockIdx.y").unwrap();
    sch.bind(j[0], "blockIdx.x").unwrap();
    let tx = sch.fuse(&[i[1], j[1]]).unwrap();
    sch.bind(tx, "threadIdx.x").unwrap();
    let a = sch.cache_read(c, 0, "shared").unwrap();
    sch.compute_at(a, k[0]).unwrap();
    let loops = sch.get_loops(a).unwrap();
    let p = sch.program();
    let extents: Vec<i64> = loops
        .iter()
        .map(|l| p.lp(sch.loop_id(*l).unwrap()).extent)
        .collect();
    assert_eq!(
        &extents[extents.len() - 2..],
        &[64, 8],
        "A_shared should be a 64x8 tile under k_0"
    );
}

#[test]
fn imperfect_split_adds_a_predicate() {
    let mut sch = Schedule::new(matmul(10, 8, 8), 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    sch.split(l[0], &[None, Some(4.into())]).unwrap();
    let text = print_program(sch.program());
    assert!(
        text.contains("for i_0, i_1, j, k in T.grid(3, 4, 8, 8):"),
        "{text}"
    );
    assert!(text.contains("T.where(i_0 * 4 + i_1 < 10)"), "{text}");
}

#[test]
fn sampled_tiles_split_a_loop_and_bad_decisions_are_errors() {
    let mut sch = Schedule::new(matmul(64, 64, 64), 3);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    let t = sch.sample_perfect_tile(l[0], 3, 8, None).unwrap();
    let prod: i64 = t.iter().map(|v| sch.value(*v).unwrap()).product();
    assert_eq!(prod, 64);
    sch.split(
        l[0],
        &[Some(t[0].into()), Some(t[1].into()), Some(t[2].into())],
    )
    .unwrap();
    let e = sch
        .sample_perfect_tile(l[1], 2, 64, Some(vec![3, 3]))
        .unwrap_err();
    assert!(matches!(e, ScheduleError::InvalidDecision { .. }), "{e}");
}

#[test]
fn mlc_schedule_lowers_to_cuda() {
    let mut sch = Schedule::new(matmul(1024, 1024, 1024), 0);
    mlc_blocking_shared(&mut sch).unwrap();
    let l = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda).unwrap();
    let src = crate::codegen::cuda::generate(&l).unwrap();
    std::fs::write("/tmp/mlc.cu", &src.code).unwrap();
    println!("{}", src.code);
}

#[test]
fn decompose_reduction_inside_a_reduction_loop_is_rejected() {
    // Found by the property test: an init placed inside k would reset the sum each step.
    let mut sch = Schedule::new(matmul(8, 8, 8), 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    let k = sch.split(l[2], &[None, Some(2.into())]).unwrap();
    let e = rejected(&mut sch, |s| s.decompose_reduction(c, k[1]).map(|_| ()));
    assert_eq!(
        e.to_string(),
        "decompose_reduction of block C: the reduction loop k_0 encloses the target loop k_1"
    );
    sch.decompose_reduction(c, k[0]).unwrap();
}

/// A fresh schedule of `p` (a matmul), its block C and C's loops.
fn block_c(p: Program) -> (Schedule, BlockRv, Vec<LoopRv>) {
    let mut sch = Schedule::new(p, 0);
    let c = sch.get_block("C").unwrap();
    let l = sch.get_loops(c).unwrap();
    (sch, c, l)
}

/// rfactor of `k_0` after splitting k by `[None, 16]`: the rf block's new axis is spatial
/// and bound to the loop, the write-back sums over it.
#[test]
fn rfactor_turns_the_outer_reduction_loop_into_a_partial_result_axis() {
    let reference = matmul(32, 24, 64);
    let (mut sch, c, l) = block_c(reference.clone());
    let k = sch.split(l[2], &[None, Some(16.into())]).unwrap();
    let rf = sch.rfactor(k[0], 0).unwrap();
    let p = sch.program();
    let text = print_program(p);
    let rb = sch.block_id(rf).unwrap();
    assert_eq!(p.block(rb).name, "C_rf");
    let rf_buf = p.block(rb).body.buffer;
    assert_eq!(p.buffer(rf_buf).shape, vec![4, 32, 24], "{text}");
    assert_eq!(p.buffer(rf_buf).kind, BufferKind::Intermediate);
    let kinds: Vec<IterKind> = p.block(rb).iter_vars.iter().map(|iv| iv.kind).collect();
    use IterKind::{Reduce as R, Spatial as S};
    assert_eq!(kinds, vec![S, S, S, R], "{text}");
    // The write-back keeps the name and rv of the original block, in a nest of its own.
    let wb = sch.block_id(c).unwrap();
    assert_eq!(p.block(wb).name, "C");
    let kinds: Vec<IterKind> = p.block(wb).iter_vars.iter().map(|iv| iv.kind).collect();
    assert_eq!(kinds, vec![S, S, R], "{text}");
    assert_eq!(p.root.len(), 2, "{text}");
    assert!(
        text.contains("C_rf[vk_rf, vi, vj] = C_rf[vk_rf, vi, vj] + A[vi, 16 * vk_rf + vk_in]"),
        "{text}"
    );
    assert!(
        text.contains("C[vi, vj] = C[vi, vj] + C_rf[vk_rf, vi, vj]"),
        "{text}"
    );
    let err = crate::interp::check(&reference, p, 3).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    // The factor axis may go anywhere in the partial-result buffer.
    let (mut sch, _, l) = block_c(reference.clone());
    let k = sch.split(l[2], &[Some(8.into()), None]).unwrap();
    let rf = sch.rfactor(k[0], 2).unwrap();
    let p = sch.program();
    let rb = sch.block_id(rf).unwrap();
    assert_eq!(p.buffer(p.block(rb).body.buffer).shape, vec![32, 24, 8]);
    let err = crate::interp::check(&reference, p, 4).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    // An unsplit reduction loop factors whole: one partial result per k.
    let (mut sch, _, l) = block_c(reference.clone());
    let rf = sch.rfactor(l[2], 1).unwrap();
    let p = sch.program();
    let rb = sch.block_id(rf).unwrap();
    assert_eq!(p.buffer(p.block(rb).body.buffer).shape, vec![32, 64, 24]);
    let err = crate::interp::check(&reference, p, 5).unwrap();
    assert!(err < 1e-5, "relative error {err}");
}

/// The partial-result buffer's shape and the iteration extents of the rf block `rf`.
fn rf_dims(sch: &Schedule, rf: BlockRv) -> (Vec<i64>, Vec<i64>) {
    let p = sch.program();
    let rb = p.block(sch.block_id(rf).unwrap());
    let extents = rb.iter_vars.iter().map(|iv| iv.extent).collect();
    (p.buffer(rb.body.buffer).shape.clone(), extents)
}

/// The inner part of a split factored (what a warp's lanes reading consecutive elements of
/// a row need): the partial results are indexed by it, the new reduction walks the outer
/// part; a middle part of a three-way split leaves the parts outside and inside it to the
/// reduction. Both compute the reference and replay.
#[test]
fn rfactor_of_an_inner_or_middle_part_of_a_split_reduction() {
    let reference = matmul(8, 12, 96);
    let (mut sch, _, l) = block_c(reference.clone());
    let k = sch.split(l[2], &[None, Some(16.into())]).unwrap();
    let rf = sch.rfactor(k[1], 0).unwrap();
    let p = sch.program();
    let text = print_program(p);
    let (shape, extents) = rf_dims(&sch, rf);
    assert_eq!(shape, vec![16, 8, 12], "{text}");
    assert_eq!(extents, vec![8, 12, 16, 6], "{text}");
    assert!(text.contains("A[vi, vk_in * 16 + vk_rf]"), "{text}");
    let err = crate::interp::check(&reference, p, 6).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    let again = crate::schedule::replay(sch.trace(), reference.clone(), 0).unwrap();
    assert_eq!(print_program(again.program()), text);
    // k = 96 = 3 x 8 x 4: the middle part (8) factored; the reduction walks the 3 x 4 others.
    let (mut sch, _, l) = block_c(reference.clone());
    let k = sch
        .split(l[2], &[Some(3.into()), Some(8.into()), Some(4.into())])
        .unwrap();
    let rf = sch.rfactor(k[1], 2).unwrap();
    let p = sch.program();
    let (shape, extents) = rf_dims(&sch, rf);
    assert_eq!(shape, vec![8, 12, 8]);
    assert_eq!(extents, vec![8, 12, 8, 12], "{}", print_program(p));
    let err = crate::interp::check(&reference, p, 7).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    // The inner part of an imperfect split (90 = 5 x 16 + 10): the split's guard leaves
    // the predicate, the partial results add zeros past the end (a select), the rf
    // block's domain is the whole box; the result is the reference's, also after the
    // loops move (compute_at, which rebuilds a block's loops from its domain).
    let reference = matmul(8, 12, 90);
    let (mut sch, c, l) = block_c(reference.clone());
    let k = sch.split(l[2], &[None, Some(16.into())]).unwrap();
    let rf = sch.rfactor(k[1], 2).unwrap();
    let p = sch.program();
    let text = print_program(p);
    let rb = sch.block_id(rf).unwrap();
    assert!(p.block(rb).predicate.is_none(), "{text}");
    let (_, extents) = rf_dims(&sch, rf);
    assert_eq!(extents, vec![8, 12, 16, 6], "{text}");
    assert!(
        text.contains("T.if_then_else(vk_in * 16 + vk_rf < 90, A[vi, vk_in * 16 + vk_rf]"),
        "{text}"
    );
    checks_as_factored_and_moved(&mut sch, &reference, c, rf, 8);
}

/// The reference's result from `sch`, a reduction `block` factored into `rf`: as it is,
/// after `rf` moves under the write-back's second loop (compute_at, which rebuilds a
/// block's loops from its domain), and lowered for the CPU (inputs drawn from `seed`).
fn checks_as_factored_and_moved(
    sch: &mut Schedule,
    reference: &Program,
    block: BlockRv,
    rf: BlockRv,
    seed: u64,
) {
    let err = crate::interp::check(reference, sch.program(), seed).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    let wl = sch.get_loops(block).unwrap();
    sch.compute_at(rf, wl[1]).unwrap();
    let err = crate::interp::check(reference, sch.program(), seed + 1).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cpu).unwrap();
    let err = crate::interp::check_lowered(reference, &lowered, seed + 2).unwrap();
    assert!(err < 1e-5, "relative error {err}");
}

/// Split-K as a GPU schedule: the rfactor axis is bound to blockIdx.y, the partial sums
/// go through a global workspace, the write-back is a second kernel; the kernels run
/// with GPU semantics and match the reference.
#[test]
fn rfactor_split_k_lowers_to_two_kernels_that_match_the_reference() {
    let reference = matmul(64, 32, 128);
    let (mut sch, c, l) = block_c(reference.clone());
    let k = sch.split(l[2], &[Some(4.into()), None]).unwrap();
    let rf = sch.rfactor(k[0], 0).unwrap();
    let rl = sch.get_loops(rf).unwrap();
    sch.reorder(&[rl[2], rl[0], rl[1], rl[3]]).unwrap();
    sch.bind(rl[2], "blockIdx.y").unwrap();
    let i = sch.split(rl[0], &[None, Some(16.into())]).unwrap();
    sch.bind(i[0], "blockIdx.x").unwrap();
    sch.bind(i[1], "threadIdx.y").unwrap();
    sch.bind(rl[1], "threadIdx.x").unwrap();
    sch.decompose_reduction(rf, rl[3]).unwrap();
    let wl = sch.get_loops(c).unwrap();
    let f = sch.fuse(&wl[..2]).unwrap();
    let t = sch.split(f, &[None, Some(128.into())]).unwrap();
    sch.bind(t[0], "blockIdx.x").unwrap();
    sch.bind(t[1], "threadIdx.x").unwrap();
    let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda).unwrap();
    assert_eq!(lowered.kernels.len(), 2);
    assert_eq!(lowered.kernels[0].grid, [4, 4, 1]);
    assert_eq!(lowered.workspaces.len(), 1);
    let err = crate::interp::check_lowered(&reference, &lowered, 5).unwrap();
    assert!(err < 1e-5, "relative error {err}");
    // The trace replays to the same program.
    let again = crate::schedule::replay(sch.trace(), reference.clone(), 0).unwrap();
    assert_eq!(print_program(again.program()), print_program(sch.program()));
}

/// A reduction over two axes stored one after the other (a global average pool's `h`
/// and `w` of NCHW), their loops fused and split by a lane count that does not divide the
/// product: rfactor of the inner part merges the two reduction variables into one over
/// their product (the body reads them as its digits), factors it like any other, and the
/// result is the reference's, with the loops moved, lowered, and replayed.
#[test]
fn rfactor_of_fused_reduction_loops_factors_their_product() {
    let reference = crate::workload::parse(
        "input X: f32[2, 3, 5, 7]\nS[n, c] = sum(X[n, c, h, w], h: 5, w: 7)\n",
    )
    .unwrap()
    .to_program();
    let mut sch = Schedule::new(reference.clone(), 0);
    let s = sch.get_block("S").unwrap();
    let l = sch.get_loops(s).unwrap();
    let hw = sch.fuse(&l[2..]).unwrap();
    let k = sch.split(hw, &[None, Some(8.into())]).unwrap();
    let rf = sch.rfactor(k[1], 0).unwrap();
    let text = print_program(sch.program());
    let (shape, extents) = rf_dims(&sch, rf);
    assert_eq!(shape, vec![8, 2, 3], "{text}");
    // n, c, the 8 lanes, 5 steps of them over the 35 (h, w) pairs.
    assert_eq!(extents, vec![2, 3, 8, 5], "{text}");
    assert!(
        text.contains("X[vn, vc, (vh_vw_in * 8 + vh_vw_rf) // 7, (vh_vw_in * 8 + vh_vw_rf) % 7]"),
        "{text}"
    );
    checks_as_factored_and_moved(&mut sch, &reference, s, rf, 11);
    let again = crate::schedule::replay(sch.trace(), reference.clone(), 0).unwrap();
    assert_eq!(print_program(again.program()), print_program(sch.program()));
    // A loop feeding a spatial and a reduction variable is still refused (fuse refuses
    // to make one): rfactor of c fused with h is never reached.
    let mut sch = Schedule::new(reference, 0);
    let s = sch.get_block("S").unwrap();
    let l = sch.get_loops(s).unwrap();
    assert!(sch.fuse(&l[1..3]).is_err());
}

#[test]
fn rfactor_of_what_it_cannot_factor_is_rejected_naming_the_loop() {
    let (mut sch, _, l) = block_c(matmul(32, 32, 30));
    let e = rejected(&mut sch, |s| s.rfactor(l[0], 0).map(|_| ()));
    assert_eq!(
        e.to_string(),
        "rfactor of loop i: it binds the spatial iteration variable vi of block C"
    );
    let k = sch.split(l[2], &[None, Some(4.into())]).unwrap();
    let e = rejected(&mut sch, |s| s.rfactor(k[0], 0).map(|_| ()));
    assert!(
        e.to_string()
            .starts_with("rfactor of loop k_0: it does not split vk evenly"),
        "{e}"
    );
    let (mut sch, c, l) = block_c(matmul(32, 32, 32));
    let e = rejected(&mut sch, |s| s.rfactor(l[2], 3).map(|_| ()));
    assert_eq!(
        e.to_string(),
        "invalid rfactor factor_axis: 3 is not in 0..=2"
    );
    sch.decompose_reduction(c, l[2]).unwrap();
    let e = rejected(&mut sch, |s| s.rfactor(l[2], 0).map(|_| ()));
    assert!(e.to_string().contains("it has no init"), "{e}");
}

/// The implicit-GEMM case: the two spatial axes of a matmul fused into one and split into
/// block, thread and serial tiles, the write-back placed at the thread. `tile` outputs per
/// thread, not aligned to the row of `n` (a thread's tile crosses rows): the box of each
/// index is its whole range, so the write-back must replay the thread's loops instead.
fn fused_write_back(m: i64, n: i64, tile: i64, threads: i64) -> Schedule {
    let mut sch = Schedule::new(matmul(m, n, 3), 0);
    let c = sch.get_block("C").unwrap();
    let wb = sch.cache_write(c, 0, "local").unwrap();
    let l = sch.get_loops(c).unwrap();
    let f = sch.fuse(&l[..2]).unwrap();
    let t = sch
        .split(f, &[None, Some(threads.into()), Some(tile.into())])
        .unwrap();
    sch.bind(t[0], "blockIdx.x").unwrap();
    sch.bind(t[1], "threadIdx.x").unwrap();
    sch.reverse_compute_at(wb, t[1]).unwrap();
    crate::ir::verify::verify(sch.program()).unwrap();
    sch
}

#[test]
fn write_back_of_an_unaligned_fused_tile_writes_exactly_its_threads_outputs() {
    // 4 x 6 fused into 24 = 2 x 3 x 4: tiles of 4 cross rows of 6. The others are padded
    // (a predicate masks the fused index beyond the extent): 3 x 7 = 21 in 2 x 4 x 3,
    // 5 x 4 = 20 in 3 x 3 x 3, 2 x 9 = 18 in 2 x 5 x 2.
    for (m, n, tile, threads) in [(4, 6, 4, 3), (3, 7, 3, 4), (5, 4, 3, 3), (2, 9, 2, 5)] {
        let sch = fused_write_back(m, n, tile, threads);
        let p = sch.program();
        let text = print_program(p);
        // The write-back iterates over the thread's `tile` points, not a box of C.
        let wb = p.find_block("C_local")[0];
        let points: i64 = p
            .ancestors(Node::Block(wb))
            .iter()
            .filter(|l| matches!(p.lp(**l).kind, LoopKind::Serial))
            .map(|l| p.lp(*l).extent)
            .product();
        assert_eq!(points, tile, "{m}x{n} in tiles of {tile}:\n{text}");
        // Serially and with GPU semantics (a point written by two threads is an error),
        // it computes the reference's answer.
        let reference = matmul(m, n, 3);
        crate::interp::check(&reference, p, 5).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let lowered = crate::lower::lower(p, crate::lower::Backend::Cuda).unwrap();
        crate::interp::check_lowered(&reference, &lowered, 5)
            .unwrap_or_else(|e| panic!("{m}x{n} in tiles of {tile}: {e}\n{text}"));
        // The trace replays to the same program.
        let again = crate::schedule::replay(sch.trace(), reference, 0).unwrap();
        assert_eq!(print_program(again.program()), text);
    }
}

#[test]
fn write_back_of_an_aligned_fused_tile_keeps_its_box() {
    // Tiles of 3 within rows of 6: each thread writes one row segment, a box.
    let sch = fused_write_back(4, 6, 3, 4);
    let text = print_program(sch.program());
    assert!(text.contains("for ax1 in range(3):"), "{text}");
    let reference = matmul(4, 6, 3);
    let lowered = crate::lower::lower(sch.program(), crate::lower::Backend::Cuda).unwrap();
    crate::interp::check_lowered(&reference, &lowered, 5).unwrap();
}

/// A matmul tiled `i0 j0 | i1 j1 | k | j2`, its accumulator's write-back at the location
/// `decision` picks among `[i0 j0 fused, j1]`, the write-back's innermost loop unrolled.
fn write_back_at(decision: usize) -> Schedule {
    let mut sch = Schedule::new(matmul(16, 16, 8), 0);
    let c = sch.get_block("C").unwrap();
    let wb = sch.cache_write(c, 0, "local").unwrap();
    let l = sch.get_loops(c).unwrap();
    let i = sch.split(l[0], &[None, Some(4.into())]).unwrap();
    let j = sch
        .split(l[1], &[None, Some(2.into()), Some(2.into())])
        .unwrap();
    sch.reorder(&[i[0], j[0], i[1], j[1], l[2], j[2]]).unwrap();
    let outer = sch.fuse(&[i[0], j[0]]).unwrap();
    let at = sch
        .sample_compute_location(wb, &[outer, j[1]], Some(decision))
        .unwrap();
    sch.reverse_compute_at(wb, at).unwrap();
    let wl = sch.get_loops(wb).unwrap();
    sch.unroll(*wl.last().unwrap()).unwrap();
    sch
}

#[test]
fn a_sampled_compute_location_is_a_decision_that_replay_can_change() {
    let reference = matmul(16, 16, 8);
    let outer = write_back_at(0);
    let inner = write_back_at(1);
    // At the fused outer loop the write-back covers the block's 4 x 4 tile (two loops of
    // its own); at j1, the 2 outputs of j2 (one loop).
    let serial_points = |sch: &Schedule| {
        let p = sch.program();
        let wb = p.find_block("C_local")[0];
        p.ancestors(Node::Block(wb))
            .iter()
            .map(|l| p.lp(*l).extent)
            .product::<i64>()
    };
    assert_eq!(sch_loops(&outer), 3);
    assert_eq!(sch_loops(&inner), 4);
    // Either way every output is written once.
    assert_eq!(serial_points(&outer), 256);
    assert_eq!(serial_points(&inner), 256);
    for sch in [&outer, &inner] {
        crate::interp::check(&reference, sch.program(), 3)
            .unwrap_or_else(|e| panic!("{e}\n{}", print_program(sch.program())));
    }
    // The other decision replayed on the trace gives the other schedule, although the
    // write-back then sits under another number of loops (its `get_loops` is matched
    // innermost first: the unrolled loop is still its own innermost).
    let with_location = |sch: &Schedule, decision: usize| {
        let trace = sch
            .trace()
            .with_decision(location_inst(sch), Decision::Categorical(decision));
        crate::schedule::replay(&trace, reference.clone(), 0)
    };
    let print_of = |sch: &Schedule| print_program(sch.program());
    assert_eq!(
        print_of(&with_location(&outer, 1).unwrap()),
        print_of(&inner)
    );
    assert_eq!(
        print_of(&with_location(&inner, 0).unwrap()),
        print_of(&outer)
    );
    // A decision beyond the locations is refused, naming the block.
    let e = with_location(&outer, 2).unwrap_err().to_string();
    assert!(
        e.contains("sample_compute_location of block C_local")
            && e.contains("there are 2 locations"),
        "{e}"
    );
}

/// The loops around the write-back `C_local`.
fn sch_loops(sch: &Schedule) -> usize {
    let p = sch.program();
    p.ancestors(Node::Block(p.find_block("C_local")[0])).len()
}

/// The index of the trace's `sample_compute_location`.
fn location_inst(sch: &Schedule) -> usize {
    sch.trace()
        .insts
        .iter()
        .position(|i| i.kind == InstKind::SampleComputeLocation)
        .expect("a sample_compute_location")
}

/// `read_cache`: a second reader of a `cache_read`'s source reads the copy; the copy
/// moved under a loop then covers both readers, the result is the reference's, and the
/// trace prints and replays. Refused: a block that does not read the source, a block
/// that is not a copy, a copy already moved under a loop the reader is not under.
#[test]
fn read_cache_redirects_a_further_reader_to_the_copy() {
    let reference = crate::workload::parse(
        "workload rownorm\ninput X: f32[4, 6]\n\
         S[i] = sum(X[i, k], k: 6)\n\
         Y[i, j] = X[i, j] / S[i]\n",
    )
    .unwrap()
    .to_program();
    let mut sch = Schedule::new(reference.clone(), 0);
    let s = sch.get_block("S").unwrap();
    let y = sch.get_block("Y").unwrap();
    let copy = sch.cache_read(s, 0, "shared").unwrap();
    let e = rejected(&mut sch, |sch| sch.read_cache(copy, copy));
    assert_eq!(
        e.to_string(),
        "read_cache of block X_shared: it does not read X, which X_shared copies"
    );
    let e = rejected(&mut sch, |sch| sch.read_cache(y, s));
    assert_eq!(
        e.to_string(),
        "read_cache of block Y: S is not a copy made by cache_read"
    );
    sch.read_cache(y, copy).unwrap();
    let x_shared = |sch: &Schedule| {
        let p = sch.program();
        let at = p.buffers.iter().position(|b| b.name == "X_shared").unwrap();
        p.readers(crate::ir::BufferId(at as u32)).len()
    };
    assert_eq!(x_shared(&sch), 2);
    let rows = sch.get_loops(y).unwrap();
    sch.compute_at(s, rows[0]).unwrap();
    sch.compute_at(copy, rows[0]).unwrap();
    let err = crate::interp::check(&reference, sch.program(), 3).unwrap();
    assert!(err < 1e-6, "{err}");
    let text = sch.trace().to_string();
    assert!(text.contains("read_cache("), "{text}");
    let again = crate::schedule::replay(
        &crate::schedule::text::parse(&text).unwrap(),
        reference.clone(),
        0,
    )
    .unwrap();
    assert_eq!(again.program(), sch.program());

    // The copy moved under S's rows first: Y, outside them, may not read it; nor may
    // a reader that runs before it.
    let mut sch = Schedule::new(reference.clone(), 0);
    let s = sch.get_block("S").unwrap();
    let y = sch.get_block("Y").unwrap();
    let copy = sch.cache_read(s, 0, "shared").unwrap();
    let rows = sch.get_loops(s).unwrap();
    sch.compute_at(copy, rows[0]).unwrap();
    let e = rejected(&mut sch, |sch| sch.read_cache(y, copy));
    assert!(
        e.to_string()
            .ends_with("X_shared is under loop i, which it is not"),
        "{e}"
    );
    let mut sch = Schedule::new(reference, 0);
    let (s, y) = (sch.get_block("S").unwrap(), sch.get_block("Y").unwrap());
    let late = sch.cache_read(y, 0, "shared").unwrap();
    let rows = sch.get_loops(y).unwrap();
    sch.compute_at(late, rows[0]).unwrap();
    let e = rejected(&mut sch, |sch| sch.read_cache(s, late));
    assert!(e.to_string().ends_with("does not run before it"), "{e}");
}

/// `storage_widen` stores a cache stage of a 16-bit operand as f32: the program still
/// computes the reference and replays; a parameter, an f32 buffer and a stage that rounds
/// what it stores (not a copy) are refused, naming the buffer.
#[test]
fn storage_widen_stores_a_16_bit_copy_as_f32_and_refuses_the_rest() {
    let w = crate::workload::preset("matmul:m=16,n=24,k=32,dtype=f16,acc=f32").unwrap();
    let reference = crate::database::canonical_program(&w).unwrap();
    let mut sch = Schedule::new(reference.clone(), 0);
    let main = sch.get_block("t2").unwrap();
    let out = sch.get_block("t3").unwrap();
    let panel = sch.cache_read(main, 1, "local").unwrap();
    let l = sch.get_loops(main).unwrap();
    sch.compute_at(panel, l[0]).unwrap();
    let e = rejected(&mut sch, |s| s.storage_widen(main, 0));
    assert!(e.to_string().contains("only 16-bit float buffers"), "{e}");
    let e = rejected(&mut sch, |s| s.storage_widen(out, 0));
    assert!(e.to_string().contains("is a parameter"), "{e}");
    // The output's stage rounds the f32 sum into f16 (`t3` now writes it): not a copy.
    sch.cache_write(out, 0, "local").unwrap();
    let e = rejected(&mut sch, |s| s.storage_widen(out, 0));
    assert!(e.to_string().contains("not a copy"), "{e}");
    sch.storage_widen(panel, 0).unwrap();
    let p = sch.program();
    let pb = sch.block_id(panel).unwrap();
    assert_eq!(p.buffer(p.block(pb).body.buffer).dtype, DType::F32);
    let lowered = crate::lower::lower(p, crate::lower::Backend::Cpu).unwrap();
    let err = crate::interp::check_lowered(&reference, &lowered, 5).unwrap();
    assert!(err < 1e-2, "relative error {err}");
    let again = crate::schedule::replay(sch.trace(), reference, 0).unwrap();
    assert_eq!(print_program(again.program()), print_program(sch.program()));
}
