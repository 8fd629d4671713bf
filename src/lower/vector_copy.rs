//! Vector copies: a CUDA vectorized loop whose one store copies one global (or shared)
//! element per lane, read through a single load that is contiguous in the lane and
//! aligned to the vector (a float2/float4 load), possibly zero-filled by a guard
//! (`select(c, load, 0)`, a padded operand inlined into the fetch) whose value is the
//! same for every lane of the vector. The store, under a statement guard uniform over the
//! vector at most (a fetch split over the threads by whole vectors, imperfectly), is
//! either contiguous and aligned too (one vector store) or scattered (the transposed store
//! of a reduction-major fetch: one scalar store per lane from the vector register).
//!
//! Whether a guard is uniform over the vector is decided by the simplifier: for a
//! comparison normalised to `d < 0`, `d < 0` holds exactly when `floordiv(d, lanes) < 0`,
//! so the guard is uniform when that quotient, with the lane ranging over `[0, lanes)`,
//! does not depend on the lane (for `k + lane < K` with `k` and `K` multiples of the
//! lane count, it is `(k - K) / lanes`). `&&`, `||` and `!` of uniform guards are uniform.

use super::compact::{contiguous, vector_body, VectorStore};
use super::kernel::KStmt;
use crate::ir::interval::Interval;
use crate::ir::simplify::simplify;
use crate::ir::{BinOp, BufferId, DType, Expr, Program, UnOp, VarId};
use std::collections::BTreeMap;

/// A vectorized loop that copies one vector (see the module doc).
pub(crate) struct VectorCopy<'a> {
    /// The statement guard around the store, uniform over the lanes (its value is that at
    /// lane 0).
    pub guard: Option<&'a Expr>,
    pub dst: BufferId,
    /// The store's flat index; contiguous and aligned unless `scatter`.
    pub dst_index: &'a Expr,
    /// Whether the lanes are stored one by one (the store is not contiguous).
    pub scatter: bool,
    pub src: BufferId,
    /// The load's flat index, contiguous in the lane and aligned.
    pub src_index: &'a Expr,
    /// The condition under which the vector is loaded rather than zero, uniform over the
    /// lanes (still written in terms of the lane: its value is that at lane 0, [`at_lane`]).
    pub valid: Option<Expr>,
}

/// The vector copy a vectorized loop over `var` with `lanes` lanes performs, or why it is
/// not one.
pub(crate) fn vector_copy<'a>(
    p: &Program,
    body: &'a [KStmt],
    var: VarId,
    lanes: i64,
    ranges: &BTreeMap<VarId, i64>,
) -> Result<VectorCopy<'a>, String> {
    let VectorStore {
        guard,
        buffer,
        indices,
        value,
    } = match vector_body(body, var) {
        Ok(store) => store,
        Err(e) => uniformly_guarded(body, var, lanes, ranges).ok_or(e)?,
    };
    let (load, valid) = zero_filled(value);
    let Expr::Load(src, sidx) = load else {
        return Err("its value is not one load".into());
    };
    // float2 / float4, or 4, 8 or 16 bytes of 16-bit elements copied as raw bits.
    let dtype = p.buffer(buffer).dtype;
    let bytes = lanes * dtype.bytes() as i64;
    let supported = match dtype {
        DType::F32 => lanes == 2 || lanes == 4,
        DType::F16 | DType::BF16 => matches!(bytes, 4 | 8 | 16),
        _ => false,
    };
    if !supported {
        return Err(format!(
            "{lanes} lanes of {} (float2, float4, or 4, 8, 16 bytes of 16-bit elements are supported)",
            dtype.name()
        ));
    }
    if p.buffer(*src).dtype != dtype {
        return Err(format!(
            "{} and {} differ in dtype",
            p.buffer(buffer).name,
            p.buffer(*src).name
        ));
    }
    contiguous(&sidx[0], var, lanes, ranges)?;
    if let Some(c) = &valid {
        if !uniform(c, var, lanes, ranges) {
            return Err("its zero-fill guard is not uniform over the vector".into());
        }
    }
    let scatter = contiguous(&indices[0], var, lanes, ranges).is_err();
    Ok(VectorCopy {
        guard,
        dst: buffer,
        dst_index: &indices[0],
        scatter,
        src: *src,
        src_index: &sidx[0],
        valid,
    })
}

