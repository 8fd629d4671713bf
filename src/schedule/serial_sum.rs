//! `serial_sum_at`: a split-K sum moved into the kernel that writes the partial results,
//! run by the thread block that writes a tile's last split (CUTLASS's serial split-K).
//!
//! The sum block `C[i, j] = sum_s P[s, i, j]` (the original block of an `rfactor`) reads
//! the partials `P` of every split `s`. Under one iteration of a blockIdx loop `target`,
//! the producers of `P` write one split's partials of one tile. The sum is placed after
//! them over that tile (its spatial iteration variables over the producers' region, its
//! reduction over every split), and annotated [`SERIAL_SUM_KEY`] with the split count:
//! it then runs only when the last split of its tile has arrived (`ir::arrival`).
//!
//! Legal when, enumerating the iterations of `target` and the loops above it (all bound
//! to blockIdx: the kernel's grid), each iteration writes the partials of one split, each
//! tile (the region of the other axes) is written by every split exactly once, and the
//! tiles partition the output: then the last arrival at a tile finds every split's
//! partials of exactly that tile written, and no two thread blocks sum one element.

use super::compute_at::{
    common_checks, complete_producers, insert_after_producers, rebuild, region, Dim,
};
use super::error::{Result, ScheduleError};
use crate::ir::arrival::SERIAL_SUM_KEY;
use crate::ir::{
    AnnValue, BlockId, BufferKind, Expr, IterKind, LoopId, LoopKind, Node, Program, Scope,
};
use std::collections::{BTreeMap, HashMap};

/// The most thread blocks the legality check enumerates.
const MAX_GRID: i64 = 1 << 20;

fn unsupported(p: &Program, b: BlockId, reason: impl Into<String>) -> ScheduleError {
    ScheduleError::Unsupported {
        primitive: "serial_sum_at",
        block: p.block(b).name.clone(),
        reason: reason.into(),
    }
}

/// Moves the split-K sum `b` under the blockIdx loop `target` of the kernel writing its
/// partials, run by the last split to arrive at each tile (see the module doc).
pub fn serial_sum_at(p: &mut Program, b: BlockId, target: LoopId) -> Result<()> {
    common_checks(p, b, target)?;
    // 1. The grid: `target` and every loop above it bound to blockIdx.
    let mut grid = p.ancestors(Node::Loop(target));
    grid.push(target);
    if let Some(l) = grid
        .iter()
        .find(|l| !matches!(p.lp(**l).kind, LoopKind::Thread(t) if t.is_block_idx()))
    {
        return Err(unsupported(
            p,
            b,
            format!("loop {} is not bound to blockIdx", p.loop_name(*l)),
        ));
    }
    // 2. A sum over one reduction variable of one produced buffer, read at that variable
    //    and at each spatial iteration variable once.
    let blk = p.block(b).clone();
    let reduce: Vec<usize> = (0..blk.iter_vars.len())
        .filter(|i| blk.iter_vars[*i].kind == IterKind::Reduce)
        .collect();
    let [s] = reduce[..] else {
        return Err(unsupported(p, b, "it is not a reduction over one variable"));
    };
    let splits = blk.iter_vars[s].extent;
    let produced: Vec<_> = p
        .block_reads(b)
        .into_iter()
        .filter(|(buf, _)| *buf != blk.body.buffer && p.buffer(*buf).kind != BufferKind::Input)
        .collect();
    let [(buf, idx)] = &produced[..] else {
        return Err(unsupported(
            p,
            b,
            "it does not read exactly one produced buffer",
        ));
    };
    if p.buffer(*buf).scope != Scope::Global {
        return Err(unsupported(
            p,
            b,
            format!("{} is not a global buffer", p.buffer(*buf).name),
        ));
    }
    let mut dim_of_iter: Vec<Option<usize>> = vec![None; blk.iter_vars.len()];
    for (d, e) in idx.iter().enumerate() {
        let pos = match e {
            Expr::Var(v) => blk.iter_vars.iter().position(|iv| iv.var == *v),
            _ => None,
        };
        match pos {
            Some(i) if dim_of_iter[i].is_none() => dim_of_iter[i] = Some(d),
            _ => {
                return Err(unsupported(
                    p,
                    b,
                    format!(
                        "it does not read {} at its iteration variables",
                        p.buffer(*buf).name
                    ),
                ))
            }
        }
    }
    if dim_of_iter.iter().any(Option::is_none) {
        return Err(unsupported(
            p,
            b,
            format!(
                "an iteration variable does not index {}",
                p.buffer(*buf).name
            ),
        ));
    }
    let split_dim = dim_of_iter[s].unwrap_or(0);
    // 3. The producers' region under one iteration of `target`: one split's tile.
    let producers = complete_producers(p, b, *buf, target)?;
    let accesses: Vec<(BlockId, Vec<Expr>)> = producers
        .iter()
        .map(|w| (*w, p.block(*w).body.indices.clone()))
        .collect();
    let reg = region(p, &accesses, target, Scope::Global, idx.len());
    if reg[split_dim].lo != reg[split_dim].hi {
        return Err(unsupported(
            p,
            b,
            format!(
                "one iteration of loop {} writes more than one split of {}",
                p.loop_name(target),
                p.buffer(*buf).name
            ),
        ));
    }
    let shape = p.buffer(*buf).shape.clone();
    check_tiles(p, &grid, &reg, split_dim, &shape, splits)
        .map_err(|reason| unsupported(p, b, reason))?;
    // 4. The sum over the tile, after the producers; every split's partials read.
    let dims: BTreeMap<usize, Dim> = dim_of_iter
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != s)
        .filter_map(|(i, d)| d.map(|d| (i, reg[d].clone())))
        .collect();
    super::util::remove_exclusive(p, b);
    let top = rebuild(p, b, &dims, Node::Loop(target));
    insert_after_producers(p, target, &producers, top);
    p.block_mut(b)
        .annotations
        .insert(SERIAL_SUM_KEY.into(), AnnValue::Int(splits));
    Ok(())
}

