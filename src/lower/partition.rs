//! Loop partitioning of a guarded copy (CPU): the zero-filled copy of a conv's padded
//! input writes each row as `t2[.. + q] = (p in range && 1 <= q && q < 15) ? t0[..] : 0`,
//! a load the compiler may not hoist out of its condition (the index is out of bounds
//! where the condition is false), so the row runs as scalar code with a branch an
//! element (the c256 14 x 14 conv's copy of 256 KB took 0.2 of its 1.0 ms, 2026-11-29).
//!
//! An innermost loop (serial or vectorized) whose body is one store of
//! `select(c, a, b)`, where every conjunct of `c` that reads the loop variable bounds it
//! (or it plus a constant) by a constant (`q >= 1`, `q < 15`, `14 >= q` ...), becomes
//! the loop's three ranges, each partitioned again where it stores a select still (a
//! copy inlined into a copy):
//! `[0, lo)` storing `b`, `[lo, hi)` storing `a` where the other conjuncts hold (`b` where
//! they do not), `[hi, N)` storing `b`, each a loop of the same kind, its variable
//! shifted by the range's start. The middle loop reads `a` unconditionally: a row of
//! contiguous loads the compiler vectorizes. Empty ranges are left out (a condition that
//! does not read the loop variable, as an NHWC conv's padded copy along its channels,
//! leaves the middle range alone: the loop unswitched); a loop whose condition reads its
//! variable any other way is kept as it is.

use super::kernel::{ForKind, KStmt};
use crate::ir::interval::bound as range_over;
use crate::ir::simplify::simplify;
use crate::ir::{BinOp, Expr, UnOp, VarId};
use std::collections::BTreeMap;

/// Partitions every qualifying innermost loop in `body` (see the module doc).
pub fn partition(body: &mut Vec<KStmt>) {
    let mut out = Vec::with_capacity(body.len());
    for mut st in body.drain(..) {
        match &mut st {
            KStmt::For { body, .. } | KStmt::If { then: body, .. } => partition(body),
            _ => {}
        }
        match split(&st) {
            // A part may store a guarded value again (a copy of a copy, inlined: nested
            // selects); each split takes one select away.
            Some(mut parts) => {
                partition(&mut parts);
                out.extend(parts)
            }
            None => out.push(st),
        }
    }
    *body = out;
}

/// The statements that replace `st`, where it is a loop partitioning applies to.
fn split(st: &KStmt) -> Option<Vec<KStmt>> {
    let KStmt::For {
        var,
        extent,
        kind: kind @ (ForKind::Serial | ForKind::Vectorized),
        body,
    } = st
    else {
        return None;
    };
    let mut stores = body.iter().filter(|s| !matches!(s, KStmt::Comment(_)));
    let Some(KStmt::Store {
        buffer,
        indices,
        value: Expr::Select(cond, then, other),
    }) = stores.next()
    else {
        return None;
    };
    if stores.next().is_some() {
        return None;
    }
    let (mut lo, mut hi) = (0, *extent);
    let mut rest = Vec::new();
    for c in cond.conjuncts() {
        if !c.uses_var(*var) {
            rest.push(c);
            continue;
        }
        let (from, to) = bound(&c, *var)?;
        lo = lo.max(from);
        hi = hi.min(to);
    }
    let hi = hi.max(lo).min(*extent);
    let lo = lo.min(hi);
    let comments: Vec<KStmt> = body
        .iter()
        .filter(|s| matches!(s, KStmt::Comment(_)))
        .cloned()
        .collect();
    let range = |from: i64, to: i64, value: &Expr| -> Option<KStmt> {
        (to > from).then(|| {
            let shift = |e: &Expr| {
                e.substitute(&|v| (v == *var).then(|| Expr::add(Expr::Var(*var), Expr::Int(from))))
            };
            let mut body = comments.clone();
            body.push(KStmt::Store {
                buffer: *buffer,
                indices: indices.iter().map(shift).collect(),
                value: shift(value),
            });
            KStmt::For {
                var: *var,
                extent: to - from,
                kind: *kind,
                body,
            }
        })
    };
    let mut out: Vec<KStmt> = range(0, lo, other).into_iter().collect();
    match rest.into_iter().reduce(Expr::and) {
        None => out.extend(range(lo, hi, then)),
        Some(inside) => {
            if let Some(l) = range(lo, hi, then) {
                out.push(KStmt::If {
                    cond: inside.clone(),
                    then: vec![l],
                });
            }
            if let Some(l) = range(lo, hi, other) {
                out.push(KStmt::If {
                    cond: Expr::Un(UnOp::Not, Box::new(inside)),
                    then: vec![l],
                });
            }
        }
    }
    out.extend(range(hi, *extent, other));
    Some(out)
}

