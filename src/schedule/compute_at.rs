//! `compute_at` and `reverse_compute_at`: moving a block under a loop of its consumer
//! (or producer), computing only the region used (or produced) in one iteration.
//!
//! Region analysis: the accesses of the other side under the target loop are rewritten in
//! terms of loop variables; loops at or above the target are fixed (symbolic) and loops
//! below it are relaxed over their whole range, so each index becomes
//! `fixed_part + [lo, hi]`. For a shared buffer the thread loops above the target are
//! relaxed too: the region is what the whole thread block uses, which is what makes a
//! cooperative fetch possible. Regions are clamped to the buffer (or iteration domain):
//! constant ranges are cut, symbolic ones get a predicate.
//!
//! A write-back (`reverse_compute_at`) may not write more than its producers wrote in that
//! iteration: a point outside would copy a value another iteration (another thread) owns.
//! Its box is exact when every index is a fixed part plus a part over relaxed loops alone,
//! no relaxed loop moves two indices, and an affine relaxed part leaves no gap in its box.
//! It is not when the producer's indices are `floordiv`/`floormod` digits of one fused
//! index whose tile is not aligned to the digits (the implicit-GEMM view of a conv: `n, p,
//! q` from one `n*p*q` axis): the box of such a digit is its whole range; nor when a split
//! axis's outer part is relaxed over a fixed inner part (`i0 * 6 + i1`, `i0` relaxed)
//! reaching two rows of a box of seven, where an update would accumulate into rows other
//! iterations own. Then the consumer iterates over copies of the relaxed loops
//! its producer's store indices use, each index bound to the producer's expression over
//! them, so it writes exactly the points written there.
//!
//! Invariant: the moved block computes every point the other side reads in that iteration
//! (perhaps more, never less), before it (`compute_at`); or exactly the points its
//! producers write in that iteration, after them (`reverse_compute_at`).

use super::error::{Result, ScheduleError};
use super::util::*;
use crate::ir::interval::Interval;
use crate::ir::offset::index_box;
use crate::ir::simplify::{range_of, simplify, split_terms};
use crate::ir::{
    BinOp, BlockId, BufferId, BufferKind, Expr, IterKind, LoopId, LoopKind, Node, Program, Scope,
    ThreadTag, VarId,
};
use std::collections::{BTreeMap, HashSet};

/// One dimension of a region: `base + [lo, hi]`, `base` over the fixed loops.
#[derive(Clone, Debug)]
pub(super) struct Dim {
    pub(super) base: Expr,
    pub(super) lo: i64,
    pub(super) hi: i64,
}

/// The variables that stay symbolic for one iteration of `target`.
fn fixed_vars(p: &Program, target: LoopId, scope: Scope) -> HashSet<VarId> {
    let mut chain = p.ancestors(Node::Loop(target));
    chain.push(target);
    chain
        .into_iter()
        .filter(|l| {
            let relax = match (scope, p.lp(*l).kind) {
                (
                    Scope::Shared,
                    LoopKind::Thread(ThreadTag::ThreadIdx(_) | ThreadTag::VThread(_)),
                ) => true,
                (Scope::Global | Scope::Shared | Scope::Local | Scope::Fragment, _) => false,
            };
            !relax
        })
        .map(|l| p.lp(l).var)
        .collect()
}

/// Rewrites `indices` (in `b`'s iteration variables) in terms of loop variables,
/// simplified over `ranges` (the program's [`loop_ranges`], gathered once by the caller).
fn in_loop_vars(
    p: &Program,
    ranges: &BTreeMap<VarId, i64>,
    b: BlockId,
    indices: &[Expr],
) -> Vec<Expr> {
    let blk = p.block(b);
    let map: BTreeMap<VarId, Expr> = blk
        .iter_vars
        .iter()
        .zip(&blk.bindings)
        .map(|(iv, e)| (iv.var, e.clone()))
        .collect();
    indices
        .iter()
        .map(|e| simplify_over(ranges, &e.substitute(&|v| map.get(&v).cloned())))
        .collect()
}

