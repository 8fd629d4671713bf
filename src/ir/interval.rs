//! Interval analysis of integer index expressions.
//!
//! [`bound`] gives the inclusive range `[min, max]` an expression can take when every
//! variable ranges over `[0, extent)` of the map it is given (a variable missing from the
//! map is unbounded). Floor division and modulo by positive constants are exact on
//! ranges; products and sums are the usual interval rules. Used for the verifier's binding
//! checks, the simplifier's range-dependent rewrites and region analysis.

use super::expr::{BinOp, Expr, UnOp};
use super::ids::VarId;
use std::collections::BTreeMap;

/// An inclusive integer range. `i64::MIN`/`i64::MAX` stand for unbounded sides.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub min: i64,
    pub max: i64,
}

pub const UNBOUNDED: Interval = Interval {
    min: i64::MIN,
    max: i64::MAX,
};

impl Interval {
    pub fn point(v: i64) -> Interval {
        Interval { min: v, max: v }
    }
    pub fn new(min: i64, max: i64) -> Interval {
        Interval { min, max }
    }
    pub fn is_bounded(self) -> bool {
        self.min != i64::MIN && self.max != i64::MAX
    }
    /// The number of integers in the range (0 when unbounded or empty).
    pub fn len(self) -> i64 {
        if !self.is_bounded() || self.max < self.min {
            0
        } else {
            self.max - self.min + 1
        }
    }
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }
    pub fn union(self, o: Interval) -> Interval {
        Interval {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
}

fn sat_add(a: i64, b: i64) -> i64 {
    if a == i64::MIN || b == i64::MIN {
        return i64::MIN;
    }
    if a == i64::MAX || b == i64::MAX {
        return i64::MAX;
    }
    a.saturating_add(b)
}

fn add(a: Interval, b: Interval) -> Interval {
    Interval {
        min: sat_add(a.min, b.min),
        max: sat_add(a.max, b.max),
    }
}

fn neg(a: Interval) -> Interval {
    let f = |v: i64| {
        if v == i64::MIN {
            i64::MAX
        } else if v == i64::MAX {
            i64::MIN
        } else {
            -v
        }
    };
    Interval {
        min: f(a.max),
        max: f(a.min),
    }
}

fn mul(a: Interval, b: Interval) -> Interval {
    if !a.is_bounded() || !b.is_bounded() {
        // Multiplying by a non-negative constant keeps one-sided information simple enough
        // to drop: callers only need bounded ranges for bounded inputs.
        if a == Interval::point(0) || b == Interval::point(0) {
            return Interval::point(0);
        }
        return UNBOUNDED;
    }
    let c = [
        a.min.saturating_mul(b.min),
        a.min.saturating_mul(b.max),
        a.max.saturating_mul(b.min),
        a.max.saturating_mul(b.max),
    ];
    Interval {
        min: *c.iter().min().unwrap(),
        max: *c.iter().max().unwrap(),
    }
}

/// Floor division of integers.
pub fn floordiv(a: i64, b: i64) -> i64 {
    a.div_euclid(b) - if b < 0 && a.rem_euclid(b) != 0 { 1 } else { 0 }
}

/// Floor modulo (the sign of the divisor), Python's `%`.
pub fn floormod(a: i64, b: i64) -> i64 {
    a - b * floordiv(a, b)
}

/// The range of `e` when each variable `v` in `extents` ranges over `[0, extents[v])`.
pub fn bound(e: &Expr, extents: &BTreeMap<VarId, i64>) -> Interval {
    bound_with(e, &|v| extents.get(&v).map(|&x| Interval::new(0, x - 1)))
}

/// The range of `e` with variable ranges given by `var_range` (`None`: unbounded).
pub fn bound_with(e: &Expr, var_range: &dyn Fn(VarId) -> Option<Interval>) -> Interval {
    match e {
        Expr::Int(v) => Interval::point(*v),
        Expr::Var(v) => var_range(*v).unwrap_or(UNBOUNDED),
        Expr::Bin(op, a, b) => {
            let x = bound_with(a, var_range);
            let y = bound_with(b, var_range);
            match op {
                BinOp::Add => add(x, y),
                BinOp::Sub => add(x, neg(y)),
                BinOp::Mul => mul(x, y),
                BinOp::FloorDiv => match b.as_int() {
                    Some(c) if c > 0 && x.is_bounded() => {
                        Interval::new(floordiv(x.min, c), floordiv(x.max, c))
                    }
                    Some(c) if c > 0 => Interval::new(
                        if x.min == i64::MIN {
                            i64::MIN
                        } else {
                            floordiv(x.min, c)
                        },
                        if x.max == i64::MAX {
                            i64::MAX
                        } else {
                            floordiv(x.max, c)
                        },
                    ),
                    _ => UNBOUNDED,
                },
                BinOp::FloorMod => match b.as_int() {
                    Some(c) if c > 0 => {
                        if x.is_bounded() && floordiv(x.min, c) == floordiv(x.max, c) {
                            Interval::new(floormod(x.min, c), floormod(x.max, c))
                        } else {
                            Interval::new(0, c - 1)
                        }
                    }
                    _ => UNBOUNDED,
                },
                BinOp::Min => Interval::new(x.min.min(y.min), x.max.min(y.max)),
                BinOp::Max => Interval::new(x.min.max(y.min), x.max.max(y.max)),
                op if op.is_predicate() => Interval::new(0, 1),
                _ => UNBOUNDED,
            }
        }
        Expr::Un(UnOp::Neg, a) => neg(bound_with(a, var_range)),
        Expr::Select(_, t, f) => bound_with(t, var_range).union(bound_with(f, var_range)),
        _ => UNBOUNDED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_ops_match_python() {
        assert_eq!(floordiv(7, 2), 3);
        assert_eq!(floordiv(-7, 2), -4);
        assert_eq!(floormod(-7, 2), 1);
        assert_eq!(floormod(7, 3), 1);
    }

    #[test]
    fn bounds_of_split_and_fuse_forms() {
        let (i0, i1) = (VarId(0), VarId(1));
        let ext: BTreeMap<VarId, i64> = [(i0, 16), (i1, 64)].into_iter().collect();
        let e = Expr::add(Expr::mul(Expr::Var(i0), Expr::Int(64)), Expr::Var(i1));
        assert_eq!(bound(&e, &ext), Interval::new(0, 1023));
        let d = Expr::bin(BinOp::FloorDiv, Expr::Var(i1), Expr::Int(8));
        assert_eq!(bound(&d, &ext), Interval::new(0, 7));
        let m = Expr::bin(BinOp::FloorMod, Expr::Var(i1), Expr::Int(8));
        assert_eq!(bound(&m, &ext), Interval::new(0, 7));
    }
}
