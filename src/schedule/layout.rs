//! `transform_layout`: storing an allocated buffer with its axes permuted and, optionally,
//! some of them fused into one (TVM's primitive of the same name, restricted to those
//! index maps). What is computed does not change: every load and store of the buffer reads
//! its indices in the new layout. The CUDA sketch stores a GEMM operand staged in shared
//! memory reduction-axis first (`[k][m]`), so that the threads of a warp read consecutive
//! words, and an implicit-GEMM conv's accumulator with its `p, q` axes as one, indexed by
//! the fused loop itself, so that a tile of that loop is a range of it, whatever rows it
//! crosses.
//!
//! `split_layout`: one axis of an allocated buffer stored as two, `[extent / f, f]` (TVM's
//! index map `i -> (i // f, i % f)`); with a permutation after it, the CPU register-tile
//! sketch packs a GEMM's A block as GotoBLAS does, `[row tile][k][row in tile]`, so that
//! the micro-kernel reads the MR scalars of a k step from one run of memory.
//!
//! `storage_widen`: an allocated 16-bit float stage that only copies 16-bit values (a
//! cache stage's fetch) stored as float32 instead; the CPU register-tile sketch so packs a
//! 16-bit GEMM's panel in f32, converting each element once rather than at every use.

use super::error::{Result, ScheduleError};
use crate::ir::{BinOp, BlockId, BufferId, Expr, Program};

/// Stores the 16-bit float buffer block `b` writes (`buffer_index` 0) as float32. Legal for
/// an allocated buffer every writer of which stores a copy of a buffer of its own 16-bit
/// type, zero-filled or not (a cache stage's fetch): every value it holds is then a 16-bit
/// value, exactly a float32 too, and its readers, which widen what they read, read the
/// same values. Nothing computed changes.
pub fn storage_widen(p: &mut Program, b: BlockId, buffer_index: i64) -> Result<()> {
    let buf = super::util::written_buffer(p, b, buffer_index)?;
    let buffer = p.buffer(buf);
    let fail = |reason: String| {
        Err(ScheduleError::InvalidArgument {
            what: "storage_widen",
            reason,
        })
    };
    if !p.allocs.contains(&buf) {
        return fail(format!(
            "{} is a parameter; only allocated buffers can be widened",
            buffer.name
        ));
    }
    if !buffer.dtype.is_half() {
        return fail(format!(
            "{} is {}; only 16-bit float buffers can be widened",
            buffer.name, buffer.dtype
        ));
    }
    for w in p.writers(buf) {
        let blk = p.block(w);
        let copy = blk.init.is_none()
            && matches!(
                crate::lower::zero_filled(&blk.body.value).0,
                Expr::Load(src, _) if p.buffer(*src).dtype == buffer.dtype
            );
        if !copy {
            return fail(format!(
                "block {} stores into {} what is not a copy of a {} value",
                blk.name, buffer.name, buffer.dtype
            ));
        }
    }
    p.buffer_mut(buf).dtype = crate::ir::DType::F32;
    Ok(())
}

/// Stores the buffer block `b` writes (`buffer_index` 0) in a new layout: new axis `i` is
/// the old axes `layout[i]` (each old axis exactly once), fused row-major when there are
/// several: `[[1], [0], [2, 3]]` swaps the first two axes and makes the last two one axis
/// of their product. A permutation is the case of one old axis per new axis. Only
/// allocated buffers not yet aligned (`storage_align`) can be transformed.
pub fn transform_layout(
    p: &mut Program,
    b: BlockId,
    buffer_index: i64,
    layout: &[Vec<i64>],
) -> Result<()> {
    let buf = super::util::written_buffer(p, b, buffer_index)?;
    let name = p.buffer(buf).name.clone();
    let rank = p.buffer(buf).shape.len();
    let groups: Vec<Vec<usize>> = layout
        .iter()
        .map(|g| g.iter().filter_map(|x| usize::try_from(*x).ok()).collect())
        .collect();
    let mut seen = vec![0usize; rank];
    for &x in groups.iter().flatten() {
        if let Some(s) = seen.get_mut(x) {
            *s += 1;
        }
    }
    let count: usize = layout.iter().map(Vec::len).sum();
    if count != rank || seen.iter().any(|s| *s != 1) || groups.iter().any(Vec::is_empty) {
        return Err(ScheduleError::InvalidArgument {
            what: "transform_layout permutation",
            reason: format!(
                "{layout:?} does not name each of the {rank} axes of {name} exactly once"
            ),
        });
    }
    transformable(p, buf, "transform_layout")?;
    let old_shape = p.buffer(buf).shape.clone();
    let shape = groups
        .iter()
        .map(|g| g.iter().map(|&x| old_shape[x]).product())
        .collect();
    let relayout = |idx: Vec<Expr>| relaid(&idx, &groups, &old_shape);
    p.buffer_mut(buf).shape = shape;
    relayout_everywhere(p, buf, &relayout);
    Ok(())
}