/// The region covered by `accesses` (block, indices) for one iteration of `target`.
pub(super) fn region(
    p: &Program,
    accesses: &[(BlockId, Vec<Expr>)],
    target: LoopId,
    scope: Scope,
    rank: usize,
) -> Vec<Dim> {
    let fixed = fixed_vars(p, target, scope);
    let ext = loop_ranges(p);
    let range = |v: VarId| ext.get(&v).map(|&x| Interval::new(0, x - 1));
    let mut dims: Vec<Option<Dim>> = vec![None; rank];
    let mut constant: Vec<bool> = vec![false; rank];
    let mut per_access: Vec<Vec<Dim>> = Vec::new();
    for (b, idx) in accesses {
        let idx = in_loop_vars(p, &ext, *b, idx);
        let mut row = Vec::new();
        for e in idx.iter() {
            // Where neither the linear split nor the floordiv bound (the block's rows of a
            // fused p*q axis) separates the fixed part: the range over all loops.
            let dim = match index_box(e, &|v| fixed.contains(&v), &range) {
                Some((base, lo, hi)) => Dim { base, lo, hi },
                None => {
                    let r = range_of(e, &range);
                    Dim {
                        base: Expr::Int(0),
                        lo: r.min,
                        hi: r.max,
                    }
                }
            };
            row.push(dim);
        }
        per_access.push(row);
    }
    for row in &per_access {
        for (d, dim) in row.iter().enumerate() {
            dims[d] = Some(match dims[d].take() {
                None => dim.clone(),
                Some(acc) if acc.base == dim.base => Dim {
                    base: acc.base,
                    lo: acc.lo.min(dim.lo),
                    hi: acc.hi.max(dim.hi),
                },
                Some(_) => {
                    constant[d] = true;
                    dim.clone()
                }
            });
        }
    }
    // Dimensions whose bases disagree fall back to the constant range over all loops.
    for d in 0..rank {
        if constant[d] {
            let mut acc: Option<Interval> = None;
            for (b, idx) in accesses {
                let e = &in_loop_vars(p, &ext, *b, idx)[d];
                let r = range_of(e, &range);
                acc = Some(acc.map_or(r, |a| a.union(r)));
            }
            let r = acc.expect("at least one access");
            dims[d] = Some(Dim {
                base: Expr::Int(0),
                lo: r.min,
                hi: r.max,
            });
        }
    }
    dims.into_iter()
        .map(|d| {
            d.unwrap_or(Dim {
                base: Expr::Int(0),
                lo: 0,
                hi: 0,
            })
        })
        .collect()
}

/// Maps each dimension of a `rank`-d access to the position of the iteration variable it
/// is, when the access indices are distinct spatial iteration variables of `b`.
fn identity_dims(p: &Program, b: BlockId, indices: &[Expr]) -> Option<Vec<usize>> {
    let blk = p.block(b);
    let mut out = Vec::new();
    for e in indices {
        let Expr::Var(v) = e else { return None };
        let pos = blk
            .iter_vars
            .iter()
            .position(|iv| iv.var == *v && iv.kind == IterKind::Spatial)?;
        if out.contains(&pos) {
            return None;
        }
        out.push(pos);
    }
    Some(out)
}

