//! `split`, `fuse`, `reorder`: reshaping a loop nest without moving computation.
//!
//! Invariant: loop variables are replaced by expressions of the new loops in every block
//! under the transformed loops, so every block still visits exactly the same iteration
//! points (an imperfect split adds a predicate that masks the extra ones).

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::{BinOp, Expr, IterKind, LoopId, LoopKind, Node, Program};
use std::collections::BTreeMap;

/// Splits `l` into `factors.len()` nested loops, outermost first. At most one factor may
/// be `None`; it is inferred as the ceiling of the extent over the product of the others.
/// When the factors multiply to more than the extent, the blocks under the loops get the
/// predicate `original < extent`.
pub fn split(p: &mut Program, l: LoopId, factors: &[Option<i64>]) -> Result<Vec<LoopId>> {
    let name = p.loop_name(l).to_string();
    let extent = p.lp(l).extent;
    let bad = |reason: String| ScheduleError::BadSplit {
        name: name.clone(),
        extent,
        reason,
    };
    // 1. The loop is serial; the factors are positive with at most one inferred.
    if p.lp(l).kind != LoopKind::Serial {
        return Err(ScheduleError::NotSerial {
            name,
            kind: kind_str(p.lp(l).kind),
            primitive: "split",
        });
    }
    if factors.is_empty() {
        return Err(bad("no factors given".into()));
    }
    if factors.iter().filter(|f| f.is_none()).count() > 1 {
        return Err(bad("at most one factor may be None".into()));
    }
    if let Some(f) = factors.iter().flatten().find(|f| **f <= 0) {
        return Err(bad(format!("factor {f} is not positive")));
    }
    let known: i64 = factors
        .iter()
        .flatten()
        .try_fold(1i64, |a, f| a.checked_mul(*f))
        .ok_or_else(|| bad("factors overflow".into()))?;
    let factors: Vec<i64> = factors
        .iter()
        .map(|f| f.unwrap_or((extent + known - 1) / known))
        .collect();
    let product: i64 = factors.iter().product();
    if product < extent {
        return Err(bad(format!(
            "factors {factors:?} multiply to {product}, less than the extent"
        )));
    }
    // 2. Build the new loops, innermost first, around the old body.
    let taken = names_in_scope(p, Node::Loop(l));
    let mut body = p.lp(l).body.clone();
    let mut new_loops = Vec::new();
    for (i, f) in factors.iter().enumerate().rev() {
        let nl = p.new_loop(unique(&format!("{name}_{i}"), &taken), *f, body);
        p.lp_mut(nl).annotations = BTreeMap::new();
        body = vec![Node::Loop(nl)];
        new_loops.push(nl);
    }
    new_loops.reverse();
    replace_node(p, Node::Loop(l), Node::Loop(new_loops[0]));
    // 3. Substitute l = sum(l_i * stride_i) into the blocks underneath.
    let mut stride = 1;
    let mut sum: Option<Expr> = None;
    for (nl, f) in new_loops.iter().zip(&factors).rev() {
        let term = Expr::mul(Expr::Var(p.lp(*nl).var), Expr::Int(stride));
        sum = Some(match sum {
            None => term,
            Some(s) => Expr::add(term, s),
        });
        stride *= f;
    }
    let sum = sum.expect("at least one factor");
    let old_var = p.lp(l).var;
    let map: BTreeMap<_, _> = [(old_var, sum.clone())].into_iter().collect();
    let blocks = p.blocks_under(Node::Loop(new_loops[0]));
    substitute_bindings(p, &blocks, &map);
    // 4. Mask the extra iterations of an imperfect split.
    if product > extent {
        let ranges = loop_ranges(p);
        let guard = simplify_over(&ranges, &Expr::bin(BinOp::Lt, sum, Expr::Int(extent)));
        for b in &blocks {
            let old = p.block(*b).predicate.clone();
            let pred = and_predicate(&ranges, old, guard.clone());
            p.block_mut(*b).predicate = pred;
        }
    }
    Ok(new_loops)
}

