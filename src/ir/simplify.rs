//! The arithmetic simplifier for integer index expressions.
//!
//! Expressions are brought to a canonical linear form `sum(coef * atom) + constant`, where
//! an atom is a variable, `floordiv(lin, c)`, `floormod(lin, c)` by a positive constant, or
//! an opaque sub-expression. The rules are the ones schedule primitives need to keep
//! bindings readable after split and fuse:
//!
//! * `(c*q + r) // c = q + r // c` and `(c*q + r) % c = r % c` (exact for floor division);
//! * `r // c = 0` and `r % c = r` when `r` provably lies in `[0, c)`;
//! * `(x // a) // b = x // (a*b)` and `(x % a) % b = x % b` when `b` divides `a`;
//! * `c * (x // c) + y % c = x` when `x - y` is a visible multiple of `c`, and
//!   `d * (x // (a*d)) + (x // a) % d = x // a`;
//! * `(g*y + r) // c = y // (c/g)` and `(g*y + r) % c = (y % (c/g)) * g + r` when `g`
//!   divides `c` and `r` lies in `[0, g)` (a vector lane inside an aligned group).
//!
//! Terms keep the order of their first appearance, so `i_0 * 64 + i_1 * 8 + i_2` prints
//! the way the split produced it.

use super::expr::{BinOp, Expr};
use super::ids::VarId;
use super::interval::{bound_with, floordiv, floormod, Interval, UNBOUNDED};

#[derive(Clone, Debug, PartialEq)]
enum Atom {
    Var(VarId),
    Div(Box<Lin>, i64),
    Mod(Box<Lin>, i64),
    Opaque(Expr),
}

#[derive(Clone, Debug, PartialEq, Default)]
struct Lin {
    terms: Vec<(Atom, i64)>,
    c: i64,
}

impl Lin {
    fn constant(c: i64) -> Lin {
        Lin {
            terms: Vec::new(),
            c,
        }
    }
    fn atom(a: Atom) -> Lin {
        Lin {
            terms: vec![(a, 1)],
            c: 0,
        }
    }
    fn add_term(&mut self, a: Atom, k: i64) {
        if k == 0 {
            return;
        }
        if let Some(t) = self.terms.iter_mut().find(|(x, _)| *x == a) {
            t.1 += k;
        } else {
            self.terms.push((a, k));
        }
        self.terms.retain(|(_, k)| *k != 0);
    }
    fn add(mut self, o: Lin, sign: i64) -> Lin {
        for (a, k) in o.terms {
            self.add_term(a, k * sign);
        }
        self.c += o.c * sign;
        self.merge_div_mod();
        self
    }
    fn scale(mut self, k: i64) -> Lin {
        if k == 0 {
            return Lin::constant(0);
        }
        for t in &mut self.terms {
            t.1 *= k;
        }
        self.c *= k;
        self
    }
    /// `self` with its constant and every coefficient reduced into `[0, c)`: congruent to
    /// it modulo `c`.
    fn reduced(self, c: i64) -> Lin {
        let mut out = Lin::constant(floormod(self.c, c));
        for (a, k) in self.terms {
            out.add_term(a, floormod(k, c));
        }
        out
    }
    fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }
    /// `c * (x // c) + y % c = x` where `y` is congruent to `x` modulo `c` (the same
    /// index, one copy reduced: `(b*64 + t) // 13` beside `(b*12 + t) % 13`), and
    /// `d * (x // (a*d)) + (x // a) % d = x // a`, wherever both terms appear with
    /// matching coefficients.
    fn merge_div_mod(&mut self) {
        loop {
            let mut found = None;
            'outer: for (i, (a, k)) in self.terms.iter().enumerate() {
                if let Atom::Div(x, c) = a {
                    for (j, (b, kb)) in self.terms.iter().enumerate() {
                        if let Atom::Mod(y, d) = b {
                            if c == d && congruent(x, y, *c) && *k == kb * c {
                                found = Some((i, j, (**x).clone(), *kb));
                                break 'outer;
                            }
                            if let Some(inner) = outer_digit(x, *c, y, *d) {
                                if *k == kb * d {
                                    found = Some((i, j, inner, *kb));
                                    break 'outer;
                                }
                            }
                        }
                    }
                }
            }
            let Some((i, j, x, kb)) = found else { return };
            let (hi, lo) = if i > j { (i, j) } else { (j, i) };
            self.terms.remove(hi);
            self.terms.remove(lo);
            let rest = std::mem::take(self);
            *self = rest.add(x.scale(kb), 1);
        }
    }
}