/// Rebuilds the loops of `b` from a region: one loop per iteration variable (none for a
/// unit range), bindings `base + lo + ax`, and a predicate where the region may leave
/// `[0, extent)`. Returns the top node of the new nest.
pub(super) fn rebuild(
    p: &mut Program,
    b: BlockId,
    dim_of_iter: &BTreeMap<usize, Dim>,
    scope_node: Node,
) -> Node {
    let blk = p.block(b).clone();
    // New loops nest under the target: only names visible there can clash.
    let taken: HashSet<String> = match scope_node {
        Node::Loop(l) => p
            .ancestors(scope_node)
            .into_iter()
            .chain([l])
            .map(|x| p.loop_name(x).to_string())
            .collect(),
        Node::Block(_) => HashSet::new(),
    };
    let ext = loop_ranges(p);
    let mut loops: Vec<LoopId> = Vec::new();
    let mut bindings = Vec::new();
    let mut guards: Vec<Expr> = Vec::new();
    let mut used = taken.clone();
    for (i, iv) in blk.iter_vars.iter().enumerate() {
        let (base, lo, hi) = match dim_of_iter.get(&i) {
            Some(d) if matches!(d.base, Expr::Int(_)) => {
                let b0 = d.base.as_int().unwrap_or(0);
                (
                    Expr::Int(0),
                    (b0 + d.lo).max(0),
                    (b0 + d.hi).min(iv.extent - 1),
                )
            }
            Some(d) => (d.base.clone(), d.lo, d.hi),
            None => (Expr::Int(0), 0, iv.extent - 1),
        };
        let extent = (hi - lo + 1).max(1);
        let start = Expr::add(base, Expr::Int(lo));
        let binding = if extent == 1 {
            start
        } else {
            let name = unique(&format!("ax{i}"), &used);
            used.insert(name.clone());
            let l = p.new_loop(name, extent, Vec::new());
            loops.push(l);
            Expr::add(start, Expr::Var(p.lp(l).var))
        };
        let mut all = ext.clone();
        for l in &loops {
            all.insert(p.lp(*l).var, p.lp(*l).extent);
        }
        let binding = simplify(&binding, &|v| all.get(&v).map(|&x| Interval::new(0, x - 1)));
        guards.extend(bound_guards(&binding, iv.extent, &all));
        bindings.push(binding);
    }
    let pred = guards
        .into_iter()
        .reduce(|a, g| Expr::bin(BinOp::And, a, g));
    install(p, b, &loops, bindings, pred)
}

/// Guards keeping `binding` (over loops of `ranges`) in `[0, extent)`, where the ranges do
/// not prove it.
fn bound_guards(binding: &Expr, extent: i64, ranges: &BTreeMap<VarId, i64>) -> Vec<Expr> {
    let r = range_of(binding, &|v| {
        ranges.get(&v).map(|&x| Interval::new(0, x - 1))
    });
    let mut guards = Vec::new();
    if !r.is_bounded() || r.min < 0 {
        guards.push(Expr::bin(BinOp::Ge, binding.clone(), Expr::Int(0)));
    }
    if !r.is_bounded() || r.max >= extent {
        guards.push(Expr::bin(BinOp::Lt, binding.clone(), Expr::Int(extent)));
    }
    guards
}

/// Nests `b` in `loops` (outermost first) with `bindings` and `predicate`; returns the top
/// node of the nest.
fn install(
    p: &mut Program,
    b: BlockId,
    loops: &[LoopId],
    bindings: Vec<Expr>,
    predicate: Option<Expr>,
) -> Node {
    let mut body = vec![Node::Block(b)];
    for l in loops.iter().rev() {
        p.lp_mut(*l).body = body;
        body = vec![Node::Loop(*l)];
    }
    let blk = p.block_mut(b);
    blk.bindings = bindings;
    blk.predicate = predicate;
    body[0]
}

/// Whether the box of `accesses` under one iteration of `target` is exactly the set of
/// points they touch: every index is a part over the fixed loops plus a part over relaxed
/// loops alone, and no relaxed loop appears in two indices of one access.
fn box_is_exact(
    p: &Program,
    accesses: &[(BlockId, Vec<Expr>)],
    target: LoopId,
    scope: Scope,
) -> bool {
    let fixed = fixed_vars(p, target, scope);
    let ext = loop_ranges(p);
    let range = |v: VarId| ext.get(&v).map(|&x| Interval::new(0, x - 1));
    accesses.iter().all(|(b, idx)| {
        let mut seen: HashSet<VarId> = HashSet::new();
        in_loop_vars(p, &ext, *b, idx).iter().all(|e| {
            let (_, rest) = split_terms(e, &|v| fixed.contains(&v), &range);
            rest.vars()
                .into_iter()
                .all(|v| !fixed.contains(&v) && seen.insert(v))
                && dense(&rest, &ext)
        })
    })
}

