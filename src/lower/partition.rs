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
use crate::ir::{BinOp, Expr, UnOp, VarId};

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
}
