//! What one buffer access touches, from its flat index expression: the elements and cache
//! lines it covers while some variables range and the others stay fixed (interval
//! analysis per linear term), and its stride along one variable.
//!
//! The footprint is the *strided-box estimate*: the index is split into linear terms
//! `coef * atom` (an atom is a variable, a `floordiv`/`floormod`, or any other non-linear
//! sub-expression); each atom takes `n` distinct values (its interval length, from
//! [`bound_with`]). Terms are merged from the smallest coefficient up: a term whose
//! coefficient is at least the span covered so far multiplies the count of distinct
//! elements by `n` (its copies do not overlap); a smaller one (a sliding window, as in a
//! convolution's `h + rh`) grows the count by the ratio of the new span to the old. The
//! estimate is exact for the tiles and cooperative fetches of the sketches (disjoint
//! strided dimensions) and close for overlapping windows. Cache lines use the same rule in
//! units of lines after the sub-line terms are merged into one contiguous chunk.

use crate::ir::interval::{bound_with, Interval};
use crate::ir::{BinOp, Expr, UnOp, VarId};

/// The linear terms `(coefficient, atom)` of an index expression; constants dropped.
pub(super) fn linear_terms<'e>(e: &'e Expr, scale: i64, out: &mut Vec<(i64, &'e Expr)>) {
    match e {
        Expr::Int(_) => {}
        Expr::Bin(BinOp::Add, a, b) => {
            linear_terms(a, scale, out);
            linear_terms(b, scale, out);
        }
        Expr::Bin(BinOp::Sub, a, b) => {
            linear_terms(a, scale, out);
            linear_terms(b, scale.saturating_neg(), out);
        }
        Expr::Bin(BinOp::Mul, a, b) => match (a.as_int(), b.as_int()) {
            (Some(c), _) => linear_terms(b, scale.saturating_mul(c), out),
            (_, Some(c)) => linear_terms(a, scale.saturating_mul(c), out),
            _ => out.push((scale, e)),
        },
        Expr::Un(UnOp::Neg, a) => linear_terms(a, scale.saturating_neg(), out),
        _ => out.push((scale, e)),
    }
}

/// Distinct elements and cache lines an access covers.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(super) struct Footprint {
    pub elements: f64,
    pub lines: f64,
}

/// The footprint of the index whose linear terms are `terms` when variables range as
/// `range` says (a fixed variable is a point), for elements of which `line_elems` fill a
/// cache line, capped at the buffer's `size` elements.
pub(super) fn footprint(
    terms: &[(i64, &Expr)],
    range: &dyn Fn(VarId) -> Option<Interval>,
    line_elems: f64,
    size: f64,
) -> Footprint {
    // Most indices have a handful of terms: keep them on the stack.
    let mut buf = [(0.0, 0.0); 16];
    let mut heap = Vec::new();
    let mut len = 0;
    for (coef, atom) in terms {
        let n = bound_with(atom, range).len();
        if n > 1 && *coef != 0 {
            let d = (coef.unsigned_abs() as f64, n as f64);
            if len < buf.len() {
                buf[len] = d;
            } else {
                heap.push(d);
            }
            len += 1;
        }
    }
    let dims: &mut [(f64, f64)] = if heap.is_empty() {
        &mut buf[..len]
    } else {
        heap.extend_from_slice(&buf);
        &mut heap
    };
    dims.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let (elements, _) = merge(dims.iter().copied(), 1.0);
    // Sub-line terms form one contiguous chunk; the rest count in line units.
    let split = dims.partition_point(|(c, _)| *c < line_elems);
    let (_, chunk_span) = merge(dims[..split].iter().copied(), 1.0);
    let chunk_lines = (chunk_span / line_elems).ceil().max(1.0);
    let outer = dims[split..].iter().map(|(c, n)| (c / line_elems, *n));
    let (lines, _) = merge(outer, chunk_lines);
    let size = size.max(1.0);
    Footprint {
        elements: elements.min(size),
        lines: lines.min((size / line_elems).ceil().max(1.0)),
    }
}

/// Merges strided dimensions `(stride, count)`, sorted by stride, starting from a dense
/// chunk of `start` units: the distinct units and the span they cover.
fn merge(dims: impl Iterator<Item = (f64, f64)>, start: f64) -> (f64, f64) {
    let (mut distinct, mut span) = (start, start);
    for (c, n) in dims {
        let next = span + c * (n - 1.0);
        if c >= span {
            distinct *= n;
        } else {
            distinct *= next / span;
        }
        span = next;
    }
    (distinct, span)
}

