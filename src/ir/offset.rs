//! The offset of an index expression over relaxed variables where the linear split of
//! [`split_terms`](super::simplify::split_terms) cannot separate it: a fixed variable under
//! a floordiv or floormod beside relaxed ones. That is the shape of an implicit-GEMM
//! conv's indices (a block's or thread's rows of a fused `p*q` or `n*p*q` axis), and both
//! region analysis (`compute_at`) and buffer compaction (`lower`) bound them through it.

use super::interval::Interval;
use super::simplify::{range_of, simplify, split_terms};
use super::{BinOp, Expr, VarId};

/// `e` as `base + [lo, hi]`, `base` over the fixed variables and the offset over the
/// others (`range` gives every variable's range): the linear split where it separates them
/// ([`split_terms`]), else [`offset_within`]; `None` where neither bounds it. The one step
/// of region analysis (`compute_at`) and of buffer compaction per index.
pub fn index_box(
    e: &Expr,
    is_fixed: &dyn Fn(VarId) -> bool,
    range: &dyn Fn(VarId) -> Option<Interval>,
) -> Option<(Expr, i64, i64)> {
    let relaxed = |v: VarId| if is_fixed(v) { None } else { range(v) };
    let (base, rest) = split_terms(e, is_fixed, range);
    if rest.vars().iter().all(|v| !is_fixed(*v)) {
        let r = range_of(&rest, &relaxed);
        if r.is_bounded() {
            return Some((base, r.min, r.max));
        }
    }
    offset_within(e, is_fixed, &relaxed).map(|(base, lo, hi)| (simplify(&base, range), lo, hi))
}

/// `e` as `base + [lo, hi]`: `base` an expression of the fixed variables alone, the
/// offset ranging over the relaxed ones, where the linear split cannot separate them
/// because a fixed variable sits under a floordiv or floormod beside relaxed ones.
/// Through `floordiv(a, c)` the base is `floordiv(base(a) + lo(a), c)` and the offset is at
/// most `ceil((hi(a) - lo(a)) / c)` (for any integer y and d >= 0, `(y + d) // c - y // c`
/// is at most that); through `floormod` only when its argument's offset is a single
/// value (a wider one may wrap). `None` where neither holds.
pub fn offset_within(
    e: &Expr,
    is_fixed: &dyn Fn(VarId) -> bool,
    relaxed: &dyn Fn(VarId) -> Option<Interval>,
) -> Option<(Expr, i64, i64)> {
    if e.vars().iter().all(|v| is_fixed(*v)) {
        return Some((e.clone(), 0, 0));
    }
    if e.vars().iter().all(|v| !is_fixed(*v)) {
        // No fixed part: the range over the relaxed variables (a thread's digit of a
        // fused index, `tid % 16`).
        let r = range_of(e, relaxed);
        return r.is_bounded().then_some((Expr::Int(0), r.min, r.max));
    }
    let within = |x: &Expr| offset_within(x, is_fixed, relaxed);
    match e {
        Expr::Var(v) => {
            let r = relaxed(*v).filter(|r| r.is_bounded())?;
            Some((Expr::Int(0), r.min, r.max))
        }
        Expr::Bin(BinOp::Add, a, b) => {
            let (ba, la, ha) = within(a)?;
            let (bb, lb, hb) = within(b)?;
            Some((Expr::add(ba, bb), la.checked_add(lb)?, ha.checked_add(hb)?))
        }
        Expr::Bin(BinOp::Sub, a, b) => {
            let (ba, la, ha) = within(a)?;
            let (bb, lb, hb) = within(b)?;
            Some((Expr::sub(ba, bb), la.checked_sub(hb)?, ha.checked_sub(lb)?))
        }
        Expr::Bin(BinOp::Mul, a, b) => {
            let (x, c) = match (a.as_ref(), b.as_ref()) {
                (x, Expr::Int(c)) | (Expr::Int(c), x) => (x, *c),
                _ => return None,
            };
            let (bx, l, h) = within(x)?;
            let (l, h) = (l.checked_mul(c)?, h.checked_mul(c)?);
            Some((Expr::mul(bx, Expr::Int(c)), l.min(h), l.max(h)))
        }
        Expr::Bin(BinOp::FloorDiv, a, b) => {
            let Expr::Int(c) = **b else { return None };
            if c <= 0 {
                return None;
            }
            let (ba, l, h) = within(a)?;
            if multiple_of(&ba, c) {
                // An aligned tile: (c*K + x) // c = K + x // c exactly.
                let base = Expr::bin(BinOp::FloorDiv, ba, Expr::Int(c));
                return Some((base, l.div_euclid(c), h.div_euclid(c)));
            }
            let base = Expr::bin(BinOp::FloorDiv, Expr::add(ba, Expr::Int(l)), Expr::Int(c));
            Some((base, 0, h.checked_sub(l)?.checked_add(c - 1)?.div_euclid(c)))
        }
        Expr::Bin(BinOp::FloorMod, a, b) => {
            let Expr::Int(m) = **b else { return None };
            let (ba, l, h) = within(a)?;
            if m <= 0 || l != h {
                return None;
            }
            let base = Expr::bin(BinOp::FloorMod, Expr::add(ba, Expr::Int(l)), Expr::Int(m));
            Some((base, 0, 0))
        }
        _ => None,
    }
}

