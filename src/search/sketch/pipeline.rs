//! Sketch rule 7b, software pipelining of the shared fetch: the loop the cooperative
//! fetches are computed at (the last loop of the first R level) gets a
//! `software_pipeline_stage` annotation whose compute stage is a sampled stage count
//! minus one (`sample_categorical` over those of `pipeline.stages` that do not exceed the
//! loop's extent and whose copies of the fetched tiles fit `pipeline.max_shared_bytes`, a
//! decision of the trace): the
//! fetches are stage 0, the compute statements stage `S - 1`. A count of 1 annotates all
//! statements with stage 0, the plain loop, so that every decision replays to the same
//! trace shape and a mutator can change it. Spaces whose stages are only `[1]` (or absent)
//! add nothing to the trace. With `pipeline.register_fetch`, where some fetch transposes
//! an operand by vectors, a coin of the trace (`sample_categorical` over 0 and 1) sets
//! `software_pipeline_register_fetch` on the loop: those vectors are then loaded into
//! registers before the iteration computes and stored into the shared tile after it,
//! instead of being copied by 4-byte `cp.async` (`lower::pipeline`).

use super::{at, SketchError};
use crate::ir::pipeline::{REGISTER_FETCH_KEY, STAGE_KEY};
use crate::ir::{Node, Scope};
use crate::schedule::{AnnArg, IntArg, LoopRv, Schedule, Target};
use crate::search::space::PipelineRule;

/// Annotates `fetch_at` with a sampled pipeline depth when its body is shared fetches
/// followed by compute, and where `transposing` (some fetch transposes an operand by
/// vectors) with the sampled choice of staging those fetches in registers; leaves the
/// schedule as it is otherwise.
pub(super) fn pipeline(
    rule: &PipelineRule,
    sch: &mut Schedule,
    fetch_at: LoopRv,
    transposing: bool,
) -> Result<(), SketchError> {
    let Some(n_fetch) = fetches(sch, fetch_at)? else {
        return Ok(());
    };
    let (extent, n_body) = {
        let l = sch.loop_id(fetch_at).map_err(at("pipeline"))?;
        let lp = sch.program().lp(l);
        (lp.extent, lp.body.len())
    };
    // A pipeline is at most as deep as the loop is long, and its copies of the fetched
    // tiles fit the space's shared-memory budget.
    let per_stage = bytes_per_stage(sch, fetch_at, n_fetch)?;
    let stages: Vec<i64> = rule
        .stages
        .iter()
        .copied()
        .filter(|s| *s == 1 || (*s <= extent && s * per_stage <= rule.max_shared_bytes))
        .collect();
    if stages.iter().all(|s| *s == 1) {
        return Ok(());
    }
    let last: Vec<i64> = stages.iter().map(|s| s - 1).collect();
    let probs = vec![1.0 / last.len() as f64; last.len()];
    let v = sch
        .sample_categorical(&last, &probs, None)
        .map_err(at("pipeline"))?;
    let value: Vec<IntArg> = (0..n_body)
        .map(|i| {
            if i < n_fetch {
                IntArg::Lit(0)
            } else {
                IntArg::Rv(v)
            }
        })
        .collect();
    sch.annotate(Target::Loop(fetch_at), STAGE_KEY, AnnArg::List(value))
        .map_err(at("pipeline"))?;
    if rule.register_fetch && transposing {
        let staged = sch
            .sample_categorical(&[0, 1], &[0.5, 0.5], None)
            .map_err(at("pipeline"))?;
        sch.annotate(
            Target::Loop(fetch_at),
            REGISTER_FETCH_KEY,
            AnnArg::Rv(staged),
        )
        .map_err(at("pipeline"))?;
    }
    Ok(())
}

/// The bytes one iteration of the loop's first `n_fetch` statements copies into shared
/// memory: per fetch block, the product of the extents of its loops below `lp` (the
/// compacted tile, up to `storage_align` padding) times its element size.
fn bytes_per_stage(sch: &Schedule, lp: LoopRv, n_fetch: usize) -> Result<i64, SketchError> {
    let l = sch.loop_id(lp).map_err(at("pipeline"))?;
    let p = sch.program();
    let mut bytes = 0i64;
    for n in &p.lp(l).body[..n_fetch] {
        for b in p.blocks_under(*n) {
            let loops = p.ancestors(Node::Block(b));
            let below = loops.iter().skip_while(|x| **x != l).skip(1);
            let elements = below.fold(1i64, |acc, x| acc.saturating_mul(p.lp(*x).extent));
            let size = p.buffer(p.block(b).body.buffer).dtype.bytes() as i64;
            bytes = bytes.saturating_add(elements.saturating_mul(size));
        }
    }
    Ok(bytes)
}

/// How many leading statements of the loop's body only fill shared buffers from global
/// memory, when at least one does and at least one other statement follows.
fn fetches(sch: &Schedule, lp: LoopRv) -> Result<Option<usize>, SketchError> {
    let l = sch.loop_id(lp).map_err(at("pipeline"))?;
    let p = sch.program();
    let body = &p.lp(l).body;
    let fills_shared = |n: &Node| {
        let blocks = p.blocks_under(*n);
        !blocks.is_empty()
            && blocks.iter().all(|b| {
                let blk = p.block(*b);
                p.buffer(blk.body.buffer).scope == Scope::Shared
                    && blk.init.is_none()
                    && p.block_reads(*b)
                        .iter()
                        .all(|(buf, _)| p.buffer(*buf).scope == Scope::Global)
            })
    };
    let n = body.iter().take_while(|n| fills_shared(n)).count();
    Ok((n > 0 && n < body.len()).then_some(n))
}
