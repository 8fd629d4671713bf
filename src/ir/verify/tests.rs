//! Tests of the verifier: one or more per invariant, each asserting the specific error,
//! plus valid programs that must pass and random corruptions that must not panic.

use super::*;
use crate::ir::expr::DType;
use crate::ir::program::{AnnValue, Buffer, Dim3, IterVar, Scope, StorageAlign};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn buffer(name: &str, shape: &[i64], scope: Scope, kind: BufferKind) -> Buffer {
    Buffer {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
        scope,
        kind,
        align: vec![],
        swizzle: false,
    }
}

fn iv(var: VarId, extent: i64, kind: IterKind) -> IterVar {
    IterVar { var, extent, kind }
}

fn v(x: VarId) -> Expr {
    Expr::Var(x)
}

fn c(x: i64) -> Expr {
    Expr::Int(x)
}

fn load(b: BufferId, idx: Vec<Expr>) -> Expr {
    Expr::Load(b, idx)
}

fn block(name: &str, iter_vars: Vec<IterVar>, bindings: Vec<Expr>, body: Store) -> Block {
    Block {
        name: name.into(),
        iter_vars,
        bindings,
        predicate: None,
        init: None,
        body,
        annotations: BTreeMap::new(),
    }
}

/// A tiled 64x64x32 matmul on the GPU, with a cache of `A` in shared memory:
///
/// ```text
/// for i_0 in 4 (blockIdx.y): for j_0 in 4 (blockIdx.x):
///   for ax0 in 16: for ax1 in 32 (vectorized):
///     block A_shared: v0 = i_0 * 16 + ax0, v1 = ax1
///       A_shared[v0, v1] = A[v0, v1]
///   for i_1 in 16 (threadIdx.y): for j_1 in 16 (threadIdx.x): for k in 32:
///     block C: vi = i_0 * 16 + i_1, vj = j_0 * 16 + j_1, vk = k (reduce)
///       init C[vi, vj] = 0.0
///       C[vi, vj] = C[vi, vj] + A_shared[vi, vk] * B[vk, vj]
/// ```
struct Matmul {
    p: Program,
    a: BufferId,
    a_shared: BufferId,
    c: BufferId,
    i0: LoopId,
    j0: LoopId,
    ax0: LoopId,
    ax1: LoopId,
    i1: LoopId,
    j1: LoopId,
    k: LoopId,
    cache: BlockId,
    comp: BlockId,
    v0: VarId,
    vi: VarId,
    vj: VarId,
    vk: VarId,
}

