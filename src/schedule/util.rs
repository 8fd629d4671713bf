//! Helpers shared by the primitives: tree surgery, substitution into bindings, names.

use crate::ir::interval::Interval;
use crate::ir::simplify::simplify;
use crate::ir::{
    BinOp, Block, BlockId, BufferId, Expr, IterKind, IterVar, LoopId, LoopKind, Node, Program,
    Store, VarId,
};
use std::collections::{BTreeMap, HashSet};

/// How a loop kind reads in messages.
pub fn kind_str(k: LoopKind) -> String {
    match k {
        LoopKind::Serial => "serial".into(),
        LoopKind::Parallel => "parallel".into(),
        LoopKind::Vectorized => "vectorized".into(),
        LoopKind::Unrolled => "unrolled".into(),
        LoopKind::Thread(t) => format!("bound to {t}"),
    }
}

/// The digits of `t` in the mixed radix of `extents` (outermost first, the last fastest),
/// for `t` below their product: a digit of extent 1 is 0, and the outermost of the others
/// needs no modulo (`t // Q`, not `t // Q % P`), so that the digits fold back into `t`
/// wherever `t` is split.
pub fn digits(t: VarId, extents: &[i64]) -> Vec<Expr> {
    let mut stride = 1;
    let mut out = vec![Expr::Int(0); extents.len()];
    let outermost = extents.iter().position(|e| *e > 1);
    for (i, e) in extents.iter().enumerate().rev() {
        if *e == 1 {
            continue;
        }
        let div = if stride == 1 {
            Expr::Var(t)
        } else {
            Expr::bin(BinOp::FloorDiv, Expr::Var(t), Expr::Int(stride))
        };
        out[i] = if Some(i) == outermost {
            div
        } else {
            Expr::bin(BinOp::FloorMod, div, Expr::Int(*e))
        };
        stride *= e;
    }
    out
}

/// Names of loops visible around `node`: its ancestors and everything under it.
pub fn names_in_scope(p: &Program, node: Node) -> HashSet<String> {
    let mut names: HashSet<String> = p
        .ancestors(node)
        .iter()
        .map(|l| p.loop_name(*l).to_string())
        .collect();
    if let Node::Loop(l) = node {
        names.extend(p.loops_under(l).iter().map(|c| p.loop_name(*c).to_string()));
    }
    names
}

/// A name not in `taken`: `base`, else `base_1`, ...
pub fn unique(base: &str, taken: &HashSet<String>) -> String {
    crate::ir::fresh_name(base, |n| taken.contains(n))
}

/// Replaces `old` by `new` at its place in the tree.
pub fn replace_node(p: &mut Program, old: Node, new: Node) {
    if let Some(place) = p.place(old) {
        p.body_mut(place.parent)[place.index] = new;
    }
}

/// Range of every live loop variable.
pub fn loop_ranges(p: &Program) -> BTreeMap<VarId, i64> {
    p.loop_var_extents()
}

/// Simplifies an expression over the ranges of live loop variables.
pub fn simplify_loops(p: &Program, e: &Expr) -> Expr {
    simplify_over(&loop_ranges(p), e)
}

/// Simplifies an expression over loop ranges gathered once by [`loop_ranges`] (a caller
/// that simplifies many expressions of one program walks it once).
pub fn simplify_over(ranges: &BTreeMap<VarId, i64>, e: &Expr) -> Expr {
    simplify(e, &|v| ranges.get(&v).map(|&x| Interval::new(0, x - 1)))
}

/// Simplifies an expression in terms of a block's iteration variables.
pub fn simplify_iters(p: &Program, b: BlockId, e: &Expr) -> Expr {
    let ext: BTreeMap<VarId, i64> = p
        .block(b)
        .iter_vars
        .iter()
        .map(|iv| (iv.var, iv.extent))
        .collect();
    simplify(e, &|v| ext.get(&v).map(|&x| Interval::new(0, x - 1)))
}

/// Conjunction of an optional predicate with another condition, simplified over the loop
/// ranges of [`loop_ranges`]; `None` when it is always true.
pub fn and_predicate(
    ranges: &BTreeMap<VarId, i64>,
    old: Option<Expr>,
    extra: Expr,
) -> Option<Expr> {
    let e = match old {
        Some(o) => Expr::bin(BinOp::And, o, extra),
        None => extra,
    };
    normalize_predicate_over(ranges, e)
}

