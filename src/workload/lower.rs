//! Lowering a workload to the loop-nest IR, TensorIR style.
//!
//! Inputs become `Input` parameters in declaration order; stages that no later stage
//! reads become `Output` parameters after them; the other stages are `Intermediate`
//! global buffers in `allocs`. Each stage is one nest of serial loops (spatial axes in
//! left-hand-side order, then reduction axes), loop variables named like the axes, around
//! a single block named like the stage whose iteration variables are `v` + axis name,
//! bound to the loop variables. A reduction has an `init` (0 for `sum`, -inf for
//! `max_reduce`) and updates its output in place. A concat is a chain of selects.

use super::model::{Scalar, TensorDef, Workload};
use crate::ir::{
    Block, Buffer, BufferId, BufferKind, Expr, IterKind, IterVar, Node, Program, Scope, Store,
    VarId,
};
use std::collections::BTreeMap;

/// An index expression in IR form, axis `k` standing for `VarId(k)` (for interval
/// analysis during checking).
pub(crate) fn index_to_ir(s: &Scalar) -> Expr {
    to_ir(s, &|k| VarId(u32::try_from(k).unwrap_or(u32::MAX)), &|t| {
        BufferId(u32::try_from(t).unwrap_or(u32::MAX))
    })
}

/// An expression in IR form, with axes and tensors mapped to variables and buffers.
fn to_ir(s: &Scalar, var: &dyn Fn(usize) -> VarId, buf: &dyn Fn(usize) -> BufferId) -> Expr {
    let go = |x: &Scalar| to_ir(x, var, buf);
    match s {
        Scalar::Int(v) => Expr::Int(*v),
        Scalar::Float(v) => Expr::Float(*v),
        Scalar::Axis(k) => Expr::Var(var(*k)),
        Scalar::Access(t, idx) => Expr::Load(buf(*t), idx.iter().map(go).collect()),
        Scalar::Bin(op, a, b) => Expr::bin(*op, go(a), go(b)),
        Scalar::Un(op, a) => Expr::Un(*op, Box::new(go(a))),
        Scalar::Select(c, t, f) => Expr::select(go(c), go(t), go(f)),
        Scalar::Cast(d, a) => Expr::Cast(*d, Box::new(go(a))),
    }
}