fn matmul() -> Matmul {
    let mut p = Program::new("matmul");
    let a = p.new_buffer(buffer("A", &[64, 32], Scope::Global, BufferKind::Input));
    let b = p.new_buffer(buffer("B", &[32, 64], Scope::Global, BufferKind::Input));
    let cb = p.new_buffer(buffer("C", &[64, 64], Scope::Global, BufferKind::Output));
    let a_shared = p.new_buffer(buffer(
        "A_shared",
        &[64, 32],
        Scope::Shared,
        BufferKind::Intermediate,
    ));
    p.params = vec![a, b, cb];
    p.allocs = vec![a_shared];
    let loops = [
        ("i_0", 4),
        ("j_0", 4),
        ("ax0", 16),
        ("ax1", 32),
        ("i_1", 16),
        ("j_1", 16),
        ("k", 32),
    ]
    .map(|(n, e)| p.new_loop(n, e, vec![]));
    let [i0, j0, ax0, ax1, i1, j1, k] = loops;
    let lv = |p: &Program, l: LoopId| v(p.lp(l).var);
    let [v0, v1, vi, vj, vk] = ["v0", "v1", "vi", "vj", "vk"].map(|n| p.new_var(n));
    let cache = block(
        "A_shared",
        vec![iv(v0, 64, IterKind::Spatial), iv(v1, 32, IterKind::Spatial)],
        vec![
            Expr::add(Expr::mul(lv(&p, i0), c(16)), lv(&p, ax0)),
            lv(&p, ax1),
        ],
        Store {
            buffer: a_shared,
            indices: vec![v(v0), v(v1)],
            value: load(a, vec![v(v0), v(v1)]),
        },
    );
    let mut comp = block(
        "C",
        vec![
            iv(vi, 64, IterKind::Spatial),
            iv(vj, 64, IterKind::Spatial),
            iv(vk, 32, IterKind::Reduce),
        ],
        vec![
            Expr::add(Expr::mul(lv(&p, i0), c(16)), lv(&p, i1)),
            Expr::add(Expr::mul(lv(&p, j0), c(16)), lv(&p, j1)),
            lv(&p, k),
        ],
        Store {
            buffer: cb,
            indices: vec![v(vi), v(vj)],
            value: Expr::add(
                load(cb, vec![v(vi), v(vj)]),
                Expr::mul(
                    load(a_shared, vec![v(vi), v(vk)]),
                    load(b, vec![v(vk), v(vj)]),
                ),
            ),
        },
    );
    comp.init = Some(Store {
        buffer: cb,
        indices: vec![v(vi), v(vj)],
        value: Expr::Float(0.0),
    });
    let cache = p.new_block(cache);
    let comp = p.new_block(comp);
    p.root = vec![Node::Loop(i0)];
    p.lp_mut(i0).body = vec![Node::Loop(j0)];
    p.lp_mut(j0).body = vec![Node::Loop(ax0), Node::Loop(i1)];
    p.lp_mut(ax0).body = vec![Node::Loop(ax1)];
    p.lp_mut(ax1).body = vec![Node::Block(cache)];
    p.lp_mut(i1).body = vec![Node::Loop(j1)];
    p.lp_mut(j1).body = vec![Node::Loop(k)];
    p.lp_mut(k).body = vec![Node::Block(comp)];
    p.lp_mut(i0).kind = LoopKind::Thread(ThreadTag::BlockIdx(Dim3::Y));
    p.lp_mut(j0).kind = LoopKind::Thread(ThreadTag::BlockIdx(Dim3::X));
    p.lp_mut(i1).kind = LoopKind::Thread(ThreadTag::ThreadIdx(Dim3::Y));
    p.lp_mut(j1).kind = LoopKind::Thread(ThreadTag::ThreadIdx(Dim3::X));
    p.lp_mut(ax1).kind = LoopKind::Vectorized;
    Matmul {
        p,
        a,
        a_shared,
        c: cb,
        i0,
        j0,
        ax0,
        ax1,
        i1,
        j1,
        k,
        cache,
        comp,
        v0,
        vi,
        vj,
        vk,
    }
}

/// `for i_0 in outer: for i_1 in 64: block C: vi = i_0 * 64 + i_1; C[vi] = A[vi]`,
/// with `extent` for `vi` and an optional predicate `i_0 * 64 + i_1 < extent`.
fn split_copy(outer: i64, extent: i64, predicated: bool) -> Program {
    let mut p = Program::new("copy");
    let a = p.new_buffer(buffer("A", &[extent], Scope::Global, BufferKind::Input));
    let cb = p.new_buffer(buffer("C", &[extent], Scope::Global, BufferKind::Output));
    p.params = vec![a, cb];
    let i0 = p.new_loop("i_0", outer, vec![]);
    let i1 = p.new_loop("i_1", 64, vec![]);
    let vi = p.new_var("vi");
    let fused = Expr::add(Expr::mul(v(p.lp(i0).var), c(64)), v(p.lp(i1).var));
    let mut blk = block(
        "C",
        vec![iv(vi, extent, IterKind::Spatial)],
        vec![fused.clone()],
        Store {
            buffer: cb,
            indices: vec![v(vi)],
            value: load(a, vec![v(vi)]),
        },
    );
    if predicated {
        blk.predicate = Some(Expr::lt(fused, c(extent)));
    }
    let b = p.new_block(blk);
    p.root = vec![Node::Loop(i0)];
    p.lp_mut(i0).body = vec![Node::Loop(i1)];
    p.lp_mut(i1).body = vec![Node::Block(b)];
    p
}