/// Simplifies a predicate over the live loops; `None` when it is always true.
pub fn normalize_predicate(p: &Program, e: Expr) -> Option<Expr> {
    normalize_predicate_over(&loop_ranges(p), e)
}

/// [`normalize_predicate`] over loop ranges gathered once by [`loop_ranges`].
pub fn normalize_predicate_over(ranges: &BTreeMap<VarId, i64>, e: Expr) -> Option<Expr> {
    let s = simplify_over(ranges, &e);
    match s.as_int() {
        Some(v) if v != 0 => None,
        _ => Some(s),
    }
}

/// Substitutes loop variables in the bindings and predicates of `blocks`, then simplifies.
/// Only bindings and predicates change, so the loop ranges are gathered once.
pub fn substitute_bindings(p: &mut Program, blocks: &[BlockId], map: &BTreeMap<VarId, Expr>) {
    let f = |v: VarId| map.get(&v).cloned();
    let ranges = loop_ranges(p);
    for b in blocks {
        let blk = p.block(*b);
        let bindings: Vec<Expr> = blk
            .bindings
            .iter()
            .map(|e| simplify_over(&ranges, &e.substitute(&f)))
            .collect();
        let pred = blk
            .predicate
            .as_ref()
            .and_then(|e| normalize_predicate_over(&ranges, e.substitute(&f)));
        let blk = p.block_mut(*b);
        blk.bindings = bindings;
        blk.predicate = pred;
    }
}

/// Removes a block from the tree together with the chain of loops that contain nothing
/// else. Returns the removed top node.
pub fn remove_exclusive(p: &mut Program, b: BlockId) -> Node {
    let mut top = Node::Block(b);
    while let Some(parent) = p.parent(top) {
        if p.lp(parent).body.len() == 1 {
            top = Node::Loop(parent);
        } else {
            break;
        }
    }
    if let Some(place) = p.place(top) {
        p.body_mut(place.parent).remove(place.index);
    }
    top
}

/// The child of `parent`'s body (index) whose subtree contains `node`, if any.
pub fn child_containing(p: &Program, parent: Option<LoopId>, node: Node) -> Option<usize> {
    let body = p.body(parent);
    body.iter()
        .position(|c| *c == node || matches!(c, Node::Loop(l) if p.is_ancestor(*l, node)))
}