/// How far the index moves when `v` goes from 0 to 1, every other variable at 0.
pub(super) fn stride(index: &Expr, v: VarId) -> i64 {
    let base = index.eval_int(&|_| 0);
    index.eval_int(&|x| i64::from(x == v)).wrapping_sub(base)
}

/// Shared-memory banks (4 bytes wide) of NVIDIA GPUs.
const BANKS: i64 = 32;

/// The bank-conflict degree of the 32-bit words one phase of a warp accesses: the most
/// distinct words that fall into one bank (1: conflict-free; a word read by several
/// threads is a broadcast and counts once).
pub(super) fn bank_ways(words: &mut Vec<i64>) -> f64 {
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u32; BANKS as usize];
    for w in words.iter() {
        per_bank[w.rem_euclid(BANKS) as usize] += 1;
    }
    f64::from(per_bank.iter().copied().max().unwrap_or(0).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(i: u32) -> Expr {
        Expr::Var(VarId(i))
    }

    fn ranges(ext: &[(u32, i64)]) -> impl Fn(VarId) -> Option<Interval> + '_ {
        move |x| {
            Some(
                ext.iter()
                    .find(|(i, _)| VarId(*i) == x)
                    .map_or(Interval::point(0), |(_, e)| Interval::new(0, e - 1)),
            )
        }
    }

    fn fp(e: &Expr, ext: &[(u32, i64)], line_elems: f64) -> Footprint {
        let mut terms = Vec::new();
        linear_terms(e, 1, &mut terms);
        footprint(&terms, &ranges(ext), line_elems, 1e12)
    }

    #[test]
    fn a_tile_of_rows_counts_rows_times_width() {
        // row * 256 + col: 64 rows of 8 floats: 512 elements, one 128-byte line per row.
        let e = Expr::add(Expr::mul(v(0), Expr::Int(256)), v(1));
        let f = fp(&e, &[(0, 64), (1, 8)], 32.0);
        assert_eq!(
            f,
            Footprint {
                elements: 512.0,
                lines: 64.0
            }
        );
        // The whole row (256 floats = 8 lines) for each of 64 rows.
        let f = fp(&e, &[(0, 64), (1, 256)], 32.0);
        assert_eq!(
            f,
            Footprint {
                elements: 16384.0,
                lines: 512.0
            }
        );
    }

    #[test]
    fn a_sliding_window_grows_by_its_span() {
        // h + rh with h < 4, rh < 3: 6 distinct rows.
        let e = Expr::add(v(0), v(1));
        assert_eq!(fp(&e, &[(0, 4), (1, 3)], 16.0).elements, 6.0);
    }

    #[test]
    fn floordiv_and_floormod_are_atoms_with_their_ranges() {
        // (t // 2) * 256 + (t % 2) * 4 + lane, t < 64, lane < 4: 32 rows of 8.
        let t = v(0);
        let e = Expr::add(
            Expr::add(
                Expr::mul(
                    Expr::bin(BinOp::FloorDiv, t.clone(), Expr::Int(2)),
                    Expr::Int(256),
                ),
                Expr::mul(
                    Expr::bin(BinOp::FloorMod, t.clone(), Expr::Int(2)),
                    Expr::Int(4),
                ),
            ),
            v(1),
        );
        assert_eq!(
            fp(&e, &[(0, 64), (1, 4)], 32.0),
            Footprint {
                elements: 256.0,
                lines: 32.0
            }
        );
        assert_eq!(stride(&e, VarId(0)), 4);
        assert_eq!(stride(&e, VarId(1)), 1);
    }

    #[test]
    fn bank_ways_count_distinct_words_per_bank() {
        // Consecutive words: conflict-free; a stride of 2 words: 2-way; all threads on one
        // word: a broadcast.
        assert_eq!(bank_ways(&mut (0..32).collect()), 1.0);
        assert_eq!(bank_ways(&mut (0..32).map(|t| 2 * t).collect()), 2.0);
        assert_eq!(bank_ways(&mut (0..32).map(|t| 32 * t).collect()), 32.0);
        assert_eq!(bank_ways(&mut vec![7; 32]), 1.0);
    }
}