/// Fuses a chain of nested loops (each the only child of the previous) into one.
pub fn fuse(p: &mut Program, loops: &[LoopId]) -> Result<LoopId> {
    // 1. Check the chain: serial loops, each the only child of the one before.
    if loops.is_empty() {
        return Err(ScheduleError::TooFewLoops {
            primitive: "fuse",
            min: 1,
        });
    }
    for (i, l) in loops.iter().enumerate() {
        if loops[..i].contains(l) {
            return Err(ScheduleError::DuplicateLoop {
                name: p.loop_name(*l).into(),
            });
        }
        if p.lp(*l).kind != LoopKind::Serial {
            return Err(ScheduleError::NotSerial {
                name: p.loop_name(*l).into(),
                kind: kind_str(p.lp(*l).kind),
                primitive: "fuse",
            });
        }
    }
    for w in loops.windows(2) {
        let (outer, inner) = (w[0], w[1]);
        if p.parent(Node::Loop(inner)) != Some(outer) {
            return Err(ScheduleError::NotNested {
                outer: p.loop_name(outer).into(),
                inner: p.loop_name(inner).into(),
            });
        }
        if p.lp(outer).body.len() != 1 {
            return Err(ScheduleError::NotOnlyChild {
                outer: p.loop_name(outer).into(),
                inner: p.loop_name(inner).into(),
            });
        }
    }
    if loops.len() == 1 {
        return Ok(loops[0]);
    }
    // 2. A fused loop must not mix data-parallel and reduction iterations of a block:
    //    the reduction would no longer start at its first step for every output element.
    for b in p.blocks_under(Node::Loop(loops[0])) {
        let blk = p.block(b);
        let kind_of = |l: &LoopId| {
            let v = p.lp(*l).var;
            let used = |k| {
                blk.iter_vars
                    .iter()
                    .zip(&blk.bindings)
                    .any(|(iv, e)| iv.kind == k && e.uses_var(v))
            };
            (used(IterKind::Spatial), used(IterKind::Reduce))
        };
        let spatial = loops.iter().find(|l| kind_of(l).0);
        let reduce = loops.iter().find(|l| kind_of(l).1);
        if let (Some(s), Some(r)) = (spatial, reduce) {
            return Err(ScheduleError::Unsupported {
                primitive: "fuse",
                block: blk.name.clone(),
                reason: format!(
                    "it uses loop {} as spatial and loop {} as reduction",
                    p.loop_name(*s),
                    p.loop_name(*r)
                ),
            });
        }
    }
    // 3. One loop over the product of the extents.
    let name: Vec<&str> = loops.iter().map(|l| p.loop_name(*l)).collect();
    let name = format!("{}_fused", name.join("_"));
    let taken = names_in_scope(p, Node::Loop(loops[0]));
    let extent = loops
        .iter()
        .try_fold(1i64, |a, l| a.checked_mul(p.lp(*l).extent))
        .ok_or_else(|| ScheduleError::InvalidArgument {
            what: "fuse",
            reason: "fused extent overflows".into(),
        })?;
    let body = p.lp(*loops.last().expect("non-empty")).body.clone();
    let fused = p.new_loop(unique(&name, &taken), extent, body);
    replace_node(p, Node::Loop(loops[0]), Node::Loop(fused));
    // 4. l_i = f // stride_i % extent_i.
    let fv = Expr::Var(p.lp(fused).var);
    let mut map = BTreeMap::new();
    let mut stride = 1;
    for (i, l) in loops.iter().enumerate().rev() {
        let e = p.lp(*l).extent;
        let div = if stride == 1 {
            fv.clone()
        } else {
            Expr::bin(BinOp::FloorDiv, fv.clone(), Expr::Int(stride))
        };
        let val = if i == 0 {
            div
        } else {
            Expr::bin(BinOp::FloorMod, div, Expr::Int(e))
        };
        map.insert(p.lp(*l).var, val);
        stride *= e;
    }
    let blocks = p.blocks_under(Node::Loop(fused));
    substitute_bindings(p, &blocks, &map);
    Ok(fused)
}

/// Reorders loops of one chain: the positions the given loops occupy in the chain are
/// filled with them in the given order. Loops between them stay where they are; every
/// loop from the outermost given loop down to the innermost must have a single child.
pub fn reorder(p: &mut Program, loops: &[LoopId]) -> Result<()> {
    // 1. Distinct loops on one chain.
    for (i, l) in loops.iter().enumerate() {
        if loops[..i].contains(l) {
            return Err(ScheduleError::DuplicateLoop {
                name: p.loop_name(*l).into(),
            });
        }
    }
    if loops.len() < 2 {
        return Ok(());
    }
    let mut by_depth: Vec<(usize, LoopId)> = loops
        .iter()
        .map(|l| (p.ancestors(Node::Loop(*l)).len(), *l))
        .collect();
    by_depth.sort();
    let not_chain = || ScheduleError::NotOneChain {
        loops: loops
            .iter()
            .map(|l| p.loop_name(*l).to_string())
            .collect::<Vec<_>>()
            .join(", "),
    };
    for w in by_depth.windows(2) {
        if !p.is_ancestor(w[0].1, Node::Loop(w[1].1)) {
            return Err(not_chain());
        }
    }
    let top = by_depth[0].1;
    let bottom = by_depth.last().expect("non-empty").1;
    // 2. The path from top to bottom has no branching.
    let mut path = vec![top];
    let mut cur = top;
    while cur != bottom {
        match p.lp(cur).body.as_slice() {
            [Node::Loop(c)] => {
                path.push(*c);
                cur = *c;
            }
            _ => {
                let next = p
                    .ancestors(Node::Loop(bottom))
                    .into_iter()
                    .skip_while(|a| *a != cur)
                    .nth(1)
                    .unwrap_or(bottom);
                return Err(ScheduleError::NotOnlyChild {
                    outer: p.loop_name(cur).into(),
                    inner: p.loop_name(next).into(),
                });
            }
        }
    }
    // 3. Fill the positions of the given loops in the given order and relink the chain.
    let mut given = loops.iter();
    let new_path: Vec<LoopId> = path
        .iter()
        .map(|l| {
            if loops.contains(l) {
                *given.next().expect("same count")
            } else {
                *l
            }
        })
        .collect();
    let inner_body = p.lp(bottom).body.clone();
    replace_node(p, Node::Loop(top), Node::Loop(new_path[0]));
    for w in new_path.windows(2) {
        p.lp_mut(w[0]).body = vec![Node::Loop(w[1])];
    }
    p.lp_mut(*new_path.last().expect("non-empty")).body = inner_body;
    Ok(())
}