/// Stores the buffer block `b` writes (`buffer_index` 0) with its axis `axis` as two,
/// `[extent / factor, factor]`: index `i` becomes `(i // factor, i % factor)` in every
/// load and store. `factor` must divide the axis's extent; only allocated buffers not
/// yet aligned can be split.
pub fn split_layout(
    p: &mut Program,
    b: BlockId,
    buffer_index: i64,
    axis: i64,
    factor: i64,
) -> Result<()> {
    let buf = super::util::written_buffer(p, b, buffer_index)?;
    transformable(p, buf, "split_layout")?;
    let name = p.buffer(buf).name.clone();
    let shape = p.buffer(buf).shape.clone();
    let Some(d) = usize::try_from(axis).ok().filter(|d| *d < shape.len()) else {
        return Err(ScheduleError::InvalidArgument {
            what: "split_layout axis",
            reason: format!("{name} has {} axes, not an axis {axis}", shape.len()),
        });
    };
    if factor < 1 || shape[d] % factor != 0 {
        return Err(ScheduleError::InvalidArgument {
            what: "split_layout factor",
            reason: format!(
                "{factor} does not divide axis {axis} of {name} (extent {})",
                shape[d]
            ),
        });
    }
    let mut new_shape = shape.clone();
    new_shape.splice(d..=d, [shape[d] / factor, factor]);
    p.buffer_mut(buf).shape = new_shape;
    let relayout = |mut idx: Vec<Expr>| {
        let i = idx[d].clone();
        idx.splice(
            d..=d,
            [
                Expr::bin(BinOp::FloorDiv, i.clone(), Expr::Int(factor)),
                Expr::bin(BinOp::FloorMod, i, Expr::Int(factor)),
            ],
        );
        idx
    };
    relayout_everywhere(p, buf, &relayout);
    Ok(())
}

/// Refuses a layout change (`what`) of a parameter or of a buffer already aligned.
fn transformable(p: &Program, buf: BufferId, what: &'static str) -> Result<()> {
    let name = &p.buffer(buf).name;
    if !p.allocs.contains(&buf) {
        return Err(ScheduleError::InvalidArgument {
            what,
            reason: format!("{name} is a parameter; only allocated buffers can be transformed"),
        });
    }
    if !p.buffer(buf).align.is_empty() {
        return Err(ScheduleError::InvalidArgument {
            what,
            reason: format!("{name} is already aligned (transform its layout first)"),
        });
    }
    Ok(())
}

/// A permutation as the layout [`transform_layout`] takes: one old axis per new axis.
pub fn singletons(permutation: &[i64]) -> Vec<Vec<i64>> {
    permutation.iter().map(|x| vec![*x]).collect()
}

/// The indices `idx` (of a buffer of `shape`) in the layout `groups` names: per group the
/// row-major fusion of its axes' indices.
fn relaid(idx: &[Expr], groups: &[Vec<usize>], shape: &[i64]) -> Vec<Expr> {
    groups
        .iter()
        .map(|g| Expr::row_major(g.iter().map(|&x| (idx[x].clone(), shape[x]))))
        .collect()
}

/// Every load and store of `buf`, in every block's body and initialisation, indexed in
/// the new layout `relayout` makes of its indices.
fn relayout_everywhere(p: &mut Program, buf: BufferId, relayout: &impl Fn(Vec<Expr>) -> Vec<Expr>) {
    for blk in p.blocks.iter_mut() {
        rewrite_accesses(&mut blk.body, buf, relayout);
        if let Some(init) = &mut blk.init {
            rewrite_accesses(init, buf, relayout);
        }
    }
}

fn rewrite_accesses(
    store: &mut crate::ir::Store,
    buf: BufferId,
    relayout: &impl Fn(Vec<Expr>) -> Vec<Expr>,
) {
    if store.buffer == buf {
        store.indices = relayout(std::mem::take(&mut store.indices));
    }
    store.value = store.value.rewrite(&mut |e| match e {
        Expr::Load(x, idx) if x == buf => Expr::Load(x, relayout(idx)),
        other => other,
    });
}