/// The range `[from, to)` a conjunct comparing `v` (or `v` plus a constant) with a
/// constant confines it to.
fn bound(c: &Expr, v: VarId) -> Option<(i64, i64)> {
    let Expr::Bin(op, a, b) = c else {
        return None;
    };
    // `v + s` (a range shifted by its start, `s` = 0 included) compares as `v`, the
    // constant less `s`.
    let offset = |e: &Expr| match e {
        Expr::Var(x) if *x == v => Some(0),
        Expr::Bin(BinOp::Add, x, y) => match (&**x, &**y) {
            (Expr::Var(x), Expr::Int(s)) | (Expr::Int(s), Expr::Var(x)) if *x == v => Some(*s),
            _ => None,
        },
        _ => None,
    };
    // Put the variable on the left: `k < v` is `v > k`.
    let (op, k) = match (&**a, &**b) {
        (x, Expr::Int(k)) if offset(x).is_some() => (*op, *k - offset(x)?),
        (Expr::Int(k), x) if offset(x).is_some() => (
            match op {
                BinOp::Lt => BinOp::Gt,
                BinOp::Le => BinOp::Ge,
                BinOp::Gt => BinOp::Lt,
                BinOp::Ge => BinOp::Le,
                other => *other,
            },
            *k - offset(x)?,
        ),
        _ => return None,
    };
    match op {
        BinOp::Ge => Some((k, i64::MAX)),
        BinOp::Gt => Some((k + 1, i64::MAX)),
        BinOp::Lt => Some((i64::MIN, k)),
        BinOp::Le => Some((i64::MIN, k + 1)),
        _ => None,
    }
}

/// Peels the tail of serial loops whose body accumulates under a select on their variable
/// (CPU): a reduction split by a vector width that does not divide it leaves its rf block
/// adding `select(c * v + e < k, value, 0)` (`schedule/rfactor.rs`; for a maximum, taking
/// the maximum with `select(.., value, -inf)`), `v` the outer part,
/// `e` over the loops inside it; the iterations of `v` where every `e` passes (`c * v +
/// max(e) < k`) become a loop of their own that adds `value` unconditionally (the
/// vector loop inside it then plain vector code), the rest a loop keeping the select.
/// Loops whose body holds anything but loops, branches, stores and comments are left
/// alone.
pub fn peel_tails(body: &mut Vec<KStmt>) {
    let mut out = Vec::with_capacity(body.len());
    for mut st in body.drain(..) {
        match &mut st {
            KStmt::For { body, .. } | KStmt::If { then: body, .. } => peel_tails(body),
            _ => {}
        }
        match peel(&st) {
            Some(parts) => out.extend(parts),
            None => out.push(st),
        }
    }
    *body = out;
}

/// The two loops that replace `st`, where it is a serial loop [`peel_tails`] applies to.
fn peel(st: &KStmt) -> Option<Vec<KStmt>> {
    let KStmt::For {
        var,
        extent,
        kind: ForKind::Serial,
        body,
    } = st
    else {
        return None;
    };
    let mut inner = BTreeMap::new();
    if !plain_loops(body, &mut inner) {
        return None;
    }
    let mut conds = Vec::new();
    for s in body {
        selects_in(s, &mut conds);
    }
    let at = |x: &Expr, v: i64| {
        simplify(
            &x.substitute(&|u| (u == *var).then_some(Expr::Int(v))),
            &|_| None,
        )
    };
    let (guard, full) = conds
        .iter()
        .flat_map(|c| c.conjuncts())
        .filter(|c| c.uses_var(*var))
        .find_map(|c| {
            let Expr::Bin(BinOp::Lt, x, k) = &c else {
                return None;
            };
            let k = k.as_int()?;
            // x = step * v + e, e free of v.
            let step = simplify(&Expr::sub(at(x, 1), at(x, 0)), &|_| None).as_int()?;
            let e = simplify(
                &Expr::sub((**x).clone(), Expr::mul(Expr::Int(step), Expr::Var(*var))),
                &|_| None,
            );
            let rest = range_over(&e, &inner);
            if step <= 0 || e.uses_var(*var) || !rest.is_bounded() {
                return None;
            }
            // c * v + max(e) < k  <=>  v < (k - max(e)) / c, rounded up.
            let full = (k - rest.max + step - 1).div_euclid(step);
            (0 < full && full < *extent).then_some((c.clone(), full))
        })?;
    let unguarded: Vec<KStmt> = body
        .iter()
        .map(|s| map_exprs(s, &|e| drop_conjunct(e, &guard)))
        .collect();
    let shifted: Vec<KStmt> = body
        .iter()
        .map(|s| {
            map_exprs(s, &|e| {
                e.substitute(&|u| (u == *var).then(|| Expr::add(Expr::Var(*var), Expr::Int(full))))
            })
        })
        .collect();
    Some(vec![
        KStmt::For {
            var: *var,
            extent: full,
            kind: ForKind::Serial,
            body: unguarded,
        },
        KStmt::For {
            var: *var,
            extent: extent - full,
            kind: ForKind::Serial,
            body: shifted,
        },
    ])
}