/// Whether the values of the relaxed part of an index fill its box: an affine sum
/// `c1 * v1 + c2 * v2 + ...` over loops of extents `e_k` leaves no gap when, by growing
/// `|c|`, each coefficient is at most one past the reach of the terms before it. A split
/// axis whose outer part is relaxed and whose inner part is fixed (`i0 * 6 + i1`, `i1`
/// fixed) reaches 0 and 6 only, where its box has 7 points. A part that is not affine
/// (digits of a fused index) is judged by the rule of one index a loop alone.
fn dense(rest: &Expr, ext: &BTreeMap<VarId, i64>) -> bool {
    let Some(ts) = affine_terms(rest, &|_| true) else {
        return true;
    };
    let mut ts: Vec<(i64, i64)> = ts
        .into_iter()
        .map(|(c, v)| (c.abs(), ext.get(&v).copied().unwrap_or(1)))
        .filter(|(c, e)| *c != 0 && *e > 1)
        .collect();
    ts.sort();
    let mut reach = 0;
    for (c, e) in ts {
        if c > reach + 1 {
            return false;
        }
        reach += c * (e - 1);
    }
    true
}

/// Rebuilds the loops of consumer `b` as copies of the loops that the store indices of its
/// producer `w` use and that one iteration of `target` relaxes (nest order), each
/// dimension's iteration variable bound to the producer's index over the copies (`dims`:
/// the iteration variable of each dimension). Iteration variables no dimension names
/// get a loop over their whole extent. The predicate keeps the indices in bounds and
/// carries the conjuncts of the producer's predicate over these loops, so `b` visits
/// exactly the points `w` writes in one iteration of `target`. Returns the top node.
fn rebuild_exact(
    p: &mut Program,
    b: BlockId,
    dims: &[usize],
    w: BlockId,
    target: LoopId,
    scope: Scope,
) -> Node {
    let fixed = fixed_vars(p, target, scope);
    let store = in_loop_vars(p, &loop_ranges(p), w, &p.block(w).body.indices.clone());
    let used: HashSet<VarId> = store.iter().flat_map(|e| e.vars()).collect();
    let relaxed: Vec<LoopId> = p
        .ancestors(Node::Block(w))
        .into_iter()
        .filter(|l| {
            let v = p.lp(*l).var;
            used.contains(&v) && !fixed.contains(&v)
        })
        .collect();
    let mut taken: HashSet<String> = p
        .ancestors(Node::Loop(target))
        .into_iter()
        .chain([target])
        .map(|x| p.loop_name(x).to_string())
        .collect();
    let mut loops = Vec::new();
    let mut map: BTreeMap<VarId, Expr> = BTreeMap::new();
    let mut fresh = |p: &mut Program, extent: i64, loops: &mut Vec<LoopId>| {
        let name = unique(&format!("ax{}", loops.len()), &taken);
        taken.insert(name.clone());
        let l = p.new_loop(name, extent, Vec::new());
        loops.push(l);
        p.lp(l).var
    };
    for old in &relaxed {
        let extent = p.lp(*old).extent;
        let copy = match extent {
            1 => Expr::Int(0),
            _ => Expr::Var(fresh(p, extent, &mut loops)),
        };
        map.insert(p.lp(*old).var, copy);
    }
    let blk = p.block(b).clone();
    let mut bindings = Vec::new();
    for (i, iv) in blk.iter_vars.iter().enumerate() {
        let binding = match dims.iter().position(|it| *it == i) {
            Some(d) => store[d].substitute(&|v| map.get(&v).cloned()),
            None => Expr::Var(fresh(p, iv.extent, &mut loops)),
        };
        bindings.push(binding);
    }
    let mut all = loop_ranges(p);
    for l in &loops {
        all.insert(p.lp(*l).var, p.lp(*l).extent);
    }
    let range = |v: VarId| all.get(&v).map(|&x| Interval::new(0, x - 1));
    let bindings: Vec<Expr> = bindings.iter().map(|e| simplify(e, &range)).collect();
    let mut guards = Vec::new();
    if let Some(pred) = &p.block(w).predicate {
        let parts = pred.conjuncts();
        let known = |v: &VarId| fixed.contains(v) || map.contains_key(v);
        guards.extend(
            parts
                .into_iter()
                .filter(|c| c.vars().iter().all(known))
                .map(|c| c.substitute(&|v| map.get(&v).cloned())),
        );
    }
    for (iv, e) in blk.iter_vars.iter().zip(&bindings) {
        guards.extend(bound_guards(e, iv.extent, &all));
    }
    let pred = guards
        .into_iter()
        .reduce(|a, g| Expr::bin(BinOp::And, a, g))
        .and_then(|e| {
            let s = simplify(&e, &range);
            (s.as_int().is_none() || s.as_int() == Some(0)).then_some(s)
        });
    install(p, b, &loops, bindings, pred)
}

