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