/// Names of blocks, joined for messages.
pub fn block_names(p: &Program, blocks: &[BlockId]) -> String {
    blocks
        .iter()
        .map(|b| p.block(*b).name.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A loop nest over `shape` with one block `dst[v] = src[v]`, guarded as
/// `if_then_else(v < bound, src[v], 0)` where `bound` (the source's shape) is given and
/// smaller than `shape`.
pub fn copy_nest(
    p: &mut Program,
    name: &str,
    src: BufferId,
    dst: BufferId,
    shape: &[i64],
    bound: Option<&[i64]>,
) -> Node {
    let mut iter_vars = Vec::new();
    let mut loops = Vec::new();
    for (d, ext) in shape.iter().enumerate() {
        loops.push(p.new_loop(format!("ax{d}"), *ext, Vec::new()));
        iter_vars.push(IterVar {
            var: p.new_var(format!("v{d}")),
            extent: *ext,
            kind: IterKind::Spatial,
        });
    }
    let idx: Vec<Expr> = iter_vars.iter().map(|iv| Expr::Var(iv.var)).collect();
    let load = Expr::Load(src, idx.clone());
    let in_bounds = bound.and_then(|bound| {
        iter_vars
            .iter()
            .zip(shape.iter().zip(bound))
            .filter(|(_, (ext, b))| ext > b)
            .map(|(iv, (_, b))| Expr::lt(Expr::Var(iv.var), Expr::Int(*b)))
            .reduce(Expr::and)
    });
    let value = match in_bounds {
        Some(c) => Expr::select(c, load, Expr::Float(0.0)),
        None => load,
    };
    let block = Block {
        name: name.into(),
        bindings: loops.iter().map(|l| Expr::Var(p.lp(*l).var)).collect(),
        iter_vars,
        predicate: None,
        init: None,
        body: Store {
            buffer: dst,
            indices: idx,
            value,
        },
        annotations: BTreeMap::new(),
    };
    let b = p.new_block(block);
    let mut body = vec![Node::Block(b)];
    for l in loops.iter().rev() {
        p.lp_mut(*l).body = body;
        body = vec![Node::Loop(*l)];
    }
    body[0]
}

/// The buffer block `b` writes, named by `buffer_index` (a block writes one buffer, so
/// only 0 is valid).
pub fn written_buffer(
    p: &Program,
    b: BlockId,
    buffer_index: i64,
) -> super::error::Result<crate::ir::BufferId> {
    let blk = p.block(b);
    if buffer_index != 0 {
        return Err(super::error::ScheduleError::IndexOutOfRange {
            block: blk.name.clone(),
            what: "written buffers",
            index: buffer_index,
            count: 1,
        });
    }
    Ok(blk.body.buffer)
}

/// The first of `loops` (extent above 1) over which block `b` would not visit each point
/// of its iteration space once: a loop no binding uses (the block runs again on every
/// iteration of it), or one whose terms in a binding overlap those of a loop before it
/// (`6 * j0 + ax1` with `ax1` over 12 visits columns 6-11 twice). A binding not affine in
/// these loops (digits of a fused loop, `f * 3 // 5 + ax0`) or a loop two bindings use is
/// judged by visiting every iteration of the loops where they are at most
/// [`ENUMERATED_ITERATIONS`] (the loops outside them at 0), and not judged beyond.
/// `None`: as far as that shows, each point once. A block that reads the buffer it
/// updates may not repeat: the repetitions would accumulate again.
pub fn repeating_loop(p: &Program, b: BlockId, loops: &[LoopId]) -> Option<LoopId> {
    let vars: BTreeMap<VarId, LoopId> = loops
        .iter()
        .filter(|l| p.lp(**l).extent > 1)
        .map(|l| (p.lp(*l).var, *l))
        .collect();
    let blk = p.block(b);
    let bindings = &blk.bindings;
    let users = |v: VarId| bindings.iter().filter(|e| e.uses_var(v)).count();
    // Conjuncts `sum < bound` of the predicate over these loops alone cap the reach of
    // that sum (an imperfect split's last tile, masked where it passes the extent).
    let caps: Vec<(BTreeMap<VarId, i64>, i64)> = blk
        .predicate
        .iter()
        .flat_map(Expr::conjuncts)
        .filter_map(|c| {
            let (lhs, most) = match &c {
                Expr::Bin(BinOp::Lt, lhs, rhs) => (lhs, rhs.as_int()? - 1),
                Expr::Bin(BinOp::Le, lhs, rhs) => (lhs, rhs.as_int()?),
                _ => return None,
            };
            let only_loops = lhs.vars().iter().all(|v| vars.contains_key(v))
                && simplify(&lhs.substitute(&|_| Some(Expr::Int(0))), &|_| None).as_int()
                    == Some(0);
            let terms = affine_terms(lhs, &|v| vars.contains_key(&v))?;
            only_loops.then(|| (terms.into_iter().map(|(c, v)| (v, c)).collect(), most))
        })
        .collect();
    if let Some((_, l)) = vars.iter().find(|(v, _)| users(**v) == 0) {
        return Some(*l);
    }
    let mut unjudged = false;
    for e in bindings {
        let Some(terms) = affine_terms(e, &|v| vars.contains_key(&v)) else {
            unjudged |= e.vars().iter().any(|v| vars.contains_key(v));
            continue;
        };
        unjudged |= terms.iter().any(|(c, v)| *c != 0 && users(*v) > 1);
        let mut terms: Vec<(i64, i64, LoopId)> = terms
            .into_iter()
            .filter(|(c, v)| *c != 0 && users(*v) == 1)
            .map(|(c, v)| (c.abs(), p.lp(vars[&v]).extent, vars[&v]))
            .collect();
        terms.sort();
        let mut reach = 0;
        let mut partial: BTreeMap<VarId, i64> = BTreeMap::new();
        for (c, extent, l) in terms {
            if c <= reach {
                return Some(l);
            }
            reach += c * (extent - 1);
            partial.insert(p.lp(l).var, c);
            for (sum, most) in &caps {
                if *sum == partial {
                    reach = reach.min(*most);
                }
            }
        }
    }
    if unjudged {
        return repeating_by_visit(p, b, loops);
    }
    None
}

/// The most iterations [`repeating_loop`] visits one by one.
pub const ENUMERATED_ITERATIONS: i64 = 4096;

/// [`repeating_loop`] by visiting every iteration of `loops` (those outside at 0): the
/// outermost loop on which two iterations the predicate lets through differ while every
/// binding has the same value; `None` when none do, or when there are more than
/// [`ENUMERATED_ITERATIONS`].
fn repeating_by_visit(p: &Program, b: BlockId, loops: &[LoopId]) -> Option<LoopId> {
    let blk = p.block(b);
    let loop_vars: Vec<VarId> = loops.iter().map(|l| p.lp(*l).var).collect();
    // A loop that is alone in the one binding that uses it, with a nonzero coefficient
    // (a reduction's `rc = ax4`), and that the predicate does not read, walks a dimension
    // of its own once: two iterations that differ on it never meet, and which others meet
    // does not depend on it, so it is held at 0 and only the others are visited (a conv's
    // three reduction loops multiplied the count past the bound).
    let own_dimension = |v: VarId| {
        if blk.predicate.as_ref().is_some_and(|c| c.uses_var(v)) {
            return false;
        }
        let mut users = blk.bindings.iter().filter(|e| e.uses_var(v));
        let (Some(e), None) = (users.next(), users.next()) else {
            return false;
        };
        let alone = e.vars().iter().all(|x| *x == v || !loop_vars.contains(x));
        alone
            && affine_terms(e, &|x| x == v)
                .is_some_and(|t| t.iter().any(|(c, x)| *x == v && *c != 0))
    };
    let loops: Vec<LoopId> = loops
        .iter()
        .copied()
        .filter(|l| p.lp(*l).extent > 1 && !own_dimension(p.lp(*l).var))
        .collect();
    let extents: Vec<i64> = loops.iter().map(|l| p.lp(*l).extent).collect();
    let total = extents
        .iter()
        .try_fold(1i64, |a, e| a.checked_mul(*e))
        .filter(|t| *t <= ENUMERATED_ITERATIONS)?;
    let mut seen: std::collections::HashMap<Vec<i64>, Vec<i64>> = Default::default();
    for n in 0..total {
        let mut rest = n;
        let mut at = vec![0; loops.len()];
        for (k, e) in extents.iter().enumerate().rev() {
            at[k] = rest % e;
            rest /= e;
        }
        let env = |v: VarId| {
            loops
                .iter()
                .position(|l| p.lp(*l).var == v)
                .map_or(0, |k| at[k])
        };
        if blk
            .predicate
            .as_ref()
            .is_some_and(|c| c.eval_int(&env) == 0)
        {
            continue;
        }
        let point: Vec<i64> = blk.bindings.iter().map(|e| e.eval_int(&env)).collect();
        if let Some(before) = seen.insert(point, at.clone()) {
            let k = (0..loops.len()).find(|&k| before[k] != at[k])?;
            return Some(loops[k]);
        }
    }
    None
}

/// `e` as a sum of `coefficient * variable` over the variables `of` selects (the rest
/// counts as a constant), coefficients of one variable added; `None` where `e` is not
/// affine in them.
pub fn affine_terms(e: &Expr, of: &dyn Fn(VarId) -> bool) -> Option<Vec<(i64, VarId)>> {
    fn go(
        e: &Expr,
        scale: i64,
        of: &dyn Fn(VarId) -> bool,
        out: &mut BTreeMap<VarId, i64>,
    ) -> bool {
        let free = |x: &Expr| x.vars().into_iter().all(|v| !of(v));
        match e {
            Expr::Var(v) if of(*v) => {
                *out.entry(*v).or_insert(0) += scale;
                true
            }
            Expr::Bin(BinOp::Add, a, b) => go(a, scale, of, out) && go(b, scale, of, out),
            Expr::Bin(BinOp::Sub, a, b) => go(a, scale, of, out) && go(b, -scale, of, out),
            Expr::Bin(BinOp::Mul, a, b) => match (&**a, &**b) {
                (Expr::Int(c), x) | (x, Expr::Int(c)) => go(x, scale * c, of, out),
                _ => free(e),
            },
            _ => free(e),
        }
    }
    let mut out = BTreeMap::new();
    go(e, 1, of, &mut out).then(|| out.into_iter().map(|(v, c)| (c, v)).collect())
}
