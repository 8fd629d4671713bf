//! `rfactor`: turning one reduction loop into a spatial axis of a partial-result buffer.
//!
//! ```text
//! for i, j, k_0, k_1:                          for i, j, k_0, k_1:
//!   C[i, j] += A[i, 16 k_0 + k_1] * ...   ->     C_rf[k_0, i, j] += A[i, 16 k_0 + k_1] * ...
//!                                              for ax0, ax1, ax2:
//!                                                C[ax0, ax1] += C_rf[ax2, ax0, ax1]
//! ```
//!
//! The loop may be any part of a split of the reduced variable (the outer part above; an
//! inner one, `k_1`, makes `C_rf[k_1, i, j] += A[i, 16 k_0 + k_1]`, the factored axis
//! consecutive in memory). The block under the loop becomes `<name>_rf`: it writes a new
//! global buffer with one more axis (at `factor_axis`) indexed by a new *spatial*
//! iteration variable bound to the loop, so the loop can then be bound to blocks or
//! threads (split-K, a cross-thread reduction). The original
//! block stays (same name, same random variable) as the write-back: a reduction over that
//! axis in its own loop nest, right after the nest of the rf block.
//!
//! Invariant: every element of the output is `init ⊕ (⊕ over the rfactor index of the
//! partial results)`, and each partial result starts from the identity of `⊕`; so the
//! result equals the original reduction for an associative and commutative `⊕` (`+`,
//! `*`, `max`, `min`), up to floating-point reassociation.

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::interval::bound;
use crate::ir::{
    BinOp, Block, BlockId, Buffer, BufferKind, Expr, IterKind, IterVar, LoopId, Node, Program,
    Scope, Store, VarId,
};
use std::collections::BTreeMap;

fn rejected(p: &Program, l: LoopId, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::UnsupportedLoop {
        primitive: "rfactor",
        name: p.loop_name(l).to_string(),
        reason: reason.into(),
    }
}

/// The identity of a combiner, as the initial value of a partial result.
fn identity(op: BinOp) -> Option<f64> {
    match op {
        BinOp::Add => Some(0.0),
        BinOp::Mul => Some(1.0),
        BinOp::Max => Some(f64::NEG_INFINITY),
        BinOp::Min => Some(f64::INFINITY),
        _ => None,
    }
}

/// Where loop variable `lv` feeds several consecutive reduction variables of `blk`, as a
/// `fuse` of their loops leaves them (`h = f // 28`, `w = f % 28`, the digits of one
/// index), replaces them in `blk` by one reduction variable over their product, bound to
/// `b_h * 28 + b_w` (which the simplifier folds back to `f`), the body reading `h` and `w`
/// as its digits; the block computes the same. rfactor then factors that one variable.
/// `blk` is left as it is otherwise.
fn merge_fused_reductions(p: &mut Program, blk: &mut Block, lv: VarId) {
    let users: Vec<usize> = (0..blk.iter_vars.len())
        .filter(|i| blk.bindings[*i].uses_var(lv))
        .collect();
    let (Some(&first), Some(&last)) = (users.first(), users.last()) else {
        return;
    };
    if users.len() < 2
        || last - first + 1 != users.len()
        || users
            .iter()
            .any(|i| blk.iter_vars[*i].kind != IterKind::Reduce)
    {
        return;
    }
    let extents: Vec<i64> = users.iter().map(|i| blk.iter_vars[*i].extent).collect();
    let Some(total) = extents.iter().try_fold(1i64, |a, e| a.checked_mul(*e)) else {
        return;
    };
    // The stride of each digit: the product of the extents after it.
    let mut strides = vec![1i64; users.len()];
    for d in (0..users.len() - 1).rev() {
        strides[d] = strides[d + 1] * extents[d + 1];
    }
    let binding = users
        .iter()
        .zip(&strides)
        .map(|(i, s)| Expr::mul(blk.bindings[*i].clone(), Expr::Int(*s)))
        .reduce(Expr::add)
        .unwrap_or(Expr::Int(0));
    let names: Vec<&str> = users
        .iter()
        .map(|i| p.var_name(blk.iter_vars[*i].var))
        .collect();
    let merged = p.new_var(names.join("_"));
    let digits: BTreeMap<VarId, Expr> = users
        .iter()
        .map(|i| blk.iter_vars[*i].var)
        .zip(digits(merged, &extents))
        .collect();
    let digit_of = |v: VarId| digits.get(&v).cloned();
    blk.body.value = blk.body.value.substitute(&digit_of);
    for e in &mut blk.body.indices {
        *e = e.substitute(&digit_of);
    }
    let binding = simplify_loops(p, &binding);
    blk.iter_vars.splice(
        first..=last,
        [IterVar {
            var: merged,
            extent: total,
            kind: IterKind::Reduce,
        }],
    );
    blk.bindings.splice(first..=last, [binding]);
}