/// The store of a body `if (c) store` whose guard depends on the lane but is uniform over
/// the vector (a fetch split imperfectly over the threads, by whole vectors).
fn uniformly_guarded<'a>(
    body: &'a [KStmt],
    var: VarId,
    lanes: i64,
    ranges: &BTreeMap<VarId, i64>,
) -> Option<VectorStore<'a>> {
    let mut real = body.iter().filter(|s| !matches!(s, KStmt::Comment(_)));
    let (Some(KStmt::If { cond, then }), None) = (real.next(), real.next()) else {
        return None;
    };
    if !uniform(cond, var, lanes, ranges) {
        return None;
    }
    let store = vector_body(then, var).ok()?;
    store.guard.is_none().then_some(VectorStore {
        guard: Some(cond),
        ..store
    })
}

/// A value as `(v, Some(c))` when it is `select(c, v, 0)` (a zero-filled read; the zero
/// a float literal, cast or not, so a 16-bit buffer's typed zero counts), nested
/// zero-fills as one with their conditions and-ed (a padded einsum's bound around a
/// conv's padding: `select(k < 720, select(in_image, x, 0), 0)`), else `(value, None)`.
pub(crate) fn zero_filled(value: &Expr) -> (&Expr, Option<Expr>) {
    let zero = |e: &Expr| match e {
        Expr::Float(z) => *z == 0.0,
        Expr::Cast(_, inner) => matches!(**inner, Expr::Float(z) if z == 0.0),
        _ => false,
    };
    match value {
        Expr::Select(c, a, b) if zero(b) => match zero_filled(a) {
            (v, Some(inner)) => (v, Some(Expr::and((**c).clone(), inner))),
            (v, None) => (v, Some((**c).clone())),
        },
        e => (e, None),
    }
}

/// `e` with the lane at `lane`, simplified.
pub(crate) fn at_lane(e: &Expr, var: VarId, lane: i64, ranges: &BTreeMap<VarId, i64>) -> Expr {
    let range = |v: VarId| ranges.get(&v).map(|&x| Interval::new(0, x - 1));
    simplify(
        &e.substitute(&|v| (v == var).then_some(Expr::Int(lane))),
        &range,
    )
}

