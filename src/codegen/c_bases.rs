//! Base pointers for accumulators held across a reduction (C only).
//!
//! A register tile accumulates `acc[f(outer) + g(tile)] += ...` inside the reduction
//! loops, its own loops (unrolled and vectorized) innermost; the compiler keeps the
//! accumulators in registers across the reduction only if it proves that the tile's
//! elements are distinct and invariant in the reduction loops (store motion). With the
//! whole index printed at every access, `f(outer)` a sum over several outer loops,
//! gcc 12 often fails to, and then loads and stores every accumulator at every step of
//! the reduction: the main nest of a c256 14 x 14 conv with a 7 x 4-vector tile and two
//! spatial loops between its reduction blocks and the tile ran at 93 GFLOP/s, with the
//! pointer below at 239 (2 threads, an AVX-512 VM, 2026-11-29; `benches/probe/cpu_pack/
//! stages.sh` on `c256/rows_7.sched`).
//!
//! So before the outermost loop of such a reduction chain the printer declares a pointer
//! to the tile, `float *tessel_acc0 = &acc[f(outer)];`, and the accesses inside that
//! split the same way read `tessel_acc0[g(tile)]`: constant offsets from an invariant
//! pointer once the tile's loops are unrolled, which store motion takes.

use crate::ir::{BufferId, Expr, VarId};
use crate::lower::{ForKind, KStmt};

/// A base pointer in scope: accesses of `buffer` whose index has `summands` among its
/// own print `name[rest]`.
pub(super) struct Base {
    pub buffer: BufferId,
    pub summands: Vec<Expr>,
    pub name: String,
}

/// The bases to declare before the serial loop `var` over `body`: for each buffer that
/// every store in the body writes through the same reduction chain starting at `var`
/// (the loop's own variable and those of the serial loops between it and the store
/// absent from the store's index: only unrolled or vectorized loops may index it), the
/// summands of the stores' index that use no variable bound at or inside the loop.
/// Buffers with a base in `active` are left to it; a base of constants alone is none.
pub(super) fn bases_at(var: VarId, body: &[KStmt], active: &[Base]) -> Vec<(BufferId, Vec<Expr>)> {
    let mut inner = vec![var];
    loop_vars(body, &mut inner);
    let mut stores: Vec<(BufferId, &Expr, bool)> = Vec::new();
    collect_stores(body, &mut vec![(var, ForKind::Serial)], &mut stores);
    let mut out: Vec<(BufferId, Vec<Expr>, bool)> = Vec::new();
    for (buffer, index, chain) in stores {
        let outer: Vec<Expr> = summands(index)
            .into_iter()
            .filter(|t| !inner.iter().any(|v| t.uses_var(*v)))
            .collect();
        let ok = chain && outer.iter().any(|t| !matches!(t, Expr::Int(_)));
        match out.iter_mut().find(|(b, _, _)| *b == buffer) {
            Some(entry) => entry.2 &= ok && entry.1 == outer,
            None => out.push((buffer, outer, ok)),
        }
    }
    out.into_iter()
        .filter(|(b, _, ok)| *ok && !active.iter().any(|a| a.buffer == *b))
        .map(|(b, s, _)| (b, s))
        .collect()
}

/// `index` relative to `base`: the summands left once the base's are taken out, or
/// `None` when the index does not hold all of them.
pub(super) fn relative(index: &Expr, base: &Base) -> Option<Expr> {
    let mut rest = summands(index);
    for t in &base.summands {
        let at = rest.iter().position(|r| r == t)?;
        rest.remove(at);
    }
    Some(rest.into_iter().reduce(Expr::add).unwrap_or(Expr::Int(0)))
}

/// The summands of a sum (an index as the lowering prints it).
pub(super) fn summands(e: &Expr) -> Vec<Expr> {
    match e {
        Expr::Bin(crate::ir::BinOp::Add, a, b) => {
            let mut out = summands(a);
            out.extend(summands(b));
            out
        }
        other => vec![other.clone()],
    }
}

fn loop_vars(body: &[KStmt], out: &mut Vec<VarId>) {
    for s in body {
        match s {
            KStmt::For { var, body, .. } => {
                out.push(*var);
                loop_vars(body, out);
            }
            KStmt::If { then, .. } => loop_vars(then, out),
            _ => {}
        }
    }
}

/// Every store under `body` with whether its path of loops (`path`, outermost first) is
/// a reduction chain for it: no serial or parallel loop of the path in its index.
fn collect_stores<'a>(
    body: &'a [KStmt],
    path: &mut Vec<(VarId, ForKind)>,
    out: &mut Vec<(BufferId, &'a Expr, bool)>,
) {
    for s in body {
        match s {
            KStmt::Store {
                buffer, indices, ..
            } => {
                let index = &indices[0];
                let chain = path.iter().all(|(v, kind)| {
                    matches!(kind, ForKind::Unrolled | ForKind::Vectorized) || !index.uses_var(*v)
                });
                out.push((*buffer, index, chain));
            }
            KStmt::For {
                var, kind, body, ..
            } => {
                path.push((*var, *kind));
                collect_stores(body, path, out);
                path.pop();
            }
            KStmt::If { then, .. } => collect_stores(then, path, out),
            _ => {}
        }
    }
}