/// Adds to consumer `b`'s predicate the conjuncts of producer `w`'s predicate over the
/// loops fixed in one iteration of `target`: where they mask an iteration, `w` writes
/// nothing in it, and the points `b` would visit there are written in other iterations
/// (an imperfect split's last tile reaching into the next one), so an update visiting
/// them would accumulate twice.
fn skip_where_masked(p: &mut Program, b: BlockId, w: BlockId, target: LoopId, scope: Scope) {
    let fixed = fixed_vars(p, target, scope);
    let carried: Vec<Expr> = p
        .block(w)
        .predicate
        .iter()
        .flat_map(Expr::conjuncts)
        .filter(|c| {
            let vars = c.vars();
            !vars.is_empty() && vars.iter().all(|v| fixed.contains(v))
        })
        .collect();
    let blk = p.block_mut(b);
    blk.predicate = carried
        .into_iter()
        .chain(blk.predicate.take())
        .reduce(|a, g| Expr::bin(BinOp::And, a, g));
}

/// The blocks other than `b` that write `buf`, when all are under `target` and complete
/// there (no reduction of theirs still running across iterations of `target`).
pub(super) fn complete_producers(
    p: &Program,
    b: BlockId,
    buf: BufferId,
    target: LoopId,
) -> Result<Vec<BlockId>> {
    let name = p.block(b).name.clone();
    let tname = p.loop_name(target).to_string();
    let producers: Vec<BlockId> = p.writers(buf).into_iter().filter(|w| *w != b).collect();
    let outside: Vec<BlockId> = producers
        .iter()
        .copied()
        .filter(|w| !p.is_ancestor(target, Node::Block(*w)))
        .collect();
    if !outside.is_empty() {
        return Err(ScheduleError::ProducerNotUnderLoop {
            block: name,
            target: tname,
            producers: block_names(p, &outside),
        });
    }
    let mut fixed_loops = p.ancestors(Node::Loop(target));
    fixed_loops.push(target);
    for w in &producers {
        let blk = p.block(*w);
        for (iv, e) in blk.iter_vars.iter().zip(&blk.bindings) {
            if iv.kind == IterKind::Reduce && fixed_loops.iter().any(|l| e.uses_var(p.lp(*l).var)) {
                return Err(ScheduleError::IncompleteProducer {
                    block: name,
                    target: tname,
                    producer: blk.name.clone(),
                });
            }
        }
    }
    Ok(producers)
}

/// Inserts `top` into the body of `target` after the last child holding one of
/// `producers`.
pub(super) fn insert_after_producers(
    p: &mut Program,
    target: LoopId,
    producers: &[BlockId],
    top: Node,
) {
    let last = producers
        .iter()
        .filter_map(|w| child_containing(p, Some(target), Node::Block(*w)))
        .max()
        .map_or(0, |i| i + 1);
    p.lp_mut(target).body.insert(last, top);
}

pub(super) fn common_checks(p: &Program, b: BlockId, target: LoopId) -> Result<()> {
    if p.is_ancestor(target, Node::Block(b)) {
        return Err(ScheduleError::AlreadyUnderLoop {
            block: p.block(b).name.clone(),
            target: p.loop_name(target).into(),
        });
    }
    Ok(())
}