/// Enumerates the thread blocks of `grid` (outermost first): each writes split
/// `reg[split_dim]` of the tile the other dimensions of `reg` give; every tile must be
/// written by each of the `splits` splits once, and the tiles (clamped to `shape`) must
/// cover every element of the other dimensions exactly once.
fn check_tiles(
    p: &Program,
    grid: &[LoopId],
    reg: &[Dim],
    split_dim: usize,
    shape: &[i64],
    splits: i64,
) -> std::result::Result<(), String> {
    let extents: Vec<i64> = grid.iter().map(|l| p.lp(*l).extent).collect();
    let blocks: i64 = extents.iter().product();
    if blocks > MAX_GRID {
        return Err(format!(
            "its grid of {blocks} thread blocks is too large to check"
        ));
    }
    let vars: Vec<_> = grid.iter().map(|l| p.lp(*l).var).collect();
    let mut tiles: HashMap<Vec<i64>, Vec<bool>> = HashMap::new();
    let mut env = vec![0i64; extents.len()];
    for mut n in 0..blocks {
        for (slot, e) in env.iter_mut().zip(&extents).rev() {
            *slot = n % e;
            n /= e;
        }
        let value = |v| vars.iter().position(|x| *x == v).map_or(0, |i| env[i]);
        let origin: Vec<i64> = reg.iter().map(|d| d.base.eval_int(&value) + d.lo).collect();
        let split = origin[split_dim];
        if !(0..splits).contains(&split) {
            return Err(format!("a thread block writes split {split} of {splits}"));
        }
        let mut tile = origin;
        tile.remove(split_dim);
        let seen = tiles
            .entry(tile)
            .or_insert_with(|| vec![false; splits as usize]);
        if std::mem::replace(&mut seen[split as usize], true) {
            return Err(format!("two thread blocks write split {split} of one tile"));
        }
    }
    if tiles.values().any(|seen| seen.iter().any(|w| !w)) {
        return Err("a tile is not written by every split".into());
    }
    let rest: Vec<(i64, i64)> = reg
        .iter()
        .zip(shape)
        .enumerate()
        .filter(|(d, _)| *d != split_dim)
        .map(|(_, (dim, n))| (dim.hi - dim.lo + 1, *n))
        .collect();
    let elements: i64 = rest.iter().map(|(_, n)| n).product();
    let mut covered = vec![false; elements.max(0) as usize];
    for origin in tiles.keys() {
        let mut ranges = Vec::new();
        for ((len, n), o) in rest.iter().zip(origin) {
            let (from, to) = ((*o).max(0), (o + len).min(*n));
            ranges.push((from, to));
        }
        let mut fresh = true;
        for_each_point(&ranges, &mut |pt| {
            let at = pt.iter().zip(&rest).fold(0, |acc, (i, (_, n))| acc * n + i) as usize;
            fresh &= !std::mem::replace(&mut covered[at], true);
        });
        if !fresh {
            return Err("two tiles overlap".into());
        }
    }
    if covered.iter().any(|c| !c) {
        return Err("the tiles leave elements of the output unsummed".into());
    }
    Ok(())
}

/// Calls `f` with every point of the box `ranges` (half-open, per dimension).
fn for_each_point(ranges: &[(i64, i64)], f: &mut dyn FnMut(&[i64])) {
    if ranges.iter().any(|(a, b)| a >= b) {
        return;
    }
    let mut pt: Vec<i64> = ranges.iter().map(|(a, _)| *a).collect();
    loop {
        f(&pt);
        let mut d = ranges.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            pt[d] += 1;
            if pt[d] < ranges[d].1 {
                break;
            }
            pt[d] = ranges[d].0;
        }
    }
}
