//! What the fused forms of the reduction rules share (the GPU's cross-thread reduction,
//! `cross_thread.rs`, and the CPU's lane reduction, `lane_reduction.rs`): a workload whose
//! one stage after its main reduction reads that reduction by rows (a softmax's output
//! divides by the row sum, a norm's output by the row's deviation) may compute the
//! reduction, the row reductions before it that are read the same way (a softmax's
//! maximum) and that stage a row (or a block's rows) at a time, in one pass over the rows
//! where each was a pass of its own over the whole input; and a stage of the output's
//! shape that two or more of them read (a softmax's exponentials) may be kept, computed
//! once a row, where inlining it recomputes it in each reader.

use super::{SketchError, Stages};
use crate::ir::{BlockId, BufferKind, Expr, IterKind, Program};

/// What the fused form of a workload computes in its one pass: the last stage (`sink`),
/// the main reduction it reads by rows, and the reductions before the main one that are
/// read the same way (`rows`); the others before it (`apart`) keep nests of their own.
#[derive(Debug)]
pub(super) struct Fusion {
    pub sink: String,
    pub rows: Vec<String>,
    pub apart: Vec<String>,
}

/// Whether `block` writes a buffer of the rows of `sink`: an intermediate of one axis
/// fewer than the sink's output, of the extents of its leading axes, read by every reader
/// at the reader's leading iteration variables.
fn by_rows(p: &Program, block: BlockId, sink: BlockId) -> bool {
    let buf = p.block(block).body.buffer;
    let sink_vars = &p.block(sink).iter_vars;
    let rank = p.buffer(buf).shape.len();
    if rank + 1 != sink_vars.len() || p.buffer(buf).kind != BufferKind::Intermediate {
        return false;
    }
    let extents_match = p
        .buffer(buf)
        .shape
        .iter()
        .zip(sink_vars)
        .all(|(e, iv)| *e == iv.extent && iv.kind == IterKind::Spatial);
    let reads: Vec<(BlockId, Vec<Expr>)> = p
        .blocks_in_order()
        .into_iter()
        .flat_map(|b| {
            p.block_reads(b)
                .into_iter()
                .filter(|(r, _)| *r == buf)
                .map(move |(_, idx)| (b, idx))
        })
        .collect();
    extents_match
        && !reads.is_empty()
        && reads.iter().all(|(reader, idx)| {
            let vars = &p.block(*reader).iter_vars;
            idx.len() == rank
                && idx
                    .iter()
                    .zip(vars)
                    .all(|(e, iv)| matches!(e, Expr::Var(v) if *v == iv.var))
        })
}

/// The fused form's plan for `p`: where `rule_applies` to the main reduction and the one
/// stage after it is spatial, reads it by rows and writes an output of at least two
/// axes; the reductions before the main one that `row_fuses` accepts and that are read
/// by rows are fused, the others kept apart. `None` where the form does not apply.
pub(super) fn plan(
    p: &Program,
    rule_applies: impl Fn(BlockId) -> bool,
    row_fuses: impl Fn(BlockId) -> bool,
) -> Result<Option<Fusion>, SketchError> {
    let st = super::stages(p)?;
    let find = |name: &str| p.find_block(name).first().copied();
    let (Some(main), [sink_name]) = (find(&st.main), &st.epilogues[..]) else {
        return Ok(None);
    };
    let Some(sink) = find(sink_name) else {
        return Ok(None);
    };
    let sink_blk = p.block(sink);
    if !rule_applies(main)
        || p.buffer(sink_blk.body.buffer).kind != BufferKind::Output
        || sink_blk.iter_vars.len() < 2
        || sink_blk
            .iter_vars
            .iter()
            .any(|iv| iv.kind != IterKind::Spatial)
        || !by_rows(p, main, sink)
    {
        return Ok(None);
    }
    let (rows, apart) = st.reductions.iter().cloned().partition(|name| {
        find(name).is_some_and(|r| rule_applies(r) && by_rows(p, r, sink) && row_fuses(r))
    });
    Ok(Some(Fusion {
        sink: sink_name.clone(),
        rows,
        apart,
    }))
}

/// The stage before the main reduction that a fused form may keep (not inline): the first
/// of the sink's shape that two or more blocks read (a softmax's exponentials, read by
/// its sum and its output; a residual layer norm's sum, read by both sums and the
/// output). `None` where there is none.
pub(super) fn kept_candidate(p: &Program, st: &Stages, sink: &str) -> Option<String> {
    let sink = p.find_block(sink).first().copied()?;
    let shape = &p.buffer(p.block(sink).body.buffer).shape;
    st.padding.iter().find_map(|name| {
        let b = *p.find_block(name).first()?;
        let buf = p.block(b).body.buffer;
        (p.buffer(buf).shape == *shape && p.readers(buf).len() >= 2).then(|| name.clone())
    })
}