/// Applies rfactor to the reduction under loop `lp`, with the new axis at `factor_axis`
/// of the partial-result buffer. Returns the rf block.
pub fn rfactor(p: &mut Program, lp: LoopId, factor_axis: i64) -> Result<BlockId> {
    // 1. Exactly one block under the loop: a reduction with its init, in the
    //    `out[idx] = out[idx] ⊕ rhs` form.
    let blocks = p.blocks_under(Node::Loop(lp));
    let [b] = blocks[..] else {
        return Err(rejected(
            p,
            lp,
            format!(
                "it must contain exactly one block, it contains {} ({})",
                blocks.len(),
                block_names(p, &blocks)
            ),
        ));
    };
    let mut blk = p.block(b).clone();
    merge_fused_reductions(p, &mut blk, p.lp(lp).var);
    let unsupported = |reason: String| ScheduleError::Unsupported {
        primitive: "rfactor",
        block: blk.name.clone(),
        reason,
    };
    let Some(init) = blk.init.clone() else {
        return Err(unsupported(
            "it has no init (rfactor must come before decompose_reduction)".into(),
        ));
    };
    let out = blk.body.buffer;
    let (op, rhs) = match &blk.body.value {
        Expr::Bin(op, a, rhs) if matches!(&**a, Expr::Load(buf, idx) if *buf == out && *idx == blk.body.indices) => {
            (*op, (**rhs).clone())
        }
        _ => {
            return Err(unsupported(format!(
                "its update is not `{0}[..] = {0}[..] op value`",
                p.buffer(out).name
            )))
        }
    };
    let Some(id) = identity(op) else {
        return Err(unsupported(format!(
            "its combiner `{op:?}` is not one of add, mul, max, min"
        )));
    };
    if rhs.loads().iter().any(|(buf, _)| *buf == out) {
        return Err(unsupported("its value reads its own output".into()));
    }
    let ndim = p.buffer(out).shape.len();
    let axis = usize::try_from(factor_axis)
        .ok()
        .filter(|a| *a <= ndim)
        .ok_or_else(|| ScheduleError::InvalidArgument {
            what: "rfactor factor_axis",
            reason: format!("{factor_axis} is not in 0..={ndim}"),
        })?;
    // 2. The loop feeds exactly one iteration variable, a reduction one, as
    //    `c * loop + rest`, the rest made of a part below `c` and whole multiples of
    //    `c * extent(loop)` (the loop is any part of a split of the variable).
    let lv = p.lp(lp).var;
    let l_ext = p.lp(lp).extent;
    let users: Vec<usize> = (0..blk.iter_vars.len())
        .filter(|i| blk.bindings[*i].uses_var(lv))
        .collect();
    let [r] = users[..] else {
        return Err(rejected(
            p,
            lp,
            format!(
                "it must bind exactly one iteration variable of block {}, it binds {}",
                blk.name,
                users.len()
            ),
        ));
    };
    let riv = blk.iter_vars[r].clone();
    if riv.kind != IterKind::Reduce {
        return Err(rejected(
            p,
            lp,
            format!(
                "it binds the spatial iteration variable {} of block {}",
                p.var_name(riv.var),
                blk.name
            ),
        ));
    }
    let e = &blk.bindings[r];
    let at_l = |v: i64| simplify_loops(p, &e.substitute(&|x| (x == lv).then_some(Expr::Int(v))));
    let rest = at_l(0);
    let stride = |a: i64, b: i64| simplify_loops(p, &Expr::sub(at_l(b), at_l(a))).as_int();
    let c = match (stride(0, 1), stride(1, 2)) {
        (Some(c1), Some(c2)) if c1 == c2 && c1 > 0 => c1,
        _ => {
            return Err(rejected(
                p,
                lp,
                format!(
                    "the binding of {} is not `c * {} + rest`",
                    p.var_name(riv.var),
                    p.loop_name(lp)
                ),
            ))
        }
    };
    // The rest holds the loops outside `lp` (`hi`, in steps of `c * l_ext`) and inside it
    // (`lo`, below `c`): vk = hi * (c * l_ext) + c * lp + lo. The new reduction variable
    // walks (hi, lo) as one, `hi * c + lo`; where `lp` is the outermost part (`hi` = 0) it
    // is the rest itself.
    let ranges = loop_ranges(p);
    let block = l_ext.saturating_mul(c);
    let hi = simplify_loops(
        p,
        &Expr::bin(BinOp::FloorDiv, rest.clone(), Expr::Int(block)),
    );
    let lo = simplify_loops(
        p,
        &Expr::bin(BinOp::FloorMod, rest.clone(), Expr::Int(block)),
    );
    let (hi_range, lo_range) = (bound(&hi, &ranges), bound(&lo, &ranges));
    let outer = hi.as_int() == Some(0);
    // An imperfect split of the reduced variable, its extra iterations masked by the
    // split's guard (`binding < extent`, the only part of the predicate that reads the
    // loop), is factored as well where the loop is an inner part: the guard leaves the
    // predicate and the rf block adds the identity of its combiner at the positions past
    // the extent (`select(position < extent, value, identity)`, which the lowering's
    // partition takes out of all but the last outer part), so that its domain is the
    // whole box of partial results and its loops can be moved like any others.
    let guard = Expr::bin(BinOp::Lt, e.clone(), Expr::Int(riv.extent));
    let masked = !outer
        && riv.extent % block.max(1) != 0
        && blk.predicate.as_ref().is_some_and(|pr| {
            let conj = pr.conjuncts();
            conj.contains(&guard) && conj.iter().all(|c| *c == guard || !c.uses_var(lv))
        });
    let parts = if masked {
        (riv.extent + block - 1) / block
    } else {
        riv.extent / block.max(1)
    };
    if (riv.extent % block.max(1) != 0 && !masked)
        || hi_range.min < 0
        || hi_range.max > parts - 1
        || lo_range.min < 0
        || lo_range.max > c - 1
    {
        let rest_range = bound(&rest, &ranges);
        return Err(rejected(
            p,
            lp,
            format!(
                "it does not split {} evenly ({} = {} x {c} x parts needed, the rest spans [{}, {}])",
                p.var_name(riv.var),
                riv.extent,
                l_ext,
                rest_range.min,
                rest_range.max
            ),
        ));
    }
    let (in_extent, in_binding) = if outer {
        (c, rest)
    } else {
        let walk = Expr::add(Expr::mul(hi, Expr::Int(c)), lo);
        (parts * c, simplify_loops(p, &walk))
    };
    if !masked && blk.predicate.as_ref().is_some_and(|pr| pr.uses_var(lv)) {
        return Err(rejected(p, lp, "the block's predicate depends on it"));
    }
    // 3. The partial-result buffer: the output's shape with the loop's extent inserted.
    let src = p.buffer(out).clone();
    let mut shape = src.shape.clone();
    shape.insert(axis, l_ext);
    let rf_buf = p.new_buffer(Buffer {
        name: p.fresh_buffer_name(&format!("{}_rf", src.name)),
        shape,
        dtype: src.dtype,
        scope: Scope::Global,
        kind: BufferKind::Intermediate,
        align: Vec::new(),
        swizzle: false,
    });
    p.allocs.push(rf_buf);
    // 4. The rf block: the loop's iteration variable becomes spatial, the rest of the
    //    reduced one stays a reduction.
    let vrf = p.new_var(format!("{}_rf", p.var_name(riv.var)));
    let vin = p.new_var(format!("{}_in", p.var_name(riv.var)));
    let mut iter_vars = blk.iter_vars.clone();
    let mut bindings = blk.bindings.clone();
    iter_vars[r] = IterVar {
        var: vrf,
        extent: l_ext,
        kind: IterKind::Spatial,
    };
    bindings[r] = Expr::Var(lv);
    iter_vars.insert(
        r + 1,
        IterVar {
            var: vin,
            extent: in_extent,
            kind: IterKind::Reduce,
        },
    );
    bindings.insert(r + 1, in_binding);
    let inner = Expr::add(Expr::mul(Expr::Int(c), Expr::Var(vrf)), Expr::Var(vin));
    let merged = if outer {
        inner
    } else {
        // (vin // c) * (c * l_ext) + c * vrf + vin % c, simplified over the block's
        // variables (for c = 1: vin * l_ext + vrf).
        let ext: BTreeMap<_, _> = [(vrf, l_ext), (vin, in_extent)].into_iter().collect();
        let vin_e = Expr::Var(vin);
        let spread = Expr::add(
            Expr::add(
                Expr::mul(
                    Expr::bin(BinOp::FloorDiv, vin_e.clone(), Expr::Int(c)),
                    Expr::Int(block),
                ),
                Expr::mul(Expr::Int(c), Expr::Var(vrf)),
            ),
            Expr::bin(BinOp::FloorMod, vin_e, Expr::Int(c)),
        );
        crate::ir::simplify::simplify_in(&spread, &ext)
    };
    let sub_r = |x: &Expr| x.substitute(&|v| (v == riv.var).then(|| merged.clone()));
    let mut rf_idx = blk.body.indices.clone();
    rf_idx.insert(axis, Expr::Var(vrf));
    let (value, predicate) = if masked {
        let within = Expr::bin(BinOp::Lt, merged.clone(), Expr::Int(riv.extent));
        let rest = blk
            .predicate
            .as_ref()
            .map(|pr| pr.conjuncts())
            .unwrap_or_default()
            .into_iter()
            .filter(|c| *c != guard)
            .reduce(|a, c| Expr::bin(BinOp::And, a, c));
        (Expr::select(within, sub_r(&rhs), Expr::Float(id)), rest)
    } else {
        (sub_r(&rhs), blk.predicate.clone())
    };
    let rf_block = Block {
        name: p.fresh_block_name(&format!("{}_rf", blk.name)),
        iter_vars,
        bindings,
        predicate,
        init: Some(Store {
            buffer: rf_buf,
            indices: rf_idx.clone(),
            value: Expr::Float(id),
        }),
        body: Store {
            buffer: rf_buf,
            indices: rf_idx.clone(),
            value: Expr::bin(op, Expr::Load(rf_buf, rf_idx), value),
        },
        annotations: blk.annotations.clone(),
    };
    let rb = p.new_block(rf_block);
    replace_node(p, Node::Block(b), Node::Block(rb));
    // 5. The write-back: the original block, over the output's spatial variables and the
    //    rfactor axis, in a new nest right after the rf block's.
    let spatial: Vec<&IterVar> = blk
        .iter_vars
        .iter()
        .filter(|iv| iv.kind == IterKind::Spatial)
        .collect();
    let mut loops = Vec::new();
    let mut wb_vars = Vec::new();
    let mut iv_map: BTreeMap<VarId, Expr> = BTreeMap::new();
    for (d, iv) in spatial.iter().enumerate() {
        let l = p.new_loop(format!("ax{d}"), iv.extent, Vec::new());
        let nv = p.new_var(p.var_name(iv.var).to_string());
        iv_map.insert(iv.var, Expr::Var(nv));
        loops.push(l);
        wb_vars.push(IterVar {
            var: nv,
            extent: iv.extent,
            kind: IterKind::Spatial,
        });
    }
    let rl = p.new_loop(format!("ax{}", spatial.len()), l_ext, Vec::new());
    let vwb = p.new_var(p.var_name(vrf).to_string());
    loops.push(rl);
    wb_vars.push(IterVar {
        var: vwb,
        extent: l_ext,
        kind: IterKind::Reduce,
    });
    let sub_iv = |x: &Expr| x.substitute(&|v| iv_map.get(&v).cloned());
    let idx: Vec<Expr> = blk.body.indices.iter().map(sub_iv).collect();
    let mut part_idx = idx.clone();
    part_idx.insert(axis, Expr::Var(vwb));
    let bindings = loops.iter().map(|l| Expr::Var(p.lp(*l).var)).collect();
    let wb = p.block_mut(b);
    wb.iter_vars = wb_vars;
    wb.bindings = bindings;
    wb.predicate = None;
    wb.init = Some(Store {
        buffer: init.buffer,
        indices: init.indices.iter().map(sub_iv).collect(),
        value: sub_iv(&init.value),
    });
    wb.body = Store {
        buffer: out,
        indices: idx.clone(),
        value: Expr::bin(op, Expr::Load(out, idx), Expr::Load(rf_buf, part_idx)),
    };
    wb.annotations = BTreeMap::new();
    let mut body = vec![Node::Block(b)];
    for l in loops.iter().rev() {
        p.lp_mut(*l).body = body;
        body = vec![Node::Loop(*l)];
    }
    let after = child_containing(p, None, Node::Block(rb)).map_or(p.root.len(), |i| i + 1);
    p.root.insert(after, body[0]);
    Ok(rb)
}