/// Whether a condition has the same value for every lane `var` in `[0, lanes)`, as far as
/// the simplifier can tell (see the module doc).
pub(crate) fn uniform(c: &Expr, var: VarId, lanes: i64, ranges: &BTreeMap<VarId, i64>) -> bool {
    if !c.uses_var(var) {
        return true;
    }
    let range = |v: VarId| ranges.get(&v).map(|&x| Interval::new(0, x - 1));
    let below_zero_quotient_is_uniform = |d: Expr| {
        let q = simplify(&Expr::bin(BinOp::FloorDiv, d, Expr::Int(lanes)), &range);
        !q.uses_var(var)
    };
    match c {
        Expr::Bin(BinOp::And | BinOp::Or, a, b) => {
            uniform(a, var, lanes, ranges) && uniform(b, var, lanes, ranges)
        }
        Expr::Un(UnOp::Not, a) => uniform(a, var, lanes, ranges),
        // a < b and its negation a >= b: a - b < 0.
        Expr::Bin(BinOp::Lt | BinOp::Ge, a, b) => {
            below_zero_quotient_is_uniform(Expr::sub((**a).clone(), (**b).clone()))
        }
        // a <= b and its negation a > b: a - b - 1 < 0.
        Expr::Bin(BinOp::Le | BinOp::Gt, a, b) => below_zero_quotient_is_uniform(Expr::sub(
            Expr::sub((**a).clone(), (**b).clone()),
            Expr::Int(1),
        )),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(n: usize) -> Vec<VarId> {
        let mut p = Program::new("t");
        (0..n).map(|i| p.new_var(format!("v{i}"))).collect()
    }

    /// `k * 32 + (t * lanes + lane) % 32`, the index a padded fetch bounds, and ranges in
    /// which the lane spans one vector.
    fn index(v: &[VarId], lanes: i64) -> (Expr, BTreeMap<VarId, i64>) {
        let (lane, t, k) = (v[0], v[1], v[2]);
        let idx = Expr::add(
            Expr::mul(Expr::Var(k), Expr::Int(32)),
            Expr::bin(
                BinOp::FloorMod,
                Expr::add(Expr::mul(Expr::Var(t), Expr::Int(lanes)), Expr::Var(lane)),
                Expr::Int(32),
            ),
        );
        let ranges = [(lane, lanes), (t, 128), (k, 10)].into();
        (idx, ranges)
    }

    #[test]
    fn nested_zero_fills_and_typed_zeros_are_one_zero_fill() {
        let load = Expr::Load(BufferId(0), vec![Expr::Var(VarId(0))]);
        let (a, b) = (Expr::Var(VarId(1)), Expr::Var(VarId(2)));
        let f16_zero = Expr::Cast(DType::F16, Box::new(Expr::Float(0.0)));
        // select(a, select(b, x, f16(0)), f16(0)): x where a && b.
        let nested = Expr::select(
            a.clone(),
            Expr::select(b.clone(), load.clone(), f16_zero.clone()),
            f16_zero,
        );
        let (v, c) = zero_filled(&nested);
        assert_eq!(v, &load);
        assert_eq!(c, Some(Expr::and(a.clone(), b)));
        // A select whose other branch is no zero is no zero-fill.
        let other = Expr::select(a, load.clone(), Expr::Float(1.0));
        assert_eq!(zero_filled(&other), (&other, None));
        assert_eq!(zero_filled(&load), (&load, None));
    }

    #[test]
    fn a_bound_on_aligned_vectors_is_uniform_and_an_odd_one_is_not() {
        let v = vars(3);
        let uniform_at = |lanes: i64, n: i64| {
            let (idx, ranges) = index(&v, lanes);
            uniform(
                &Expr::bin(BinOp::Lt, idx, Expr::Int(n)),
                v[0],
                lanes,
                &ranges,
            )
        };
        assert!(uniform_at(4, 100));
        assert!(uniform_at(2, 100));
        assert!(uniform_at(2, 310));
        assert!(!uniform_at(4, 310));
        assert!(!uniform_at(4, 311));
        assert!(!uniform_at(2, 311));
        let (idx, ranges) = index(&v, 4);
        let c = Expr::bin(BinOp::Lt, idx.clone(), Expr::Int(100));
        let with_row = Expr::bin(
            BinOp::And,
            Expr::bin(BinOp::Lt, Expr::Var(v[1]), Expr::Int(77)),
            c.clone(),
        );
        assert!(uniform(&with_row, v[0], 4, &ranges));
        assert!(uniform(&Expr::Un(UnOp::Not, Box::new(c)), v[0], 4, &ranges));
        let ge = Expr::bin(BinOp::Ge, idx.clone(), Expr::Int(311));
        assert!(!uniform(&ge, v[0], 4, &ranges));
        let le = Expr::bin(BinOp::Le, idx.clone(), Expr::Int(99));
        assert!(uniform(&le, v[0], 4, &ranges));
        let eq = Expr::bin(BinOp::Eq, idx.clone(), Expr::Int(100));
        assert!(!uniform(&eq, v[0], 4, &ranges));
    }
}
