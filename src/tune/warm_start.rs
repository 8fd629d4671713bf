//! The start of a run: what the database already knows goes to the strategy before it
//! proposes anything, so a second run continues where the first stopped and a new
//! workload starts from what worked on others.

use crate::database::Database;
use crate::database::{DatabaseError, Filter, TargetKey, TargetKind};
use crate::ir::Program;
use crate::schedule::{replay, replay_fitted, Trace};
use crate::search::{ir_hash, MeasuredResult, SearchStrategy};
use crate::workload::Workload;
use rayon::prelude::*;

/// The fastest traces of each other workload handed to the strategy as seeds.
pub const SEEDS_PER_WORKLOAD: usize = 4;

/// The fastest traces of every workload on targets of one kind, read from the database
/// by the first task that asks: a network's tasks all open before any is measured, and
/// each took the same traces (minus its own workload's) from a query of its own, parsing
/// every trace again (about half of opening ResNet-50's 24 tasks).
pub(crate) struct Seeds {
    kind: TargetKind,
    by_workload: Option<Vec<(String, Trace)>>,
}

impl Seeds {
    /// Nothing read yet: valid while no record of `kind` is added (one run's opening).
    pub fn new(kind: TargetKind) -> Seeds {
        Seeds {
            kind,
            by_workload: None,
        }
    }

    /// The [`SEEDS_PER_WORKLOAD`] fastest traces of every workload but `w`, grouped by
    /// workload key, fastest first in each group.
    fn of_others(&mut self, db: &Database, w: &Workload) -> Result<Vec<Trace>, DatabaseError> {
        let all = match &mut self.by_workload {
            Some(all) => all,
            none => none.insert(db.best_traces(self.kind, SEEDS_PER_WORKLOAD)?),
        };
        let own = w.key();
        Ok(all
            .iter()
            .filter(|(key, _)| *key != own)
            .map(|(_, t)| t.clone())
            .collect())
    }
}

/// What the strategy was given.
pub(crate) struct WarmStart {
    /// Records of this workload on this target fed back.
    pub fed_back: usize,
    /// Traces of other workloads given as seeds (fitted to this workload).
    pub seeds: usize,
}

/// Feeds `strategy` every record of `w` measured on exactly `target` (successes and
/// failures; a trace that no longer replays on `program` is left out) and seeds it with
/// the [`SEEDS_PER_WORKLOAD`] fastest of them and the best traces of other workloads
/// measured on targets of the same kind (`seeds`, of `target`'s kind), their tile
/// decisions fitted to this program's loops ([`fit`]).
pub(crate) fn warm_start(
    strategy: &mut (dyn SearchStrategy + Send),
    db: &Database,
    w: &Workload,
    program: &Program,
    target: &TargetKey,
    seeds: &mut Seeds,
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
    // The fastest of its own records are seeds too: a trace recorded before the space
    // gained a decision is grown into it by the strategy (its replay is the measured
    // candidate itself, which the population holds once).
    let own = fastest(&results, SEEDS_PER_WORKLOAD);
    if !own.is_empty() {
        strategy.seed_traces(&own);
    }
    let seeds = fit(seeds.of_others(db, w)?, program);
    if !seeds.is_empty() {
        strategy.seed_traces(&seeds);
    }
    Ok(WarmStart {
        fed_back: results.len(),
        seeds: seeds.len(),
    })
}

/// The traces of the `n` fastest successful results, fastest first.
fn fastest(results: &[MeasuredResult], n: usize) -> Vec<Trace> {
    let mut ok: Vec<(f64, &Trace)> = results
        .iter()
        .filter_map(|r| r.median_seconds.map(|s| (s, &r.trace)))
        .filter(|(s, _)| s.is_finite() && *s > 0.0)
        .collect();
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    ok.into_iter().take(n).map(|(_, t)| t.clone()).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::NewRecord;
    use crate::workload::preset;

    fn cpu() -> TargetKey {
        TargetKey {
            kind: TargetKind::Cpu,
            arch: "x86_64-avx2".into(),
            device: "test CPU".into(),
            toolchain: "gcc".into(),
        }
    }

    /// A split of the first loop by `n`: a distinct trace per `n`.
    fn trace(n: u32) -> Trace {
        crate::schedule::text::parse(&format!(
            "b0 = get_block(\"t2\")\ni0, i1, r0 = get_loops(b0)\ni0_0, i0_1 = split(i0, factors=[None, {n}])\n"
        ))
        .unwrap()
    }

    #[test]
    fn the_seeds_are_read_once_and_leave_the_asking_workload_out() {
        let mut db = Database::open_in_memory().unwrap();
        let a = preset("matmul:16x8x8").unwrap();
        let b = preset("matmul:8x16x8").unwrap();
        db.commit(&NewRecord::ok(&a, cpu(), trace(2), vec![1e-6]))
            .unwrap();
        db.commit(&NewRecord::ok(&b, cpu(), trace(4), vec![1e-6]))
            .unwrap();
        let mut seeds = Seeds::new(TargetKind::Cpu);
        assert_eq!(seeds.of_others(&db, &a).unwrap(), vec![trace(4)]);
        assert_eq!(seeds.of_others(&db, &b).unwrap(), vec![trace(2)]);
        // Read once: a record stored since is not among them; new seeds read it.
        db.commit(&NewRecord::ok(&b, cpu(), trace(8), vec![1e-7]))
            .unwrap();
        assert_eq!(seeds.of_others(&db, &a).unwrap(), vec![trace(4)]);
        let mut fresh = Seeds::new(TargetKind::Cpu);
        assert_eq!(fresh.of_others(&db, &a).unwrap(), vec![trace(8), trace(4)]);
        assert!(Seeds::new(TargetKind::Cuda)
            .of_others(&db, &a)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn the_fastest_own_results_are_seeds_fastest_first_failures_left_out() {
        let result = |n: u32, s: Option<f64>| MeasuredResult {
            trace: trace(n),
            ir_hash: n.to_string(),
            median_seconds: s,
        };
        let results = [
            result(2, Some(3e-6)),
            result(3, None),
            result(4, Some(1e-6)),
            result(5, Some(f64::NAN)),
            result(6, Some(2e-6)),
        ];
        assert_eq!(fastest(&results, 2), vec![trace(4), trace(6)]);
        assert_eq!(fastest(&results, 9), vec![trace(4), trace(6), trace(2)]);
    }
}