/// Moves producer `b` under `target`, before the first consumer there, computing the
/// region its consumers read in one iteration of `target`. A block already nested under
/// `target` (deeper, beside its consumers) moves out to it: it then computes, once per
/// iteration of `target`, what it computed over that iteration's inner loops (a fragment
/// stage loaded for a whole shared stage instead of per reduction step). Refused where
/// a block under `target` writes what `b` reads at or after that place.
pub fn compute_at(p: &mut Program, b: BlockId, target: LoopId) -> Result<()> {
    let name = p.block(b).name.clone();
    let tname = p.loop_name(target).to_string();
    // 1. A non-output block, the only writer of its buffer, whose consumers are all under
    //    the target loop.
    let buf = p.block(b).body.buffer;
    if p.buffer(buf).kind == BufferKind::Output {
        return Err(ScheduleError::OutputBlock {
            block: name,
            buffer: p.buffer(buf).name.clone(),
        });
    }
    let writers = p.writers(buf);
    if writers != [b] {
        return Err(ScheduleError::NotSingleWriter {
            buffer: p.buffer(buf).name.clone(),
            writers: block_names(p, &writers),
            primitive: "compute_at",
        });
    }
    let consumers: Vec<BlockId> = p.readers(buf).into_iter().filter(|c| *c != b).collect();
    if consumers.is_empty() {
        return Err(ScheduleError::NoConsumers {
            block: name,
            what: "consumer",
        });
    }
    let outside: Vec<BlockId> = consumers
        .iter()
        .copied()
        .filter(|c| !p.is_ancestor(target, Node::Block(*c)))
        .collect();
    if !outside.is_empty() {
        return Err(ScheduleError::ConsumerNotUnderLoop {
            block: name,
            target: tname,
            consumers: block_names(p, &outside),
        });
    }
    let dims = identity_dims(p, b, &p.block(b).body.indices.clone()).ok_or_else(|| {
        ScheduleError::Unsupported {
            primitive: "compute_at",
            block: name.clone(),
            reason: "its store indices are not its spatial iteration variables".into(),
        }
    })?;
    // 2. The region the consumers read under one iteration of the target.
    let accesses: Vec<(BlockId, Vec<Expr>)> = consumers
        .iter()
        .flat_map(|c| {
            p.block_reads(*c)
                .into_iter()
                .filter(|(rb, _)| *rb == buf)
                .map(move |(_, idx)| (*c, idx))
        })
        .collect();
    let scope = p.buffer(buf).scope;
    let rank = p.buffer(buf).shape.len();
    let reg = region(p, &accesses, target, scope, rank);
    //    What it reads must be written before that place: a block moved out of a nest
    //    beside the writer of its input (a write-back copy beside the update it copies)
    //    would otherwise read that input before it is computed.
    let first = consumers
        .iter()
        .filter_map(|c| child_containing(p, Some(target), Node::Block(*c)))
        .min()
        .unwrap_or(0);
    for (read, _) in p.block_reads(b) {
        let late = p.writers(read).into_iter().find(|w| {
            *w != b
                && child_containing(p, Some(target), Node::Block(*w)).is_some_and(|i| i >= first)
        });
        if let Some(w) = late {
            return Err(ScheduleError::Unsupported {
                primitive: "compute_at",
                block: name,
                reason: format!(
                    "it reads {}, which {} writes under loop {tname} no earlier than the \
                     place before its first consumer there",
                    p.buffer(read).name,
                    p.block(w).name
                ),
            });
        }
    }
    // 3. Detach the block, rebuild its loops, insert before the first consumer.
    remove_exclusive(p, b);
    let dim_of_iter: BTreeMap<usize, Dim> = dims
        .iter()
        .enumerate()
        .map(|(d, it)| (*it, reg[d].clone()))
        .collect();
    let top = rebuild(p, b, &dim_of_iter, Node::Loop(target));
    let first = consumers
        .iter()
        .filter_map(|c| child_containing(p, Some(target), Node::Block(*c)))
        .min()
        .unwrap_or(0);
    p.lp_mut(target).body.insert(first, top);
    Ok(())
}

