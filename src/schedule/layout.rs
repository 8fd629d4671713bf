//! `transform_layout`: storing an allocated buffer with its axes permuted (TVM's primitive
//! of the same name, restricted to permutations). What is computed does not change: every
//! load and store of the buffer reads its indices in the new order. The CUDA sketch stores
//! a GEMM operand staged in shared memory reduction-axis first (`[k][m]`), so that the
//! threads of a warp read consecutive words.

use super::error::{Result, ScheduleError};
use crate::ir::{BlockId, BufferId, Expr, Program};

/// Permutes the axes of the buffer block `b` writes (`buffer_index` 0): new axis `i` is
/// old axis `permutation[i]`. Only allocated buffers not yet aligned (`storage_align`)
/// can be transformed.
pub fn transform_layout(
    p: &mut Program,
    b: BlockId,
    buffer_index: i64,
    permutation: &[i64],
) -> Result<()> {
    let buf = super::util::written_buffer(p, b, buffer_index)?;
    let name = p.buffer(buf).name.clone();
    let rank = p.buffer(buf).shape.len();
    let perm: Vec<usize> = permutation
        .iter()
        .filter_map(|x| usize::try_from(*x).ok())
        .collect();
    let mut seen = vec![false; rank];
    for &x in &perm {
        if let Some(s) = seen.get_mut(x) {
            *s = true;
        }
    }
    if perm.len() != rank || seen.iter().any(|s| !s) {
        return Err(ScheduleError::InvalidArgument {
            what: "transform_layout permutation",
            reason: format!("{permutation:?} is not a permutation of the {rank} axes of {name}"),
        });
    }
    if !p.allocs.contains(&buf) {
        return Err(ScheduleError::InvalidArgument {
            what: "transform_layout",
            reason: format!("{name} is a parameter; only allocated buffers can be transformed"),
        });
    }
    if !p.buffer(buf).align.is_empty() {
        return Err(ScheduleError::InvalidArgument {
            what: "transform_layout",
            reason: format!("{name} is already aligned (transform its layout first)"),
        });
    }
    let permute = |idx: Vec<Expr>| permuted(&idx, &perm);
    let shape = permuted(&p.buffer(buf).shape, &perm);
    p.buffer_mut(buf).shape = shape;
    for blk in p.blocks.iter_mut() {
        rewrite_accesses(&mut blk.body, buf, &permute);
        if let Some(init) = &mut blk.init {
            rewrite_accesses(init, buf, &permute);
        }
    }
    Ok(())
}

/// `xs` in the order `perm` (a permutation of its positions) names.
fn permuted<T: Clone>(xs: &[T], perm: &[usize]) -> Vec<T> {
    perm.iter().map(|&i| xs[i].clone()).collect()
}

fn rewrite_accesses(
    store: &mut crate::ir::Store,
    buf: BufferId,
    permute: &impl Fn(Vec<Expr>) -> Vec<Expr>,
) {
    if store.buffer == buf {
        store.indices = permute(std::mem::take(&mut store.indices));
    }
    store.value = store.value.rewrite(&mut |e| match e {
        Expr::Load(x, idx) if x == buf => Expr::Load(x, permute(idx)),
        other => other,
    });
}
