//! The start of a run: what the database already knows goes to the strategy before it
//! proposes anything, so a second run continues where the first stopped and a new
//! workload starts from what worked on others.

use crate::database::Database;
use crate::database::{DatabaseError, Filter, TargetKey};
use crate::ir::Program;
use crate::schedule::{replay, replay_fitted, Trace};
use crate::search::{ir_hash, MeasuredResult, SearchStrategy};
use crate::workload::Workload;
use rayon::prelude::*;

/// The fastest traces of each other workload handed to the strategy as seeds.
pub const SEEDS_PER_WORKLOAD: usize = 4;

/// What the strategy was given.
pub(crate) struct WarmStart {
    /// Records of this workload on this target fed back.
    pub fed_back: usize,
    /// Traces of other workloads given as seeds (fitted to this workload).
    pub seeds: usize,
}

/// Feeds `strategy` every record of `w` measured on exactly `target` (successes and
/// failures; a trace that no longer replays on `program` is left out) and seeds it with
/// the best traces of other workloads measured on targets of the same kind, their tile
/// decisions fitted to this program's loops ([`fit`]).
pub(crate) fn warm_start(
    strategy: &mut (dyn SearchStrategy + Send),
    db: &Database,
    w: &Workload,
    program: &Program,
    target: &TargetKey,
) -> Result<WarmStart, DatabaseError> {
    let records = db.records(&Filter {
        workload: Some(w.key()),
        target: Some(target.clone()),
        best_only: false,
    })?;
    // Replays are independent: on every core (a workload can hold thousands of records).
    let results: Vec<MeasuredResult> = records
        .into_par_iter()
        .filter_map(|r| {
            let sch = replay(&r.trace, program.clone(), 0).ok()?;
            Some(MeasuredResult {
                ir_hash: ir_hash(sch.program()),
                trace: r.trace,
                median_seconds: r.median_secs,
            })
        })
        .collect();
    if !results.is_empty() {
        strategy.feedback(&results);
    }
    let seeds = fit(
        db.best_traces_of_others(w, target.kind, SEEDS_PER_WORKLOAD)?,
        program,
    );
    if !seeds.is_empty() {
        strategy.seed_traces(&seeds);
    }
    Ok(WarmStart {
        fed_back: results.len(),
        seeds: seeds.len(),
    })
}

/// The traces of other workloads that replay on `program` once their tile decisions are
/// fitted to its loops (`replay_fitted`: a GEMM's tiles carry over to another shape, the
/// outer tiles absorbing the difference), each as the fitted trace, without duplicates.
/// Traces of another computation (a conv's on a GEMM) do not replay and are left out.
pub(crate) fn fit(traces: Vec<Trace>, program: &Program) -> Vec<Trace> {
    let mut seen = std::collections::HashSet::new();
    let fitted: Vec<(String, Trace)> = traces
        .par_iter()
        .filter_map(|t| replay_fitted(t, program.clone(), 0).ok())
        .map(|sch| (ir_hash(sch.program()), sch.trace().clone()))
        .collect();
    fitted
        .into_iter()
        .filter(|(hash, _)| seen.insert(hash.clone()))
        .map(|(_, trace)| trace)
        .collect()
}