/// Moves consumer `b` under `target`, after the last producer there, computing the
/// region its producers write in one iteration of `target`, and skipping the iterations
/// where its one producer's predicate writes nothing.
pub fn reverse_compute_at(p: &mut Program, b: BlockId, target: LoopId) -> Result<()> {
    let name = p.block(b).name.clone();
    let tname = p.loop_name(target).to_string();
    common_checks(p, b, target)?;
    // 1. The block reads one produced buffer, all of whose writers are under the target
    //    and complete there (no reduction still running across iterations of the target).
    let produced: Vec<(BufferId, Vec<Expr>)> = p
        .block_reads(b)
        .into_iter()
        .filter(|(buf, _)| {
            p.buffer(*buf).kind != BufferKind::Input && p.writers(*buf).iter().any(|w| *w != b)
        })
        .collect();
    let (buf, read_idx) = match produced.as_slice() {
        [] => {
            return Err(ScheduleError::NoConsumers {
                block: name,
                what: "producer",
            })
        }
        [one] => one.clone(),
        many => {
            let all_same = many.iter().all(|(x, i)| *x == many[0].0 && *i == many[0].1);
            if !all_same {
                return Err(ScheduleError::Unsupported {
                    primitive: "reverse_compute_at",
                    block: name,
                    reason: "it reads more than one produced buffer region".into(),
                });
            }
            many[0].clone()
        }
    };
    let producers = complete_producers(p, b, buf, target)?;
    let dims = identity_dims(p, b, &read_idx).ok_or_else(|| ScheduleError::Unsupported {
        primitive: "reverse_compute_at",
        block: name.clone(),
        reason: format!(
            "it does not read {} at its spatial iteration variables",
            p.buffer(buf).name
        ),
    })?;
    // 2. The region the producers write under one iteration of the target.
    let accesses: Vec<(BlockId, Vec<Expr>)> = producers
        .iter()
        .map(|w| (*w, p.block(*w).body.indices.clone()))
        .collect();
    //    Where its box is not exact (see the module doc), the consumer replays the loops
    //    of its one producer instead.
    let scope = p.buffer(buf).scope;
    let exact_box = box_is_exact(p, &accesses, target, scope);
    let single = match producers.as_slice() {
        [w] => Some(*w),
        _ => None,
    };
    if !exact_box && single.is_none() {
        return Err(ScheduleError::Unsupported {
            primitive: "reverse_compute_at",
            block: name,
            reason: format!(
                "the region its producers {} write under loop {tname} is not a box",
                block_names(p, &producers)
            ),
        });
    }
    let reg = region(p, &accesses, target, scope, read_idx.len());
    // 3. Detach, rebuild, insert after the last producer (an update in place is checked
    //    there, step 4, and put back as it was if it may not stay).
    let own = p.block(b).body.buffer;
    let untouched = p
        .block_reads(b)
        .iter()
        .any(|(r, _)| *r == own)
        .then(|| p.clone());
    remove_exclusive(p, b);
    let top = match single {
        Some(w) if !exact_box => rebuild_exact(p, b, &dims, w, target, scope),
        _ => {
            let dim_of_iter: BTreeMap<usize, Dim> = dims
                .iter()
                .enumerate()
                .map(|(d, it)| (*it, reg[d].clone()))
                .collect();
            rebuild(p, b, &dim_of_iter, Node::Loop(target))
        }
    };
    if let (Some(w), true) = (single, exact_box) {
        skip_where_masked(p, b, w, target, scope);
    }
    insert_after_producers(p, target, &producers, top);
    // 4. An update in place (it reads what it writes) runs once for each point: under a
    //    thread loop a shared region is relaxed over, every thread would add it again.
    if let Some(untouched) = untouched {
        let nest = p.ancestors(Node::Block(b));
        if let Some(l) = repeating_loop(p, b, &nest) {
            let reason = format!(
                "it updates {} in place and would run more than once for some points there \
                 (over loop {})",
                p.buffer(own).name,
                p.loop_name(l)
            );
            *p = untouched;
            return Err(ScheduleError::Unsupported {
                primitive: "reverse_compute_at",
                block: name,
                reason,
            });
        }
    }
    Ok(())
}
