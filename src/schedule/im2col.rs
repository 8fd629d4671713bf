//! `im2col`: a convolution rewritten as a GEMM over two-dimensional buffers, the
//! implicit-GEMM view made explicit (MetaSchedule reaches the same form with `reindex` and
//! `transform_block_layout`), so that the schedules of GEMMs, the tensor-core ones among
//! them, apply to it.
//!
//! The block must be an einsum of two factors (`pad_einsum`'s form): the data, read at
//! index expressions (`p * stride + r`), and the weights, read at iteration variables. Its
//! spatial variables fall into those the data reads (a conv's n, p, q: the GEMM's rows M)
//! and those the weights read (k: its columns N), its reduction variables (c, r, s) make
//! the GEMM's K, the rows and columns in the block's order of their variables, K in the
//! order of the data's axes that read them (so the data's contiguous axis, a
//! channels-last input's channel, is K's fastest digit). A variable read by both
//! factors (a batch) or by neither is refused. Then:
//!
//! * a new stage `X_im2col[m, kk] = X[..]` holds the data at the GEMM's rows and reduction
//!   steps (the window expressions of the digits of `m` and `kk`: `n = m / (P*Q)`,
//!   `p = m / Q % P`, ...), and `W_2d` the weights as a matrix, `[K, N]` where the weights'
//!   last axis is a column variable (a conv's `r, s, c, k` weights: rows of k), else
//!   `[N, K]` (`k, c, r, s`), so each keeps its contiguous axis;
//! * the block becomes `O_2d[m, n] += f(X_im2col[m, kk]) * g(W_2d[..])` over three loops
//!   (`f`, `g` the factors' conversions, kept) where the output's last axis is a channel
//!   (NHWC), and the transposed GEMM `O_2d[n, m]` where it is a pixel (NCHW): either way
//!   a row of `O_2d` is a run of neighbouring output elements;
//! * the result goes back to the conv's layout by one elementwise block over `O_2d`'s
//!   indices that stores at their digits: the block that read the output (a conversion to
//!   a 16-bit output, an epilogue), rewritten so, where the output was an intermediate
//!   only it read; else a new copy `O_2d -> O`.
//!
//! The new stages are elementwise: a schedule inlines the data's padding into
//! `X_im2col` and both stages into its shared-memory fetches (`compute_inline`), and the
//! copy back into the write-back (`reverse_compute_inline`: it reads `O_2d` at its own
//! iteration variables).

use super::error::{Result, ScheduleError};
use super::pad_einsum::{einsum, new_global};
use super::util::{self, replace_node};
use crate::ir::{
    Block, BlockId, BufferId, BufferKind, Expr, IterKind, IterVar, Node, Program, Store, VarId,
};
use std::collections::BTreeMap;

fn refuse(p: &Program, b: BlockId, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::Unsupported {
        primitive: "im2col",
        block: p.block(b).name.clone(),
        reason: reason.into(),
    }
}

/// What `im2col` made: the names of the new blocks, for a schedule to find them.
#[derive(Clone, Debug, PartialEq)]
pub struct Im2col {
    /// The block computing the data at the GEMM's rows and reduction steps.
    pub data: String,
    /// The block computing the weights as a matrix.
    pub weights: String,
    /// The block storing the GEMM's result in the conv's layout.
    pub back: String,
}

/// One group of iteration variables (outermost first) with their extents.
#[derive(Default)]
struct Group {
    vars: Vec<VarId>,
    extents: Vec<i64>,
}

impl Group {
    fn size(&self) -> i64 {
        self.extents.iter().product()
    }

    /// Each variable of the group as a digit of `t` ([`util::digits`]), for `t` within the
    /// group's size.
    fn digits(&self, t: VarId) -> Vec<(VarId, Expr)> {
        self.vars
            .iter()
            .copied()
            .zip(util::digits(t, &self.extents))
            .collect()
    }
}

