//! Stage 5, record: every outcome goes to the database exactly once, successes with
//! their run times, failures with their kind and message, and into the run's tallies.

use super::report::{failure_name, rejection_name, Best, RoundStats, TuneReport};
use super::TuneError;
use crate::database::{Database, NewRecord, Status, TargetKey};
use crate::measure::{FailureKind, Outcome};
use crate::search::{Candidate, MeasuredResult, Proposal, Rejection};
use crate::workload::Workload;

/// Where outcomes are filed.
pub(crate) struct Recorder<'a> {
    pub workload: &'a Workload,
    pub target: &'a TargetKey,
}

impl Recorder<'_> {
    /// Records what proposing a batch produced besides candidates: the postprocessors'
    /// rejections (stored as `rejected` records), instantiation failures, duplicates
    /// and known candidates (counted only).
    pub fn proposal(
        &self,
        db: &mut Database,
        p: &Proposal,
        report: &mut TuneReport,
        round: &mut RoundStats,
    ) -> Result<(), TuneError> {
        report.instantiation_failures += p.instantiation_failures;
        report.duplicates += p.duplicates;
        report.already_measured += p.known;
        round.proposed += p.candidates.len() + p.rejected.len();
        round.duplicates += p.duplicates;
        round.already_measured += p.known;
        if p.instantiation_failures > 0 {
            *round.failures.entry("instantiation".into()).or_insert(0) += p.instantiation_failures;
        }
        for (trace, why) in &p.rejected {
            *report.rejected.entry(why.kind()).or_insert(0) += 1;
            *round
                .failures
                .entry(rejection_name(why.kind()))
                .or_insert(0) += 1;
            db.commit(&NewRecord::failed(
                self.workload,
                self.target.clone(),
                trace.clone(),
                Status::Rejected,
                why.to_string(),
            ))?;
        }
        Ok(())
    }

    /// Records the outcome of each measured candidate, updates the best and the count of
    /// failures in a row, and returns the results for the strategy.
    pub fn outcomes(
        &self,
        db: &mut Database,
        candidates: &[Candidate],
        outcomes: Vec<Outcome>,
        report: &mut TuneReport,
        round: &mut RoundStats,
        failures_in_a_row: &mut usize,
    ) -> Result<Vec<MeasuredResult>, TuneError> {
        let mut results = Vec::with_capacity(candidates.len());
        for (cand, outcome) in candidates.iter().zip(outcomes) {
            report.trials += 1;
            round.measured += 1;
            let (record, median) = match outcome {
                Ok(m) => {
                    report.ok += 1;
                    round.ok += 1;
                    report.compile_seconds += m.build.compile_seconds;
                    *failures_in_a_row = 0;
                    if report
                        .best
                        .as_ref()
                        .is_none_or(|b| m.median_seconds < b.median_seconds)
                    {
                        report.best = Some(Best {
                            trace: cand.trace.clone(),
                            median_seconds: m.median_seconds,
                            this_run: true,
                        });
                    }
                    let median = m.median_seconds;
                    let rec = NewRecord::ok(
                        self.workload,
                        self.target.clone(),
                        cand.trace.clone(),
                        m.runs,
                    );
                    (rec, Some(median))
                }
                Err(f) => {
                    *failures_in_a_row += 1;
                    let name = match &f.rejection {
                        Some(r) => {
                            let kind = Rejection::from(r.clone()).kind();
                            *report.rejected.entry(kind).or_insert(0) += 1;
                            rejection_name(kind)
                        }
                        None => {
                            *report.failures.entry(f.kind).or_insert(0) += 1;
                            failure_name(f.kind).to_string()
                        }
                    };
                    *round.failures.entry(name).or_insert(0) += 1;
                    let rec = NewRecord::failed(
                        self.workload,
                        self.target.clone(),
                        cand.trace.clone(),
                        status_of(f.kind),
                        f.message,
                    );
                    (rec, None)
                }
            };
            db.commit(&record)?;
            results.push(MeasuredResult {
                trace: cand.trace.clone(),
                ir_hash: cand.ir_hash.clone(),
                median_seconds: median,
            });
        }
        round.best_seconds = report.best.as_ref().map(|b| b.median_seconds);
        Ok(results)
    }
}

/// The database status of a failure kind.
pub(crate) fn status_of(k: FailureKind) -> Status {
    match k {
        FailureKind::Instantiation | FailureKind::Rejected => Status::Rejected,
        FailureKind::Compile => Status::CompileError,
        FailureKind::Launch | FailureKind::Runtime => Status::RuntimeError,
        FailureKind::WrongAnswer => Status::WrongAnswer,
        FailureKind::Timeout => Status::Timeout,
        FailureKind::Crash => Status::Crash,
    }
}