/// The first violation, asserting that `verify` and `verify_all` agree on it.
fn first_error(p: &Program) -> VerifyError {
    let all = verify_all(p);
    let first = verify(p).expect_err("the program should fail verification");
    assert_eq!(all.first(), Some(&first));
    first
}

#[test]
fn tiled_matmul_with_cache_and_threads_passes() {
    let m = matmul();
    assert_eq!(verify(&m.p), Ok(()));
    assert!(verify_all(&m.p).is_empty());
}

#[test]
fn unreachable_nodes_are_ignored() {
    let mut m = matmul();
    // A stale loop in the arena that shares a variable and has extent 0.
    let stale = m.p.new_loop("stale", 0, vec![Node::Block(m.comp)]);
    m.p.lp_mut(stale).var = m.p.lp(m.k).var;
    assert_eq!(verify(&m.p), Ok(()));
}

#[test]
fn predicate_allows_imperfect_tiles() {
    assert_eq!(verify(&split_copy(16, 1024, false)), Ok(()));
    assert_eq!(verify(&split_copy(17, 1024, true)), Ok(()));
}

#[test]
fn decomposed_reduction_passes() {
    // C_local is initialised by its own block, updated by a reduction without init,
    // then copied out.
    let mut p = Program::new("decomposed");
    let a = p.new_buffer(buffer("A", &[8, 4], Scope::Global, BufferKind::Input));
    let cl = p.new_buffer(buffer(
        "C_local",
        &[8],
        Scope::Local,
        BufferKind::Intermediate,
    ));
    let cb = p.new_buffer(buffer("C", &[8], Scope::Global, BufferKind::Output));
    p.params = vec![a, cb];
    p.allocs = vec![cl];
    let i = p.new_loop("i", 8, vec![]);
    let k = p.new_loop("k", 4, vec![]);
    let [vi0, vi1, vk, vi2] = ["vi", "vi", "vk", "vi"].map(|n| p.new_var(n));
    let (iv_, kv) = (p.lp(i).var, p.lp(k).var);
    let init = p.new_block(block(
        "C_init",
        vec![iv(vi0, 8, IterKind::Spatial)],
        vec![v(iv_)],
        Store {
            buffer: cl,
            indices: vec![v(vi0)],
            value: Expr::Float(0.0),
        },
    ));
    let update = p.new_block(block(
        "C_update",
        vec![iv(vi1, 8, IterKind::Spatial), iv(vk, 4, IterKind::Reduce)],
        vec![v(iv_), v(kv)],
        Store {
            buffer: cl,
            indices: vec![v(vi1)],
            value: Expr::add(load(cl, vec![v(vi1)]), load(a, vec![v(vi1), v(vk)])),
        },
    ));
    let out = p.new_block(block(
        "C",
        vec![iv(vi2, 8, IterKind::Spatial)],
        vec![v(iv_)],
        Store {
            buffer: cb,
            indices: vec![v(vi2)],
            value: load(cl, vec![v(vi2)]),
        },
    ));
    p.root = vec![Node::Loop(i)];
    p.lp_mut(i).body = vec![Node::Block(init), Node::Loop(k), Node::Block(out)];
    p.lp_mut(k).body = vec![Node::Block(update)];
    assert_eq!(verify(&p), Ok(()));
    // Swapping init and update makes the update read C_local first.
    p.lp_mut(i).body = vec![Node::Loop(k), Node::Block(init), Node::Block(out)];
    assert!(
        matches!(first_error(&p), VerifyError::ReadBeforeWrite { ref buffer, .. } if buffer == "C_local")
    );
}