/// Whether `body` holds only loops, branches, stores and comments; gathers the extents of
/// its loops into `extents`.
fn plain_loops(body: &[KStmt], extents: &mut BTreeMap<VarId, i64>) -> bool {
    body.iter().all(|s| match s {
        KStmt::For {
            var, extent, body, ..
        } => {
            extents.insert(*var, *extent);
            plain_loops(body, extents)
        }
        KStmt::If { then, .. } => plain_loops(then, extents),
        KStmt::Store { .. } | KStmt::Comment(_) => true,
        _ => false,
    })
}

/// The conditions of the masked accumulations in `st`: stores of
/// `b[i] = b[i] + select(c, value, 0)`, or of a maximum or minimum with the select's
/// other side the combiner's identity (`-inf`, `inf`), as `rfactor` of an imperfect
/// split leaves them (a conv's inlined zero padding, a select inside a product, is not
/// one).
fn selects_in(st: &KStmt, out: &mut Vec<Expr>) {
    match st {
        KStmt::For { body, .. } | KStmt::If { then: body, .. } => {
            for s in body {
                selects_in(s, out);
            }
        }
        KStmt::Store {
            buffer,
            indices,
            value: Expr::Bin(op @ (BinOp::Add | BinOp::Max | BinOp::Min), acc, masked),
        } => {
            let identity = match op {
                BinOp::Add => 0.0,
                BinOp::Max => f64::NEG_INFINITY,
                _ => f64::INFINITY,
            };
            if let (Expr::Load(b, idx), Expr::Select(c, _, other)) = (&**acc, &**masked) {
                if b == buffer
                    && idx == indices
                    && matches!(**other, Expr::Float(z) if z == identity)
                {
                    out.push((**c).clone());
                }
            }
        }
        _ => {}
    }
}

/// `e` with the conjunct `guard` taken out of every select's condition (a select left
/// with none is its first branch).
fn drop_conjunct(e: &Expr, guard: &Expr) -> Expr {
    e.rewrite(&mut |x| match x {
        Expr::Select(c, t, o) => {
            let rest = c
                .conjuncts()
                .into_iter()
                .filter(|k| k != guard)
                .reduce(Expr::and);
            match rest {
                None => *t,
                Some(r) => Expr::select(r, *t, *o),
            }
        }
        other => other,
    })
}