/// Whether `x - y` is a multiple of `c` for every value of the variables, as the linear
/// forms show (every coefficient and the constant of the difference divisible by `c`).
/// `x // (a*d)` beside `(x // a) % d` (the two digits of `x // a`, the first folded by
/// `(x // a) // d = x // (a*d)`): `d * (x // (a*d)) + (x // a) % d = x // a`. Returns
/// `x // a` when `y` is that and `c` is `a*d`.
fn outer_digit(x: &Lin, c: i64, y: &Lin, d: i64) -> Option<Lin> {
    let [(Atom::Div(x2, a), 1)] = y.terms.as_slice() else {
        return None;
    };
    (y.c == 0 && **x2 == *x && a.checked_mul(d) == Some(c)).then(|| y.clone())
}

/// A `floormod(l, a)` term with `c` dividing `a` counts as `l` (congruent to it modulo
/// `c`: `(t % 289) // 17 * 17 + t % 17 = t % 289`).
fn congruent(x: &Lin, y: &Lin, c: i64) -> bool {
    if x == y {
        return true;
    }
    let d = modulo_form(x, c).add(modulo_form(y, c), -1);
    d.c % c == 0 && d.terms.iter().all(|(_, k)| k % c == 0)
}

/// `l` with every `floormod(m, a)` term whose `a` is a multiple of `c` replaced by `m`
/// (recursively): a form congruent to `l` modulo `c`.
fn modulo_form(l: &Lin, c: i64) -> Lin {
    let mut out = Lin::constant(l.c);
    for (a, k) in &l.terms {
        match a {
            Atom::Mod(m, modulus) if modulus % c == 0 => {
                out = out.add(modulo_form(m, c).scale(*k), 1)
            }
            other => out.add_term(other.clone(), *k),
        }
    }
    out
}

struct Ctx<'a> {
    range: &'a dyn Fn(VarId) -> Option<Interval>,
}