#[test]
fn select_guarded_padding_loads_are_exempt() {
    // pad[vi] = if_then_else(1 <= vi and vi < 65, A[vi - 1], 0.0) over vi in [0, 66).
    let mut p = Program::new("pad");
    let a = p.new_buffer(buffer("A", &[64], Scope::Global, BufferKind::Input));
    let pad = p.new_buffer(buffer("pad", &[66], Scope::Global, BufferKind::Output));
    p.params = vec![a, pad];
    let i = p.new_loop("i", 66, vec![]);
    let vi = p.new_var("vi");
    let cond = Expr::and(Expr::ge(v(vi), c(1)), Expr::lt(v(vi), c(65)));
    let shifted = load(a, vec![Expr::sub(v(vi), c(1))]);
    let b = p.new_block(block(
        "pad",
        vec![iv(vi, 66, IterKind::Spatial)],
        vec![v(p.lp(i).var)],
        Store {
            buffer: pad,
            indices: vec![v(vi)],
            value: Expr::select(cond, shifted.clone(), Expr::Float(0.0)),
        },
    ));
    p.root = vec![Node::Loop(i)];
    p.lp_mut(i).body = vec![Node::Block(b)];
    assert_eq!(verify(&p), Ok(()));
    p.block_mut(b).body.value = shifted;
    let e = first_error(&p);
    assert!(
        matches!(
            e,
            VerifyError::AccessOutOfBounds {
                dim: 0,
                min: -1,
                max: 64,
                size: 64,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "block \"pad\": index 0 of A[vi - 1] ranges over [-1, 64], outside [0, 64) of A"
    );
}

// ----- 1. tree ------------------------------------------------------------------

#[test]
fn node_id_out_of_range() {
    let mut m = matmul();
    m.p.lp_mut(m.k).body.push(Node::Block(BlockId(99)));
    let e = first_error(&m.p);
    assert!(matches!(e, VerifyError::IdOutOfRange { .. }));
    assert_eq!(
        e.to_string(),
        "loop \"k\": block99 is out of range (the arena holds 2)"
    );
    assert_eq!(e.invariant(), 1);
}

#[test]
fn buffer_and_var_ids_out_of_range() {
    let mut m = matmul();
    m.p.block_mut(m.comp).body.value = load(BufferId(42), vec![]);
    assert!(
        matches!(first_error(&m.p), VerifyError::IdOutOfRange { ref id, .. } if id == "buffer42")
    );
    let mut m = matmul();
    m.p.lp_mut(m.k).var = VarId(1000);
    assert!(
        matches!(first_error(&m.p), VerifyError::IdOutOfRange { ref id, .. } if id == "var1000")
    );
    let mut m = matmul();
    m.p.allocs.push(BufferId(7));
    assert!(
        matches!(first_error(&m.p), VerifyError::IdOutOfRange { ref place, .. } if place == "allocs")
    );
}

#[test]
fn shared_node_is_reported() {
    let mut m = matmul();
    m.p.lp_mut(m.j1).body.push(Node::Block(m.cache));
    let e = first_error(&m.p);
    assert!(matches!(e, VerifyError::NodeReachedTwice { .. }));
    assert_eq!(
        e.to_string(),
        "block \"A_shared\" is reached twice: under loop \"ax1\" and under loop \"j_1\""
    );
}

#[test]
fn cycle_is_reported_and_ends() {
    let mut m = matmul();
    m.p.lp_mut(m.k).body.push(Node::Loop(m.i0));
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::NodeReachedTwice { ref second, .. } if second == "loop \"k\""),
        "{e}"
    );
}

// ----- 2. loops -----------------------------------------------------------------

/// `Schedule::annotate`, `storage_align` and `storage_swizzle` do not run the verifier
/// again: annotations and storage hints, whatever they say, change neither a passing
/// program's verdict nor a failing one's errors.
#[test]
fn annotations_and_storage_hints_change_no_verdict() {
    let annotate_everything = |p: &mut Program| {
        for l in &mut p.loops {
            l.annotations
                .insert("software_pipeline_stage".into(), AnnValue::Ints(vec![9]));
            l.annotations
                .insert("pragma_auto_unroll_max_step".into(), AnnValue::Int(-1));
        }
        for b in &mut p.blocks {
            b.annotations.insert(
                "meta_schedule.tiling_structure".into(),
                AnnValue::Str("?".into()),
            );
        }
        for b in &mut p.buffers {
            b.swizzle = true;
            b.align.push(StorageAlign {
                axis: 7,
                factor: 0,
                offset: -1,
            });
        }
    };
    let mut m = matmul();
    annotate_everything(&mut m.p);
    assert_eq!(verify(&m.p), Ok(()));
    let mut bad = matmul();
    bad.p.lp_mut(bad.ax0).extent = 0;
    let errors = verify_all(&bad.p);
    annotate_everything(&mut bad.p);
    assert!(!errors.is_empty());
    assert_eq!(verify_all(&bad.p), errors);
}

