//! The software-pipeline annotation of a loop and the check that it can be applied.
//!
//! `software_pipeline_stage = [s0, s1, ...]` on a serial loop gives, as in TensorIR, the
//! pipeline stage of each statement of the loop's body. The form tessel lowers is the
//! G->S->R pipeline of a GEMM's reduction loop: the body is fetches (statements whose
//! blocks only copy into shared buffers) followed by compute (statements that read those
//! buffers and write none of them); every fetch has stage 0 and every compute statement
//! the same stage `S - 1`. The lowering (`lower::pipeline`) then keeps `S` copies of every
//! buffer the fetches fill and issues the fetch of iteration `k + S - 1` while iteration
//! `k` computes. All stages 0 is the plain loop (no pipelining), so a sampled stage count
//! of 1 keeps the trace's shape.
//!
//! [`plan`] is the one check: the `annotate` primitive calls it when the annotation is
//! set (a trace that cannot be pipelined is refused there) and the lowering calls it again
//! (a later primitive may have changed the body).

use super::{AnnValue, BlockId, BufferId, LoopId, LoopKind, Node, Program, Scope};
use std::collections::BTreeSet;
use thiserror::Error;

/// The annotation key: one stage per statement of the loop body.
pub const STAGE_KEY: &str = "software_pipeline_stage";

/// The annotation key (an integer, 1 for on) that stages a pipeline's transposing fetches
/// in registers: each vector a fetch reads along the global rows and stores scattered
/// across the shared tile's rows (a reduction-major tile of an operand stored by rows) is
/// loaded into registers before the iteration computes and stored after it, instead of
/// being copied element by element with 4-byte `cp.async` (`lower::pipeline`).
pub const REGISTER_FETCH_KEY: &str = "software_pipeline_register_fetch";

/// The most stages a pipeline may have (the copies of every fetched buffer).
pub const MAX_STAGES: i64 = 8;

/// Why a loop's `software_pipeline_stage` annotation cannot be applied.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PipelineError {
    #[error("loop {name}: {STAGE_KEY} must be a list of integers, got {value}")]
    NotAList { name: String, value: String },
    #[error(
        "loop {name}: {STAGE_KEY} has {got} stages but the loop body has {expected} statements"
    )]
    Length {
        name: String,
        got: usize,
        expected: usize,
    },
    #[error("loop {name} is {kind}; a software pipeline needs a serial loop")]
    NotSerial { name: String, kind: String },
    #[error("loop {name}: {stages} pipeline stages (at most {max})")]
    TooManyStages { name: String, stages: i64, max: i64 },
    #[error("loop {name}: {stages} pipeline stages exceed its extent {extent}")]
    StagesExceedExtent {
        name: String,
        stages: i64,
        extent: i64,
    },
    #[error("loop {name}: the body is not fetches into shared memory (stage 0) followed by compute (stage {last}): {reason}")]
    NotFetchThenCompute {
        name: String,
        last: i64,
        reason: String,
    },
}

/// A loop that is to be pipelined: its stage count and what its fetches fill.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub stages: i64,
    /// The blocks of the fetch statements.
    pub fetch_blocks: BTreeSet<BlockId>,
    /// The shared buffers the fetches fill (each gets `stages` copies).
    pub buffers: BTreeSet<BufferId>,
    /// Whether transposing vector fetches are staged in registers ([`REGISTER_FETCH_KEY`]).
    pub register_fetch: bool,
}