/// `st` (loops, branches, stores and comments: see [`plain_loops`]) with `f` applied to
/// each of its expressions.
fn map_exprs(st: &KStmt, f: &impl Fn(&Expr) -> Expr) -> KStmt {
    match st {
        KStmt::For {
            var,
            extent,
            kind,
            body,
        } => KStmt::For {
            var: *var,
            extent: *extent,
            kind: *kind,
            body: body.iter().map(|s| map_exprs(s, f)).collect(),
        },
        KStmt::If { cond, then } => KStmt::If {
            cond: f(cond),
            then: then.iter().map(|s| map_exprs(s, f)).collect(),
        },
        KStmt::Store {
            buffer,
            indices,
            value,
        } => KStmt::Store {
            buffer: *buffer,
            indices: indices.iter().map(f).collect(),
            value: f(value),
        },
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::BufferId;

    fn row(cond: Expr) -> KStmt {
        let q = VarId(0);
        KStmt::For {
            var: q,
            extent: 16,
            kind: ForKind::Vectorized,
            body: vec![
                KStmt::Comment("block t2".into()),
                KStmt::Store {
                    buffer: BufferId(1),
                    indices: vec![Expr::Var(q)],
                    value: Expr::select(
                        cond,
                        Expr::Load(BufferId(0), vec![Expr::sub(Expr::Var(q), Expr::Int(1))]),
                        Expr::Float(0.0),
                    ),
                },
            ],
        }
    }

    #[test]
    fn a_guarded_row_copy_becomes_its_three_ranges() {
        let (q, p) = (Expr::Var(VarId(0)), Expr::Var(VarId(1)));
        let cond = Expr::and(
            Expr::and(
                Expr::ge(p.clone(), Expr::Int(1)),
                Expr::ge(q.clone(), Expr::Int(1)),
            ),
            Expr::and(
                Expr::lt(q.clone(), Expr::Int(15)),
                Expr::lt(p, Expr::Int(15)),
            ),
        );
        let mut parts = vec![row(cond)];
        partition(&mut parts);
        // [0, 1) zeros, [1, 15) the load under `p`'s conjuncts (zeros otherwise), [15, 16).
        let shapes: Vec<String> = parts
            .iter()
            .map(|s| match s {
                KStmt::For { extent, .. } => format!("for {extent}"),
                KStmt::If { then, .. } => match &then[0] {
                    KStmt::For { extent, body, .. } => {
                        let load = matches!(
                            &body[1],
                            KStmt::Store {
                                value: Expr::Load(..),
                                ..
                            }
                        );
                        format!("if for {extent} {}", if load { "load" } else { "zero" })
                    }
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            shapes,
            ["for 1", "if for 14 load", "if for 14 zero", "for 1"]
        );
    }

    #[test]
    fn a_convs_partitioned_padded_copy_computes_the_reference() {
        // The unscheduled conv's padded copy, lowered for the CPU: its rows partitioned,
        // and the kernel, run by the kernel interpreter, computes the reference.
        let w = crate::workload::preset("conv2d_nchw:n=1,c=2,h=5,w=7,k=3,r=3,s=3,stride=1,pad=1")
            .unwrap();
        let program = w.to_program();
        let lowered = crate::lower::lower(&program, crate::lower::Backend::Cpu).unwrap();
        fn has_if(body: &[KStmt]) -> bool {
            body.iter().any(|s| match s {
                KStmt::If { .. } => true,
                KStmt::For { body, .. } => has_if(body),
                _ => false,
            })
        }
        assert!(
            has_if(&lowered.kernels[0].body),
            "{:?}",
            lowered.kernels[0].body
        );
        let err = crate::interp::check_lowered(&program, &lowered, 3).unwrap();
        assert_eq!(err, 0.0);
    }

    #[test]
    fn a_nested_guard_is_partitioned_level_by_level() {
        // A copy inlined into a copy: `q < 15 ? (p >= 1 && q >= 1 ? load : 0) : 0`. Every
        // loop that comes out stores a load or a zero, no select.
        let (q, p) = (Expr::Var(VarId(0)), Expr::Var(VarId(1)));
        let KStmt::For {
            var,
            extent,
            kind,
            mut body,
        } = row(Expr::and(
            Expr::ge(p, Expr::Int(1)),
            Expr::ge(q.clone(), Expr::Int(1)),
        ))
        else {
            unreachable!()
        };
        let KStmt::Store { value, .. } = &mut body[1] else {
            unreachable!()
        };
        *value = Expr::select(Expr::lt(q, Expr::Int(15)), value.clone(), Expr::Float(0.0));
        let mut parts = vec![KStmt::For {
            var,
            extent,
            kind,
            body,
        }];
        partition(&mut parts);
        fn stores(body: &[KStmt], out: &mut Vec<Expr>) {
            for s in body {
                match s {
                    KStmt::For { body, .. } | KStmt::If { then: body, .. } => stores(body, out),
                    KStmt::Store { value, .. } => out.push(value.clone()),
                    _ => {}
                }
            }
        }
        let mut values = Vec::new();
        stores(&parts, &mut values);
        assert!(
            values.iter().any(|v| matches!(v, Expr::Load(..))),
            "{parts:?}"
        );
        assert!(
            values
                .iter()
                .all(|v| matches!(v, Expr::Load(..) | Expr::Float(_))),
            "{parts:?}"
        );
    }

    #[test]
    fn a_row_whose_condition_reads_its_variable_otherwise_is_kept() {
        let q = Expr::Var(VarId(0));
        for cond in [
            // Not a comparison with a constant.
            Expr::ge(Expr::add(q.clone(), Expr::Var(VarId(1))), Expr::Int(1)),
            Expr::bin(BinOp::Ne, q.clone(), Expr::Int(3)),
            Expr::ge(Expr::bin(BinOp::FloorMod, q, Expr::Int(4)), Expr::Int(1)),
        ] {
            let original = vec![row(cond)];
            let mut parts = original.clone();
            partition(&mut parts);
            assert_eq!(parts, original);
        }
    }

    /// `ko` over 7 vector steps of 16 lanes summing 100 elements: a reduction's rf block
    /// adding `select(ko * 16 + kv < 100, A[..], 0)`.
    fn tail_sum(bound_var: Option<VarId>) -> KStmt {
        tail_reduction(BinOp::Add, 0.0, bound_var)
    }

    /// `b[kv] = op(b[kv], select(16 * ko + kv < limit, a[16 * ko + kv], other))` over
    /// `ko` < 7, `kv` < 16 (vectorized).
    fn tail_reduction(op: BinOp, other: f64, bound_var: Option<VarId>) -> KStmt {
        let (ko, kv) = (VarId(0), VarId(1));
        let pos = Expr::add(Expr::mul(Expr::Var(ko), Expr::Int(16)), Expr::Var(kv));
        let limit = match bound_var {
            None => Expr::Int(100),
            Some(v) => Expr::Var(v),
        };
        KStmt::For {
            var: ko,
            extent: 7,
            kind: ForKind::Serial,
            body: vec![KStmt::For {
                var: kv,
                extent: 16,
                kind: ForKind::Vectorized,
                body: vec![KStmt::Store {
                    buffer: BufferId(1),
                    indices: vec![Expr::Var(kv)],
                    value: Expr::bin(
                        op,
                        Expr::Load(BufferId(1), vec![Expr::Var(kv)]),
                        Expr::select(
                            Expr::bin(BinOp::Lt, pos.clone(), limit),
                            Expr::Load(BufferId(0), vec![pos]),
                            Expr::Float(other),
                        ),
                    ),
                }],
            }],
        }
    }

    /// The six vector steps whose lanes all lie below 100 run without the select; the
    /// seventh keeps it, its step shifted by six.
    #[test]
    fn a_reductions_last_vector_step_is_peeled_off() {
        let mut body = vec![tail_sum(None)];
        peel_tails(&mut body);
        let [KStmt::For {
            extent: 6,
            body: full,
            ..
        }, KStmt::For {
            extent: 1,
            body: tail,
            ..
        }] = &body[..]
        else {
            panic!("{body:?}");
        };
        let text = |b: &[KStmt]| format!("{b:?}");
        assert!(!text(full).contains("Select"), "{}", text(full));
        assert!(text(tail).contains("Select"), "{}", text(tail));
        assert!(text(tail).contains("Int(6)"), "{}", text(tail));
        // A bound the loops do not fix (another loop's variable) leaves the loop alone.
        let original = vec![tail_sum(Some(VarId(5)))];
        let mut same = original.clone();
        peel_tails(&mut same);
        assert_eq!(same, original);
    }

    /// A maximum (a softmax's row maximum) whose select adds `-inf` past the end is
    /// peeled as a sum is; one whose select gives another value (a clamp at zero) is not
    /// a masked accumulation and is left alone.
    #[test]
    fn a_maximums_last_vector_step_is_peeled_off_too() {
        let mut body = vec![tail_reduction(BinOp::Max, f64::NEG_INFINITY, None)];
        peel_tails(&mut body);
        assert!(
            matches!(
                &body[..],
                [KStmt::For { extent: 6, .. }, KStmt::For { extent: 1, .. }]
            ),
            "{body:?}"
        );
        for (op, other) in [(BinOp::Max, 0.0), (BinOp::Min, f64::NEG_INFINITY)] {
            let original = vec![tail_reduction(op, other, None)];
            let mut same = original.clone();
            peel_tails(&mut same);
            assert_eq!(same, original);
        }
        let mut body = vec![tail_reduction(BinOp::Min, f64::INFINITY, None)];
        peel_tails(&mut body);
        assert_eq!(body.len(), 2, "{body:?}");
    }
}