#[test]
fn loop_extent_below_one() {
    let mut m = matmul();
    m.p.lp_mut(m.ax0).extent = 0;
    assert!(
        matches!(first_error(&m.p), VerifyError::LoopExtent { ref lp, extent: 0 } if lp == "ax0")
    );
}

#[test]
fn loops_sharing_a_variable() {
    let mut m = matmul();
    m.p.lp_mut(m.j1).var = m.p.lp(m.i1).var;
    let e = first_error(&m.p);
    assert!(matches!(e, VerifyError::DuplicateVar { .. }), "{e}");
    assert_eq!(e.invariant(), 2);
}

#[test]
fn loop_variable_reused_as_iter_var() {
    let mut m = matmul();
    let kv = m.p.lp(m.k).var;
    m.p.block_mut(m.comp).iter_vars[2].var = kv;
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::DuplicateVar { ref second, .. } if second == "block \"C\""),
        "{e}"
    );
}

// ----- 3. bindings --------------------------------------------------------------

#[test]
fn binding_count_differs() {
    let mut m = matmul();
    m.p.block_mut(m.comp).bindings.pop();
    assert!(matches!(
        first_error(&m.p),
        VerifyError::BindingCount {
            iter_vars: 3,
            bindings: 2,
            ..
        }
    ));
}

#[test]
fn iter_var_declared_twice() {
    let mut m = matmul();
    m.p.block_mut(m.comp).iter_vars[1].var = m.vi;
    assert!(
        matches!(first_error(&m.p), VerifyError::DuplicateIterVar { ref iter_var, .. } if iter_var == "vi")
    );
}

#[test]
fn binding_uses_a_loop_that_does_not_enclose_the_block() {
    let mut m = matmul();
    let ax0 = m.p.lp(m.ax0).var;
    m.p.block_mut(m.comp).bindings[2] = v(ax0);
    let e = first_error(&m.p);
    assert!(matches!(e, VerifyError::BindingScope { ref var, .. } if var == "ax0"));
    assert_eq!(
        e.to_string(),
        "block \"C\": binding of vk = ax0 uses ax0, which is not the variable of an enclosing loop"
    );
}

#[test]
fn predicate_uses_a_foreign_variable() {
    let mut m = matmul();
    let ax1 = m.p.lp(m.ax1).var;
    m.p.block_mut(m.comp).predicate = Some(Expr::lt(v(ax1), c(4)));
    assert!(
        matches!(first_error(&m.p), VerifyError::PredicateScope { ref var, .. } if var == "ax1")
    );
}

// ----- 4. block bodies ----------------------------------------------------------

#[test]
fn body_uses_a_loop_variable() {
    let mut m = matmul();
    let kv = m.p.lp(m.k).var;
    let blk = m.p.block_mut(m.comp);
    blk.body.value = Expr::add(
        blk.body.value.clone(),
        Expr::Cast(DType::F32, Box::new(v(kv))),
    );
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::StoreScope { role: StoreRole::Body, ref var, .. } if var == "k"),
        "{e}"
    );
    assert_eq!(e.invariant(), 4);
}

#[test]
fn init_uses_another_blocks_iter_var() {
    let mut m = matmul();
    let v0 = m.v0;
    if let Some(init) = &mut m.p.block_mut(m.comp).init {
        init.value = Expr::Cast(DType::F32, Box::new(v(v0)));
    }
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::StoreScope { role: StoreRole::Init, ref var, .. } if var == "v0"),
        "{e}"
    );
}

// ----- 5. binding ranges --------------------------------------------------------

#[test]
fn binding_overflows_its_iter_var() {
    let e = first_error(&split_copy(17, 1024, false));
    assert!(matches!(
        e,
        VerifyError::BindingRange {
            min: 0,
            max: 1087,
            extent: 1024,
            ..
        }
    ));
    assert_eq!(
        e.to_string(),
        "block \"C\": binding of vi = i_0 * 64 + i_1 ranges over [0, 1087], outside [0, 1024)"
    );
}