/// The variables of two groups as the digits of `a` and `b`.
fn digits(ga: &Group, a: VarId, gb: &Group, b: VarId) -> BTreeMap<VarId, Expr> {
    ga.digits(a).into_iter().chain(gb.digits(b)).collect()
}

/// Indices with variables replaced as `map` says.
fn at(idx: &[Expr], map: &BTreeMap<VarId, Expr>) -> Vec<Expr> {
    idx.iter()
        .map(|e| e.substitute(&|u| map.get(&u).cloned()))
        .collect()
}

/// Rewrites convolution block `b` as a GEMM (see the module doc); the new blocks' names.
pub fn im2col(p: &mut Program, b: BlockId) -> Result<Im2col> {
    // 1. The einsum, its two factors and the three groups of variables.
    let es = einsum(p, b).map_err(|e| match e {
        ScheduleError::Unsupported { block, reason, .. } => ScheduleError::Unsupported {
            primitive: "im2col",
            block,
            reason,
        },
        other => other,
    })?;
    let blk = p.block(b).clone();
    let [(xa, xi), (wa, wi)] = es.factors.as_slice() else {
        return Err(refuse(
            p,
            b,
            format!("it multiplies {} factors, not two", es.factors.len()),
        ));
    };
    let pure = |idx: &[Expr]| idx.iter().all(|e| matches!(e, Expr::Var(_)));
    let ((x, x_idx), (w, w_idx)) = match (pure(xi), pure(wi)) {
        (false, true) => ((*xa, xi.clone()), (*wa, wi.clone())),
        (true, false) => ((*wa, wi.clone()), (*xa, xi.clone())),
        _ => {
            return Err(refuse(
                p,
                b,
                "it has no single factor read at window expressions (the data) beside one read at its iteration variables (the weights)",
            ))
        }
    };
    if x == w {
        return Err(refuse(p, b, "its two factors read one buffer"));
    }
    let reads = |idx: &[Expr], v: VarId| idx.iter().any(|e| e.uses_var(v));
    let (mut rows, mut cols, mut red) = (Group::default(), Group::default(), Group::default());
    for iv in &blk.iter_vars {
        let group = match (iv.kind, reads(&x_idx, iv.var), reads(&w_idx, iv.var)) {
            (IterKind::Reduce, _, _) => &mut red,
            (IterKind::Spatial, true, false) => &mut rows,
            (IterKind::Spatial, false, true) => &mut cols,
            (_, both, _) => {
                return Err(refuse(
                    p,
                    b,
                    format!(
                        "its spatial variable {} is read by {} factors (a batch axis)",
                        p.var_name(iv.var),
                        if both { "both" } else { "neither of its" }
                    ),
                ))
            }
        };
        group.vars.push(iv.var);
        group.extents.push(iv.extent);
    }
    // The reduction's digits in the order of the data's axes that read them, so that the
    // data's contiguous axis (a channels-last input's channel) is K's fastest digit.
    let axis_of = |v: &VarId| x_idx.iter().position(|e| e.uses_var(*v));
    let mut order: Vec<(VarId, i64)> = red.vars.iter().copied().zip(red.extents.clone()).collect();
    order.sort_by_key(|(v, _)| axis_of(v));
    (red.vars, red.extents) = order.into_iter().unzip();
    if rows.vars.is_empty() || cols.vars.is_empty() || red.vars.is_empty() {
        return Err(refuse(p, b, "it lacks rows, columns or a reduction"));
    }
    let (m, n, k) = (rows.size(), cols.size(), red.size());
    // The GEMM's columns are the group of the output's last axis, so that a row of the
    // result is a run of neighbouring output elements: the channels where they are last
    // (NHWC), else the pixels (NCHW, whose GEMM is the transposed one, weights x data).
    let swap = matches!(blk.body.indices.last(), Some(Expr::Var(v)) if rows.vars.contains(v));
    let (first, second) = if swap { (&cols, &rows) } else { (&rows, &cols) };
    let (e1, e2) = (first.size(), second.size());
    let out = blk.body.buffer;
    let root_pos = p
        .root
        .iter()
        .position(|nd| *nd == Node::Loop(es.loops[0]))
        .ok_or_else(|| refuse(p, b, "its nest is not at the root"))?;
    // The block that reads the output back, where it is an intermediate only it reads.
    let back_reader = match p.buffer(out).kind {
        BufferKind::Output => None,
        BufferKind::Intermediate => {
            let readers: Vec<BlockId> = p.readers(out).into_iter().filter(|r| *r != b).collect();
            match readers.as_slice() {
                [r] => Some(check_reader(p, *r, out, &blk.body.indices)?),
                _ => {
                    return Err(refuse(
                        p,
                        b,
                        format!(
                            "its output {} is read by {} blocks, not one",
                            p.buffer(out).name,
                            readers.len()
                        ),
                    ))
                }
            }
        }
        _ => {
            return Err(refuse(
                p,
                b,
                "it does not write an output or an intermediate",
            ))
        }
    };
    // 2. The two-dimensional buffers.
    let w_rows_k = matches!(w_idx.last(), Some(Expr::Var(v)) if cols.vars.contains(v));
    let x2 = new_global(p, x, "im2col", vec![m, k]);
    let w2 = new_global(p, w, "2d", if w_rows_k { vec![k, n] } else { vec![n, k] });
    let o2 = new_global(p, out, "2d", vec![e1, e2]);
    // 3. The stages: data and weights at the digits of the GEMM's indices.
    let x_name = p.fresh_block_name(&p.buffer(x2).name.clone());
    let x_nest = nest(p, &x_name, &[("m", m), ("k", k)], |v| {
        let idx = at(&x_idx, &digits(&rows, v[0], &red, v[1]));
        (
            x2,
            vec![Expr::Var(v[0]), Expr::Var(v[1])],
            Expr::Load(x, idx),
        )
    });
    let w_name = p.fresh_block_name(&p.buffer(w2).name.clone());
    let w_dims: [(&str, i64); 2] = if w_rows_k {
        [("k", k), ("n", n)]
    } else {
        [("n", n), ("k", k)]
    };
    let w_nest = nest(p, &w_name, &w_dims, |v| {
        let (vk, vn) = if w_rows_k { (v[0], v[1]) } else { (v[1], v[0]) };
        let idx = at(&w_idx, &digits(&cols, vn, &red, vk));
        (
            w2,
            vec![Expr::Var(v[0]), Expr::Var(v[1])],
            Expr::Load(w, idx),
        )
    });
    // 4. The GEMM over three loops.
    let (gi, gj, gk) = (p.new_var("i"), p.new_var("j"), p.new_var("k"));
    let lk = p.new_loop("k", k, vec![Node::Block(b)]);
    let lj = p.new_loop("j", e2, vec![Node::Loop(lk)]);
    let li = p.new_loop("i", e1, vec![Node::Loop(lj)]);
    let o_idx = vec![Expr::Var(gi), Expr::Var(gj)];
    // The data's row and the weights' column among the GEMM's two.
    let (gm, gn) = if swap { (gj, gi) } else { (gi, gj) };
    let w2_idx = if w_rows_k {
        vec![Expr::Var(gk), Expr::Var(gn)]
    } else {
        vec![Expr::Var(gn), Expr::Var(gk)]
    };
    let value = blk.body.value.rewrite(&mut |e| match e {
        Expr::Load(a, _) if a == x => Expr::Load(x2, vec![Expr::Var(gm), Expr::Var(gk)]),
        Expr::Load(a, _) if a == w => Expr::Load(w2, w2_idx.clone()),
        Expr::Load(a, _) if a == out => Expr::Load(o2, o_idx.clone()),
        other => other,
    });
    let bindings = [li, lj, lk]
        .iter()
        .map(|l| Expr::Var(p.lp(*l).var))
        .collect();
    {
        let nb = p.block_mut(b);
        nb.iter_vars = vec![
            IterVar {
                var: gi,
                extent: e1,
                kind: IterKind::Spatial,
            },
            IterVar {
                var: gj,
                extent: e2,
                kind: IterKind::Spatial,
            },
            IterVar {
                var: gk,
                extent: k,
                kind: IterKind::Reduce,
            },
        ];
        nb.bindings = bindings;
        nb.body = Store {
            buffer: o2,
            indices: o_idx.clone(),
            value,
        };
        if let Some(init) = &mut nb.init {
            init.buffer = o2;
            init.indices = o_idx;
        }
    }
    replace_node(p, Node::Loop(es.loops[0]), Node::Loop(li));
    // 5. Back to the conv's layout: each output index as the digits of (m, n).
    let out_vars: Vec<VarId> = blk
        .body
        .indices
        .iter()
        .map(|e| match e {
            Expr::Var(v) => *v,
            _ => unreachable!("einsum stores at its iteration variables"),
        })
        .collect();
    let back_name;
    let back_nest = match back_reader {
        None => {
            back_name = p.fresh_block_name(&format!("{}_copy", p.buffer(o2).name));
            nest(p, &back_name, &[("i", e1), ("j", e2)], |v| {
                let map = digits(first, v[0], second, v[1]);
                let idx = out_vars.iter().map(|u| map[u].clone()).collect();
                (
                    out,
                    idx,
                    Expr::Load(o2, vec![Expr::Var(v[0]), Expr::Var(v[1])]),
                )
            })
        }
        Some(reader) => {
            back_name = p.block(reader.block).name.clone();
            let node = renest(p, reader.block, &[("i", e1), ("j", e2)], |v, old| {
                // The reader's variable at output position d is the main block's d-th
                // store variable: the digit of i or j that variable is.
                let digits = digits(first, v[0], second, v[1]);
                let map: BTreeMap<VarId, Expr> = reader
                    .vars
                    .iter()
                    .zip(&out_vars)
                    .map(|(r, u)| (*r, digits[u].clone()))
                    .collect();
                let sub = |e: &Expr| e.substitute(&|u| map.get(&u).cloned());
                let value = sub(&old.body.value.rewrite(&mut |e| match e {
                    Expr::Load(a, _) if a == out => {
                        Expr::Load(o2, vec![Expr::Var(v[0]), Expr::Var(v[1])])
                    }
                    other => other,
                }));
                (
                    old.body.buffer,
                    old.body.indices.iter().map(sub).collect(),
                    value,
                )
            });
            replace_node(p, reader.root, node);
            p.allocs.retain(|a| *a != out);
            node
        }
    };
    // 6. In order: the stages, the GEMM, the copy back (a rewritten reader stays where it
    //    was, after the GEMM).
    p.root.insert(root_pos, w_nest);
    p.root.insert(root_pos, x_nest);
    if !p.root.contains(&back_nest) {
        p.root.insert(root_pos + 3, back_nest);
    }
    Ok(Im2col {
        data: x_name,
        weights: w_name,
        back: back_name,
    })
}