impl Ctx<'_> {
    fn atom_range(&self, a: &Atom) -> Interval {
        match a {
            Atom::Var(v) => (self.range)(*v).unwrap_or(UNBOUNDED),
            Atom::Div(l, c) => {
                let r = self.lin_range(l);
                if r.is_bounded() {
                    Interval::new(floordiv(r.min, *c), floordiv(r.max, *c))
                } else {
                    UNBOUNDED
                }
            }
            Atom::Mod(l, c) => {
                let r = self.lin_range(l);
                if r.is_bounded() && r.min >= 0 && r.max < *c {
                    r
                } else {
                    Interval::new(0, c - 1)
                }
            }
            Atom::Opaque(e) => bound_with(e, self.range),
        }
    }

    fn lin_range(&self, l: &Lin) -> Interval {
        let mut acc = Interval::point(l.c);
        for (a, k) in &l.terms {
            let r = self.atom_range(a);
            if !r.is_bounded() {
                return UNBOUNDED;
            }
            let (x, y) = (r.min.saturating_mul(*k), r.max.saturating_mul(*k));
            acc = Interval::new(
                acc.min.saturating_add(x.min(y)),
                acc.max.saturating_add(x.max(y)),
            );
        }
        acc
    }

    fn to_lin(&self, e: &Expr) -> Lin {
        match e {
            Expr::Int(v) => Lin::constant(*v),
            Expr::Var(v) => Lin::atom(Atom::Var(*v)),
            Expr::Bin(BinOp::Add, a, b) => self.merge_digits(self.to_lin(a).add(self.to_lin(b), 1)),
            Expr::Bin(BinOp::Sub, a, b) => {
                self.merge_digits(self.to_lin(a).add(self.to_lin(b), -1))
            }
            Expr::Bin(BinOp::Mul, a, b) => {
                let (la, lb) = (self.to_lin(a), self.to_lin(b));
                match (la.as_const(), lb.as_const()) {
                    (_, Some(k)) => la.scale(k),
                    (Some(k), None) => lb.scale(k),
                    _ => Lin::atom(Atom::Opaque(Expr::mul(from_lin(&la), from_lin(&lb)))),
                }
            }
            Expr::Bin(BinOp::FloorDiv, a, b) => match self.to_lin(b).as_const() {
                Some(c) if c > 0 => self.div(self.to_lin(a), c),
                _ => self.opaque(e),
            },
            Expr::Bin(BinOp::FloorMod, a, b) => match self.to_lin(b).as_const() {
                Some(c) if c > 0 => self.modulo(self.to_lin(a), c),
                _ => self.opaque(e),
            },
            Expr::Bin(op @ (BinOp::Min | BinOp::Max), a, b) => {
                let (la, lb) = (self.to_lin(a), self.to_lin(b));
                let (ra, rb) = (self.lin_range(&la), self.lin_range(&lb));
                let a_le_b = ra.is_bounded() && rb.is_bounded() && ra.max <= rb.min;
                let b_le_a = ra.is_bounded() && rb.is_bounded() && rb.max <= ra.min;
                match (op, a_le_b, b_le_a) {
                    (BinOp::Min, true, _) | (BinOp::Max, _, true) => la,
                    (BinOp::Min, _, true) | (BinOp::Max, true, _) => lb,
                    _ => Lin::atom(Atom::Opaque(Expr::bin(*op, from_lin(&la), from_lin(&lb)))),
                }
            }
            _ => self.opaque(e),
        }
    }

    /// Digits of one index that the ranges reduced apart, folded back together (each fold
    /// replaces two terms by what they sum to, until none applies):
    ///
    /// * `d * (x // c) + (y // a) % d = y // a` where `y = g*x + r` with `r` in `[0, g)`
    ///   and `g*c = a*d`, so `x // c = y // (a*d)` (`c` is 1 where the digit reduced to
    ///   `x` itself). A batch of NHWC images as GEMM rows: the image
    ///   `(256*b + 16*w + i) // 3136` is `(16*b + w) // 196` for `i < 16`, beside the pixel
    ///   row `(256*b + 16*w + i) // 56 % 56`.
    /// * `a * ((x + y // a) % d) + z % a = (a*x + y) % (a*d)` where `z` is congruent to `y`
    ///   modulo `a` (`x + y // a` is `(a*x + y) // a`; the pixel row and column of rows
    ///   that a 16-row piece splits across: `(4*b + (16*t + i) // 12) % 12` beside
    ///   `(4*t + i) % 12`, each reduced modulo 12).
    /// * `D * (x // c) + w % D = g*x + r` where `g*c = D` and `r`, the difference `w - g*x`
    ///   with its coefficients reduced modulo `D`, lies in `[0, g)` (then `g*x + r` has
    ///   the digits `x // c` and `w % D`).
    fn merge_digits(&self, mut l: Lin) -> Lin {
        // Most sums have no remainder term: nothing to fold, nothing to clone.
        if !l.terms.iter().any(|(a, _)| matches!(a, Atom::Mod(..))) {
            return l;
        }
        // Each fold removes two terms; the bound only guards against a cycle of folds.
        for _ in 0..l.terms.len() * 2 {
            let Some((i, j, sum)) = self.fold_digits(&l) else {
                break;
            };
            let (hi, lo) = if i > j { (i, j) } else { (j, i) };
            l.terms.remove(hi);
            l.terms.remove(lo);
            l = l.add(sum, 1);
        }
        l
    }

    /// Two terms of `l` that are digits of one value (see [`Ctx::merge_digits`]), with the
    /// sum that replaces them.
    fn fold_digits(&self, l: &Lin) -> Option<(usize, usize, Lin)> {
        for (j, (b, kb)) in l.terms.iter().enumerate() {
            let Atom::Mod(w, d) = b else { continue };
            // The higher digit's coefficient is the lower one's times its modulus.
            let Some(high) = kb.checked_mul(*d) else {
                continue;
            };
            for (i, (a, k)) in l.terms.iter().enumerate() {
                if i == j || *k != high {
                    continue;
                }
                let sum = match a {
                    Atom::Mod(inner, d2) => self.fold_remainders(inner, *d2, w, *d),
                    Atom::Div(x, c) => self
                        .fold_reduced_digit(x, *c, w, *d)
                        .or_else(|| self.fold_quotient(x, *c, w, *d)),
                    other => self.fold_reduced_digit(&Lin::atom(other.clone()), 1, w, *d),
                };
                if let Some(sum) = sum {
                    return Some((i, j, sum.scale(*kb)));
                }
            }
        }
        None
    }

    /// `d * (x // c) + (y // a) % d = y // a` where `w` is `y // a`, `y = g*x + r` with
    /// `r` in `[0, g)` and `g*c = a*d`.
    fn fold_reduced_digit(&self, x: &Lin, c: i64, w: &Lin, d: i64) -> Option<Lin> {
        let [(Atom::Div(y, a), 1)] = w.terms.as_slice() else {
            return None;
        };
        let ad = a.checked_mul(d)?;
        if w.c != 0 || ad % c != 0 || ad == c {
            return None;
        }
        let g = ad / c;
        let r = self.lin_range(&(**y).clone().add(x.clone().scale(g), -1));
        (r.is_bounded() && r.min >= 0 && r.max < g).then(|| w.clone())
    }

    /// `a * ((x + y // a) % d) + z % a = (a*x + y) % (a*d)` where `p = x + y // a` and
    /// `z` is congruent to `y` modulo `a`.
    fn fold_remainders(&self, p: &Lin, d: i64, z: &Lin, a: i64) -> Option<Lin> {
        let at = p
            .terms
            .iter()
            .position(|(t, k)| *k == 1 && matches!(t, Atom::Div(_, a2) if *a2 == a))?;
        let Atom::Div(y, _) = &p.terms[at].0 else {
            return None;
        };
        let mut x = p.clone();
        x.terms.remove(at);
        let whole = x.scale(a).add((**y).clone(), 1);
        let ad = a.checked_mul(d)?;
        congruent(z, &whole, a).then(|| self.modulo(whole, ad))
    }

    /// `D * (x // c) + w % D = g*x + r` where `g*c = D` and `r` (`w - g*x`, coefficients
    /// reduced modulo `D`) lies in `[0, g)`.
    fn fold_quotient(&self, x: &Lin, c: i64, w: &Lin, big: i64) -> Option<Lin> {
        if big % c != 0 || big == c {
            return None;
        }
        let g = big / c;
        let r = modulo_form(w, big).add(x.clone().scale(g), -1).reduced(big);
        let range = self.lin_range(&r);
        (range.is_bounded() && range.min >= 0 && range.max < g)
            .then(|| x.clone().scale(g).add(r, 1))
    }

    fn opaque(&self, e: &Expr) -> Lin {
        let inner = match e {
            Expr::Bin(op, a, b) => Expr::bin(*op, self.simplify(a), self.simplify(b)),
            Expr::Select(c, a, b) => {
                Expr::select(self.simplify(c), self.simplify(a), self.simplify(b))
            }
            other => other.clone(),
        };
        Lin::atom(Atom::Opaque(inner))
    }

    fn div(&self, l: Lin, c: i64) -> Lin {
        if c == 1 {
            return l;
        }
        let mut q = Lin::constant(floordiv(l.c, c));
        let mut rest = Lin::constant(floormod(l.c, c));
        for (a, k) in l.terms {
            if k % c == 0 {
                q.add_term(a, k / c);
            } else {
                rest.add_term(a, k);
            }
        }
        let r = self.lin_range(&rest);
        if r.is_bounded() && r.min >= 0 && r.max < c {
            return q;
        }
        if rest.c == 0 && rest.terms.len() == 1 && rest.terms[0].1 == 1 {
            if let Atom::Div(inner, a) = &rest.terms[0].0 {
                return q.add(Lin::atom(Atom::Div(inner.clone(), a * c)), 1);
            }
        }
        if let Some((g, big, _)) = self.factor_out(&rest, c) {
            return q.add(self.div(big, c / g), 1);
        }
        q.add(Lin::atom(Atom::Div(Box::new(rest), c)), 1)
    }

    /// `rest = g*big + small` with `g` dividing `c` and `small` in `[0, g)`, so that
    /// `rest // c = big // (c/g)` and `rest % c = (big % (c/g)) * g + small`.
    fn factor_out(&self, rest: &Lin, c: i64) -> Option<(i64, Lin, Lin)> {
        let mut gs: Vec<i64> = rest
            .terms
            .iter()
            .map(|(_, k)| gcd(k.abs(), c))
            .filter(|g| *g > 1 && *g < c)
            .collect();
        gs.sort_unstable_by(|a, b| b.cmp(a));
        gs.dedup();
        for g in gs {
            let mut big = Lin::constant(floordiv(rest.c, g));
            let mut small = Lin::constant(floormod(rest.c, g));
            for (a, k) in &rest.terms {
                if k % g == 0 {
                    big.add_term(a.clone(), k / g);
                } else {
                    small.add_term(a.clone(), *k);
                }
            }
            if big.terms.is_empty() {
                continue;
            }
            let r = self.lin_range(&small);
            if r.is_bounded() && r.min >= 0 && r.max < g {
                return Some((g, big, small));
            }
        }
        None
    }

    fn modulo(&self, l: Lin, c: i64) -> Lin {
        if c == 1 {
            return Lin::constant(0);
        }
        let rest = l.reduced(c);
        let r = self.lin_range(&rest);
        if r.is_bounded() && r.min >= 0 && r.max < c {
            return rest;
        }
        if rest.c == 0 && rest.terms.len() == 1 && rest.terms[0].1 == 1 {
            if let Atom::Mod(inner, a) = &rest.terms[0].0 {
                if a % c == 0 {
                    return Lin::atom(Atom::Mod(inner.clone(), c));
                }
            }
        }
        if let Some((g, big, small)) = self.factor_out(&rest, c) {
            return self.modulo(big, c / g).scale(g).add(small, 1);
        }
        Lin::atom(Atom::Mod(Box::new(rest), c))
    }

    fn simplify(&self, e: &Expr) -> Expr {
        match e {
            Expr::Bin(op, a, b) if op.is_predicate() => {
                let (a, b) = (self.simplify(a), self.simplify(b));
                match op {
                    BinOp::And => match (a.as_int(), b.as_int()) {
                        (Some(0), _) | (_, Some(0)) => Expr::Int(0),
                        (Some(_), _) => b,
                        (_, Some(_)) => a,
                        _ => Expr::bin(*op, a, b),
                    },
                    BinOp::Or => match (a.as_int(), b.as_int()) {
                        (Some(x), _) if x != 0 => Expr::Int(1),
                        (_, Some(x)) if x != 0 => Expr::Int(1),
                        (Some(_), _) => b,
                        (_, Some(_)) => a,
                        _ => Expr::bin(*op, a, b),
                    },
                    _ => {
                        if is_index(&a) && is_index(&b) {
                            let d = self.to_lin(&a).add(self.to_lin(&b), -1);
                            let r = self.lin_range(&d);
                            if let Some(v) = decide(*op, r) {
                                return Expr::Int(v as i64);
                            }
                        }
                        Expr::bin(*op, a, b)
                    }
                }
            }
            e if is_index(e) => from_lin(&self.to_lin(e)),
            Expr::Load(b, idx) => Expr::Load(*b, idx.iter().map(|i| self.simplify(i)).collect()),
            Expr::Bin(op, a, b) => Expr::bin(*op, self.simplify(a), self.simplify(b)),
            Expr::Un(op, a) => Expr::Un(*op, Box::new(self.simplify(a))),
            Expr::Cast(t, a) => Expr::Cast(*t, Box::new(self.simplify(a))),
            Expr::Select(c, a, b) => {
                let c = self.simplify(c);
                match c.as_int() {
                    Some(0) => self.simplify(b),
                    Some(_) => self.simplify(a),
                    None => Expr::select(c, self.simplify(a), self.simplify(b)),
                }
            }
            other => other.clone(),
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The truth value of `d op 0` when it does not depend on the variables, given `d`'s range.
fn decide(op: BinOp, r: Interval) -> Option<bool> {
    if !r.is_bounded() {
        return None;
    }
    let (lo, hi) = (r.min, r.max);
    let (always, never) = match op {
        BinOp::Lt => (hi < 0, lo >= 0),
        BinOp::Le => (hi <= 0, lo > 0),
        BinOp::Gt => (lo > 0, hi <= 0),
        BinOp::Ge => (lo >= 0, hi < 0),
        BinOp::Eq => (lo == 0 && hi == 0, lo > 0 || hi < 0),
        BinOp::Ne => (lo > 0 || hi < 0, lo == 0 && hi == 0),
        _ => return None,
    };
    if always {
        Some(true)
    } else if never {
        Some(false)
    } else {
        None
    }
}

/// Whether an expression is integer index arithmetic (no loads, floats or predicates).
pub fn is_index(e: &Expr) -> bool {
    match e {
        Expr::Int(_) | Expr::Var(_) => true,
        Expr::Bin(op, a, b) => {
            matches!(
                op,
                BinOp::Add
                    | BinOp::Sub
                    | BinOp::Mul
                    | BinOp::FloorDiv
                    | BinOp::FloorMod
                    | BinOp::Min
                    | BinOp::Max
            ) && is_index(a)
                && is_index(b)
        }
        Expr::Select(c, a, b) => {
            is_index(a) && is_index(b) && matches!(**c, Expr::Bin(op, _, _) if op.is_predicate())
        }
        _ => false,
    }
}

fn atom_expr(a: &Atom) -> Expr {
    match a {
        Atom::Var(v) => Expr::Var(*v),
        Atom::Div(l, c) => Expr::bin(BinOp::FloorDiv, from_lin(l), Expr::Int(*c)),
        Atom::Mod(l, c) => Expr::bin(BinOp::FloorMod, from_lin(l), Expr::Int(*c)),
        Atom::Opaque(e) => e.clone(),
    }
}

fn from_lin(l: &Lin) -> Expr {
    let mut acc: Option<Expr> = None;
    for (a, k) in &l.terms {
        let ae = atom_expr(a);
        let (term, neg) = match *k {
            1 => (ae, false),
            -1 => (ae, true),
            k if k < 0 => (Expr::mul(ae, Expr::Int(-k)), true),
            k => (Expr::mul(ae, Expr::Int(k)), false),
        };
        acc = Some(match (acc, neg) {
            (None, false) => term,
            (None, true) => Expr::sub(Expr::Int(0), term),
            (Some(x), false) => Expr::add(x, term),
            (Some(x), true) => Expr::sub(x, term),
        });
    }
    match acc {
        None => Expr::Int(l.c),
        Some(x) if l.c > 0 => Expr::add(x, Expr::Int(l.c)),
        Some(x) if l.c < 0 => Expr::sub(x, Expr::Int(-l.c)),
        Some(x) => x,
    }
}

/// Simplifies an expression; variable ranges come from `range` (`None`: unbounded).
/// Index sub-expressions are brought to canonical linear form; predicates decided by the
/// ranges fold to `1`/`0`; `Select`s on a folded condition are resolved.
pub fn simplify(e: &Expr, range: &dyn Fn(VarId) -> Option<Interval>) -> Expr {
    Ctx { range }.simplify(e)
}

/// Simplifies with each variable of `extents` ranging over `[0, extent)`.
pub fn simplify_in(e: &Expr, extents: &std::collections::BTreeMap<VarId, i64>) -> Expr {
    simplify(e, &|v| extents.get(&v).map(|&x| Interval::new(0, x - 1)))
}

/// The range of an index expression, with the same range rules as [`simplify`] (tighter
/// than [`bound_with`] on split/fuse forms).
pub fn range_of(e: &Expr, range: &dyn Fn(VarId) -> Option<Interval>) -> Interval {
    let ctx = Ctx { range };
    if is_index(e) {
        ctx.lin_range(&ctx.to_lin(e))
    } else {
        bound_with(e, range)
    }
}

/// Splits an index expression into the part that depends only on `fixed` variables and the
/// rest: `e = fixed_part + rest`, both simplified. Used by region analysis to keep the
/// outer-loop part symbolic while relaxing the inner loops.
pub fn split_terms(
    e: &Expr,
    is_fixed: &dyn Fn(VarId) -> bool,
    range: &dyn Fn(VarId) -> Option<Interval>,
) -> (Expr, Expr) {
    let ctx = Ctx { range };
    let l = ctx.to_lin(e);
    let mut fixed = Lin::constant(l.c);
    let mut rest = Lin::constant(0);
    for (a, k) in l.terms {
        let vars = atom_expr(&a).vars();
        if vars.iter().all(|v| is_fixed(*v)) {
            fixed.add_term(a, k);
        } else {
            rest.add_term(a, k);
        }
    }
    (from_lin(&fixed), from_lin(&rest))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Index-expression builders for tests (also used by `lower::compact`'s).
    pub(crate) fn v(i: u32) -> Expr {
        Expr::Var(VarId(i))
    }
    pub(crate) fn fd(a: Expr, c: i64) -> Expr {
        Expr::bin(BinOp::FloorDiv, a, Expr::Int(c))
    }
    pub(crate) fn fm(a: Expr, c: i64) -> Expr {
        Expr::bin(BinOp::FloorMod, a, Expr::Int(c))
    }

    #[test]
    fn fuse_then_unfuse_is_identity() {
        // f = i * 8 + j with j in [0, 8): f // 8 = i, f % 8 = j
        let ext: BTreeMap<VarId, i64> = [(VarId(0), 16), (VarId(1), 8)].into_iter().collect();
        let f = Expr::add(Expr::mul(v(0), Expr::Int(8)), v(1));
        assert_eq!(simplify_in(&fd(f.clone(), 8), &ext), v(0));
        assert_eq!(simplify_in(&fm(f, 8), &ext), v(1));
    }

    /// The row and column of a fused index, each simplified on its own (the column's
    /// argument reduced modulo the row length, or a floormod by a multiple of it left
    /// inside), fuse back to the index: what makes an implicit-GEMM accumulator stored
    /// with p, q as one axis indexed by the fused loop itself.
    #[test]
    fn a_row_and_a_congruent_column_fuse_back() {
        let ext: BTreeMap<VarId, i64> = [(VarId(0), 3), (VarId(1), 1000)].into_iter().collect();
        let row_col = |x: Expr, y: Expr, c: i64| {
            simplify_in(
                &Expr::add(Expr::mul(fd(x, c), Expr::Int(c)), fm(y, c)),
                &ext,
            )
        };
        // (b*64 + t) // 13 * 13 + (b*12 + t) % 13 = b*64 + t (64 = 12 modulo 13).
        let at = |k: i64| Expr::add(Expr::mul(v(0), Expr::Int(k)), v(1));
        assert_eq!(row_col(at(64), at(12), 13), at(64));
        // (t % 289) // 17 * 17 + t % 17 = t % 289.
        assert_eq!(row_col(fm(v(1), 289), v(1), 17), fm(v(1), 289));
        // 83 * (t // 1079) + (t // 13) % 83 = t // 13 (the row folded into t // (13*83)).
        let digits = simplify_in(
            &Expr::add(
                Expr::mul(fd(fd(v(1), 13), 83), Expr::Int(83)),
                fm(fd(v(1), 13), 83),
            ),
            &[(VarId(1), 100_000)].into_iter().collect(),
        );
        assert_eq!(digits, fd(v(1), 13));
        // Not congruent: left as it is.
        let apart = row_col(at(64), at(13), 13);
        assert!(apart != at(64) && apart != at(13), "{apart:?}");
        let apart = row_col(fm(v(1), 288), v(1), 17);
        assert!(apart != fm(v(1), 288), "{apart:?}");
    }

    /// A GEMM row `b*v0 + t*v1 + v2`: a block's tile, a 16-row piece in it, a row of it.
    fn gemm_row(b: i64, t: i64) -> Expr {
        Expr::add(
            Expr::add(Expr::mul(v(0), Expr::Int(b)), Expr::mul(v(1), Expr::Int(t))),
            v(2),
        )
    }

    #[test]
    fn a_reduced_outer_digit_folds_back() {
        // Rows m = 256*b + 16*w + i (i < 16) of a batch of 56 x 56 images: the image
        // m // 3136 reduces to (16*b + w) // 196, the pixel row is m // 56 % 56, the
        // column m % 56; the three digits fold back into m.
        let m = gemm_row(256, 16);
        let folded = Expr::add(
            Expr::add(
                Expr::mul(fd(m.clone(), 3136), Expr::Int(3136)),
                Expr::mul(fm(fd(m.clone(), 56), 56), Expr::Int(56)),
            ),
            fm(m.clone(), 56),
        );
        let extents = [(VarId(0), 98), (VarId(1), 16), (VarId(2), 16)]
            .into_iter()
            .collect();
        assert_eq!(simplify_in(&folded, &extents), simplify_in(&m, &extents));
        // Not beside another row's image: (w // 196) is no digit of m.
        let other = Expr::add(
            Expr::add(
                Expr::mul(fd(v(1), 196), Expr::Int(3136)),
                Expr::mul(fm(fd(m.clone(), 56), 56), Expr::Int(56)),
            ),
            fm(m.clone(), 56),
        );
        assert_ne!(simplify_in(&other, &extents), simplify_in(&m, &extents));
    }

    #[test]
    fn digits_reduced_apart_fold_back() {
        // Rows m = 192*b + 16*t + i (t < 12, i < 16) of a batch of 12 x 12 images: a
        // 16-row piece spans two pixel rows. The image m // 144 reduces to
        // (12*b + t) // 9, the pixel row (m // 12) % 12 to (4*b + (16*t + i) // 12) % 12,
        // the column m % 12 to (4*t + i) % 12; the three fold back into m.
        let m = gemm_row(192, 16);
        let digits = |image: Expr| {
            Expr::add(
                Expr::add(
                    Expr::mul(image, Expr::Int(144)),
                    Expr::mul(fm(fd(m.clone(), 12), 12), Expr::Int(12)),
                ),
                fm(m.clone(), 12),
            )
        };
        let extents = [(VarId(0), 6), (VarId(1), 12), (VarId(2), 16)]
            .into_iter()
            .collect();
        // Equal as the simplifier sees it: the difference folds to 0.
        let same = |a: &Expr, b: &Expr| {
            simplify_in(&Expr::sub(a.clone(), b.clone()), &extents) == Expr::Int(0)
        };
        assert!(same(&digits(fd(m.clone(), 144)), &m));
        // The row and column alone fold into m % 144.
        let low = Expr::add(
            Expr::mul(fm(fd(m.clone(), 12), 12), Expr::Int(12)),
            fm(m.clone(), 12),
        );
        assert!(same(&low, &fm(m.clone(), 144)));
        // An image that is no digit of m (t // 9, b left out): left apart.
        let other = digits(fd(v(1), 9));
        assert!(!same(&other, &m));
        // Nor is a column of another row.
        let shifted = Expr::add(
            Expr::mul(fm(fd(m.clone(), 12), 12), Expr::Int(12)),
            fm(Expr::add(m.clone(), Expr::Int(1)), 12),
        );
        assert!(!same(&shifted, &fm(m.clone(), 144)));
        // Folded or not, each simplified form has the value of what it was made from at
        // every point of the ranges.
        for e in [digits(fd(m.clone(), 144)), low, other, shifted] {
            let s = simplify_in(&e, &extents);
            for p in 0..6 * 12 * 16 {
                let env = |v: VarId| [p / 192, p / 16 % 12, p % 16][v.0 as usize];
                assert_eq!(s.eval_int(&env), e.eval_int(&env), "{e:?} at {p}");
            }
        }
    }

    #[test]
    fn split_then_fuse_is_identity() {
        // i = f // 8 * 8 + f % 8 = f
        let ext: BTreeMap<VarId, i64> = [(VarId(0), 64)].into_iter().collect();
        let e = Expr::add(Expr::mul(fd(v(0), 8), Expr::Int(8)), fm(v(0), 8));
        assert_eq!(simplify_in(&e, &ext), v(0));
    }

    #[test]
    fn nested_div_and_mod_fold() {
        let ext: BTreeMap<VarId, i64> = [(VarId(0), 1024)].into_iter().collect();
        assert_eq!(simplify_in(&fd(fd(v(0), 4), 8), &ext), fd(v(0), 32));
        assert_eq!(simplify_in(&fm(fm(v(0), 32), 8), &ext), fm(v(0), 8));
        // (i * 64 + j) // 8 with j < 64 keeps the mixed part
        let e = fd(Expr::add(Expr::mul(v(0), Expr::Int(64)), v(1)), 8);
        let ext2: BTreeMap<VarId, i64> = [(VarId(0), 16), (VarId(1), 64)].into_iter().collect();
        assert_eq!(
            simplify_in(&e, &ext2),
            Expr::add(Expr::mul(v(0), Expr::Int(8)), fd(v(1), 8))
        );
    }

    #[test]
    fn lanes_factor_out_of_div_and_mod() {
        // (4 * t + l) // 8 = t // 2 and (4 * t + l) % 8 = t % 2 * 4 + l for l in [0, 4)
        let ext: BTreeMap<VarId, i64> = [(VarId(0), 64), (VarId(1), 4)].into_iter().collect();
        let x = Expr::add(Expr::mul(v(0), Expr::Int(4)), v(1));
        assert_eq!(simplify_in(&fd(x.clone(), 8), &ext), fd(v(0), 2));
        assert_eq!(
            simplify_in(&fm(x, 8), &ext),
            Expr::add(Expr::mul(fm(v(0), 2), Expr::Int(4)), v(1))
        );
    }

    #[test]
    fn predicates_fold_by_range() {
        let ext: BTreeMap<VarId, i64> = [(VarId(0), 8), (VarId(1), 8)].into_iter().collect();
        let e = Expr::lt(
            Expr::add(Expr::mul(v(0), Expr::Int(8)), v(1)),
            Expr::Int(64),
        );
        assert_eq!(simplify_in(&e, &ext), Expr::Int(1));
        let e = Expr::lt(
            Expr::add(Expr::mul(v(0), Expr::Int(8)), v(1)),
            Expr::Int(60),
        );
        assert!(matches!(simplify_in(&e, &ext), Expr::Bin(BinOp::Lt, _, _)));
    }

    #[test]
    fn terms_keep_their_order_and_constants_fold() {
        let ext = BTreeMap::new();
        let e = Expr::add(
            Expr::add(Expr::mul(v(2), Expr::Int(3)), Expr::Int(4)),
            Expr::sub(v(1), Expr::Int(4)),
        );
        assert_eq!(
            simplify_in(&e, &ext),
            Expr::add(Expr::mul(v(2), Expr::Int(3)), v(1))
        );
    }
}