/// The pipeline of loop `l`: `None` when it has no stage annotation or all its stages
/// are 0, the plan when it can be applied, else why not (naming the loop).
pub fn plan(p: &Program, l: LoopId) -> Result<Option<Plan>, PipelineError> {
    let lp = p.lp(l);
    let name = p.loop_name(l).to_string();
    let stages = match lp.annotations.get(STAGE_KEY) {
        None => return Ok(None),
        Some(AnnValue::Ints(v)) => v.clone(),
        Some(other) => {
            return Err(PipelineError::NotAList {
                name,
                value: other.to_string(),
            })
        }
    };
    if stages.len() != lp.body.len() {
        return Err(PipelineError::Length {
            name,
            got: stages.len(),
            expected: lp.body.len(),
        });
    }
    let last = stages.iter().copied().max().unwrap_or(0);
    let wrong = |reason: String| PipelineError::NotFetchThenCompute {
        name: name.clone(),
        last,
        reason,
    };
    if stages.iter().any(|s| *s < 0) {
        return Err(wrong("a stage is negative".into()));
    }
    if last == 0 {
        return Ok(None);
    }
    if lp.kind != LoopKind::Serial {
        return Err(PipelineError::NotSerial {
            name,
            kind: format!("{:?}", lp.kind).to_lowercase(),
        });
    }
    let count = last + 1;
    if count > MAX_STAGES {
        return Err(PipelineError::TooManyStages {
            name,
            stages: count,
            max: MAX_STAGES,
        });
    }
    if count > lp.extent {
        return Err(PipelineError::StagesExceedExtent {
            name,
            stages: count,
            extent: lp.extent,
        });
    }
    // 1. Stage 0 statements first, then statements of the last stage only.
    let n_fetch = stages.iter().take_while(|s| **s == 0).count();
    if n_fetch == 0 {
        return Err(wrong("the first statement is not at stage 0".into()));
    }
    if stages[n_fetch..].iter().any(|s| *s != last) {
        return Err(wrong(format!(
            "stages {stages:?}: every statement after the fetches must be at stage {last}"
        )));
    }
    if n_fetch == lp.body.len() {
        return Err(wrong("there is no compute statement".into()));
    }
    // 2. Every fetch block copies into a shared buffer, and no other block of the program
    //    touches that buffer outside the compute statements of this loop.
    let mut fetch_blocks = BTreeSet::new();
    let mut buffers = BTreeSet::new();
    for n in &lp.body[..n_fetch] {
        for b in p.blocks_under(*n) {
            let blk = p.block(b);
            let buf = blk.body.buffer;
            if p.buffer(buf).scope != Scope::Shared || blk.init.is_some() {
                return Err(wrong(format!(
                    "block {} at stage 0 does not fill a shared buffer",
                    blk.name
                )));
            }
            fetch_blocks.insert(b);
            buffers.insert(buf);
        }
    }
    let mut compute_reads = BTreeSet::new();
    for n in &lp.body[n_fetch..] {
        for b in p.blocks_under(*n) {
            let blk = p.block(b);
            // Compute writes no shared memory: the pipeline's one barrier per iteration
            // orders only the fetches against the compute.
            if p.buffer(blk.body.buffer).scope == Scope::Shared {
                return Err(wrong(format!(
                    "block {} at stage {last} writes the shared buffer {}",
                    blk.name,
                    p.buffer(blk.body.buffer).name
                )));
            }
            compute_reads.extend(p.block_reads(b).into_iter().map(|(buf, _)| buf));
        }
    }
    for b in &fetch_blocks {
        if let Some((buf, _)) = p
            .block_reads(*b)
            .into_iter()
            .find(|(buf, _)| buffers.contains(buf))
        {
            return Err(wrong(format!(
                "fetch {} reads the fetched buffer {}",
                p.block(*b).name,
                p.buffer(buf).name
            )));
        }
    }
    let inside: BTreeSet<BlockId> = p.blocks_under(Node::Loop(l)).into_iter().collect();
    for buf in &buffers {
        let outside = p
            .writers(*buf)
            .into_iter()
            .chain(p.readers(*buf))
            .find(|b| !inside.contains(b));
        if let Some(b) = outside {
            return Err(wrong(format!(
                "block {} outside the loop uses the fetched buffer {}",
                p.block(b).name,
                p.buffer(*buf).name
            )));
        }
        if !compute_reads.contains(buf) {
            return Err(wrong(format!(
                "no compute statement reads the fetched buffer {}",
                p.buffer(*buf).name
            )));
        }
    }
    let register_fetch =
        matches!(lp.annotations.get(REGISTER_FETCH_KEY), Some(AnnValue::Int(v)) if *v != 0);
    Ok(Some(Plan {
        stages: count,
        fetch_blocks,
        buffers,
        register_fetch,
    }))
}