/// The block that reads an intermediate output back, checked: elementwise, alone in a
/// perfect nest of its own loops at the root, reading `out` at its own iteration
/// variables.
struct Reader {
    block: BlockId,
    /// Its root node.
    root: Node,
    /// Its iteration variable read at each position of `out`.
    vars: Vec<VarId>,
}

fn check_reader(p: &Program, r: BlockId, out: BufferId, store: &[Expr]) -> Result<Reader> {
    let blk = p.block(r);
    let no = |why: &str| {
        refuse(
            p,
            r,
            format!("im2col rewrites the block that reads the conv's output back, and {why}"),
        )
    };
    if blk.is_reduction() || blk.init.is_some() || blk.predicate.is_some() {
        return Err(no("it is not elementwise"));
    }
    let loops = p.ancestors(Node::Block(r));
    if loops.len() != blk.iter_vars.len()
        || loops
            .iter()
            .zip(&blk.bindings)
            .any(|(l, e)| *e != Expr::Var(p.lp(*l).var) || !p.lp(*l).annotations.is_empty())
        || loops.windows(2).any(|w| p.lp(w[0]).body.len() != 1)
    {
        return Err(no(
            "it is not alone in an unscheduled nest of its own loops",
        ));
    }
    let root = Node::Loop(loops[0]);
    if !p.root.contains(&root) {
        return Err(no("its nest is not at the root"));
    }
    let reads: Vec<Vec<Expr>> = p
        .block_reads(r)
        .into_iter()
        .filter(|(b, _)| *b == out)
        .map(|(_, i)| i)
        .collect();
    let vars: Option<Vec<VarId>> = match reads.as_slice() {
        [idx] if idx.len() == store.len() => idx
            .iter()
            .map(|e| match e {
                Expr::Var(v) if blk.iter_vars.iter().any(|iv| iv.var == *v) => Some(*v),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    let vars =
        vars.ok_or_else(|| no("it does not read the output once at its iteration variables"))?;
    if vars.len() != blk.iter_vars.len() {
        return Err(no("it has iteration variables the output does not"));
    }
    Ok(Reader {
        block: r,
        root,
        vars,
    })
}

/// A new perfect nest of spatial loops over `dims` (name, extent) around a new block
/// `name`, whose store `f` gives from its iteration variables.
fn nest(
    p: &mut Program,
    name: &str,
    dims: &[(&str, i64)],
    f: impl FnOnce(&[VarId]) -> (BufferId, Vec<Expr>, Expr),
) -> Node {
    let vars: Vec<VarId> = dims
        .iter()
        .map(|(n, _)| p.new_var(format!("v{n}")))
        .collect();
    let (buffer, indices, value) = f(&vars);
    build(
        p,
        None,
        name,
        BTreeMap::new(),
        dims,
        vars,
        Store {
            buffer,
            indices,
            value,
        },
    )
}

/// Block `id` again, over a new perfect nest of spatial loops over `dims` (its name and
/// annotations kept, its id too, so that a schedule's handle on it stays valid), `f`
/// giving its store from the new iteration variables and the old block.
fn renest(
    p: &mut Program,
    id: BlockId,
    dims: &[(&str, i64)],
    f: impl FnOnce(&[VarId], &Block) -> (BufferId, Vec<Expr>, Expr),
) -> Node {
    let old = p.block(id).clone();
    let vars: Vec<VarId> = dims
        .iter()
        .map(|(n, _)| p.new_var(format!("v{n}")))
        .collect();
    let (buffer, indices, value) = f(&vars, &old);
    let store = Store {
        buffer,
        indices,
        value,
    };
    build(p, Some(id), &old.name, old.annotations, dims, vars, store)
}

fn build(
    p: &mut Program,
    id: Option<BlockId>,
    name: &str,
    annotations: BTreeMap<String, crate::ir::AnnValue>,
    dims: &[(&str, i64)],
    vars: Vec<VarId>,
    body: Store,
) -> Node {
    let loops: Vec<_> = dims
        .iter()
        .map(|(n, e)| p.new_loop(*n, *e, vec![]))
        .collect();
    let block = Block {
        name: name.into(),
        iter_vars: vars
            .iter()
            .zip(dims)
            .map(|(v, (_, e))| IterVar {
                var: *v,
                extent: *e,
                kind: IterKind::Spatial,
            })
            .collect(),
        bindings: loops.iter().map(|l| Expr::Var(p.lp(*l).var)).collect(),
        predicate: None,
        init: None,
        body,
        annotations,
    };
    let b = match id {
        Some(id) => {
            *p.block_mut(id) = block;
            id
        }
        None => p.new_block(block),
    };
    let mut body = vec![Node::Block(b)];
    for l in loops.iter().rev() {
        p.lp_mut(*l).body = body;
        body = vec![Node::Loop(*l)];
    }
    body[0]
}