impl Workload {
    /// The workload as a loop-nest program (see the module documentation for its shape).
    pub fn to_program(&self) -> Program {
        let mut p = Program::new(self.name.clone());
        let mut bufs = Vec::new();
        for (i, t) in self.tensors.iter().enumerate() {
            let kind = match t.def {
                TensorDef::Input => BufferKind::Input,
                _ if self.is_read_later(i) => BufferKind::Intermediate,
                _ => BufferKind::Output,
            };
            let id = p.new_buffer(Buffer {
                name: t.name.clone(),
                shape: t.shape.clone(),
                dtype: t.dtype,
                scope: Scope::Global,
                kind,
                align: Vec::new(),
                swizzle: false,
            });
            bufs.push((id, kind));
        }
        for kind in [BufferKind::Input, BufferKind::Output] {
            p.params
                .extend(bufs.iter().filter(|b| b.1 == kind).map(|b| b.0));
        }
        p.allocs.extend(
            bufs.iter()
                .filter(|b| b.1 == BufferKind::Intermediate)
                .map(|b| b.0),
        );
        let buf = |t: usize| bufs[t].0;
        for (i, t) in self.tensors.iter().enumerate() {
            // (axis name, extent, kind) per loop, outermost first.
            let axes: Vec<(String, i64, IterKind)> = match &t.def {
                TensorDef::Input => continue,
                TensorDef::Compute(c) => {
                    let n = c.axes.len();
                    c.all_axes()
                        .enumerate()
                        .map(|(k, a)| {
                            let kind = if k < n {
                                IterKind::Spatial
                            } else {
                                IterKind::Reduce
                            };
                            (a.name.clone(), a.extent, kind)
                        })
                        .collect()
                }
                TensorDef::Concat { .. } => t
                    .shape
                    .iter()
                    .enumerate()
                    .map(|(d, &e)| (format!("ax{d}"), e, IterKind::Spatial))
                    .collect(),
            };
            let iter_vars: Vec<IterVar> = axes
                .iter()
                .map(|(name, extent, kind)| IterVar {
                    var: p.new_var(format!("v{name}")),
                    extent: *extent,
                    kind: *kind,
                })
                .collect();
            let ivs: Vec<VarId> = iter_vars.iter().map(|iv| iv.var).collect();
            let n_spatial = axes.iter().filter(|a| a.2 == IterKind::Spatial).count();
            let out = buf(i);
            let indices: Vec<Expr> = ivs[..n_spatial].iter().map(|v| Expr::Var(*v)).collect();
            let value = match &t.def {
                TensorDef::Concat { inputs, axis } => {
                    let parts: Vec<(BufferId, i64)> = inputs
                        .iter()
                        .map(|&x| (buf(x), self.tensors[x].shape[*axis]))
                        .collect();
                    concat_value(&parts, *axis, &ivs)
                }
                TensorDef::Compute(c) => to_ir(&c.value, &|k| ivs[k], &buf),
                TensorDef::Input => continue,
            };
            let current = Expr::Load(out, indices.clone());
            let (init, value) = match &t.def {
                TensorDef::Compute(c) => match &c.reduce {
                    Some(r) => {
                        let (start, op) = match r.op {
                            super::ReduceOp::Sum => (0.0, crate::ir::BinOp::Add),
                            super::ReduceOp::Max => (f64::NEG_INFINITY, crate::ir::BinOp::Max),
                        };
                        let init = Store {
                            buffer: out,
                            indices: indices.clone(),
                            value: Expr::Float(start),
                        };
                        (Some(init), Expr::bin(op, current, value))
                    }
                    None => (None, value),
                },
                _ => (None, value),
            };
            // Loops are created outermost first so that their variables come before the
            // block's in the arena; the nest is linked innermost first.
            let loops: Vec<(String, i64)> = axes.iter().map(|(n, e, _)| (n.clone(), *e)).collect();
            let loop_ids: Vec<_> = loops
                .iter()
                .map(|(n, e)| p.new_loop(n.clone(), *e, Vec::new()))
                .collect();
            let bindings = loop_ids.iter().map(|l| Expr::Var(p.lp(*l).var)).collect();
            let block = p.new_block(Block {
                name: t.name.clone(),
                iter_vars,
                bindings,
                predicate: None,
                init,
                body: Store {
                    buffer: out,
                    indices,
                    value,
                },
                annotations: BTreeMap::new(),
            });
            let mut node = Node::Block(block);
            for l in loop_ids.iter().rev() {
                p.lp_mut(*l).body.push(node);
                node = Node::Loop(*l);
            }
            p.root.push(node);
        }
        p
    }
}

/// `if_then_else(v < e0, X0[..v..], if_then_else(v < e0 + e1, X1[..v - e0..], ...))`
/// along `axis`.
fn concat_value(parts: &[(BufferId, i64)], axis: usize, vars: &[VarId]) -> Expr {
    let mut offsets = Vec::new();
    let mut acc = 0i64;
    for (_, e) in parts {
        offsets.push(acc);
        acc = acc.saturating_add(*e);
    }
    let load = |k: usize| {
        let (b, _) = parts[k];
        let idx = vars
            .iter()
            .enumerate()
            .map(|(d, v)| {
                let x = Expr::Var(*v);
                if d == axis && offsets[k] > 0 {
                    Expr::sub(x, Expr::Int(offsets[k]))
                } else {
                    x
                }
            })
            .collect();
        Expr::Load(b, idx)
    };
    let last = parts.len().saturating_sub(1);
    let mut e = load(last);
    for k in (0..last).rev() {
        let end = offsets[k] + parts[k].1;
        e = Expr::select(Expr::lt(Expr::Var(vars[axis]), Expr::Int(end)), load(k), e);
    }
    e
}
