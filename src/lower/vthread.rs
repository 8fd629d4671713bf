//! Virtual threads: a loop bound to `vthread.*` is sunk to the statements that use its
//! variable and unrolled there. Its iterations are independent by construction (only
//! spatial loops can be bound), so distributing it over a statement list and interchanging
//! it with the loops below is legal; a statement that does not use the variable runs once
//! instead of once per virtual thread, which is only done when every such statement is
//! idempotent (it does not accumulate into its own output). Otherwise the loop stays
//! where it is, as an unrolled serial loop.

use super::Tree;
use crate::ir::{BlockId, LoopKind, Program, ThreadTag, VarId};

fn block_uses(p: &Program, b: BlockId, v: VarId) -> bool {
    let blk = p.block(b);
    blk.bindings.iter().any(|e| e.uses_var(v))
        || blk.predicate.as_ref().is_some_and(|e| e.uses_var(v))
}

fn uses(p: &Program, t: &Tree, v: VarId) -> bool {
    match t {
        Tree::Block(b) => block_uses(p, *b, v),
        Tree::Loop { body, .. } | Tree::Unrolled { body, .. } => body.iter().any(|c| uses(p, c, v)),
    }
}

/// Whether every block in `t` that does not use `v` is idempotent.
fn hoistable(p: &Program, t: &Tree, v: VarId) -> bool {
    match t {
        Tree::Block(b) => {
            let blk = p.block(*b);
            let accumulates = blk.init.is_some()
                || blk
                    .body
                    .value
                    .loads()
                    .iter()
                    .any(|(buf, _)| *buf == blk.body.buffer);
            block_uses(p, *b, v) || !accumulates
        }
        Tree::Loop { body, .. } | Tree::Unrolled { body, .. } => {
            body.iter().all(|c| hoistable(p, c, v))
        }
    }
}

fn sink(p: &Program, v: VarId, extent: i64, trees: Vec<Tree>) -> Vec<Tree> {
    trees
        .into_iter()
        .map(|t| {
            if !uses(p, &t, v) {
                return t;
            }
            match t {
                Tree::Block(b) => Tree::Unrolled {
                    var: v,
                    extent,
                    body: vec![Tree::Block(b)],
                },
                // A vectorized loop stays innermost: the virtual thread goes around it.
                Tree::Loop { id, body } if p.lp(id).kind == LoopKind::Vectorized => {
                    Tree::Unrolled {
                        var: v,
                        extent,
                        body: vec![Tree::Loop { id, body }],
                    }
                }
                Tree::Loop { id, body } => Tree::Loop {
                    id,
                    body: sink(p, v, extent, body),
                },
                Tree::Unrolled {
                    var,
                    extent: e,
                    body,
                } => Tree::Unrolled {
                    var,
                    extent: e,
                    body: sink(p, v, extent, body),
                },
            }
        })
        .collect()
}

/// Sinks every virtual-thread loop of a tree (inner ones first). A sunk loop dissolves
/// into its body, so one tree may become several.
pub(crate) fn sink_all(p: &Program, t: Tree) -> Vec<Tree> {
    match t {
        Tree::Block(_) => vec![t],
        Tree::Unrolled { var, extent, body } => {
            vec![Tree::Unrolled {
                var,
                extent,
                body: body.into_iter().flat_map(|c| sink_all(p, c)).collect(),
            }]
        }
        Tree::Loop { id, body } => {
            let body: Vec<Tree> = body.into_iter().flat_map(|c| sink_all(p, c)).collect();
            let lp = p.lp(id);
            if let LoopKind::Thread(ThreadTag::VThread(_)) = lp.kind {
                if body.iter().all(|c| hoistable(p, c, lp.var)) {
                    return sink(p, lp.var, lp.extent, body);
                }
            }
            vec![Tree::Loop { id, body }]
        }
    }
}