#[test]
fn predicate_does_not_excuse_a_negative_binding() {
    let mut p = split_copy(17, 1024, true);
    let b = p.blocks_in_order()[0];
    let shifted = Expr::sub(p.block(b).bindings[0].clone(), c(1));
    p.block_mut(b).bindings[0] = shifted;
    let e = first_error(&p);
    assert!(
        matches!(
            e,
            VerifyError::BindingRange {
                min: -1,
                predicated: true,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unbounded_binding_fails() {
    let mut m = matmul();
    let kv = m.p.lp(m.k).var;
    m.p.block_mut(m.comp).bindings[2] = Expr::bin(BinOp::Div, v(kv), c(2));
    let e = first_error(&m.p);
    assert!(
        matches!(
            e,
            VerifyError::BindingRange {
                min: i64::MIN,
                max: i64::MAX,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("[-inf, +inf]"), "{e}");
}

#[test]
fn iter_var_extent_below_one() {
    let mut m = matmul();
    m.p.block_mut(m.comp).iter_vars[0].extent = 0;
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::IterVarExtent { extent: 0, .. }),
        "{e}"
    );
    assert_eq!(e.invariant(), 5);
}

// ----- 6. reductions ------------------------------------------------------------

#[test]
fn init_on_a_spatial_block() {
    let mut m = matmul();
    let body = m.p.block(m.cache).body.clone();
    m.p.block_mut(m.cache).init = Some(body);
    assert!(
        matches!(first_error(&m.p), VerifyError::InitWithoutReduce { ref block } if block == "A_shared")
    );
}

#[test]
fn init_writes_elsewhere_than_the_body() {
    let mut m = matmul();
    let (vi, vj) = (m.vi, m.vj);
    if let Some(init) = &mut m.p.block_mut(m.comp).init {
        init.indices = vec![v(vj), v(vi)];
    }
    let e = first_error(&m.p);
    assert!(matches!(e, VerifyError::InitMismatch { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "block \"C\": init writes C[vj, vi] but the body writes C[vi, vj]"
    );
}

#[test]
fn store_indexed_by_a_reduce_var() {
    let mut m = matmul();
    let (vi, vk) = (m.vi, m.vk);
    let blk = m.p.block_mut(m.comp);
    blk.body.indices = vec![v(vi), v(vk)];
    if let Some(init) = &mut blk.init {
        init.indices = vec![v(vi), v(vk)];
    }
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::ReduceVarInStoreIndex { role: StoreRole::Body, ref iter_var, .. } if iter_var == "vk")
    );
}

// ----- 7. buffers ---------------------------------------------------------------

#[test]
fn undeclared_buffer() {
    let mut m = matmul();
    m.p.allocs.clear();
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::UndeclaredBuffer { ref buffer, .. } if buffer == "A_shared"),
        "{e}"
    );
}

#[test]
fn index_count_differs_from_rank() {
    let mut m = matmul();
    let (a, v0) = (m.a, m.v0);
    m.p.block_mut(m.cache).body.value = load(a, vec![v(v0)]);
    let e = first_error(&m.p);
    assert!(
        matches!(
            e,
            VerifyError::IndexCount {
                indices: 1,
                rank: 2,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn store_to_an_input() {
    let mut m = matmul();
    m.p.block_mut(m.cache).body.buffer = m.a;
    assert!(
        matches!(first_error(&m.p), VerifyError::StoreToInput { ref buffer, .. } if buffer == "A")
    );
}

#[test]
fn load_out_of_bounds() {
    let mut m = matmul();
    let (a_shared, vi, vk) = (m.a_shared, m.vi, m.vk);
    let blk = m.p.block_mut(m.comp);
    blk.body.value = load(a_shared, vec![v(vi), Expr::add(v(vk), c(1))]);
    let e = first_error(&m.p);
    assert!(
        matches!(
            e,
            VerifyError::AccessOutOfBounds {
                dim: 1,
                min: 1,
                max: 32,
                size: 32,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.invariant(), 7);
}

#[test]
fn store_out_of_bounds() {
    let mut m = matmul();
    m.p.buffer_mut(m.c).shape = vec![64, 48];
    let e = first_error(&m.p);
    assert!(
        matches!(
            e,
            VerifyError::AccessOutOfBounds {
                max: 63,
                size: 48,
                ..
            }
        ),
        "{e}"
    );
}

// ----- 8. thread bindings -------------------------------------------------------

#[test]
fn same_tag_nested_with_another_extent() {
    let mut m = matmul();
    m.p.lp_mut(m.i1).kind = LoopKind::Thread(ThreadTag::ThreadIdx(Dim3::X));
    m.p.lp_mut(m.i1).extent = 8;
    let e = first_error(&m.p);
    assert!(
        matches!(
            e,
            VerifyError::ThreadExtentMismatch {
                outer_extent: 8,
                inner_extent: 16,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn block_idx_under_thread_idx() {
    let mut m = matmul();
    m.p.lp_mut(m.k).kind = LoopKind::Thread(ThreadTag::BlockIdx(Dim3::Z));
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::BlockIdxUnderThread { ref inner, .. } if inner == "k"),
        "{e}"
    );
}

#[test]
fn reduce_bound_to_a_thread_loop() {
    let mut m = matmul();
    m.p.lp_mut(m.k).kind = LoopKind::Thread(ThreadTag::ThreadIdx(Dim3::Z));
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::ReduceOverThread { ref lp, .. } if lp == "k"),
        "{e}"
    );
    assert_eq!(e.invariant(), 8);
}

#[test]
fn reduction_under_a_repeated_tag() {
    let mut m = matmul();
    m.p.lp_mut(m.i1).kind = LoopKind::Thread(ThreadTag::ThreadIdx(Dim3::X));
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::ReduceUnderRepeatedTag { ref outer, ref inner, .. } if outer == "i_1" && inner == "j_1"),
        "{e}"
    );
}

// ----- 9. loop kinds ------------------------------------------------------------

#[test]
fn vectorized_loop_with_a_loop_body() {
    let mut m = matmul();
    m.p.lp_mut(m.ax0).kind = LoopKind::Vectorized;
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::VectorizedNotInnermost { ref lp } if lp == "ax0"),
        "{e}"
    );
}

#[test]
fn reduce_over_vectorized_or_parallel_loop() {
    for (kind, name) in [
        (LoopKind::Vectorized, "vectorized"),
        (LoopKind::Parallel, "parallel"),
    ] {
        let mut m = matmul();
        m.p.lp_mut(m.k).kind = kind;
        let e = first_error(&m.p);
        assert!(
            matches!(e, VerifyError::ReduceOverParallelLoop { kind, .. } if kind == name),
            "{e}"
        );
        assert_eq!(e.invariant(), 9);
    }
}

// ----- 10. dataflow order -------------------------------------------------------

#[test]
fn cache_read_after_its_consumer() {
    let mut m = matmul();
    m.p.lp_mut(m.j0).body = vec![Node::Loop(m.i1), Node::Loop(m.ax0)];
    let e = first_error(&m.p);
    assert!(
        matches!(e, VerifyError::ReadBeforeWrite { ref block, ref buffer } if block == "C" && buffer == "A_shared")
    );
    assert_eq!(
        e.to_string(),
        "block \"C\" reads A_shared before any block writes it"
    );
}

#[test]
fn output_never_written() {
    let mut m = matmul();
    let d =
        m.p.new_buffer(buffer("D", &[4], Scope::Global, BufferKind::Output));
    m.p.params.push(d);
    assert!(
        matches!(first_error(&m.p), VerifyError::OutputNotWritten { ref buffer } if buffer == "D")
    );
}

// ----- 11. names ----------------------------------------------------------------

#[test]
fn duplicate_block_names() {
    let mut m = matmul();
    m.p.block_mut(m.cache).name = "C".into();
    let e = first_error(&m.p);
    assert!(matches!(e, VerifyError::DuplicateBlockName { ref name } if name == "C"));
    assert_eq!(e.invariant(), 11);
}

// ----- robustness ---------------------------------------------------------------

#[test]
fn verify_all_reports_every_violation() {
    let mut m = matmul();
    m.p.lp_mut(m.ax0).extent = 0;
    m.p.block_mut(m.cache).name = "C".into();
    let all = verify_all(&m.p);
    assert!(all
        .iter()
        .any(|e| matches!(e, VerifyError::LoopExtent { .. })));
    assert!(all
        .iter()
        .any(|e| matches!(e, VerifyError::DuplicateBlockName { .. })));
}

#[test]
fn expressions_print_with_precedence() {
    let m = matmul();
    let [a, b, x] = [m.vi, m.vj, m.vk].map(v);
    let e = Expr::mul(
        Expr::sub(a.clone(), Expr::sub(b.clone(), x.clone())),
        Expr::bin(BinOp::FloorMod, x, c(8)),
    );
    assert_eq!(
        ShowExpr {
            program: &m.p,
            expr: &e
        }
        .to_string(),
        "(vi - (vj - vk)) * (vk % 8)"
    );
    let e = Expr::bin(
        BinOp::Min,
        Expr::Un(UnOp::Neg, Box::new(a)),
        load(m.c, vec![b, c(0)]),
    );
    assert_eq!(
        ShowExpr {
            program: &m.p,
            expr: &e
        }
        .to_string(),
        "min(-vi, C[vj, 0])"
    );
}

/// Random corruptions of a valid program: the verifier never panics, and `verify`
/// returns the first error of `verify_all`.
#[test]
fn corrupted_programs_never_panic() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    for _ in 0..3000 {
        let mut m = matmul();
        for _ in 0..rng.gen_range(1..4) {
            let p = &mut m.p;
            let (nl, nb, nv, nbuf) = (
                p.loops.len() as u32,
                p.blocks.len() as u32,
                p.vars.len() as u32,
                6,
            );
            let l = rng.gen_range(0..nl) as usize;
            let b = rng.gen_range(0..nb) as usize;
            match rng.gen_range(0..12) {
                0 => p.loops[l]
                    .body
                    .push(Node::Loop(LoopId(rng.gen_range(0..nl + 2)))),
                1 => p.loops[l]
                    .body
                    .push(Node::Block(BlockId(rng.gen_range(0..nb + 2)))),
                2 => p.loops[l].var = VarId(rng.gen_range(0..nv + 2)),
                3 => p.loops[l].extent = rng.gen_range(-2..70),
                4 => {
                    let tags = [
                        ThreadTag::BlockIdx(Dim3::X),
                        ThreadTag::ThreadIdx(Dim3::X),
                        ThreadTag::VThread(Dim3::Y),
                    ];
                    let kinds = [
                        LoopKind::Serial,
                        LoopKind::Vectorized,
                        LoopKind::Parallel,
                        LoopKind::Thread(tags[rng.gen_range(0..3)]),
                    ];
                    p.loops[l].kind = kinds[rng.gen_range(0..4)];
                }
                5 => {
                    let n = p.blocks[b].iter_vars.len();
                    p.blocks[b].iter_vars[rng.gen_range(0..n)].var =
                        VarId(rng.gen_range(0..nv + 2));
                }
                6 => p.blocks[b].body.buffer = BufferId(rng.gen_range(0..nbuf)),
                7 => {
                    p.blocks[b].body.value = load(
                        BufferId(rng.gen_range(0..nbuf)),
                        vec![v(VarId(rng.gen_range(0..nv + 2)))],
                    )
                }
                8 => p.blocks[b].bindings.truncate(rng.gen_range(0..3)),
                9 => p.root.push(Node::Loop(LoopId(rng.gen_range(0..nl + 2)))),
                10 => p.params.push(BufferId(rng.gen_range(0..nbuf))),
                _ => p.blocks[b].iter_vars[0].extent = rng.gen_range(-2..2),
            }
        }
        let all = verify_all(&m.p);
        assert_eq!(verify(&m.p).err(), all.first().cloned());
        for e in &all {
            assert!((1..=11).contains(&e.invariant()));
            assert!(!e.to_string().is_empty());
        }
    }
}