/// Whether `e` is a multiple of `c` for every value of its variables, as its form shows.
fn multiple_of(e: &Expr, c: i64) -> bool {
    match e {
        Expr::Int(k) => k.rem_euclid(c) == 0,
        Expr::Bin(BinOp::Add | BinOp::Sub, a, b) => multiple_of(a, c) && multiple_of(b, c),
        Expr::Bin(BinOp::Mul, a, b) => match (a.as_ref(), b.as_ref()) {
            (x, Expr::Int(k)) | (Expr::Int(k), x) => k.rem_euclid(c) == 0 || multiple_of(x, c),
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::simplify::tests::{fd, fm, v};
    /// The index of an implicit-GEMM conv's accumulator along p: the fused n*p*q axis
    /// (block part v0 fixed, thread part v1 fixed, the thread's own tile v2, v3 relaxed)
    /// under floordiv and floormod. Every value of it lies within `base + [lo, hi]`.
    #[test]
    fn the_offset_under_floordiv_and_floormod_bounds_every_value() {
        let fixed = |x: VarId| x.0 < 2;
        let ranges = [(2u32, 1i64), (3, 3)];
        let relaxed = |x: VarId| {
            ranges
                .iter()
                .find(|(i, _)| *i == x.0)
                .map(|&(_, n)| Interval::new(0, n - 1))
        };
        let fused = |tile: i64| {
            Expr::add(
                Expr::add(Expr::mul(v(0), Expr::Int(361)), fd(v(1), 2)),
                Expr::add(Expr::mul(v(2), Expr::Int(tile)), v(3)),
            )
        };
        // (v0 * 19 + v1 * 361) + v3 with v3 in [0, 3): inside one row of q.
        let aligned = || {
            Expr::add(
                Expr::add(
                    Expr::mul(v(0), Expr::Int(19)),
                    Expr::mul(v(1), Expr::Int(361)),
                ),
                v(3),
            )
        };
        let cases = [
            (fm(fd(fused(3), 19), 19), false),
            (fd(fused(3), 361), true),
            (fd(fused(3), 19), true),
            (Expr::sub(fm(fd(fused(1), 19), 19), fd(v(1), 4)), false),
            // Thread tiles aligned to q = 19: p and n are one value per thread.
            (fm(fd(aligned(), 19), 19), true),
            (fd(aligned(), 361), true),
        ];
        for (e, bounded) in cases {
            let Some((base, lo, hi)) = offset_within(&e, &fixed, &relaxed) else {
                assert!(!bounded, "no offset found for {e:?}");
                continue;
            };
            assert!(base.vars().iter().all(|x| fixed(*x)), "{base:?}");
            for f0 in 0..3 {
                for f1 in 0..40 {
                    let base_at = base.eval_int(&|x| if x.0 == 0 { f0 } else { f1 });
                    for r2 in 0..1 {
                        for r3 in 0..3 {
                            let vals = [f0, f1, r2, r3];
                            let at = e.eval_int(&|x| vals[x.0 as usize]);
                            assert!(
                                (base_at + lo..=base_at + hi).contains(&at),
                                "{e:?} = {at} outside {base_at} + [{lo}, {hi}]"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A floormod whose argument moves with a relaxed variable may wrap: no offset.
    #[test]
    fn a_floormod_over_a_range_has_no_offset() {
        let e = fm(Expr::add(v(0), v(1)), 8);
        let relaxed = |x: VarId| (x.0 == 1).then(|| Interval::new(0, 3));
        assert!(offset_within(&e, &|x| x.0 == 0, &relaxed).is_none());
    }

    /// A part with no fixed variable is bounded by its range, whatever operators it uses:
    /// a block's rows of a fused index whose thread digit is `tid % 16` (tid relaxed over
    /// the block) lie within `(b * 64) // 13 + [0, 5]`.
    #[test]
    fn a_part_over_relaxed_variables_alone_is_bounded_by_its_range() {
        let relaxed = |x: VarId| (x.0 == 1).then(|| Interval::new(0, 63));
        let fixed = |x: VarId| x.0 == 0;
        let digit = fm(v(1), 16);
        assert_eq!(
            offset_within(&digit, &fixed, &relaxed),
            Some((Expr::Int(0), 0, 15))
        );
        let row = fd(
            Expr::add(
                Expr::mul(v(0), Expr::Int(64)),
                Expr::mul(digit, Expr::Int(4)),
            ),
            13,
        );
        let (base, lo, hi) = offset_within(&row, &fixed, &relaxed).unwrap();
        for b in 0..5 {
            let at = base.eval_int(&|_| b);
            for t in 0..64 {
                let value = row.eval_int(&|x| if x.0 == 0 { b } else { t });
                assert!(
                    (at + lo..=at + hi).contains(&value),
                    "{value} outside {at} + [{lo}, {hi}]"
                );
            }
        }
        assert_eq!((lo, hi), (0, 5));
    }
}
