//! `decompose_reduction`: moving a reduction's init out of its reduction loops.
//!
//! Invariant: the init block writes the same elements the update accumulates into,
//! under copies of the spatial loops between the target loop and the block, placed right
//! before the target loop, so every element is initialised exactly once before its first
//! update.

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::{Block, BlockId, Expr, IterKind, IterVar, LoopId, Node, Program, Store, VarId};
use std::collections::BTreeMap;

/// Splits block `b` into `<name>_init` (placed before `target`) and `<name>_update`.
/// Returns the init block.
pub fn decompose_reduction(p: &mut Program, b: BlockId, target: LoopId) -> Result<BlockId> {
    let blk = p.block(b).clone();
    let tname = p.loop_name(target).to_string();
    // 1. A block with an init, under the target loop.
    let Some(init) = blk.init.clone() else {
        return Err(ScheduleError::NoInit { block: blk.name });
    };
    let anc = p.ancestors(Node::Block(b));
    let Some(pos) = anc.iter().position(|l| *l == target) else {
        return Err(ScheduleError::NotUnderLoop {
            block: blk.name,
            target: tname,
        });
    };
    //    No reduction loop may enclose the target: the init would rerun between steps.
    let reduce_bindings: Vec<&Expr> = blk
        .iter_vars
        .iter()
        .zip(&blk.bindings)
        .filter(|(iv, _)| iv.kind == IterKind::Reduce)
        .map(|(_, e)| e)
        .collect();
    if let Some(outer) = anc[..pos]
        .iter()
        .find(|l| reduce_bindings.iter().any(|e| e.uses_var(p.lp(**l).var)))
    {
        return Err(ScheduleError::Unsupported {
            primitive: "decompose_reduction",
            block: blk.name,
            reason: format!(
                "the reduction loop {} encloses the target loop {tname}",
                p.loop_name(*outer)
            ),
        });
    }
    // 2. Classify the loops from the target down: spatial-only loops are copied.
    let spatial: Vec<&Expr> = blk
        .iter_vars
        .iter()
        .zip(&blk.bindings)
        .filter(|(iv, _)| iv.kind == IterKind::Spatial)
        .map(|(_, e)| e)
        .collect();
    let reduce: Vec<&Expr> = blk
        .iter_vars
        .iter()
        .zip(&blk.bindings)
        .filter(|(iv, _)| iv.kind == IterKind::Reduce)
        .map(|(_, e)| e)
        .collect();
    let mut copied: Vec<LoopId> = Vec::new();
    for l in &anc[pos..] {
        let v = p.lp(*l).var;
        let (s, r) = (
            spatial.iter().any(|e| e.uses_var(v)),
            reduce.iter().any(|e| e.uses_var(v)),
        );
        if s && r {
            return Err(ScheduleError::MixedLoop {
                block: blk.name,
                target: tname,
                name: p.loop_name(*l).into(),
            });
        }
        if s {
            copied.push(*l);
        }
    }
    //    Below the target the block must visit each point once (see `repeating_loop`):
    //    a producer `compute_at` placed under a relaxed thread loop, or gave a region wider
    //    than its tile, computes some points again, which with the init inside the block
    //    starts afresh, but with one init above would add the updates twice.
    if let Some(l) = repeating_loop(p, b, &anc[pos..]) {
        return Err(ScheduleError::Unsupported {
            primitive: "decompose_reduction",
            block: blk.name,
            reason: format!(
                "under the target loop {tname} it runs more than once for some points (over \
                 loop {}): the updates would repeat after one initialization",
                p.loop_name(l)
            ),
        });
    }
    // The init keeps the conjuncts of the predicate that do not involve the reduction
    // loops below the target (those only mask reduction steps).
    let dropped: Vec<VarId> = anc[pos..]
        .iter()
        .filter(|l| !copied.contains(l))
        .map(|l| p.lp(*l).var)
        .collect();
    let mut init_pred: Vec<Expr> = Vec::new();
    for c in blk.predicate.iter().flat_map(Expr::conjuncts) {
        let uses_dropped = dropped.iter().any(|v| c.uses_var(*v));
        let uses_copied = copied.iter().any(|l| c.uses_var(p.lp(*l).var));
        match (uses_dropped, uses_copied) {
            (false, _) => init_pred.push(c),
            (true, false) => {}
            (true, true) => {
                return Err(ScheduleError::Unsupported {
                    primitive: "decompose_reduction",
                    block: blk.name,
                    reason: "its predicate mixes spatial and reduction loops in one condition"
                        .into(),
                })
            }
        }
    }
    // 3. The init block over the spatial iteration variables, under copies of the loops.
    let taken = names_in_scope(p, Node::Loop(target));
    let mut loop_map: BTreeMap<VarId, Expr> = BTreeMap::new();
    let mut new_loops = Vec::new();
    for l in &copied {
        let src = p.lp(*l).clone();
        let nl = p.new_loop(
            unique(&format!("{}_init", p.loop_name(*l)), &taken),
            src.extent,
            Vec::new(),
        );
        p.lp_mut(nl).kind = src.kind;
        loop_map.insert(src.var, Expr::Var(p.lp(nl).var));
        new_loops.push(nl);
    }
    let mut iter_vars = Vec::new();
    let mut bindings = Vec::new();
    let mut iv_map: BTreeMap<VarId, Expr> = BTreeMap::new();
    for (iv, e) in blk.iter_vars.iter().zip(&blk.bindings) {
        if iv.kind == IterKind::Spatial {
            let nv = p.new_var(p.var_name(iv.var).to_string());
            iv_map.insert(iv.var, Expr::Var(nv));
            iter_vars.push(IterVar {
                var: nv,
                extent: iv.extent,
                kind: IterKind::Spatial,
            });
            bindings.push(e.substitute(&|v| loop_map.get(&v).cloned()));
        }
    }
    let sub_iv = |e: &Expr| e.substitute(&|v| iv_map.get(&v).cloned());
    let init_block = Block {
        name: p.fresh_block_name(&format!("{}_init", blk.name)),
        iter_vars,
        bindings,
        predicate: init_pred
            .into_iter()
            .map(|e| e.substitute(&|v| loop_map.get(&v).cloned()))
            .reduce(Expr::and),
        init: None,
        body: Store {
            buffer: init.buffer,
            indices: init.indices.iter().map(sub_iv).collect(),
            value: sub_iv(&init.value),
        },
        annotations: BTreeMap::new(),
    };
    let ib = p.new_block(init_block);
    let mut body = vec![Node::Block(ib)];
    for l in new_loops.iter().rev() {
        p.lp_mut(*l).body = body;
        body = vec![Node::Loop(*l)];
    }
    let place = p.place(Node::Loop(target)).expect("target is live");
    p.body_mut(place.parent).insert(place.index, body[0]);
    // 4. The update block: no init, renamed.
    let update_name = p.fresh_block_name(&format!("{}_update", blk.name));
    let ub = p.block_mut(b);
    ub.init = None;
    ub.name = update_name;
    Ok(ib)
}
